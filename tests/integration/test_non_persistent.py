"""Non-persistent topics: no bookie is touched, every subscription type
works, a consumer without permits misses messages (counted as dropped), and
a broker restart loses only what was in flight."""

from __future__ import annotations

import asyncio

import pytest

from client import (
    Client,
    ConsumerKeySharedPolicy,
    ConsumerType,
    InitialPosition,
    KeySharedMode,
    NotAllowedError,
    Timeout,
)
from client.admin import Admin
from metastore.client import MetastoreClient
from tests.harness import wait_for


def _np(topic: str) -> str:
    return f"non-persistent://public/default/{topic}"


def _stored_keys(cluster, topic: str) -> list[str]:  # type: ignore[no-untyped-def]
    """Metastore keys a persistent topic of that name would have (ledger list, cursors)."""

    async def run() -> list[str]:
        ms = MetastoreClient(cluster.endpoints["metastore"])
        try:
            records, _ = await ms.list_prefix("/managed-ledgers/public/default/non-persistent/")
            return [r.key for r in records if topic in r.key]
        finally:
            await ms.close()

    return asyncio.run(run())


def _drain(consumer, timeout_ms: int = 300) -> list[bytes]:  # type: ignore[no-untyped-def]
    got: list[bytes] = []
    while True:
        try:
            m = consumer.receive(timeout_millis=timeout_ms)
        except Timeout:
            return got
        consumer.acknowledge(m)
        got.append(m.data())


def test_every_subscription_type_and_no_bookie_write(cluster, topic):
    t = _np(topic)
    with Client(cluster.service_url) as c:
        ex = c.subscribe(t, "ex")
        fo = [
            c.subscribe(t, "fo", consumer_type=ConsumerType.Failover, consumer_name=n) for n in "ab"
        ]
        sh = [c.subscribe(t, "sh", consumer_type=ConsumerType.Shared) for _ in range(2)]
        ks = [
            c.subscribe(
                t,
                "ks",
                consumer_type=ConsumerType.KeyShared,
                key_shared_policy=ConsumerKeySharedPolicy(KeySharedMode.Sticky, sticky_ranges=[r]),
            )
            for r in ((0, 32767), (32768, 65535))
        ]
        p = c.create_producer(t, batching_enabled=False)
        ids = [p.send(f"{i}".encode(), partition_key=f"key-{i % 4}") for i in range(20)]
        assert [i.entry_id() for i in ids] == list(range(ids[0].entry_id(), ids[0].entry_id() + 20))
        assert _drain(ex) == [f"{i}".encode() for i in range(20)]
        assert _drain(fo[0]) == [f"{i}".encode() for i in range(20)] and _drain(fo[1]) == []
        shared = [_drain(s) for s in sh]
        assert sorted(shared[0] + shared[1], key=int) == [f"{i}".encode() for i in range(20)]
        assert shared[0] and shared[1]
        keyed = [_drain(k) for k in ks]
        assert sorted(keyed[0] + keyed[1], key=int) == [f"{i}".encode() for i in range(20)]
        for got in keyed:  # each key at one consumer
            keys = {int(x) % 4 for x in got}
            assert not keys & {int(x) % 4 for x in (keyed[1] if got is keyed[0] else keyed[0])}
        with pytest.raises(NotAllowedError, match="non-persistent"):
            ex.seek(ids[0])
        assert _stored_keys(cluster, topic) == []  # no managed ledger: no ledger, no bookie
        with Admin(cluster.service_url) as admin:
            assert admin.topics.stats(t)["storageSize"] == 0


def test_a_consumer_without_permits_misses_messages_and_they_count_as_dropped(cluster, topic):
    t = _np(topic)
    with Client(cluster.service_url) as c, Admin(cluster.service_url) as admin:
        slow = c.subscribe(t, "slow", receiver_queue_size=5)
        p = c.create_producer(t, batching_enabled=False)
        for i in range(20):
            p.send(f"{i}".encode())  # completes once dispatched (or dropped)
        stats = wait_for(
            lambda: (
                (s := admin.topics.stats(t))["subscriptions"]["slow"]["msgDropCount"] == 15 and s
            ),
            10,
            "15 drops to be counted",
        )
        assert stats["subscriptions"]["slow"]["msgBacklog"] == 0
        assert _drain(slow) == [f"{i}".encode() for i in range(5)]
        # With permits again it gets what is published from now on.
        p.send(b"after")
        assert slow.receive(timeout_millis=5000).data() == b"after"
        # No subscription at all: the send still completes.
        lonely = c.create_producer(_np(topic + "-nobody"), batching_enabled=False)
        assert lonely.send(b"x").entry_id() == 0


def test_a_broker_restart_loses_in_flight_messages_and_nothing_else(fresh_cluster, topic):
    fresh_cluster.start()
    url = fresh_cluster.service_url
    with Client(url) as c:
        p = c.create_producer(topic, batching_enabled=False)
        kept = [p.send(f"p{i}".encode()) for i in range(5)]
        durable = c.subscribe(topic, "d", initial_position=InitialPosition.Earliest)
        np_consumer = c.subscribe(_np(topic), "np", receiver_queue_size=3)
        np_p = c.create_producer(_np(topic), batching_enabled=False)
        for i in range(6):
            np_p.send(f"n{i}".encode())  # 3 queued at the consumer, 3 dropped
        assert len(kept) == 5 and durable is not None and np_consumer is not None
    fresh_cluster.stop()
    fresh_cluster.start()
    with Client(fresh_cluster.service_url) as c:
        durable = c.subscribe(topic, "d")
        assert [m.data() for m in (durable.receive(timeout_millis=10000) for _ in range(5))] == [
            f"p{i}".encode() for i in range(5)
        ]
        np_consumer = c.subscribe(_np(topic), "np")
        with pytest.raises(Timeout):
            np_consumer.receive(timeout_millis=300)  # nothing was kept
        np_p = c.create_producer(_np(topic), batching_enabled=False)
        np_p.send(b"new")
        assert np_consumer.receive(timeout_millis=5000).data() == b"new"
