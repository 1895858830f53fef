"""The stats history on real processes: brokers publish snapshots to the
stats topic, which listings hide, retention keeps across ledger rollovers
and restarts, and ``magnetar-admin stats export`` writes to hourly files."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator

import pyarrow.parquet as pq
import pytest

from client import Client, InitialPosition, MessageId
from client.admin import Admin
from client.stats_export import hour_of
from protos import stats_schema
from tests.harness import StandaloneCluster, wait_for
from tests.stats_topic import stats_records

STATS = stats_schema.STATS_TOPIC
# One snapshot a second; ledgers roll every 3 entries (a snapshot of a
# standalone is one entry), so rollovers come within seconds.
ENV = {
    "MAGNETAR_BROKER_STATS_EXPORT_INTERVAL_S": "1",
    "MAGNETAR_BROKER_MANAGED_LEDGER_MAX_ENTRIES_PER_LEDGER": "3",
    "MAGNETAR_BROKER_MANAGED_LEDGER_MIN_LEDGER_ROLLOVER_TIME_MINUTES": "0",
}


@pytest.fixture(scope="module")
def stats_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    c = StandaloneCluster(tmp_path_factory.mktemp("stats") / "data", env=ENV)
    c.start()
    yield c
    c.stop()


def _latest_of(service_url: str, topic: str) -> dict | None:
    mine = [r for _, r in stats_records(service_url) if r.get("topic") == topic]
    return mine[-1] if mine else None


def test_snapshots_of_a_topic_and_its_subscription_reach_the_stats_topic(stats_cluster, topic):
    n, m = 20, 7
    full = f"persistent://public/default/{topic}"
    with Client(stats_cluster.service_url) as client:
        consumer = client.subscribe(topic, "sub", initial_position=InitialPosition.Earliest)
        producer = client.create_producer(topic, batching_enabled=False)
        for i in range(n):
            producer.send(f"m{i}".encode())
        for _ in range(m):
            consumer.acknowledge(consumer.receive(5000))

        def settled() -> dict | None:
            r = _latest_of(stats_cluster.service_url, full)
            subs = {s["name"]: s for s in (r or {}).get("subscriptions", [])}
            if r and r["msgInCounter"] == n and subs.get("sub", {}).get("msgBacklog") == n - m:
                return r
            return None

        record = wait_for(settled, 30, f"a snapshot with {n} in and a backlog of {n - m}")
    assert tuple(record) == stats_schema.field_names(stats_schema.KIND_TOPIC)
    sub = record["subscriptions"][0]
    assert [f for f, _ in stats_schema.SUBSCRIPTION_FIELDS] == list(sub)
    assert (sub["type"], sub["isDurable"], sub["consumers"]) == ("Exclusive", True, 1)
    assert record["msgOutCounter"] >= m and record["publishers"] == 1
    assert (record["tenant"], record["namespace"], record["partition"]) == (
        "public",
        "public/default",
        -1,
    )
    assert record["countersSince"] <= record["timestamp"]
    assert record["bundle"].startswith("0x") and record["storageSize"] > 0

    snapshot = [
        r
        for _, r in stats_records(stats_cluster.service_url)
        if r["timestamp"] == record["timestamp"]
    ]
    kinds = {r["kind"] for r in snapshot}
    assert kinds == {"topic", "broker", "bookie"}  # the standalone broker leads: bookies too
    broker = next(r for r in snapshot if r["kind"] == "broker")
    assert broker["numTopics"] >= 1 and broker["splitMaxTopics"] > 0
    bookie = next(r for r in snapshot if r["kind"] == "bookie")
    assert bookie["diskTotalBytes"] == bookie["diskUsedBytes"] + bookie["diskFreeBytes"] > 0
    # The history never describes itself.
    assert all(not r.get("topic", "").startswith("persistent://magnetar/") for r in snapshot)


def test_a_records_message_carries_its_key_time_and_kind(stats_cluster):
    wait_for(lambda: len(stats_records(stats_cluster.service_url)) >= 2, 30, "stats records")
    for msg, record in stats_records(stats_cluster.service_url)[:50]:
        assert msg.event_timestamp() == record["timestamp"]
        assert msg.publish_timestamp() >= record["timestamp"]
        assert msg.properties() == {"kind": record["kind"], "schema_version": "1"}
        expected_key = {"broker": record["broker"], "bookie": record.get("bookie")}.get(
            record["kind"]
        )
        if record["kind"] == "topic":
            assert msg.partition_key().startswith(record["topic"])
        else:
            assert msg.partition_key() == expected_key


def test_system_topics_are_listed_only_when_asked_for(stats_cluster):
    wait_for(lambda: stats_records(stats_cluster.service_url), 30, "the stats topic")
    with Admin(stats_cluster.service_url) as admin:
        assert admin.topics.get_list("magnetar/system") == []
        assert admin.topics.get_list("magnetar/system", include_system_topic=True) == [STATS]
    plain = _admin(stats_cluster, "topics", "list", "magnetar/system")
    assert (plain.returncode, json.loads(plain.stdout)) == (0, [])
    asked = _admin(stats_cluster, "topics", "list", "magnetar/system", "--include-system-topic")
    assert json.loads(asked.stdout) == [STATS]


def _first_id(service_url: str, topic: str) -> MessageId:
    with Client(service_url) as client:
        reader = client.create_reader(topic, MessageId.earliest)
        first = reader.read_next(10000).message_id()
        reader.close()
    return first


def test_retention_keeps_the_stats_topics_ledgers_which_a_plain_topic_loses(stats_cluster, topic):
    """Neither topic has a subscription, so everything in them counts as
    consumed: without retention, every ledger but the current one goes."""
    url = stats_cluster.service_url
    first_stats = _first_id(url, STATS)
    with Client(url) as client:
        producer = client.create_producer(topic, batching_enabled=False)
        first_plain = producer.send(b"0")
        for i in range(1, 10):
            producer.send(str(i).encode())  # 10 entries: ledgers of 3 roll over
    wait_for(
        lambda: _first_id(url, topic).ledger_id() > first_plain.ledger_id(),
        30,
        "the plain topic's consumed ledgers to be deleted",
    )
    wait_for(
        lambda: stats_records(url)[-1][0].message_id().ledger_id() > first_stats.ledger_id() + 2,
        30,
        "the stats topic to roll over twice",
    )
    assert _first_id(url, STATS) == first_stats


def test_the_history_survives_a_restart(tmp_path):
    cluster = StandaloneCluster(tmp_path / "data", env=ENV)
    cluster.start()
    try:
        wait_for(lambda: len(stats_records(cluster.service_url)) >= 6, 30, "a few snapshots")
        before = [(m.message_id(), r) for m, r in stats_records(cluster.service_url)]
        cluster.stop()
        cluster.start()
        wait_for(
            lambda: len(stats_records(cluster.service_url)) > len(before), 30, "snapshots after it"
        )
        after = [(m.message_id(), r) for m, r in stats_records(cluster.service_url)]
    finally:
        cluster.stop()
    assert after[: len(before)] == before  # every record kept, in order
    assert after[-1][1]["timestamp"] > before[-1][1]["timestamp"]  # and the history goes on


def _admin(cluster: StandaloneCluster, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, MAGNETAR_SERVICE_URL=cluster.service_url)
    return subprocess.run(
        [sys.executable, "-m", "client.admin_cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_stats_export_writes_the_records_to_hourly_files(stats_cluster, tmp_path):
    wait_for(lambda: len(stats_records(stats_cluster.service_url)) >= 3, 30, "stats records")
    published = [r for _, r in stats_records(stats_cluster.service_url)]
    for fmt in ("jsonl", "parquet"):
        out = tmp_path / fmt
        done = _admin(
            stats_cluster,
            "stats",
            "export",
            "--since",
            "1d",
            "--output",
            str(out),
            "--format",
            fmt,
        )
        assert done.returncode == 0, done.stderr
        summary = json.loads(done.stdout)
        assert summary["records"] >= len(published) and summary["unknown_version"] == 0
        assert sorted(p.name for p in out.iterdir()) == summary["files"]
        rows: list[dict] = []
        for name in summary["files"]:
            hour = name.removeprefix("stats-").split(".")[0]
            if fmt == "jsonl":
                batch = [json.loads(line) for line in (out / name).read_text().splitlines()]
            else:
                batch = pq.read_table(out / name).to_pylist()
            assert {hour_of(r["timestamp"]) for r in batch} == {hour}
            rows.extend(batch)
        exported = {(r["timestamp"], r["kind"], r.get("topic"), r.get("bookie")) for r in rows}
        for r in published:
            assert (r["timestamp"], r["kind"], r.get("topic"), r.get("bookie")) in exported


# (arguments, exit code, what stderr says)
BAD_EXPORTS = [
    (["--since", "yesterday"], 2, "is not a time"),
    (["--since", "1h", "--until", "2h"], 2, "must be after"),
    (["--format", "csv"], 2, "csv"),
    (["--topic", "persistent://magnetar/system/nothing"], 1, "TopicNotFound"),
]


def test_bad_exports_are_refused_with_a_clear_error(stats_cluster, tmp_path):
    wait_for(lambda: stats_records(stats_cluster.service_url), 30, "the stats topic")
    for args, code, said in BAD_EXPORTS:
        done = _admin(stats_cluster, "stats", "export", "--output", str(tmp_path / "x"), *args)
        assert done.returncode == code, (args, done.stderr)
        assert said in done.stderr, (args, done.stderr)
    with Admin(stats_cluster.service_url) as admin:  # the bad topic was not created
        listed = admin.topics.get_list("magnetar/system", include_system_topic=True)
    assert listed == [STATS]


def test_every_broker_records_and_the_history_survives_the_death_of_its_owner(tmp_path):
    """A local cluster of three brokers snapshotting every second: all three
    publish to the one stats topic; kill -9 of the broker that owns it loses
    no stored record, and the others go on publishing through its new owner."""
    from tests.integration.test_local_cluster import _free_offset, _start, _states, _stop
    from tests.traffic import owner_of, place_topic_on

    config = tmp_path / "magnetar.toml"
    config.write_text("[broker]\nsession_ttl_ms = 4000\nstats_export_interval_s = 1\n")
    proc, endpoints = _start(
        tmp_path, "--port-offset", str(_free_offset()), "--config", str(config)
    )
    url, brokers = endpoints["service_url"], endpoints["brokers"]
    try:
        writers = lambda: {r["broker"] for _, r in stats_records(url)}  # noqa: E731
        wait_for(lambda: len(writers()) == 3, 60, "records from each of the three brokers")
        place_topic_on(f"magnetar://{brokers[0]}", STATS)
        assert owner_of(url, STATS) == f"magnetar://{brokers[0]}"
        before = [(m.message_id(), r) for m, r in stats_records(url)]
        os.kill(_states(tmp_path)["pids"]["broker-0"], signal.SIGKILL)
        killed_ms = before[-1][1]["timestamp"] + 1000
        after = lambda: [r for _, r in stats_records(url) if r["timestamp"] > killed_ms]  # noqa: E731
        wait_for(
            lambda: {r["broker"] for r in after()} >= set(brokers[1:]),
            90,
            "records from the two other brokers after the kill",
        )
        now = [(m.message_id(), r) for m, r in stats_records(url)]
    finally:
        _stop(proc, tmp_path)
    assert now[: len(before)] == before  # nothing stored was lost
