"""Key_Shared subscriptions on real processes: the seed's hash-range and
sticky examples, consistent hashing, draining hashes (Pulsar 4 ordering),
key-based batching, the lookup admin call, and a randomized check of the
invariant while consumers join and leave."""

from __future__ import annotations

import asyncio
import itertools
import json
import random
import subprocess
import sys
import time
from typing import Any

import pytest

from client import (
    BatchingType,
    Client,
    ConsumerAssignError,
    ConsumerBusy,
    ConsumerKeySharedPolicy,
    ConsumerType,
    CumulativeAcknowledgementNotAllowedError,
    InitialPosition,
    KeySharedMode,
    Timeout,
    aio,
)
from client.admin import Admin
from protos.hashing import key_shared_slot
from tests.harness import ROOT, async_wait_for, wait_for

Q = 16384


def key_in(lo: int, hi: int, prefix: str = "key") -> str:
    """The first key ``prefix-i`` whose slot is in lo..hi."""
    return next(
        f"{prefix}-{i}" for i in range(100000) if lo <= key_shared_slot(f"{prefix}-{i}") <= hi
    )


def _ks(client: Client, topic: str, name: str, sub: str = "ks", **kw: Any):  # type: ignore[no-untyped-def]
    kw.setdefault("receiver_queue_size", 100)
    return client.subscribe(
        topic,
        sub,
        consumer_type=ConsumerType.KeyShared,
        consumer_name=name,
        initial_position=InitialPosition.Earliest,
        **kw,
    )


def _collect(consumers: dict[str, Any], n: int, timeout_s: float = 15, ack: bool = True):  # type: ignore[no-untyped-def]
    """Receive ``n`` messages from any of ``consumers``: [(consumer name, message)]."""
    got: list[tuple[str, Any]] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < n:
        assert time.monotonic() < deadline, f"got {len(got)} of {n} messages"
        for name, c in consumers.items():
            try:
                m = c.receive(timeout_millis=20)
            except Timeout:
                continue
            if ack:
                c.acknowledge(m)
            got.append((name, m))
    return got


def _consumer_stats(admin: Admin, topic: str, sub: str = "ks") -> dict[str, dict]:
    subs = admin.topics.stats(topic)["subscriptions"]
    return {c["consumerName"]: c for c in subs[sub]["consumers"]}


def _owner(ranges: dict[str, list[list[int]]], slot: int) -> str:
    return next(n for n, rs in ranges.items() for s, e in rs if s <= slot <= e)


def test_auto_split_follows_the_seed_pictures_and_routes_every_key(cluster, topic):
    with Client(cluster.service_url) as c, Admin(cluster.service_url) as admin:
        consumers = {n: _ks(c, topic, n) for n in ("C1", "C2", "C3", "C4")}
        ranges = {n: s["keyHashRangeArrays"] for n, s in _consumer_stats(admin, topic).items()}
        assert ranges == {
            "C3": [[0, Q - 1]],
            "C2": [[Q, 2 * Q - 1]],
            "C4": [[2 * Q, 3 * Q - 1]],
            "C1": [[3 * Q, 65535]],
        }
        p = c.create_producer(topic, batching_enabled=False)
        keys = ["Order-3459134"] + [f"k{i}" for i in range(30)]
        for j in range(3):
            for key in keys:
                p.send(f"{key}/{j}".encode(), partition_key=key)
        got = _collect(consumers, 3 * len(keys))
        by_key: dict[str, list[tuple[str, bytes]]] = {}
        for name, m in got:
            by_key.setdefault(m.partition_key(), []).append((name, m.data()))
        assert {n for n, _ in by_key["Order-3459134"]} == {"C3"}  # the seed's example
        for key, seen in by_key.items():
            assert {n for n, _ in seen} == {_owner(ranges, key_shared_slot(key))}
            assert [d for _, d in seen] == [f"{key}/{j}".encode() for j in range(3)]
        # C4 leaves: its region merges into C1's on its right.
        consumers.pop("C4").close()
        ranges = {n: s["keyHashRangeArrays"] for n, s in _consumer_stats(admin, topic).items()}
        assert ranges["C1"] == [[2 * Q, 65535]] and "C4" not in ranges
        with pytest.raises(CumulativeAcknowledgementNotAllowedError):
            consumers["C1"].acknowledge_cumulative(got[-1][1])


def test_sticky_ranges_from_the_seed_and_an_overlap_is_refused(cluster, topic):
    sticky = KeySharedMode.Sticky
    with Client(cluster.service_url) as c, Admin(cluster.service_url) as admin:
        c1 = _ks(
            c,
            topic,
            "C1",
            key_shared_policy=ConsumerKeySharedPolicy(
                sticky, sticky_ranges=[(0, Q - 1), (2 * Q, 3 * Q - 1)]
            ),
        )
        c2 = _ks(
            c,
            topic,
            "C2",
            key_shared_policy=ConsumerKeySharedPolicy(
                sticky, sticky_ranges=[(Q, 2 * Q - 1), (3 * Q, 65535)]
            ),
        )
        before = _consumer_stats(admin, topic)
        with pytest.raises(ConsumerAssignError, match="overlaps"):
            _ks(
                c,
                topic,
                "C3",
                key_shared_policy=ConsumerKeySharedPolicy(sticky, sticky_ranges=[(100, 200)]),
            )
        with pytest.raises(ConsumerBusy, match="STICKY"):
            _ks(c, topic, "C4")  # AUTO_SPLIT cannot join a Sticky subscription
        after = _consumer_stats(admin, topic)
        assert after.keys() == before.keys() == {"C1", "C2"}
        assert after["C1"]["keyHashRangeArrays"] == [[0, Q - 1], [2 * Q, 3 * Q - 1]]
        p = c.create_producer(topic, batching_enabled=False)
        to_c2 = key_in(Q, 2 * Q - 1)
        p.send(b"seed", partition_key="Order-3459134")
        p.send(b"other", partition_key=to_c2)
        got = dict((m.data(), n) for n, m in _collect({"C1": c1, "C2": c2}, 2))
        assert got == {b"seed": "C1", b"other": "C2"}


def test_a_moved_key_drains_at_its_old_consumer_and_only_that_key_waits(cluster, topic):
    moving = key_in(0, 2 * Q - 1, "mv")  # C2 takes 0..32767 when it joins
    fresh = key_in(0, 2 * Q - 1, "new")  # moves too, but nothing of it is unacked
    staying = key_in(2 * Q, 65535, "st")
    with Client(cluster.service_url) as c, Admin(cluster.service_url) as admin:
        c1 = _ks(c, topic, "C1")
        p = c.create_producer(topic, batching_enabled=False)
        ids = [p.send(f"{moving}/{j}".encode(), partition_key=moving) for j in range(2)]
        p.send(b"s/0", partition_key=staying)
        held = [c1.receive(timeout_millis=5000) for _ in range(3)]
        assert sorted(m.data() for m in held) == sorted(
            [b"s/0", f"{moving}/0".encode(), f"{moving}/1".encode()]
        )
        c1.acknowledge(next(m for m in held if m.data() == b"s/0"))
        c2 = _ks(c, topic, "C2")
        for j in (2, 3):
            p.send(f"{moving}/{j}".encode(), partition_key=moving)
        for j in range(2):
            p.send(f"{fresh}/{j}".encode(), partition_key=fresh)
        p.send(b"s/1", partition_key=staying)
        # The new key and the key that stayed flow at once ...
        got = _collect({"C1": c1, "C2": c2}, 3)
        assert sorted((n, m.data()) for n, m in got) == [
            ("C1", b"s/1"),
            ("C2", f"{fresh}/0".encode()),
            ("C2", f"{fresh}/1".encode()),
        ]
        # ... the moved one waits for C1's two unacked messages.
        slot = key_shared_slot(moving)
        s = wait_for(
            lambda: (x := _consumer_stats(admin, topic))["C1"]["drainingHashesCount"] == 1 and x,
            10,
            "C1 to show its draining hash",
        )
        assert s["C1"]["drainingHashesUnackedMessages"] == 2
        (entry,) = s["C1"]["drainingHashes"]
        assert entry["hash"] == slot and entry["unackMsgs"] == 2 and entry["blockedAttempts"] >= 1
        assert s["C2"]["drainingHashesCount"] == 0
        look = admin.topics.key_shared_lookup(topic, "ks", key=moving)
        assert look["hash"] == slot and look["consumer"] == "C2" and look["holder"] == "C1"
        assert look["draining"] and look["waitingForDelivery"] == 2
        assert look["unackedMessageIds"] == [f"{i.ledger_id()}:{i.entry_id()}" for i in ids]
        with pytest.raises(Timeout):
            c2.receive(timeout_millis=300)
        c1.acknowledge(held[0] if held[0].data() != b"s/0" else held[1])
        wait_for(
            lambda: _consumer_stats(admin, topic)["C1"]["drainingHashesUnackedMessages"] == 1,
            10,
            "one ack to count",
        )
        with pytest.raises(Timeout):
            c2.receive(timeout_millis=200)
        for m in held:
            if m.data() != b"s/0":
                c1.acknowledge(m)
        after = [c2.receive(timeout_millis=5000) for _ in range(2)]
        assert [m.data() for m in after] == [f"{moving}/2".encode(), f"{moving}/3".encode()]
        s = wait_for(
            lambda: (x := _consumer_stats(admin, topic))["C1"]["drainingHashesCount"] == 0 and x,
            10,
            "the hash to leave the draining state",
        )
        assert s["C1"]["drainingHashesClearedTotal"] == 1


def test_a_leaving_holder_hands_its_keys_over_in_order(cluster, topic):
    moving = key_in(0, 2 * Q - 1, "mv")
    with Client(cluster.service_url) as c:
        c1 = _ks(c, topic, "C1")
        p = c.create_producer(topic, batching_enabled=False)
        for j in range(2):
            p.send(f"{j}".encode(), partition_key=moving)
        held = [c1.receive(timeout_millis=5000) for _ in range(2)]
        c2 = _ks(c, topic, "C2")
        for j in (2, 3):
            p.send(f"{j}".encode(), partition_key=moving)
        with pytest.raises(Timeout):
            c2.receive(timeout_millis=300)
        c1.close()  # nothing acked: the two go to C2 first, then the rest
        got = [c2.receive(timeout_millis=5000) for _ in range(4)]
        assert [m.data() for m in got] == [b"0", b"1", b"2", b"3"]
        assert [m.redelivery_count() for m in got] == [1, 1, 0, 0]
        assert len(held) == 2


def test_out_of_order_delivery_does_not_wait_for_the_old_consumer(cluster, topic):
    moving = key_in(0, 2 * Q - 1, "mv")
    policy = ConsumerKeySharedPolicy(allow_out_of_order_delivery=True)
    with Client(cluster.service_url) as c:
        c1 = _ks(c, topic, "C1", key_shared_policy=policy)
        p = c.create_producer(topic, batching_enabled=False)
        p.send(b"0", partition_key=moving)
        assert c1.receive(timeout_millis=5000).data() == b"0"
        c2 = _ks(c, topic, "C2", key_shared_policy=policy)
        p.send(b"1", partition_key=moving)
        assert c2.receive(timeout_millis=5000).data() == b"1"
        with pytest.raises(ConsumerBusy, match="allow_out_of_order_delivery=True"):
            _ks(c, topic, "C3")


def test_key_based_batching_packs_one_key_per_batch(cluster, topic):
    low, high = key_in(0, 2 * Q - 1, "lo"), key_in(2 * Q, 65535, "hi")
    with Client(cluster.service_url) as c:
        consumers = {n: _ks(c, topic, n) for n in ("C1", "C2")}  # C2 low half, C1 high
        for batching, expect_split in (
            (BatchingType.KeyBased, True),
            (BatchingType.Default, False),
        ):
            p = c.create_producer(topic, batching_type=batching, batching_max_publish_delay_ms=1000)
            futures = []
            for j in range(4):
                for key in (low, high):
                    futures.append(j)
                    p.send_async(f"{key}/{j}".encode(), None, partition_key=key)
            p.flush()
            got = _collect(consumers, 8)
            where = {m.data().decode(): n for n, m in got}
            if expect_split:
                assert {where[f"{low}/{j}"] for j in range(4)} == {"C2"}
                assert {where[f"{high}/{j}"] for j in range(4)} == {"C1"}
                for key in (low, high):
                    seen = [m.data() for _, m in got if m.partition_key() == key]
                    assert seen == [f"{key}/{j}".encode() for j in range(4)]
            else:
                # One batch, keyed by its first message: everything to C2.
                assert set(where.values()) == {"C2"}
            p.close()


def test_key_shared_lookup_cli_and_errors(cluster, topic):
    with Client(cluster.service_url) as c, Admin(cluster.service_url) as admin:
        _ks(c, topic, "C1")
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "client.admin_cli",
                "--service-url",
                cluster.service_url,
                "topics",
                "key-shared-lookup",
                topic,
                "-s",
                "ks",
                "--key",
                "Order-3459134",
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stderr
        doc = json.loads(out.stdout)
        assert doc["hash"] == 6067 and doc["consumer"] == "C1" and doc["holder"] is None
        from client import InvalidConfiguration, NotAllowedError, SubscriptionNotFound

        with pytest.raises(SubscriptionNotFound):
            admin.topics.key_shared_lookup(topic, "nope", key="a")
        with pytest.raises(InvalidConfiguration):
            admin.topics.key_shared_lookup(topic, "ks", hash=70000)
        c.subscribe(topic, "plain", consumer_type=ConsumerType.Shared)
        with pytest.raises(NotAllowedError):
            admin.topics.key_shared_lookup(topic, "plain", hash=1)


# ------------------------------------------------------------------ randomized


class _Churn:
    """Consumers of one Key_Shared subscription joining and leaving at
    random, and what each holds: on every receive :meth:`check` asserts
    that no other consumer holds the key unacknowledged and that per-key
    order holds (a consumer's run of a key starts at the key's oldest
    unacknowledged message, then rises)."""

    def __init__(self, client: Any, topic: str, seed: int) -> None:
        self.client, self.topic = client, topic
        self.rng = random.Random(seed)
        self.keys = [f"key-{i}" for i in range(16)]
        self.acked: dict[str, set[int]] = {k: set() for k in self.keys}
        self.sent: dict[str, list[int]] = {k: [] for k in self.keys}
        # consumer -> key -> seq -> message: received and not yet acknowledged
        self.held: dict[str, dict[str, dict[int, Any]]] = {}
        self.last: dict[str, tuple[str, int]] = {}  # key -> (consumer, last seq of its run)
        self.stats = {"received": 0, "joins": 0, "leaves": 0, "handovers": 0}
        self.names = iter(f"c{i}" for i in range(1000))
        self.live: dict[str, tuple[Any, asyncio.Task, asyncio.Event]] = {}

    def check(self, name: str, key: str, seq: int) -> None:
        others = [o for o, ks in self.held.items() if o != name and ks.get(key)]
        assert not others, f"{key} received by {name} while unacked at {others}"
        prev = self.last.get(key)
        if prev is not None and prev[0] == name:
            assert seq > prev[1], f"{key}: {name} got {seq} after {prev[1]}"
        else:
            oldest = min(s for s in self.sent[key] if s not in self.acked[key])
            assert seq == oldest, f"{key}: {name}'s run starts at {seq}, oldest unacked {oldest}"
            self.stats["handovers"] += 1
        self.last[key] = (name, seq)

    async def consume(self, name: str, consumer: Any, stop: asyncio.Event) -> None:
        mine = self.held[name]
        while not stop.is_set():
            try:
                m = await consumer.receive(timeout_millis=50)
            except Timeout:
                m = None
            if m is not None:
                key, seq = m.partition_key(), int(m.data())
                if seq in self.acked[key]:
                    continue  # acked after the broker had already redelivered it
                self.check(name, key, seq)
                mine.setdefault(key, {})[seq] = m
                self.stats["received"] += 1
            await self._ack_some(consumer, mine, idle=m is None)

    async def _ack_some(self, consumer: Any, mine: dict[str, dict[int, Any]], idle: bool) -> None:
        """Acknowledge some of what the consumer holds (everything when
        idle), in any order."""
        for key in list(mine):
            for seq in list(mine[key]):
                if idle or self.rng.random() < 0.3:
                    msg = mine[key].pop(seq)
                    self.acked[key].add(seq)
                    await consumer.acknowledge(msg)
            if not mine[key]:
                del mine[key]

    async def join(self) -> None:
        name = next(self.names)
        consumer = await self.client.subscribe(
            self.topic,
            "churn",
            consumer_type=ConsumerType.KeyShared,
            consumer_name=name,
            initial_position=InitialPosition.Earliest,
            receiver_queue_size=self.rng.choice([5, 20, 100]),
        )
        self.held[name] = {}
        stop = asyncio.Event()
        task = asyncio.create_task(self.consume(name, consumer, stop))
        self.live[name] = (consumer, task, stop)
        self.stats["joins"] += 1

    async def leave(self, name: str) -> None:
        consumer, task, stop = self.live.pop(name)
        stop.set()
        await task  # stop receiving first, then the broker may hand its keys on
        del self.held[name]  # what it held unacked is redelivered to the others
        await consumer.close()
        self.stats["leaves"] += 1

    async def join_or_leave(self) -> None:
        live = self.live
        if len(live) < 4 and (len(live) < 2 or self.rng.random() < 0.5):
            await self.join()
        else:
            await self.leave(self.rng.choice(sorted(live)))

    def raise_broken(self) -> None:
        """Raise here what a consumer's check raised: an invariant broke."""
        for _name, (_c, task, _s) in self.live.items():
            if task.done():
                task.result()

    def all_acked(self) -> bool:
        self.raise_broken()
        return all(len(self.acked[k]) == len(self.sent[k]) for k in self.keys)


async def _churn(service_url: str, topic: str, seed: int, messages: int = 1200) -> dict[str, int]:
    """Publish ``messages`` over 16 keys while consumers join and leave at
    random (every 60 messages), checking the Key_Shared invariant on every
    receive (:class:`_Churn`); the counts of what happened."""
    async with aio.Client(service_url) as client:
        churn = _Churn(client, topic, seed)
        producer = await client.create_producer(topic, batching_enabled=False)
        await churn.join()
        for seq in range(messages):
            key = churn.rng.choice(churn.keys)
            churn.sent[key].append(seq)
            await producer.send(str(seq).encode(), partition_key=key)
            if seq % 60 == 59:
                await churn.join_or_leave()
            churn.raise_broken()
        await async_wait_for(churn.all_acked, 60, "every message to be acknowledged")
        for name in sorted(churn.live):
            await churn.leave(name)
        await producer.close()
    return churn.stats


@pytest.mark.parametrize("seed", [1, 2])
def test_random_joins_and_leaves_keep_each_key_at_one_consumer_and_in_order(cluster, topic, seed):
    stats = asyncio.run(_churn(cluster.service_url, topic, seed))
    assert stats["joins"] >= 3 and stats["leaves"] >= 2, stats
    assert stats["handovers"] > 16, stats


def test_consistent_hashing_covers_the_space_and_keeps_the_invariant(
    fresh_cluster, tmp_path, topic
):
    config = tmp_path / "magnetar.toml"
    config.write_text("[broker]\nsubscription_key_shared_use_consistent_hashing = true\n")
    fresh_cluster.extra_args = ["--config", str(config)]
    fresh_cluster.start()
    url = fresh_cluster.service_url
    with Client(url) as c, Admin(url) as admin:
        consumers = {n: _ks(c, topic, n) for n in ("a", "b", "c")}
        ranges = {n: s["keyHashRangeArrays"] for n, s in _consumer_stats(admin, topic).items()}
        flat = sorted((s, e) for rs in ranges.values() for s, e in rs)
        assert flat[0][0] == 0 and flat[-1][1] == 65535
        assert all(b[0] == a[1] + 1 for a, b in itertools.pairwise(flat))
        assert all(len(rs) > 10 for rs in ranges.values()), "100 points each: many ranges"
        p = c.create_producer(topic, batching_enabled=False)
        keys = [f"k{i}" for i in range(40)]
        for key in keys:
            p.send(key.encode(), partition_key=key)
        for name, m in _collect(consumers, len(keys)):
            assert _owner(ranges, key_shared_slot(m.partition_key())) == name
    stats = asyncio.run(_churn(url, topic + "-churn", seed=3))
    assert stats["joins"] >= 3 and stats["leaves"] >= 2, stats
