"""What the broker counts for Prometheus, kept where traffic passes: per
topic, per subscription and for the whole broker (the exporter,
:mod:`broker.metrics_export`, reads it at scrape time).

Theory of operation. A topic's figures live in a :class:`TopicMetrics`
that outlives the topic: :class:`BrokerMetrics` hands the same object to
every load of the same topic on this broker, so its counters
(``pulsar_in_messages_total`` and friends) keep growing across unloads and
reloads instead of starting again at zero. Objects of topics no longer
served here are kept, oldest first out, up to
``max_unloaded_topic_metrics``; one that goes is folded into its
namespace's totals (:class:`NamespaceTotals`), so the namespace-level
counters stay monotonic too. Every object is in exactly one place (served,
unloaded, or folded) at any moment and the exporter reads each once, so a
scrape during an unload or a reload never counts a topic twice.

Publishing, dispatch, acknowledgements and ledger adds only bump numbers
here (no locks, no label lookups); everything with labels is built at
scrape time. :meth:`BrokerMetrics.roll` ends a stats interval
(``stats_update_frequency_in_secs``): Pulsar's bucketed gauges and the
summaries' quantiles then show the interval that ended.
"""

from __future__ import annotations

import collections
import time
from dataclasses import dataclass

from broker.meter import ENTRY_SIZE_BOUNDS_BYTES, WRITE_LATENCY_BOUNDS_MS, Meter, StatsBuckets
from broker.settings import BrokerSettings
from protos import prometheus_text
from protos.prometheus_text import OpStats
from protos.topic_name import PARTITION_SUFFIX, TopicName


class SubscriptionMetrics:
    """A subscription's traffic: messages out, redelivered and acknowledged."""

    __slots__ = ("acked", "counting_since_ms", "expired", "label_str", "out", "redelivered")

    def __init__(self, window_s: float, label_str: str) -> None:
        self.counting_since_ms = int(time.time() * 1000)  # the counters count from then
        self.out = Meter(window_s)
        self.redelivered = Meter(window_s)
        self.acked = Meter(window_s)
        self.expired = Meter(window_s)  # by message TTL or expire-messages
        self.label_str = label_str  # the topic's labels and subscription="..."


class TopicMetrics:
    """One topic's counters, meters and buckets (module docstring)."""

    __slots__ = (
        "_add_errors_at_roll",
        "add_errors",
        "add_errors_shown",
        "counting_since_ms",
        "entry_size",
        "label_str",
        "meter_in",
        "meter_out",
        "name",
        "namespace",
        "namespace_label_str",
        "publish_latency_ms",
        "publish_throttled",
        "reads",
        "subscriptions",
        "window_s",
        "write_latency",
        "writes",
    )

    def __init__(
        self,
        name: TopicName,
        window_s: float,
        cluster: str,
        split: bool,
        publish_latency_ms: OpStats | None = None,
    ) -> None:
        self.name = name
        self.namespace = name.namespace_name
        self.window_s = window_s
        self.counting_since_ms = int(time.time() * 1000)  # the counters count from then
        self.meter_in = Meter(window_s)  # messages and bytes published
        self.meter_out = Meter(window_s)  # messages and bytes dispatched
        self.writes = Meter(window_s)  # entries and bytes stored
        self.reads = Meter(window_s)  # entries and bytes read back
        self.add_errors = 0  # entry adds that failed, ever
        self.publish_throttled = 0  # publishes the publish rate made wait, ever
        self._add_errors_at_roll = 0
        self.add_errors_shown = 0  # ... in the last complete stats interval
        self.write_latency = StatsBuckets(WRITE_LATENCY_BOUNDS_MS)
        self.entry_size = StatsBuckets(ENTRY_SIZE_BOUNDS_BYTES)
        # The broker's pulsar_broker_publish_latency, shared by every topic.
        self.publish_latency_ms = (
            publish_latency_ms if publish_latency_ms is not None else OpStats()
        )
        self.subscriptions: dict[str, SubscriptionMetrics] = {}
        self.namespace_label_str = prometheus_text.labels(
            (("cluster", cluster), ("namespace", self.namespace))
        )
        self.label_str = prometheus_text.join(
            self.namespace_label_str, topic_label_str(name, split)
        )

    def entry_stored(self, size: int, latency_s: float) -> None:
        """Pulsar's storage figures of one stored entry (latency from the
        broker's add call, its queueing included, as Pulsar measures it)."""
        latency_ms = latency_s * 1000
        self.writes.add(1, size)
        self.write_latency.add(latency_ms, latency_s * 1e6)  # Pulsar sums microseconds
        self.entry_size.add(size)
        self.publish_latency_ms.record(latency_ms)

    def subscription(self, name: str) -> SubscriptionMetrics:
        sub = self.subscriptions.get(name)
        if sub is None:
            sub = SubscriptionMetrics(self.window_s, self.subscription_labels(name))
            self.subscriptions[name] = sub
        return sub

    def subscription_labels(self, name: str) -> str:
        return prometheus_text.join(
            self.label_str, prometheus_text.labels((("subscription", name),))
        )

    def forget_subscription(self, name: str) -> None:
        """The subscription was deleted (unsubscribed, or a non-persistent
        one lost its last consumer)."""
        self.subscriptions.pop(name, None)

    def keep_subscriptions(self, names: set[str]) -> None:
        """Forget subscriptions that no longer exist (the topic closed)."""
        for gone in [n for n in self.subscriptions if n not in names]:
            del self.subscriptions[gone]

    def roll(self) -> None:
        self.write_latency.roll()
        self.entry_size.roll()
        self.add_errors_shown = self.add_errors - self._add_errors_at_roll
        self._add_errors_at_roll = self.add_errors


def topic_label_str(name: TopicName, split: bool) -> str:
    """Pulsar's topic labels: the full name (a partition's own name), or with
    ``split_topic_and_partition_label_in_prometheus`` the partitioned
    topic's name and ``partition`` (-1 for a topic that is not a partition)."""
    full = name.full_name
    if not split:
        return prometheus_text.labels((("topic", full),))
    base, partition = full, "-1"
    if name.partition_index >= 0:
        base = full[: full.rindex(PARTITION_SUFFIX)]
        partition = str(name.partition_index)
    return prometheus_text.labels((("topic", base), ("partition", partition)))


@dataclass
class NamespaceTotals:
    """Counters of a namespace's topics whose own objects were dropped."""

    msgs_in: int = 0
    bytes_in: int = 0
    msgs_out: int = 0
    bytes_out: int = 0

    def fold(self, t: TopicMetrics) -> None:
        self.msgs_in += t.meter_in.msgs
        self.bytes_in += t.meter_in.bytes
        self.msgs_out += t.meter_out.msgs
        self.bytes_out += t.meter_out.bytes


class RequestStats:
    """A kind of request's outcome counters, pending gauge and latency summary (ms)."""

    __slots__ = ("answers", "failures", "latency_ms", "pending", "redirects")

    def __init__(self) -> None:
        self.answers = 0
        self.redirects = 0
        self.failures = 0
        self.pending = 0
        self.latency_ms = OpStats()


class BrokerMetrics:
    """Every :class:`TopicMetrics` of this broker and its broker-wide figures."""

    def __init__(self, settings: BrokerSettings) -> None:
        self.cluster = settings.cluster_name
        self.window_s = float(settings.stats_update_frequency_in_secs)
        self.split = settings.split_topic_and_partition_label_in_prometheus
        self.max_unloaded = settings.max_unloaded_topic_metrics
        self._served: dict[str, TopicMetrics] = {}
        # Topic instances using each served object: an unload's close can
        # still be running when the next load of the same topic starts.
        self._users: dict[str, int] = {}
        self._unloaded: collections.OrderedDict[str, TopicMetrics] = collections.OrderedDict()
        self.departed: dict[str, NamespaceTotals] = {}
        self.lookups = RequestStats()
        self.topic_loads = RequestStats()
        self.publish_latency_ms = OpStats()  # pulsar_broker_publish_latency
        # Load manager decisions this broker took as leader.
        self.bundles_split = 0
        self.bundles_unloaded = 0
        self.broker_unloads = 0

    def topic(self, name: TopicName) -> TopicMetrics:
        """The metrics of a topic loaded here: those it had when it was last
        served here, if they are still kept."""
        key = name.full_name
        metrics = self._served.get(key) or self._unloaded.pop(key, None)
        if metrics is None:
            metrics = TopicMetrics(
                name, self.window_s, self.cluster, self.split, self.publish_latency_ms
            )
        self._served[key] = metrics
        self._users[key] = self._users.get(key, 0) + 1
        return metrics

    def topic_closed(self, name: TopicName, subscriptions: set[str] | None) -> None:
        """An instance of the topic stopped (closed, or its load failed:
        ``subscriptions`` None keeps them all). Once no instance uses them,
        its metrics are kept for a reload, with the subscriptions it had."""
        key = name.full_name
        users = self._users.get(key, 0) - 1
        if users > 0:
            self._users[key] = users  # a newer instance of the topic still counts into it
            return
        self._users.pop(key, None)
        metrics = self._served.pop(key, None)
        if metrics is None:
            return
        if subscriptions is not None:
            metrics.keep_subscriptions(subscriptions)
        self._unloaded[key] = metrics
        while len(self._unloaded) > self.max_unloaded:
            _, old = self._unloaded.popitem(last=False)
            self.departed.setdefault(old.namespace, NamespaceTotals()).fold(old)

    def forget_topic(self, name: TopicName) -> None:
        """A deleted topic: its kept counters go (a new topic of the name starts at 0)."""
        if name.full_name not in self._served:
            self._unloaded.pop(name.full_name, None)

    def served(self) -> list[TopicMetrics]:
        return list(self._served.values())

    def unloaded(self) -> list[TopicMetrics]:
        return list(self._unloaded.values())

    def roll(self) -> None:
        """A stats interval ended (``stats_update_frequency_in_secs``)."""
        for metrics in self._served.values():
            metrics.roll()
        for metrics in self._unloaded.values():
            metrics.roll()
        self.lookups.latency_ms.rotate()
        self.topic_loads.latency_ms.rotate()
        self.publish_latency_ms.rotate()
