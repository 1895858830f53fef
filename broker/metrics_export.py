"""The broker's ``/metrics``: Pulsar's series, names, types and labels
(the tables are :mod:`broker.metrics_families`; docs/metrics.md lists
every series).

Theory of operation. A scrape first takes a snapshot on the event loop:
each served topic's figures come from :func:`broker.stats.topic_figures`
(the numbers ``topics stats`` shows), one topic at a time with no await
inside one, yielding to the loop every ``SNAPSHOT_TOPICS_PER_TURN`` topics
so that a broker with thousands of topics keeps serving while it is
scraped. Every :class:`~broker.metrics.TopicMetrics` is read exactly once
per snapshot (served, unloaded or folded into its namespace's totals, see
:mod:`broker.metrics`), so an unload or reload during a scrape never counts
a topic twice. The snapshot becomes rows of values and is formatted on the
loop as well, ``RENDER_FAMILIES_PER_TURN`` families per loop turn, with the
label strings escaped when each topic was first seen. (Formatting in a
thread was measured slower: with 1,000 topics the snapshot and the
formatting took ~50 + ~45 ms against ~29 + ~30 ms on the loop, the GIL
being handed back and forth.)

With ``expose_topic_level_metrics_in_prometheus`` (default) there is one
series per topic and per subscription; without it the topic series are
summed per namespace (counters include topics served here earlier, so
they never go down) and there are no subscription series. Types are
Pulsar's: its topic, namespace and broker figures are all gauges, counters
included (``pulsar_in_messages_total`` only grows: use ``rate()``).
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field

from prometheus_client import REGISTRY, generate_latest

from broker.load_manager import LoadManager
from broker.metrics import BrokerMetrics, TopicMetrics
from broker.metrics_families import (
    COLUMN_INDEX,
    ML_NAMESPACE_COLUMNS,
    PER_SUBSCRIPTION_ONLY,
    SUBSCRIPTION_COLUMNS,
    TOPIC_COLUMNS,
    BrokerLabels,
    broker_totals,
    cache_families,
    column_families,
    connection_families,
    load_balancer_families,
    ml_namespace_values,
    request_families,
    subscription_values,
    topic_values,
    totals_families,
)
from broker.settings import BrokerSettings
from broker.stats import TopicFigures, topic_figures
from broker.tcp_connections import established_peers
from broker.topics import TopicRegistry
from protos import prometheus_text
from protos.access import AccessCounts
from protos.prometheus_text import Family

SNAPSHOT_TOPICS_PER_TURN = 200
RENDER_FAMILIES_PER_TURN = 8

Row = tuple[str, list[float]]


@dataclass
class Snapshot:
    """What one scrape shows, read on the event loop: each served topic's
    figures, and the counters of topics loading or served here earlier
    (namespace level only); :meth:`MetricsExporter.rows` makes rows of it."""

    served: list[tuple[TopicMetrics, TopicFigures, bool]] = field(default_factory=list)
    earlier: list[tuple[str, tuple[int, int, int, int]]] = field(default_factory=list)
    cache: dict[str, float] = field(default_factory=dict)
    bundles_owned: int = 0
    load_report: dict | None = None


@dataclass
class Rows:
    """A snapshot as rows of values, one per table of families."""

    topics: list[Row] = field(default_factory=list)
    subscriptions: list[Row] = field(default_factory=list)
    namespaces: dict[str, list[float]] = field(default_factory=dict)
    ml_namespaces: dict[str, list[float]] = field(default_factory=dict)
    topics_per_namespace: dict[str, int] = field(default_factory=dict)


class MetricsExporter:
    def __init__(
        self,
        settings: BrokerSettings,
        topics: TopicRegistry,
        load_manager: LoadManager,
        broker_address: str,
        access: AccessCounts | None = None,
    ) -> None:
        self.access = access  # the access guard's counts (None: authentication is off)
        self.settings = settings
        self.topics = topics
        self.metrics: BrokerMetrics = topics.metrics
        self.load_manager = load_manager
        self.topic_level = settings.expose_topic_level_metrics_in_prometheus
        cluster = settings.cluster_name
        self.labels = BrokerLabels(
            prometheus_text.labels((("cluster", cluster),)),
            prometheus_text.labels((("cluster", cluster), ("broker", broker_address))),
        )
        self.connections = Connections(int(broker_address.rpartition(":")[2]))
        self._evicted_at_roll = 0
        self._evictions_shown = 0

    # ---------------------------------------------------------------- the snapshot

    async def snapshot(self) -> Snapshot:
        snap = Snapshot(load_report=self.load_manager.last_report)
        unloaded = self.metrics.unloaded()
        departed = [(ns, vars(t).copy()) for ns, t in self.metrics.departed.items()]
        for i, metrics in enumerate(self.metrics.served()):
            if i and i % SNAPSHOT_TOPICS_PER_TURN == 0:
                await asyncio.sleep(0)
            topic = self.topics.topics.get(metrics.name.full_name)
            if topic is not None and topic.metrics is metrics:
                snap.served.append((metrics, topic_figures(topic), topic.persistent))
            elif not self.topic_level:
                # Still loading: its series show once it is served, and its
                # counters stay in the namespace's sums meanwhile.
                unloaded.append(metrics)
        if not self.topic_level:
            cluster = self.settings.cluster_name
            for m in unloaded:
                counts = (m.meter_in.msgs, m.meter_in.bytes, m.meter_out.msgs, m.meter_out.bytes)
                snap.earlier.append((m.namespace_label_str, counts))
            for ns, t in departed:
                label_str = prometheus_text.labels((("cluster", cluster), ("namespace", ns)))
                counts = (t["msgs_in"], t["bytes_in"], t["msgs_out"], t["bytes_out"])
                snap.earlier.append((label_str, counts))
        snap.cache = self._cache_figures()
        snap.bundles_owned = len(self.topics.ownership.owned)
        return snap

    def rows(self, snap: Snapshot) -> Rows:
        """The snapshot's rows (only the snapshot's own objects and
        immutable label strings are read here)."""
        rows = Rows()
        for metrics, f, persistent in snap.served:
            values = topic_values(f)
            ns = metrics.namespace
            rows.topics_per_namespace[ns] = rows.topics_per_namespace.get(ns, 0) + 1
            if persistent:
                _add_row(rows.ml_namespaces, ns, ml_namespace_values(f))
            if not self.topic_level:
                _add_row(rows.namespaces, metrics.namespace_label_str, values)
                continue
            rows.topics.append((metrics.label_str, values))
            for name, sf in f.subscriptions.items():
                sub = metrics.subscriptions.get(name)
                label_str = sub.label_str if sub is not None else metrics.subscription_labels(name)
                rows.subscriptions.append((label_str, subscription_values(sf)))
        for label_str, counts in snap.earlier:
            _add_row(rows.namespaces, label_str, _counters_row(*counts))
        return rows

    def _cache_figures(self) -> dict[str, float]:
        cache = self.topics.cache
        hits, hit_bytes = cache.hits.rates()
        misses, miss_bytes = cache.misses.rates()
        return {
            "ml_count": sum(1 for t in self.topics.topics.values() if t.persistent),
            "cache_used_size": cache.size,
            "cache_entries": len(cache),
            "cache_hits_rate": hits,
            "cache_misses_rate": misses,
            "cache_hits_throughput": hit_bytes,
            "cache_misses_throughput": miss_bytes,
            "cache_inserted": cache.inserted,
            "cache_evicted": cache.evicted,
            "cache_evictions": self._evictions_shown,
        }

    # ---------------------------------------------------------------- stats intervals

    def roll(self) -> None:
        """A stats interval ended: Pulsar's per-interval figures move on."""
        self.metrics.roll()
        evicted = self.topics.cache.evicted
        self._evictions_shown, self._evicted_at_roll = evicted - self._evicted_at_roll, evicted

    async def roll_forever(self) -> None:
        while True:
            await asyncio.sleep(self.settings.stats_update_frequency_in_secs)
            self.roll()

    # ---------------------------------------------------------------- rendering

    async def render(self) -> bytes:
        """The text of one scrape (the HTTP endpoint's ``render``)."""
        loop = asyncio.get_running_loop()
        # Asking the kernel for connections is a syscall: it overlaps the snapshot.
        connections = loop.run_in_executor(None, self.connections.count)
        try:
            snap = await self.snapshot()
        finally:
            counted = await connections
        families = self.families(snap, counted)
        parts = []
        for i, family in enumerate(families):
            if i and i % RENDER_FAMILIES_PER_TURN == 0:
                await asyncio.sleep(0)
            parts.append(prometheus_text.render((family,)))
        return "".join(parts).encode() + generate_latest(REGISTRY)

    def families(self, snap: Snapshot, connections: tuple[int, int, int]) -> list[Family]:
        labels = self.labels
        r = self.rows(snap)
        rows: list[Row] = r.topics if self.topic_level else list(r.namespaces.items())
        out = totals_families(labels, broker_totals(rows, sum(r.topics_per_namespace.values())))
        out.append(self._topics_count(r.topics_per_namespace))
        out += request_families(labels, self.metrics)
        out += load_balancer_families(labels, snap.load_report, self.metrics, snap.bundles_owned)
        out += cache_families(labels, snap.cache)
        out += connection_families(labels, *connections)
        if self.access is not None:
            out += self.access.families(labels.cluster)
        if self.topic_level:
            out += column_families(TOPIC_COLUMNS, rows, skip=PER_SUBSCRIPTION_ONLY)
            out += column_families(SUBSCRIPTION_COLUMNS, r.subscriptions)
        else:
            out += column_families(TOPIC_COLUMNS, rows, namespace_level=True)
        cluster = self.settings.cluster_name
        ml_rows = [
            (prometheus_text.labels((("cluster", cluster), ("namespace", f"{ns}/persistent"))), v)
            for ns, v in r.ml_namespaces.items()
        ]
        out += column_families(ML_NAMESPACE_COLUMNS, ml_rows)
        return _merged(out)

    def _topics_count(self, per_namespace: dict[str, int]) -> Family:
        family = Family("pulsar_topics_count", "gauge", "Topics of the namespace served here")
        for ns, n in sorted(per_namespace.items()):
            label_str = prometheus_text.labels(
                (("cluster", self.settings.cluster_name), ("namespace", ns))
            )
            family.add(label_str, n)
        return family


def _merged(families: list[Family]) -> list[Family]:
    """One family per name (the text format wants a name's samples
    together): pulsar_subscription_delayed and the out totals can come
    from two tables."""
    by_name: dict[str, Family] = {}
    for f in families:
        kept = by_name.get(f.name)
        if kept is None:
            by_name[f.name] = f
        else:
            kept.samples.extend(f.samples)
            kept.tables.extend(f.tables)
    return list(by_name.values())


def _add_row(rows: dict[str, list[float]], key: str, values: list[float]) -> None:
    row = rows.get(key)
    if row is None:
        rows[key] = list(values)
    else:
        for i, v in enumerate(values):
            row[i] += v


def _counters_row(msgs_in: int, bytes_in: int, msgs_out: int, bytes_out: int) -> list[float]:
    row: list[float] = [0] * len(TOPIC_COLUMNS)
    row[COLUMN_INDEX["pulsar_in_messages_total"]] = msgs_in
    row[COLUMN_INDEX["pulsar_in_bytes_total"]] = bytes_in
    row[COLUMN_INDEX["pulsar_out_messages_total"]] = msgs_out
    row[COLUMN_INDEX["pulsar_out_bytes_total"]] = bytes_out
    return row


class Connections:
    """Client connections of the broker's gRPC port, asked of the kernel at
    each scrape (:mod:`broker.tcp_connections`). The created and closed
    counts grow by what each scrape sees change, so a connection opened and
    closed between two scrapes is not counted."""

    def __init__(self, port: int) -> None:
        self.port = port
        self._lock = threading.Lock()
        self._open: set[str] = set()
        self.created = 0
        self.closed = 0

    def count(self) -> tuple[int, int, int]:
        """(open now, created so far, closed so far)."""
        established = established_peers(self.port)
        with self._lock:
            self.created += len(established - self._open)
            self.closed += len(self._open - established)
            self._open = established
            return len(established), self.created, self.closed
