"""The broker's label settings on real processes:
``expose_topic_level_metrics_in_prometheus = false`` sums the topic series
per namespace (Pulsar's exposeTopicLevelMetricsInPrometheus), and
``split_topic_and_partition_label_in_prometheus`` labels partitions with
their partitioned topic and ``partition``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from client import Client, InitialPosition
from client.admin import Admin
from tests.harness import StandaloneCluster, wait_for
from tests.metrics_scrape import scrape


def _cluster(tmp: pytest.TempPathFactory, name: str, **settings: str) -> StandaloneCluster:
    env = {f"MAGNETAR_BROKER_{k.upper()}": v for k, v in settings.items()}
    return StandaloneCluster(tmp.mktemp(name) / "data", env=env).start()


@pytest.fixture(scope="module")
def namespace_level(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    c = _cluster(
        tmp_path_factory,
        "ns-level",
        expose_topic_level_metrics_in_prometheus="false",
        stats_update_frequency_in_secs="1",
        # At most one unloaded topic's object is kept: an unload of three
        # folds two into the namespace's totals (and their reloads start anew).
        max_unloaded_topic_metrics="1",
        http_min_render_interval_ms="0",
    )
    yield c
    c.stop()


def test_topic_level_off_sums_per_namespace_and_keeps_counters_monotonic(namespace_level):
    port = int(namespace_level.endpoints["metrics"]["broker"])
    ns = {"cluster": "standalone", "namespace": "public/default"}
    url = namespace_level.service_url
    with Client(url) as c, Admin(url) as admin:
        for t in ("a", "b", "c"):
            c.subscribe(t, "s", initial_position=InitialPosition.Earliest)
            p = c.create_producer(t, batching_enabled=False)
            for _ in range(4):
                p.send(b"x")
        s = scrape(port)
        assert s.value("pulsar_in_messages_total", **ns) == 12
        assert s.value("pulsar_msg_backlog", remote_cluster="local", **ns) == 12
        assert s.value("pulsar_topics_count", **ns) == 3
        assert s.value("pulsar_subscriptions_count", **ns) == 3
        assert not [k for k in s.samples if dict(k[1]).get("topic")], "a topic label"
        assert "pulsar_subscription_back_log" not in s.names()  # no subscription series
        admin.namespaces.unload("public/default")
        # Unloaded topics, and topics loading again (the clients reconnect),
        # keep their counts in the namespace's sum, whenever it is scraped.
        for _ in range(30):
            assert scrape(port).value("pulsar_in_messages_total", **ns) == 12
        wait_for(lambda: scrape(port).get("pulsar_topics_count", **ns) == 3, 30, "reloads")
        assert scrape(port).value("pulsar_in_messages_total", **ns) == 12


@pytest.fixture(scope="module")
def split_labels(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    c = _cluster(tmp_path_factory, "split", split_topic_and_partition_label_in_prometheus="true")
    yield c
    c.stop()


def test_split_labels_name_the_partitioned_topic_and_the_partition(split_labels):
    port = int(split_labels.endpoints["metrics"]["broker"])
    url = split_labels.service_url
    topic = "persistent://public/default/parted"
    with Client(url) as c, Admin(url) as admin:
        admin.topics.create_partitioned_topic(topic, 3)
        p = c.create_producer(topic, batching_enabled=False)
        for i in range(9):
            p.send(b"x", partition_key=f"key-{i}")
        c.create_producer("plain", batching_enabled=False).send(b"y")
        s = scrape(port)
        per_partition = s.matching("pulsar_in_messages_total", topic=topic)
        assert sum(per_partition.values()) == 9
        assert {dict(lab)["partition"] for lab in per_partition} <= {"0", "1", "2"}
        assert not s.matching("pulsar_in_messages_total", topic=f"{topic}-partition-0")
        plain = s.value("pulsar_in_messages_total", topic="persistent://public/default/plain")
        assert plain == 1
        assert (
            s.value(
                "pulsar_in_messages_total",
                topic="persistent://public/default/plain",
                partition="-1",
            )
            == 1
        )
