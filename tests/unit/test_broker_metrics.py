"""What the broker keeps for Prometheus (broker/metrics.py) and the names it
exports (broker/metrics_families.py): counters that survive unloads and
reloads, a bound on what topics no longer served keep, Pulsar's labels
and bucket names."""

from __future__ import annotations

from dataclasses import replace

import pytest

from broker.metrics import BrokerMetrics, topic_label_str
from broker.metrics_families import (
    ENTRY_SIZE_BANDS,
    TOPIC_COLUMNS,
    WRITE_LATENCY_BANDS,
)
from broker.settings import BrokerSettings
from protos.topic_name import TopicName


def _metrics(**settings: object) -> BrokerMetrics:
    return BrokerMetrics(replace(BrokerSettings(cluster_name="c1"), **settings))  # type: ignore[arg-type]


def test_a_reloaded_topic_counts_on_from_where_it_stopped():
    m = _metrics()
    name = TopicName.parse("t")
    first = m.topic(name)
    first.meter_in.add(10, 100)
    m.topic_closed(name, set())
    assert m.served() == [] and m.unloaded() == [first]
    again = m.topic(name)
    assert again is first and again.meter_in.msgs == 10
    assert m.served() == [first] and m.unloaded() == []


def test_unloaded_topics_are_bounded_and_the_oldest_fold_into_their_namespace():
    m = _metrics(max_unloaded_topic_metrics=2)
    names = [TopicName.parse(f"tenant/ns/t{i}") for i in range(4)]
    for i, name in enumerate(names):
        tm = m.topic(name)
        tm.meter_in.add(i + 1, 10)
        tm.meter_out.add(1, 1)
        m.topic_closed(name, set())
    assert [t.name for t in m.unloaded()] == names[2:]
    folded = m.departed["tenant/ns"]
    assert (folded.msgs_in, folded.bytes_in, folded.msgs_out, folded.bytes_out) == (3, 20, 2, 2)
    # Every topic is in exactly one place: the namespace's counter never goes down.
    kept = sum(t.meter_in.msgs for t in m.unloaded())
    assert kept + folded.msgs_in == 1 + 2 + 3 + 4
    assert m.topic(names[0]).meter_in.msgs == 0  # folded: a reload starts again


def test_a_closed_topic_forgets_subscriptions_that_no_longer_exist():
    m = _metrics()
    name = TopicName.parse("t")
    tm = m.topic(name)
    tm.subscription("kept").out.add(5, 50)
    tm.subscription("gone").out.add(1, 1)
    m.topic_closed(name, {"kept"})
    assert set(m.topic(name).subscriptions) == {"kept"}
    assert m.topic(name).subscription("kept").out.msgs == 5


# (topic, split labels) -> the topic's labels, as Pulsar writes them
LABELS = [
    ("t", False, 'topic="persistent://public/default/t"'),
    ("t-partition-3", False, 'topic="persistent://public/default/t-partition-3"'),
    ("t-partition-3", True, 'topic="persistent://public/default/t",partition="3"'),
    ("t", True, 'topic="persistent://public/default/t",partition="-1"'),
    ("non-persistent://a/b/x-partition-0", True, 'topic="non-persistent://a/b/x",partition="0"'),
]


@pytest.mark.parametrize(("topic", "split", "expected"), LABELS)
def test_topic_labels(topic, split, expected):
    assert topic_label_str(TopicName.parse(topic), split) == expected


def test_every_series_of_a_topic_carries_cluster_and_namespace_first():
    tm = _metrics().topic(TopicName.parse("tenant/ns/t"))
    assert tm.label_str == ('cluster="c1",namespace="tenant/ns",topic="persistent://tenant/ns/t"')
    sub = tm.subscription('a "quoted"\nname')
    assert sub.label_str == tm.label_str + ',subscription="a \\"quoted\\"\\nname"'


def test_bucket_names_are_pulsars():
    assert WRITE_LATENCY_BANDS == [
        "pulsar_storage_write_latency_le_0_5",
        "pulsar_storage_write_latency_le_1",
        "pulsar_storage_write_latency_le_5",
        "pulsar_storage_write_latency_le_10",
        "pulsar_storage_write_latency_le_20",
        "pulsar_storage_write_latency_le_50",
        "pulsar_storage_write_latency_le_100",
        "pulsar_storage_write_latency_le_200",
        "pulsar_storage_write_latency_le_1000",
    ]
    assert ENTRY_SIZE_BANDS == [
        "pulsar_entry_size_le_128",
        "pulsar_entry_size_le_512",
        "pulsar_entry_size_le_1_kb",
        "pulsar_entry_size_le_2_kb",
        "pulsar_entry_size_le_4_kb",
        "pulsar_entry_size_le_16_kb",
        "pulsar_entry_size_le_100_kb",
        "pulsar_entry_size_le_1_mb",
    ]
    names = [c.name for c in TOPIC_COLUMNS]
    assert len(names) == len(set(names))
    for extra in (
        "pulsar_storage_write_latency_overflow",
        "pulsar_storage_write_latency_count",
        "pulsar_storage_write_latency_sum",
        "pulsar_entry_size_le_overflow",
        "pulsar_entry_size_count",
        "pulsar_entry_size_sum",
    ):
        assert extra in names


def test_a_stats_interval_moves_every_kept_topic_on():
    m = _metrics()
    served = m.topic(TopicName.parse("a"))
    gone = m.topic(TopicName.parse("b"))
    m.topic_closed(gone.name, set())
    for tm in (served, gone):
        tm.write_latency.add(3.0)
        tm.add_errors += 2
    m.roll()
    assert served.write_latency.count == gone.write_latency.count == 1
    assert served.add_errors_shown == 2
    m.roll()
    assert served.write_latency.count == 0 and served.add_errors_shown == 0


def test_an_unload_still_closing_when_the_topic_loads_again_moves_nothing():
    m = _metrics(max_unloaded_topic_metrics=0)  # an unloaded topic's object goes at once
    name = TopicName.parse("t")
    old = m.topic(name)
    new = m.topic(name)  # loaded again before the old instance's close ended
    assert new is old
    old.meter_in.add(3, 3)
    m.topic_closed(name, set())  # the old instance's close ends
    assert m.served() == [new] and not m.departed  # still served, nothing folded
    new.meter_in.add(2, 2)
    m.topic_closed(name, set())
    assert m.served() == [] and m.departed["public/default"].msgs_in == 5


def test_a_failed_load_keeps_the_subscriptions_counters():
    m = _metrics()
    name = TopicName.parse("t")
    m.topic(name).subscription("s").out.add(7, 70)
    m.topic_closed(name, {"s"})
    m.topic(name)  # the next load fails (bookies down, a lost race)
    m.topic_closed(name, None)
    assert m.topic(name).subscription("s").out.msgs == 7
    m.topic_closed(TopicName.parse("never-loaded"), None)  # nothing to do
