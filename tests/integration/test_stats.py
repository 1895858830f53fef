"""admin.topics.stats and `magnetar-admin topics stats` with Pulsar's field names."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from client import Client, ConsumerType, InitialPosition, TopicNotFound
from client.admin import Admin
from tests.harness import ROOT


def test_topic_stats_report_rates_backlog_and_consumers(cluster, topic):
    with Client(cluster.service_url) as c:
        # A subscription with no consumer: everything stays in its backlog.
        c.subscribe(topic, "idle", initial_position=InitialPosition.Earliest).close()
        p = c.create_producer(topic, batching_enabled=False, producer_name="stats-p")
        for _ in range(20):
            p.send(b"x" * 100)
        sub = c.subscribe(
            topic,
            "work",
            consumer_type=ConsumerType.Shared,
            initial_position=InitialPosition.Earliest,
            consumer_name="stats-c",
        )
        got = [sub.receive(timeout_millis=5000) for _ in range(20)]
        for m in got[:5]:
            sub.acknowledge(m)
        with Admin(cluster.service_url) as admin:

            def stats() -> dict:
                return admin.topics.stats(topic)

            # Acks are grouped for 100 ms: wait for them to reach the broker.
            from tests.harness import wait_for

            s = wait_for(
                lambda: (x := stats())["subscriptions"]["work"]["unackedMessages"] == 15 and x,
                10,
                "the acks to be counted",
            )
        assert s["msgInCounter"] == 20 and s["bytesInCounter"] > 2000
        assert s["msgRateIn"] > 0 and s["msgThroughputIn"] > 0
        assert s["msgOutCounter"] == 20 and s["msgRateOut"] > 0
        assert s["storageSize"] >= 2000
        assert [pub["producerName"] for pub in s["publishers"]] == ["stats-p"]
        work = s["subscriptions"]["work"]
        assert work["type"] == "Shared" and work["msgBacklog"] == 15
        assert work["consumers"][0]["consumerName"] == "stats-c"
        assert work["consumers"][0]["unackedMessages"] == 15
        assert work["consumers"][0]["availablePermits"] >= 0
        assert s["subscriptions"]["idle"]["msgBacklog"] == 20
        assert s["backlogSize"] > 0


def test_stats_of_a_missing_topic_is_topic_not_found(cluster, topic):
    with Admin(cluster.service_url) as admin, pytest.raises(TopicNotFound):
        admin.topics.stats(f"never-created-{topic}")


def test_cli_prints_stats_as_json(cluster, topic):
    with Client(cluster.service_url) as c:
        c.create_producer(topic).send(b"one")
    out = subprocess.run(
        [sys.executable, "-m", "client.admin_cli", "topics", "stats", topic],
        cwd=ROOT,
        env={**os.environ, "MAGNETAR_SERVICE_URL": cluster.service_url},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["msgInCounter"] == 1
    bad = subprocess.run(
        [
            *(sys.executable, "-m", "client.admin_cli", "--service-url", cluster.service_url),
            *("topics", "stats", "bad//name"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode != 0 and "Invalid" in bad.stderr
