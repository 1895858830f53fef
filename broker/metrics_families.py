"""Which series the broker exports, in tables: Pulsar's names, help texts
and where each value comes from (docs/metrics.md is written from these).

A *column* is one family of topic-level (or namespace-level) gauges: a row
of values per topic holds one value per column, in table order, so the
exporter sums rows per namespace and per broker by position. Bucket
families follow Pulsar's layout: each band is a family of its own
(``pulsar_storage_write_latency_le_5``), counting the last complete stats
interval, plus ``_count`` and ``_sum``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from broker.meter import ENTRY_SIZE_BOUNDS_BYTES, WRITE_LATENCY_BOUNDS_MS, Shown
from broker.metrics import BrokerMetrics
from broker.stats import SubscriptionFigures, TopicFigures
from protos.prometheus_text import Family, counter, gauge, join


@dataclass(frozen=True)
class Column:
    name: str
    help: str
    # Extra labels of the namespace-level series (Pulsar's remote_cluster="local").
    namespace_labels: str = ""
    # A float (a rate, a sum of latencies): written with 9 significant digits,
    # which costs half of Python's shortest repr (the bulk of a large scrape).
    real: bool = False


def _bucket_names(
    prefix: str, bounds: tuple[float, ...], unit: Callable[[float], str]
) -> list[str]:
    return [f"{prefix}_le_{unit(b)}" for b in bounds]


def _ms(bound: float) -> str:
    return str(bound).replace(".", "_") if bound != int(bound) else str(int(bound))


def _size(bound: float) -> str:
    b = int(bound)
    if b >= 1024 * 1024:
        return f"{b // (1024 * 1024)}_mb"
    if b >= 1024:
        return f"{b // 1024}_kb"
    return str(b)


WRITE_LATENCY_BANDS = _bucket_names("pulsar_storage_write_latency", WRITE_LATENCY_BOUNDS_MS, _ms)
ENTRY_SIZE_BANDS = _bucket_names("pulsar_entry_size", ENTRY_SIZE_BOUNDS_BYTES, _size)

_LATENCY_HELP = (
    "Entries stored in the last stats interval with a storage write latency in this band (ms)"
)
_SIZE_HELP = "Entries stored in the last stats interval with a size in this band (bytes)"

# Per topic (namespace level) and per subscription (topic level) alike.
OUT_COLUMNS = [
    Column("pulsar_out_messages_total", "Messages dispatched (grows; survives reloads)"),
    Column("pulsar_out_bytes_total", "Bytes dispatched (grows; survives reloads)"),
]

TOPIC_COLUMNS: list[Column] = [
    Column("pulsar_subscriptions_count", "Subscriptions"),
    Column("pulsar_producers_count", "Connected producers"),
    Column("pulsar_consumers_count", "Connected consumers"),
    Column("pulsar_rate_in", "Messages published per second", real=True),
    Column("pulsar_rate_out", "Messages dispatched per second", real=True),
    Column("pulsar_throughput_in", "Bytes published per second", real=True),
    Column("pulsar_throughput_out", "Bytes dispatched per second", real=True),
    Column("pulsar_in_messages_total", "Messages published (grows; survives reloads)"),
    Column("pulsar_in_bytes_total", "Bytes published (grows; survives reloads)"),
    *OUT_COLUMNS,
    Column("pulsar_storage_size", "Bytes stored on bookies, replicas included"),
    Column("pulsar_storage_logical_size", "Bytes stored, one copy"),
    Column("pulsar_storage_backlog_size", "Estimated bytes of the largest subscription backlog"),
    Column("pulsar_storage_offloaded_size", "Bytes offloaded to tiered storage (none)"),
    Column(
        "pulsar_storage_backlog_quota_limit",
        "The destination_storage backlog quota in bytes (-1: none)",
    ),
    Column(
        "pulsar_storage_backlog_quota_limit_time",
        "The message_age backlog quota in seconds (-1: none)",
    ),
    Column(
        "pulsar_publish_rate_limit_times",
        "Publishes the publish rate made wait (grows; survives reloads)",
    ),
    Column("pulsar_storage_write_rate", "Entries stored per second", real=True),
    Column("pulsar_storage_read_rate", "Entries read back per second", real=True),
    Column(
        "pulsar_msg_backlog",
        "Messages not yet acknowledged, summed over subscriptions",
        'remote_cluster="local"',
    ),
    Column("pulsar_subscription_delayed", "Messages held for delayed delivery"),
    *(Column(n, _LATENCY_HELP) for n in WRITE_LATENCY_BANDS),
    Column("pulsar_storage_write_latency_overflow", _LATENCY_HELP + " (over 1 s)"),
    Column(
        "pulsar_storage_write_latency_le_overflow",
        "The same as pulsar_storage_write_latency_overflow (the name Pulsar's docs use)",
    ),
    Column("pulsar_storage_write_latency_count", "Entries stored in the last stats interval"),
    Column(
        "pulsar_storage_write_latency_sum",
        "Storage write latency of the last stats interval, summed (microseconds, as Pulsar)",
        real=True,
    ),
    *(Column(n, _SIZE_HELP) for n in ENTRY_SIZE_BANDS),
    Column("pulsar_entry_size_le_overflow", _SIZE_HELP + " (over 1 MB)"),
    Column("pulsar_entry_size_count", "Entries stored in the last stats interval"),
    Column("pulsar_entry_size_sum", "Bytes of the entries stored in the last stats interval"),
]
COLUMN_INDEX = {c.name: i for i, c in enumerate(TOPIC_COLUMNS)}
# With topic-level series on, these are written per subscription only (as
# Pulsar writes the out counters), so a sum over a topic counts each once.
PER_SUBSCRIPTION_ONLY = frozenset(
    {"pulsar_out_messages_total", "pulsar_out_bytes_total", "pulsar_subscription_delayed"}
)


def _buckets(b: Shown) -> list[float]:
    return [*b.counts[:-1], b.counts[-1], b.counts[-1], b.observed, b.sum]


def topic_values(f: TopicFigures) -> list[float]:
    """One topic's row, in TOPIC_COLUMNS order."""
    latency = _buckets(f.write_latency)
    sizes = f.entry_size
    return [
        len(f.subscriptions),
        f.producers,
        f.consumers,
        f.rate_in,
        f.rate_out,
        f.throughput_in,
        f.throughput_out,
        f.msgs_in,
        f.bytes_in,
        f.msgs_out,
        f.bytes_out,
        f.storage * f.write_quorum,
        f.storage,
        f.backlog_bytes,
        0,
        f.quota_limit_bytes,
        f.quota_limit_s,
        f.publish_throttled,
        f.write_rate,
        f.read_rate,
        f.backlog_messages,
        f.delayed,
        *latency,
        *sizes.counts,
        sizes.observed,
        sizes.sum,
    ]


SUBSCRIPTION_COLUMNS: list[Column] = [
    Column("pulsar_subscription_back_log", "Messages not yet acknowledged"),
    Column("pulsar_subscription_back_log_no_delayed", "Backlog less delayed messages"),
    Column("pulsar_subscription_delayed", "Messages held for delayed delivery"),
    Column("pulsar_subscription_unacked_messages", "Messages delivered and not yet acknowledged"),
    Column("pulsar_subscription_msg_rate_out", "Messages dispatched per second", real=True),
    Column("pulsar_subscription_msg_throughput_out", "Bytes dispatched per second", real=True),
    Column(
        "pulsar_subscription_msg_rate_redeliver", "Messages dispatched again per second", real=True
    ),
    Column("pulsar_subscription_msg_ack_rate", "Messages acknowledged per second", real=True),
    Column(
        "pulsar_subscription_blocked_on_unacked_messages",
        "1 while dispatch is stopped by max_unacked_messages_per_subscription",
    ),
    Column("pulsar_subscription_consumers_count", "Connected consumers"),
    *OUT_COLUMNS,
]


def subscription_values(s: SubscriptionFigures) -> list[float]:
    return [
        s.backlog.messages,
        max(0, s.backlog.messages - s.delayed),
        s.delayed,
        s.unacked,
        s.rate_out,
        s.throughput_out,
        s.rate_redeliver,
        s.rate_ack,
        1 if s.blocked else 0,
        s.consumers,
        s.msgs_out,
        s.bytes_out,
    ]


# pulsar_broker_*: sums of topic columns (None: the number of topics).
BROKER_TOTALS: list[tuple[str, str, str | None]] = [
    ("pulsar_broker_topics_count", "Topics served by this broker", None),
    ("pulsar_broker_subscriptions_count", "Subscriptions", "pulsar_subscriptions_count"),
    ("pulsar_broker_producers_count", "Connected producers", "pulsar_producers_count"),
    ("pulsar_broker_consumers_count", "Connected consumers", "pulsar_consumers_count"),
    ("pulsar_broker_rate_in", "Messages published per second", "pulsar_rate_in"),
    ("pulsar_broker_rate_out", "Messages dispatched per second", "pulsar_rate_out"),
    ("pulsar_broker_throughput_in", "Bytes published per second", "pulsar_throughput_in"),
    ("pulsar_broker_throughput_out", "Bytes dispatched per second", "pulsar_throughput_out"),
    ("pulsar_broker_storage_size", "Bytes stored, replicas included", "pulsar_storage_size"),
    ("pulsar_broker_storage_logical_size", "Bytes stored, one copy", "pulsar_storage_logical_size"),
    ("pulsar_broker_storage_write_rate", "Entries stored per second", "pulsar_storage_write_rate"),
    ("pulsar_broker_storage_read_rate", "Entries read back per second", "pulsar_storage_read_rate"),
    ("pulsar_broker_msg_backlog", "Messages not yet acknowledged", "pulsar_msg_backlog"),
]


def broker_totals(rows: Sequence[tuple[str, Sequence[float]]], topics: int) -> list[float]:
    """The pulsar_broker_* totals: the topic columns summed over ``rows``
    (topic rows, or namespace rows: those of topics no longer served hold
    only counters, which no total uses)."""
    out: list[float] = []
    for _, _, col in BROKER_TOTALS:
        if col is None:
            out.append(topics)
        else:
            i = COLUMN_INDEX[col]
            out.append(sum(values[i] for _, values in rows))
    return out


# pulsar_ml_*: per namespace (Pulsar labels it "tenant/ns/persistent").
ML_NAMESPACE_COLUMNS: list[Column] = [
    Column("pulsar_ml_AddEntryBytesRate", "Bytes stored per second", real=True),
    Column(
        "pulsar_ml_AddEntryWithReplicasBytesRate",
        "Bytes stored per second, replicas included",
        real=True,
    ),
    Column("pulsar_ml_AddEntryMessagesRate", "Entries stored per second", real=True),
    Column("pulsar_ml_AddEntrySucceed", "Entries stored in the last stats interval"),
    Column("pulsar_ml_AddEntryErrors", "Entry adds that failed in the last stats interval"),
    Column("pulsar_ml_ReadEntriesRate", "Entries read per second", real=True),
    Column("pulsar_ml_ReadEntriesBytesRate", "Bytes read per second", real=True),
    Column("pulsar_ml_NumberOfMessagesInBacklog", "Messages not yet acknowledged"),
    Column("pulsar_ml_StoredMessagesSize", "Bytes stored, replicas included"),
]


def ml_namespace_values(f: TopicFigures) -> list[float]:
    return [
        f.write_bytes_rate,
        f.write_bytes_rate * f.write_quorum,
        f.write_rate,
        f.write_latency.observed,
        f.add_errors,
        f.read_rate,
        f.read_bytes_rate,
        f.backlog_messages,
        f.storage * f.write_quorum,
    ]


def column_families(
    columns: list[Column],
    rows: list[tuple[str, list[float]]],
    skip: frozenset[str] = frozenset(),
    namespace_level: bool = False,
) -> list[Family]:
    """One gauge family per column, a sample per row (its label string)."""
    out = []
    for i, column in enumerate(columns):
        if column.name in skip:
            continue
        family = Family(column.name, "gauge", column.help)
        extra = column.namespace_labels if namespace_level else ""
        family.add_table(rows, i, extra, ".9g" if column.real else "")
        out.append(family)
    return out


LOOKUP_QUANTILES = (0.5, 0.99, 0.999, 1.0)
TOPIC_LOAD_QUANTILES = (0.5, 0.75, 0.95, 0.99, 0.999, 0.9999)
PUBLISH_QUANTILES = (0.0, 0.5, 0.95, 0.99, 0.999, 0.9999, 1.0)


@dataclass(frozen=True)
class BrokerLabels:
    cluster: str  # cluster="..."
    broker: str  # cluster="...",broker="..."


def totals_families(labels: BrokerLabels, totals: list[float]) -> list[Family]:
    return [
        gauge(name, help_text, value, labels.cluster)
        for (name, help_text, _), value in zip(BROKER_TOTALS, totals, strict=True)
    ]


def request_families(labels: BrokerLabels, metrics: BrokerMetrics) -> list[Family]:
    """Lookups, topic loads and the publish latency."""
    c = labels.cluster
    lookups, loads = metrics.lookups, metrics.topic_loads
    return [
        lookups.latency_ms.family(
            "pulsar_broker_lookup", "Lookup latency (ms)", LOOKUP_QUANTILES, c
        ),
        counter(
            "pulsar_broker_lookup_answers",
            "Lookups answered by this broker (it owns the topic, or it placed it)",
            lookups.answers,
            c,
        ),
        counter(
            "pulsar_broker_lookup_redirects",
            "Lookups answered with another broker",
            lookups.redirects,
            c,
        ),
        counter("pulsar_broker_lookup_failures", "Lookups that failed", lookups.failures, c),
        gauge("pulsar_broker_lookup_pending_requests", "Lookups in progress", lookups.pending, c),
        gauge(
            "pulsar_broker_topic_load_pending_requests", "Topic loads in progress", loads.pending, c
        ),
        loads.latency_ms.family(
            "pulsar_topic_load_times", "Topic load latency (ms)", TOPIC_LOAD_QUANTILES, c
        ),
        counter("pulsar_topic_load_failed", "Topic loads that failed", loads.failures, c),
        metrics.publish_latency_ms.family(
            "pulsar_broker_publish_latency",
            "Storage latency of published entries (ms)",
            PUBLISH_QUANTILES,
            c,
        ),
    ]


def load_balancer_families(
    labels: BrokerLabels, report: dict | None, metrics: BrokerMetrics, bundles_owned: int
) -> list[Family]:
    """Pulsar's pulsar_lb_* (usage in percent, from the last load report)."""
    lb = join(labels.broker, 'metric="loadBalancing"')
    out = []
    if report is not None:
        for name, key in (
            ("pulsar_lb_cpu_usage", "cpu"),
            ("pulsar_lb_memory_usage", "memory"),
            ("pulsar_lb_bandwidth_in_usage", "bandwidthIn"),
            ("pulsar_lb_bandwidth_out_usage", "bandwidthOut"),
        ):
            out.append(
                gauge(
                    name,
                    f"{key} usage in the last load report (%)",
                    100.0 * float(report.get(key, 0.0)),
                    lb,
                )
            )
    out += [
        gauge("pulsar_lb_bundles_count", "Bundles this broker owns", bundles_owned, lb),
        gauge(
            "pulsar_lb_bundles_split_total",
            "Bundles this broker split as load manager leader",
            metrics.bundles_split,
            join(labels.cluster, 'metric="bundlesSplit"'),
        ),
        gauge(
            "pulsar_lb_unload_broker_total",
            "Brokers this broker shed load from as leader",
            metrics.broker_unloads,
            join(labels.cluster, 'metric="bundleUnloading"'),
        ),
        gauge(
            "pulsar_lb_unload_bundle_total",
            "Bundles this broker unloaded as leader",
            metrics.bundles_unloaded,
            join(labels.cluster, 'metric="bundleUnloading"'),
        ),
    ]
    return out


CACHE_SERIES = [
    ("pulsar_ml_count", "Managed ledgers open", "ml_count"),
    ("pulsar_ml_cache_used_size", "Bytes held by the entry cache", "cache_used_size"),
    ("pulsar_ml_cache_entries", "Entries held by the entry cache", "cache_entries"),
    ("pulsar_ml_cache_hits_rate", "Entries served from the cache per second", "cache_hits_rate"),
    ("pulsar_ml_cache_misses_rate", "Entries read from bookies per second", "cache_misses_rate"),
    (
        "pulsar_ml_cache_hits_throughput",
        "Bytes served from the cache per second",
        "cache_hits_throughput",
    ),
    (
        "pulsar_ml_cache_misses_throughput",
        "Bytes read from bookies per second",
        "cache_misses_throughput",
    ),
    (
        "pulsar_ml_cache_inserted_entries_total",
        "Entries put in the cache (grows)",
        "cache_inserted",
    ),
    (
        "pulsar_ml_cache_evicted_entries_total",
        "Entries evicted from the cache (grows)",
        "cache_evicted",
    ),
    ("pulsar_ml_cache_evictions", "Entries evicted in the last stats interval", "cache_evictions"),
]


def cache_families(labels: BrokerLabels, figures: dict[str, float]) -> list[Family]:
    return [gauge(name, h, figures[key], labels.cluster) for name, h, key in CACHE_SERIES]


def connection_families(
    labels: BrokerLabels, active: int, created: int, closed: int
) -> list[Family]:
    lab = join(labels.broker, 'metric="broker_connection"')
    return [
        gauge("pulsar_active_connections", "Client connections open", active, lab),
        gauge(
            "pulsar_connection_created_total_count", "Client connections seen opening", created, lab
        ),
        gauge(
            "pulsar_connection_closed_total_count", "Client connections seen closing", closed, lab
        ),
    ]
