"""Who gets which entry (broker/dispatch_rules.py): the per-type rules as
step tables, and the persistent and non-persistent dispatchers applying
the same rules."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest

from broker.consumer import Consumer, Deliveries
from broker.dispatch_rules import (
    Candidate,
    KeySharedRule,
    Room,
    RoundRobin,
    Rule,
    SharedRule,
    SingleActiveRule,
    active_consumer,
    assign,
)
from broker.dispatcher import EntryFacts, SharedDispatcher, SingleActiveConsumerDispatcher
from broker.key_shared import KeyHashTracker, StickyRangeSelector
from broker.metrics import TopicMetrics
from broker.modes import SubscriptionType
from broker.non_persistent_dispatcher import NonPersistentDispatcher
from broker.policies import applied
from broker.rate_limits import TopicRates
from broker.settings import BrokerSettings
from broker.subscription import Subscription
from protos.topic_name import TopicName

# ---------------------------------------------------------------- active consumer

# (consumers joined in order as (name, priority), partition index of a
# Failover subscription or -1) -> the active one.
ACTIVE = [
    ([("C2", 0), ("C3", 1), ("C1", 0)], 3, "C1"),  # sorted C1, C2, C3: 3 % 3 = 0
    ([("C2", 0), ("C3", 1)], 3, "C3"),  # C1 left: [C2, C3], 3 % 2 = 1
    ([("Z", 0), ("A", 0), ("M", 0)], -1, "Z"),  # not a partition: first come
    ([("A", 0), ("M", 0)], -1, "A"),  # Z left
    ([("b", 1), ("a", 1)], 0, "a"),  # same priority: by name
    ([], 0, None),
]


def test_the_active_consumer():
    for joined, partition, expected in ACTIVE:
        prio = dict(joined)
        order = {n: (p, n) for n, p in prio.items()}
        got = active_consumer([n for n, _ in joined], partition, order.__getitem__)
        assert got == expected, (joined, partition)


def _sub(
    topic: str, sub_type: SubscriptionType, persistent: bool = True, **settings: Any
) -> Subscription:
    cursor = SimpleNamespace(rewind=lambda: None, is_acked=lambda pos: False)
    name = TopicName.parse(topic)
    topic_settings = replace(BrokerSettings(), **settings)
    t = SimpleNamespace(
        settings=topic_settings,
        policies=applied(None, None, topic_settings),
        rates=TopicRates(persistent),
        on_acked=lambda: None,
        name=name,
        metrics=TopicMetrics(name, 60.0, "c", False),
        persistent=persistent,
        count_out=lambda *a: None,
        subscription_idle=lambda s: None,
    )
    return Subscription(t, "s", sub_type, cursor, None)  # type: ignore[arg-type]


def test_failover_on_a_partition_sorts_by_priority_then_name():
    async def main() -> None:
        sub = _sub("t-partition-3", SubscriptionType.FAILOVER)
        for name, prio in (("C2", 0), ("C3", 1), ("C1", 0)):
            sub.add_consumer(name, SubscriptionType.FAILOVER, lambda d: None, prio)
        assert sub.active_consumer().name == "C1"  # type: ignore[union-attr]
        sub.remove_consumer(sub.consumers[2])  # C1 leaves: [C2, C3], 3 % 2 = 1
        assert sub.active_consumer().name == "C3"  # type: ignore[union-attr]

    asyncio.run(main())


# ---------------------------------------------------------------- a round

# (consumers as (name, priority, room), subscription room, messages per
# entry) -> who gets each entry in turn (None: it waits / is dropped).
SHARED_ROUNDS = [
    # Round-robin among equals, starting after the last pick.
    ([("a", 0, 9), ("b", 0, 9), ("c", 0, 9)], 99, [1, 1, 1, 1], ["b", "c", "a", "b"]),
    # The best priority level first, while it has room.
    ([("best", 0, 2), ("x", 1, 9), ("y", 1, 9)], 99, [1, 1, 1, 1], ["best", "best", "y", "x"]),
    # A batch entry takes its whole size; room may go below zero once.
    ([("a", 0, 3)], 99, [5, 1], ["a", None]),
    # The subscription's room stops everyone.
    ([("a", 0, 9), ("b", 0, 9)], 2, [1, 1, 1], ["b", "a", None]),
    # No consumer with room: nothing goes.
    ([("a", 0, 0)], 99, [1], [None]),
]


def test_shared_rounds():
    for consumers, sub_room, entries, expected in SHARED_ROUNDS:
        prio = {n: p for n, p, _ in consumers}
        room = Room({n: r for n, _, r in consumers if r > 0}, sub_room)
        rule = SharedRule([n for n, _, _ in consumers], prio.__getitem__, RoundRobin())
        got = _receivers(entries, rule, room)
        assert got == expected, (consumers, entries)


def _receivers(
    messages: list[int], rule: Rule[str], room: Room[str], slots: list[int] | None = None
) -> list[str | None]:
    slots = slots or [0] * len(messages)
    cands = [Candidate(i, s, n) for i, (s, n) in enumerate(zip(slots, messages, strict=True))]
    out = assign(cands, rule, room)
    who = {i: c for c, items in out.plan.items() for i in items}
    return [who.get(i) for i in range(len(messages))]


def test_single_active_takes_everything_read_for_it():
    room = Room({"a": 1, "b": 9})
    assert _receivers([5, 5, 5], SingleActiveRule("a"), room) == ["a", "a", "a"]
    assert _receivers([1], SingleActiveRule("z"), Room({"a": 1})) == [None]  # not ready
    assert _receivers([1], SingleActiveRule(None), Room({"a": 1})) == [None]


# Sticky ranges: c1 owns slots 0..9, c2 owns 10..19. (consumers' room,
# slots already held (slot -> holder), entries as (slot, readable)) -> who
# gets each one.
KEY_SHARED_ROUNDS = [
    ({"c1": 9, "c2": 9}, {}, [(1, True), (11, True), (2, True)], ["c1", "c2", "c1"]),
    # c1 has no room: its slot waits, and so does every later entry of it.
    ({"c2": 9}, {}, [(1, True), (11, True), (1, True)], [None, "c2", None]),
    # An earlier entry of slot 1 was not read this round: slot 1 waits.
    ({"c1": 9}, {}, [(1, False), (1, True), (2, True)], [None, None, "c1"]),
    # Slot 3 is still held by c2 (its range moved to c1): it drains first.
    ({"c1": 9, "c2": 9}, {3: "c2"}, [(3, True), (4, True)], [None, "c1"]),
    # Nobody owns slot 30.
    ({"c1": 9, "c2": 9}, {}, [(30, True)], [None]),
]


def test_key_shared_rounds():
    for room, held, entries, expected in KEY_SHARED_ROUNDS:
        selector: StickyRangeSelector[str] = StickyRangeSelector()
        selector.add("c1", "c1", [(0, 9)])
        selector.add("c2", "c2", [(10, 19)])
        tracker = KeyHashTracker(selector)
        for slot, holder in held.items():
            tracker.delivered(holder, slot, 1)
        rule = KeySharedRule(tracker)
        cands = [Candidate(i, s, 1, r) for i, (s, r) in enumerate(entries)]
        out = assign(cands, rule, Room(dict(room)))
        who = {i: c for c, items in out.plan.items() for i in items}
        assert [who.get(i) for i in range(len(entries))] == expected, (room, held, entries)
        for i, c in who.items():  # a delivered slot is held by its consumer
            assert tracker.holder(entries[i][0]) == c


# ---------------------------------------------------------------- the dispatchers


def test_shared_serves_the_best_priority_with_permits_and_respects_the_unacked_limit():
    async def main() -> None:
        sub = _sub("t", SubscriptionType.SHARED, max_unacked_messages_per_consumer=10)
        best, a, b = (
            sub.add_consumer(n, SubscriptionType.SHARED, lambda d: None, p)
            for n, p in (("best", 0), ("a", 1), ("b", 1))
        )
        d = sub.dispatcher
        assert isinstance(d, SharedDispatcher)
        a.permits = b.permits = 5
        assert _next_receiver(sub) in (a, b)  # 'best' has no permits
        best.permits = 1
        assert _next_receiver(sub) is best
        held = [(9, i) for i in range(10)]
        sub.pending.delivered(best, [(p, 1) for p in held])  # at the limit: blocked
        assert _next_receiver(sub) in (a, b)
        sub.pending.acked(held[:4], False, best)  # 6 unacked: still blocked
        assert _next_receiver(sub) in (a, b) and sub.pending.is_blocked(best)
        sub.pending.acked(held[4:5], False, best)  # 5: half the limit, unblocked
        assert _next_receiver(sub) is best and not sub.pending.is_blocked(best)

    asyncio.run(main())


def _next_receiver(sub: Subscription) -> Consumer | None:
    d = sub.dispatcher
    assert isinstance(d, SharedDispatcher)
    rule = SharedRule(sub.consumers, lambda c: c.priority_level, RoundRobin())
    out = assign([Candidate("e", 0, 1)], rule, d._room(d._ready_consumers()))
    return next(iter(out.plan), None)


def test_non_persistent_subscriptions_use_the_same_rules():
    async def main() -> None:
        sub = _sub("non-persistent://public/default/t", SubscriptionType.SHARED, False)
        got: dict[str, list[Deliveries | None]] = {}
        consumers = []
        for name, prio in (("best", 0), ("a", 1), ("b", 1)):
            got[name] = []
            consumers.append(
                sub.add_consumer(name, SubscriptionType.SHARED, got[name].append, prio)
            )
        best, a, b = consumers
        a.permits = b.permits = 2
        d = sub.dispatcher
        assert isinstance(d, NonPersistentDispatcher)
        facts = EntryFacts(1, 0, b"k")
        for i in range(5):
            d.dispatch_entry((0, i), b"x", facts)
        # No permits at the best level: round-robin at the next, then dropped.
        assert [len(got[n]) for n in ("best", "a", "b")] == [0, 2, 2]
        assert d.dropped.msgs == 1
        best.permits = 1
        d.dispatch_entry((0, 5), b"x", facts)
        assert len(got["best"]) == 1 and best.permits == 0

    asyncio.run(main())


def test_a_closing_active_consumer_gives_back_what_it_holds_before_another_gets_it():
    """A Failover consumer whose stream ended is no longer active before it
    is removed: the next active one gets its entries, and the removal then
    finds nothing left to give back (one redelivery, counted once)."""

    async def main() -> None:
        sub = _sub("plain", SubscriptionType.FAILOVER)
        a = sub.add_consumer("A", SubscriptionType.FAILOVER, lambda d: None)
        b = sub.add_consumer("B", SubscriptionType.FAILOVER, lambda d: None)
        sub.pending.delivered(a, [((1, 0), 1)])
        a.detach()  # its stream ended; the subscription has not removed it yet
        d = sub.dispatcher
        assert isinstance(d, SingleActiveConsumerDispatcher)
        d._check_active_change()
        assert sub.active_consumer() is b and sub.pending.pending(a) == {}
        sub.pending.delivered(b, [((1, 0), 1)])  # no longer held by A
        sub.remove_consumer(a)
        assert sub.pending.redelivery_count((1, 0)) == 1 and sub.pending.holder((1, 0)) is b

    asyncio.run(main())


class _SlowLedger:
    """Entries (1, 0..4); the first read waits until released."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.reads = 0

    def has_entry(self, pos: tuple[int, int]) -> bool:
        return 0 <= pos[1] <= 4

    def normalize(self, pos: tuple[int, int]) -> tuple[int, int]:
        return pos

    def next_position(self, pos: tuple[int, int]) -> tuple[int, int]:
        return (pos[0], pos[1] + 1)

    async def read_entries(
        self, start: tuple[int, int], count: int, max_bytes: int, tailing: bool = False
    ) -> list[tuple[tuple[int, int], bytes]]:
        self.reads += 1
        if self.reads == 1:
            await self.release.wait()
        return [((1, e), b"entry") for e in range(start[1], min(start[1] + count, 5))]


async def _until(condition: Any, turns: int = 1000) -> None:
    """Let the event loop run other tasks until ``condition()`` holds (a
    bounded number of turns: no clock involved)."""
    for _ in range(turns):
        if condition():
            return
        await asyncio.sleep(0)  # one turn of the loop, not a wait for time
    raise AssertionError("the condition did not hold")


def test_a_replaced_dispatcher_delivers_nothing_more(caplog: pytest.LogCaptureFixture) -> None:
    """A subscription that changes type (its last Shared consumer left, a
    Failover one joins) while the Shared dispatcher's read is in flight:
    the old dispatcher's read is dropped, so the entries go only to the new
    active consumer, and never to the standby one."""

    async def main() -> None:
        ledger = _SlowLedger()
        cursor = SimpleNamespace(read_position=(1, 0), is_acked=lambda pos: False)
        cursor.rewind = lambda: setattr(cursor, "read_position", (1, 0))
        cursor.state = SimpleNamespace(batch_acked={})
        topic = SimpleNamespace(
            settings=BrokerSettings(),
            policies=applied(None, None, BrokerSettings()),
            rates=TopicRates(True),
            on_acked=lambda: None,
            name=TopicName.parse("t"),
            metrics=TopicMetrics(TopicName.parse("t"), 60.0, "c", False),
            persistent=True,
            count_out=lambda *a: None,
            subscription_idle=lambda s: None,
        )
        sub = Subscription(topic, "s", SubscriptionType.SHARED, cursor, ledger)  # type: ignore[arg-type]
        got: dict[str, list[int]] = {"shared": [], "c1": [], "c2": []}

        def sink(name: str):  # type: ignore[no-untyped-def]
            return lambda d: got[name].extend(d.entry_ids) if d is not None else None

        shared = sub.add_consumer("shared", SubscriptionType.SHARED, sink("shared"))
        sub.grant_permits(shared, 10)  # the Shared dispatcher starts its read
        await _until(lambda: ledger.reads == 1)
        old = sub.dispatcher
        sub.remove_consumer(shared)
        c1 = sub.add_consumer("c1", SubscriptionType.FAILOVER, sink("c1"))
        c2 = sub.add_consumer("c2", SubscriptionType.FAILOVER, sink("c2"))
        assert sub.dispatcher is not old
        sub.grant_permits(c2, 10)
        sub.grant_permits(c1, 10)
        ledger.release.set()
        await _until(lambda: old._task is None and sub.dispatcher._task is None)
        assert got == {"shared": [], "c1": [0, 1, 2, 3, 4], "c2": []}
        assert sorted(sub.pending.pending(c1)) == [(1, e) for e in range(5)]

    with caplog.at_level(logging.ERROR, logger="broker.dispatcher"):
        asyncio.run(main())
    assert not caplog.records, [r.getMessage() for r in caplog.records]
