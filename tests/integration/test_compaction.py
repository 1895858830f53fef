"""Topic compaction on real processes (issue 25, points 4-5): ``topics
compact`` keeps each key's latest message in a ledger on the bookies, a
tombstone removes its key, keyless messages are left out; read-compacted
consumers and readers see the view up to the horizon and the live topic
after it, in order and without duplicates; runs merge with the previous
view; the threshold policy compacts automatically; a broker killed in the
middle of a run leaves the previous view whole."""

from __future__ import annotations

import itertools
import json
import os
import signal

import grpc
import pytest

from client import (
    Client,
    CompressionType,
    ConsumerType,
    InitialPosition,
    InvalidConfiguration,
    MessageId,
    NotAllowedError,
    Timeout,
)
from client.admin import Admin
from protos import metadata_paths, metastore_pb2, metastore_pb2_grpc
from protos.topic_name import TopicName
from tests.harness import StandaloneCluster, wait_for

_n = itertools.count()


def _topic() -> str:
    return f"persistent://public/default/compact-{next(_n)}-{os.getpid()}"


def _get(cluster: StandaloneCluster, key: str) -> bytes | None:
    with grpc.insecure_channel(cluster.endpoints["metastore"]) as ch:
        resp = metastore_pb2_grpc.MetastoreStub(ch).Get(
            metastore_pb2.GetRequest(key=key), timeout=10
        )
    return bytes(resp.record.value) if resp.found else None


def _record(cluster: StandaloneCluster, topic: str) -> dict:
    """The topic's compaction record in the metastore ({} when none)."""
    found = _get(cluster, metadata_paths.compaction(TopicName.parse(topic)))
    return json.loads(found) if found else {}


def _compact(admin: Admin, topic: str) -> None:
    admin.topics.compact(topic)
    status = admin.topics.compaction_status(topic, wait=True, timeout_s=120)
    assert status == {"status": "SUCCESS", "lastError": ""}, status


def _read_all(c: Client, topic: str, compacted: bool = True, limit: int = 100000) -> list:
    reader = c.create_reader(topic, MessageId.earliest, is_read_compacted=compacted)
    out: list = []
    try:
        while len(out) < limit:
            m = reader.read_next(timeout_millis=3000)
            out.append((m.partition_key(), m.data(), m.message_id()))
    except Timeout:
        pass
    reader.close()
    return out


def _fill(c: Client, topic: str, batched: bool) -> dict[str, bytes]:
    """A keyed history with overwrites, tombstones and keyless messages;
    the latest value per key it leaves."""
    p = c.create_producer(topic, batching_enabled=batched, compression_type=CompressionType.LZ4)
    latest: dict[str, bytes] = {}
    for i in range(60):
        key = f"k{i % 7}"
        value = f"{key}-v{i}".encode()
        p.send_async(value, None, partition_key=key)
        latest[key] = value
        if i % 10 == 9:
            p.send_async(b"no key", None)
    for gone in ("k3", "k5"):
        p.send_async(None, None, partition_key=gone)
        latest.pop(gone)
    p.flush()
    return latest


@pytest.mark.parametrize("batched", [False, True], ids=["plain", "batched"])
def test_the_compacted_view_keeps_each_keys_latest(cluster, batched):
    topic = _topic()
    with Client(cluster.service_url) as c, Admin(cluster.service_url) as admin:
        latest = _fill(c, topic, batched)
        assert admin.topics.compaction_status(topic) == {"status": "NOT_RUN", "lastError": ""}
        before = _read_all(c, topic, compacted=False)
        _compact(admin, topic)
        view = _read_all(c, topic)
        assert {k: v for k, v, _ in view} == latest
        assert len(view) == len(latest)  # one message per key, no tombstones, no keyless
        ids = [mid for _, _, mid in view]
        assert ids == sorted(ids)  # in topic order, with their original ids
        assert set(ids) <= {mid for _, _, mid in before}
        # The whole topic is still there for everyone else.
        assert _read_all(c, topic, compacted=False) == before
        subs = admin.topics.stats(topic)["subscriptions"]
        assert subs["__compaction"]["msgBacklog"] == 0


def test_read_compacted_goes_on_with_the_live_topic_without_duplicates(cluster):
    topic = _topic()
    with Client(cluster.service_url) as c, Admin(cluster.service_url) as admin:
        latest = _fill(c, topic, batched=True)
        _compact(admin, topic)
        p = c.create_producer(topic, batching_enabled=False)
        after = [p.send(b"after-1", partition_key="k0"), p.send(b"after-2")]
        consumer = c.subscribe(
            topic,
            "reads-compacted",
            consumer_type=ConsumerType.Failover,
            initial_position=InitialPosition.Earliest,
            is_read_compacted=True,
        )
        got = []
        while True:
            try:
                m = consumer.receive(timeout_millis=3000)
            except Timeout:
                break
            got.append(m)
            consumer.acknowledge(m)
        ids = [m.message_id() for m in got]
        assert ids == sorted(ids) and len(set(ids)) == len(ids)
        assert ids[-2:] == after  # the live topic after the horizon, keyless ones too
        assert {m.partition_key(): m.data() for m in got[:-2]} == latest
        # What the view left out counts as acknowledged: nothing is left behind.
        wait_for(
            lambda: (
                admin.topics.stats(topic)["subscriptions"]["reads-compacted"]["msgBacklog"] == 0
            ),
            10,
            "the read-compacted subscription to have no backlog",
        )


def test_a_second_run_merges_with_the_first_view(cluster):
    topic = _topic()
    with Client(cluster.service_url) as c, Admin(cluster.service_url) as admin:
        latest = _fill(c, topic, batched=True)
        _compact(admin, topic)
        p = c.create_producer(topic)
        p.send(b"k0-new", partition_key="k0")
        p.send(None, partition_key="k1")
        p.send(b"k3-back", partition_key="k3")
        p.flush()
        latest.update({"k0": b"k0-new", "k3": b"k3-back"})
        latest.pop("k1")
        _compact(admin, topic)
        assert {k: v for k, v, _ in _read_all(c, topic)} == latest
        _compact(admin, topic)  # nothing new: the view stays
        assert {k: v for k, v, _ in _read_all(c, topic)} == latest


def test_bad_uses_are_refused(cluster):
    topic = _topic()
    with Client(cluster.service_url) as c, Admin(cluster.service_url) as admin:
        with pytest.raises(InvalidConfiguration, match="exclusive or failover"):
            c.subscribe(topic, "s", consumer_type=ConsumerType.Shared, is_read_compacted=True)
        with pytest.raises(NotAllowedError, match="non-persistent"):
            admin.topics.compact(f"non-persistent://public/default/{topic.rsplit('/', 1)[1]}")


def test_a_partitioned_topic_compacts_each_partition(cluster):
    topic = _topic()
    with Client(cluster.service_url) as c, Admin(cluster.service_url) as admin:
        admin.topics.create_partitioned_topic(topic, 2)
        p = c.create_producer(topic)
        for i in range(40):
            p.send(f"v{i}".encode(), partition_key=f"k{i % 5}")
        admin.topics.compact(topic)
        wait_for(
            lambda: all(
                s["status"] == "SUCCESS" for s in admin.topics.compaction_status(topic).values()
            ),
            60,
            "both partitions compacted",
        )
        seen = {}
        for partition in c.get_topic_partitions(topic):
            for key, value, _ in _read_all(c, partition):
                seen[key] = value
        assert seen == {f"k{k}": f"v{35 + k}".encode() for k in range(5)}


def test_the_threshold_compacts_automatically(tmp_path):
    config = tmp_path / "magnetar.toml"
    config.write_text("[broker]\nbroker_service_compaction_monitor_interval_in_seconds = 1\n")
    cluster = StandaloneCluster(tmp_path / "data", ["--config", str(config)]).start()
    try:
        topic = _topic()
        with Client(cluster.service_url) as c, Admin(cluster.service_url) as admin:
            admin.namespaces.set_policy("public/default", "compaction-threshold", 20000)
            p = c.create_producer(topic, batching_enabled=False)
            for i in range(10):  # ~10 KiB: under the threshold
                p.send(os.urandom(1000), partition_key=f"k{i % 3}")
            assert admin.topics.compaction_status(topic)["status"] == "NOT_RUN"
            for i in range(30):
                p.send(os.urandom(1000), partition_key=f"k{i % 3}")
            wait_for(
                lambda: admin.topics.compaction_status(topic)["status"] == "SUCCESS",
                30,
                "the monitor to compact the topic",
            )
            assert len(_read_all(c, topic)) == 3
    finally:
        cluster.stop()


def test_a_broker_killed_during_a_run_leaves_the_previous_view(tmp_path):
    cluster = StandaloneCluster(tmp_path / "data").start()
    try:
        topic = _topic()
        with Client(cluster.service_url) as c, Admin(cluster.service_url) as admin:
            p = c.create_producer(topic, batching_enabled=False, block_if_queue_full=True)
            for i in range(20):
                p.send(f"first-{i}".encode(), partition_key=f"k{i % 4}")
            _compact(admin, topic)
            first_view = _read_all(c, topic)
            for i in range(20000):  # the next run takes a while: it is killed in it
                p.send_async(f"second-{i}".encode(), None, partition_key=f"k{i % 4}")
            p.flush()
            admin.topics.compact(topic)
            # Killed once the run has named the ledger it is writing.
            wait_for(lambda: _record(cluster, topic).get("pending", -1) >= 0, 30, "the run")
            pending = _record(cluster, topic)["pending"]
            broker = cluster.endpoints["pids"]["broker"]
            os.kill(broker, signal.SIGKILL)

        def restarted() -> bool:
            now = json.loads((cluster.data_dir / "endpoints.json").read_text())
            return bool(now["pids"]["broker"] != broker and now["states"]["broker"] == "running")

        wait_for(restarted, 60, "the supervisor to restart the broker")
        with Client(cluster.service_url) as c, Admin(cluster.service_url) as admin:
            status = admin.topics.compaction_status(topic)
            assert status["status"] == "ERROR" and "interrupted" in status["lastError"], status
            # The previous view, whole, then the live topic after its horizon.
            view = _read_all(c, topic, limit=30000)
            assert view[: len(first_view)] == first_view
            assert len(view) == len(first_view) + 20000
            _compact(admin, topic)
            assert _get(cluster, metadata_paths.ledger(pending)) is None  # the garbage went
            assert _record(cluster, topic)["pending"] == -1
            final = {k: v for k, v, _ in _read_all(c, topic)}
            assert final == {f"k{k}": f"second-{19996 + k}".encode() for k in range(4)}
    finally:
        cluster.stop()


def test_the_view_outlives_the_ledgers_retention_deleted(tmp_path):
    """After a run, retention may delete the ledgers the view's entries came
    from: a new reader or read-compacted subscription from the earliest
    message still reads every key's latest value."""
    config = tmp_path / "magnetar.toml"
    config.write_text(
        "[broker]\nmanaged_ledger_max_entries_per_ledger = 10\n"
        "managed_ledger_min_ledger_rollover_time_minutes = 0\n"
    )
    cluster = StandaloneCluster(tmp_path / "data", ["--config", str(config)]).start()
    try:
        topic = _topic()
        with Client(cluster.service_url) as c, Admin(cluster.service_url) as admin:
            everything = c.subscribe(topic, "everything", initial_position=InitialPosition.Earliest)
            p = c.create_producer(topic, batching_enabled=False)
            for i in range(50):
                p.send(f"v{i}".encode(), partition_key=f"k{i % 5}")
            for _ in range(50):
                everything.acknowledge(everything.receive(timeout_millis=10000))
            _compact(admin, topic)
            p.send(b"live", partition_key="k0")  # a ledger after the horizon
            first_view_ledgers = {
                mid.ledger_id() for _, v, mid in _read_all(c, topic) if v != b"live"
            }
            wait_for(
                lambda: (
                    not first_view_ledgers
                    & {entry["ledgerId"] for entry in admin.topics.stats_internal(topic)["ledgers"]}
                ),
                30,
                "retention to delete the ledgers the view came from",
            )
            latest = {f"k{k}": f"v{45 + k}".encode() for k in range(5)}
            view = _read_all(c, topic)
            assert {k: v for k, v, _ in view[:-1]} == latest and view[-1][1] == b"live"
            durable = c.subscribe(
                topic, "late", initial_position=InitialPosition.Earliest, is_read_compacted=True
            )
            got = [durable.receive(timeout_millis=10000) for _ in range(6)]
            assert [m.data() for m in got] == [v for _, v, _ in view]
    finally:
        cluster.stop()
