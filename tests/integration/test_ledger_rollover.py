"""Managed-ledger rollover and deletion of consumed ledgers."""

from __future__ import annotations

import asyncio

from client import Client, InitialPosition, SubscriptionMode, Timeout
from metastore.client import MetastoreClient
from tests.harness import wait_for

TOPIC = "persistent://public/default/rolling"
KEY = "/managed-ledgers/public/default/persistent/rolling"


def _ledgers(cluster) -> list[int]:  # type: ignore[no-untyped-def]
    async def get() -> list[int]:
        import json

        ms = MetastoreClient(cluster.endpoints["metastore"])
        try:
            stat = await ms.get(KEY)
            return [] if stat is None else list(json.loads(stat.value)["ledgers"])
        finally:
            await ms.close()

    return asyncio.run(get())


def _ledger_exists(cluster, ledger_id: int) -> bool:  # type: ignore[no-untyped-def]
    async def get() -> bool:
        ms = MetastoreClient(cluster.endpoints["metastore"])
        try:
            return await ms.get(f"/ledgers/{ledger_id}") is not None
        finally:
            await ms.close()

    return asyncio.run(get())


def _drain(consumer, limit: int) -> list:  # type: ignore[no-untyped-def]
    out: list = []
    while len(out) < limit:
        try:
            out.append(consumer.receive(timeout_millis=2000))
        except Timeout:
            break
    return out


def test_ledgers_roll_over_and_consumed_ones_are_deleted(fresh_cluster, tmp_path):
    config = tmp_path / "magnetar.toml"
    config.write_text(
        "[broker]\n"
        "managed_ledger_max_entries_per_ledger = 10\n"
        "managed_ledger_min_ledger_rollover_time_minutes = 0\n"
        "managed_ledger_inactive_ledger_rollover_seconds = 1\n"
    )
    fresh_cluster.extra_args = ["--config", str(config)]
    cluster = fresh_cluster.start()
    with Client(cluster.service_url) as c:
        slow = c.subscribe(TOPIC, "slow", initial_position=InitialPosition.Earliest)
        # Non-durable subscriptions never hold data back: this one reads nothing.
        c.subscribe(
            TOPIC,
            "lazy",
            initial_position=InitialPosition.Earliest,
            subscription_mode=SubscriptionMode.NonDurable,
            receiver_queue_size=1,
        )
        fast = c.subscribe(TOPIC, "fast", initial_position=InitialPosition.Earliest)
        p = c.create_producer(TOPIC, batching_enabled=False)
        sent = [f"m{i}".encode() for i in range(45)]
        for m in sent:
            p.send(m)
        ledgers = _ledgers(cluster)
        assert len(ledgers) >= 5, ledgers  # 10 entries per ledger
        got = _drain(fast, 45)
        assert [m.data() for m in got] == sent
        for m in got:
            fast.acknowledge(m)
        # 'slow' has acknowledged nothing: every ledger is kept.
        assert _ledgers(cluster)[: len(ledgers)] == ledgers
        first_half = _drain(slow, 25)
        for m in first_half:
            slow.acknowledge(m)
        # Ledgers both subscriptions consumed go, with their bookie data; the rest stay.
        # The ledger list changes first, then each ledger is deleted (bookies, metadata).
        wait_for(
            lambda: not any(_ledger_exists(cluster, lid) for lid in ledgers[:2]),
            15,
            "ledgers of entries 0-19 to be deleted",
        )
        remaining = _ledgers(cluster)
        assert ledgers[0] not in remaining
        assert all(lid in remaining for lid in ledgers[2:]), (ledgers, remaining)  # 25-29 unacked
        rest = _drain(slow, 45)
        assert [m.data() for m in rest] == sent[25:]
        for m in rest:
            slow.acknowledge(m)
        # Idle and fully consumed: the current ledger is rolled and deleted too.
        wait_for(
            lambda: not set(ledgers) & set(_ledgers(cluster)), 20, "every consumed ledger to go"
        )
        p.send(b"after")
        assert fast.receive(timeout_millis=5000).data() == b"after"
    # A restart reopens the trimmed topic.
    cluster.stop()
    cluster.start()
    with Client(cluster.service_url) as c:
        again = c.subscribe(TOPIC, "fast", initial_position=InitialPosition.Earliest)
        assert [m.data() for m in _drain(again, 10)] == [b"after"]  # never acknowledged
