"""Who gets which entry: the per-type rules every dispatcher applies.

Theory of operation. A dispatcher reads entries and asks these rules where
each one goes; the rules do no I/O and read no clock. One *round* hands out
entries in position order. Each ready consumer starts the round with some
*room* (the messages it may still get: its permits, capped by its unacked
allowance) and the subscription with its own (its unacked allowance); an
entry of n messages that goes to a consumer takes n from both. An entry may
go to a consumer whose room is positive even when n is larger, so a batch
entry overshoots a limit at most once.

* Exclusive and Failover (:class:`SingleActiveRule`): everything read goes
  to the active consumer if it is ready (the read was sized to its room).
  The active consumer is the first to have joined, except for Failover on
  a partition of a partitioned topic: there the consumers are sorted by
  priority level, then name, and partition i goes to consumer i mod n, so
  the partitions spread over them (:func:`active_consumer`).
* Shared (:class:`SharedRule`): each entry goes to the next consumer,
  round-robin, among those with room at the best (lowest) priority level
  that has any.
* Key_Shared (:class:`KeySharedRule`): each entry goes to the consumer the
  selector picks for the entry's slot, if that consumer has room and no
  other consumer still holds unacknowledged messages of the slot
  (:class:`broker.key_shared.KeyHashTracker`). An entry that cannot go now
  waits, and so does every later entry of its slot in the round, which
  keeps per-key order.

Persistent and non-persistent dispatchers apply the same rules
(:func:`assign`); an entry no consumer takes waits for a later round
(persistent) or is dropped (non-persistent).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from broker.key_shared import KeyHashTracker
from broker.pending_acks import UNLIMITED

C = TypeVar("C", bound=Hashable)
T = TypeVar("T")


@dataclass
class Room(Generic[C]):
    """Messages each ready consumer, and the subscription, may still get."""

    consumers: dict[C, int]
    subscription: int = UNLIMITED

    def ready(self, consumer: C | None) -> bool:
        return consumer is not None and consumer in self.consumers

    def has(self, consumer: C) -> bool:
        return self.consumers.get(consumer, 0) > 0 and self.subscription > 0

    def take(self, consumer: C, messages: int) -> None:
        self.consumers[consumer] -= messages
        self.subscription -= messages


@dataclass(slots=True)  # not frozen: built once per entry, and frozen init is slow
class Candidate(Generic[T]):
    """An entry a round may hand out. ``item`` is the dispatcher's own (its
    position and bytes); ``readable`` is False for an entry known but not
    read this round: it waits, holding back later entries of its slot."""

    item: T
    slot: int
    messages: int
    readable: bool = True


class Rule(Protocol[C]):
    def choose(self, slot: int, room: Room[C]) -> C | None: ...

    def skipped(self, slot: int) -> None: ...

    def placed(self, consumer: C, slot: int, messages: int) -> None: ...


@dataclass
class Assignment(Generic[C, T]):
    """The outcome of a round: each consumer's entries in order, and the
    entries that went nowhere (in order)."""

    plan: dict[C, list[T]] = field(default_factory=dict)
    left: list[T] = field(default_factory=list)


def assign(candidates: Iterable[Candidate[T]], rule: Rule[C], room: Room[C]) -> Assignment[C, T]:
    """Hand out ``candidates`` in order under ``rule``."""
    out: Assignment[C, T] = Assignment()
    for cand in candidates:
        if not cand.readable:
            rule.skipped(cand.slot)
            out.left.append(cand.item)
            continue
        consumer = rule.choose(cand.slot, room)
        if consumer is None:
            out.left.append(cand.item)
            continue
        room.take(consumer, cand.messages)
        rule.placed(consumer, cand.slot, cand.messages)
        out.plan.setdefault(consumer, []).append(cand.item)
    return out


def active_consumer(
    consumers: Sequence[C], failover_partition: int, order: Callable[[C], tuple[int, str]]
) -> C | None:
    """The consumer an Exclusive or Failover subscription delivers to.

    ``consumers`` are the connected ones in the order they joined;
    ``failover_partition`` is the topic's partition index for a Failover
    subscription on a partition, else -1; ``order`` gives a consumer's
    (priority level, name)."""
    if not consumers:
        return None
    if failover_partition >= 0:
        ordered = sorted(consumers, key=order)
        return ordered[failover_partition % len(ordered)]
    return consumers[0]


class SingleActiveRule(Generic[C]):
    def __init__(self, active: C | None) -> None:
        self.active = active

    def choose(self, slot: int, room: Room[C]) -> C | None:
        return self.active if room.ready(self.active) else None

    def skipped(self, slot: int) -> None:
        pass

    def placed(self, consumer: C, slot: int, messages: int) -> None:
        pass


class RoundRobin:
    """Where the next Shared round-robin pick starts; kept across rounds."""

    def __init__(self) -> None:
        self._next = 0

    def pick(self, ready: Sequence[C]) -> C:
        assert ready, "a pick needs a ready consumer"
        self._next = (self._next + 1) % len(ready)
        return ready[self._next]


class SharedRule(Generic[C]):
    def __init__(
        self, consumers: Sequence[C], priority: Callable[[C], int], turn: RoundRobin
    ) -> None:
        self.consumers = consumers
        self.priority = priority
        self.turn = turn

    def choose(self, slot: int, room: Room[C]) -> C | None:
        ready = [c for c in self.consumers if room.has(c)]
        if not ready:
            return None
        best = min(self.priority(c) for c in ready)
        return self.turn.pick([c for c in ready if self.priority(c) == best])

    def skipped(self, slot: int) -> None:
        pass

    def placed(self, consumer: C, slot: int, messages: int) -> None:
        pass


class KeySharedRule(Generic[C]):
    """``record`` is False where nothing stays pending (non-persistent
    topics): a slot then never has a holder."""

    def __init__(self, tracker: KeyHashTracker[C], record: bool = True) -> None:
        self.tracker = tracker
        self.record = record
        self.waiting: set[int] = set()  # slots with an earlier entry waiting this round

    def choose(self, slot: int, room: Room[C]) -> C | None:
        if slot in self.waiting:
            return None
        consumer = self.tracker.target(slot, room.has)
        if consumer is None:
            self.waiting.add(slot)
        return consumer

    def skipped(self, slot: int) -> None:
        self.waiting.add(slot)

    def placed(self, consumer: C, slot: int, messages: int) -> None:
        if self.record:
            self.tracker.delivered(consumer, slot, messages)
