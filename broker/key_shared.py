"""Key_Shared: which consumer owns which key hash, and when a hash may move.

Theory of operation. A message's sticky key is its ordering key if it has
one, else its partition key, else :data:`NO_KEY` (the bytes ``NONE_KEY``, as
Pulsar names it). Its *slot* is ``murmur3_32(key) % 65536``; for a batch
entry the first message's key stands for the whole batch (seed: key-based
batching).

A *selector* maps slots to consumers:

* :class:`AutoSplitHashRangeSelector` — one region per consumer; the first
  consumer owns 0..65535; a new consumer takes the lower half of the
  largest region (ties: the lowest region); a leaving consumer's region is
  merged into the region on its right (into the one on its left when it
  was the rightmost).
* :class:`ConsistentHashingSelector` — 100 points per consumer on a ring of
  0..65535, point ``i`` (1..100) at ``murmur3_32(f"{name}\\0{n}\\0{i}") %
  65536`` where ``n`` is the lowest index no connected consumer of that
  name uses (so same-named consumers get different points); a slot
  belongs to the first point at or after it, wrapping round; on a point
  shared by several consumers the earliest added one wins.
* :class:`StickyRangeSelector` — each consumer brings its inclusive
  ranges; overlap (with others or within its own list) is refused and
  changes nothing; a slot nobody covers has no consumer.

:class:`KeyHashTracker` keeps the Pulsar 4 ordering rule. Every slot with
unacknowledged messages has one *holder*, the consumer holding them. A
message may go only to the slot's selected consumer, and only if the slot
has no holder or that consumer is the holder. So when consumers join or
leave, a slot that moved waits ("drains") until its old holder
acknowledges everything of that slot or disconnects; other slots carry on.
``allow_out_of_order_delivery`` drops the holder check (and the guarantee).
The tracker is bounded by the unacknowledged messages of the subscription
(one record per slot with unacked messages).
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from protos.hashing import KEY_SHARED_HASH_RANGE, murmur3_32

C = TypeVar("C", bound=Hashable)

NO_KEY = b"NONE_KEY"
SLOT_MAX = KEY_SHARED_HASH_RANGE - 1
CONSISTENT_HASHING_POINTS = 100

Range = tuple[int, int]  # inclusive


class ConsumerAssignError(ValueError):
    """A Key_Shared consumer cannot be placed (Sticky ranges missing, out of
    0..65535 or overlapping). Nothing was changed."""


def sticky_key(ordering_key: bytes | None, partition_key: str | None) -> bytes:
    if ordering_key:
        return ordering_key
    if partition_key:
        return partition_key.encode("utf-8")
    return NO_KEY


def slot_of(key: str | bytes) -> int:
    return murmur3_32(key) % KEY_SHARED_HASH_RANGE


class Selector(Generic[C]):
    def add(self, consumer: C, name: str, ranges: list[Range] | None = None) -> None:
        raise NotImplementedError

    def remove(self, consumer: C) -> None:
        raise NotImplementedError

    def select(self, slot: int) -> C | None:
        raise NotImplementedError

    def ranges(self) -> dict[C, list[Range]]:
        """Each consumer's slots as sorted inclusive ranges."""
        raise NotImplementedError


class AutoSplitHashRangeSelector(Selector[C]):
    def __init__(self) -> None:
        # Regions sorted by start; region i covers starts[i]..ends[i].
        self._starts: list[int] = []
        self._ends: list[int] = []
        self._owners: list[C] = []

    def add(self, consumer: C, name: str, ranges: list[Range] | None = None) -> None:
        if consumer in self._owners:
            raise ConsumerAssignError(f"consumer {name!r} is already placed")
        if not self._owners:
            self._starts, self._ends, self._owners = [0], [SLOT_MAX], [consumer]
            return
        sizes = [e - s + 1 for s, e in zip(self._starts, self._ends, strict=True)]
        i = sizes.index(max(sizes))  # the first (lowest) of the largest
        if sizes[i] < 2:
            raise ConsumerAssignError(
                f"no region left to split for consumer {name!r}: every region is one slot"
            )
        start, end = self._starts[i], self._ends[i]
        middle = start + sizes[i] // 2 - 1
        self._starts[i] = middle + 1
        self._starts.insert(i, start)
        self._ends.insert(i, middle)
        self._owners.insert(i, consumer)
        assert self._ends[i + 1] == end

    def remove(self, consumer: C) -> None:
        if consumer not in self._owners:
            return
        i = self._owners.index(consumer)
        start, end = self._starts[i], self._ends[i]
        del self._starts[i], self._ends[i], self._owners[i]
        if not self._owners:
            return
        if i < len(self._owners):
            self._starts[i] = start  # merged into the region on the right
        else:
            self._ends[i - 1] = end  # it was the rightmost: into the left one

    def select(self, slot: int) -> C | None:
        if not self._owners:
            return None
        return self._owners[bisect.bisect_right(self._starts, slot) - 1]

    def ranges(self) -> dict[C, list[Range]]:
        return {c: [(s, e)] for s, e, c in zip(self._starts, self._ends, self._owners, strict=True)}


class ConsistentHashingSelector(Selector[C]):
    def __init__(self, points_per_consumer: int = CONSISTENT_HASHING_POINTS) -> None:
        self.points_per_consumer = points_per_consumer
        self._points: list[int] = []  # sorted ring positions
        self._at: dict[int, list[C]] = {}  # position -> consumers, earliest added first
        self._names: dict[C, tuple[str, int]] = {}

    def points_of(self, name: str, index: int) -> list[int]:
        return [
            murmur3_32(f"{name}\0{index}\0{i}") % KEY_SHARED_HASH_RANGE
            for i in range(1, self.points_per_consumer + 1)
        ]

    def add(self, consumer: C, name: str, ranges: list[Range] | None = None) -> None:
        if consumer in self._names:
            raise ConsumerAssignError(f"consumer {name!r} is already placed")
        used = {i for n, i in self._names.values() if n == name}
        index = next(i for i in range(len(used) + 1) if i not in used)
        self._names[consumer] = (name, index)
        for p in self.points_of(name, index):
            owners = self._at.get(p)
            if owners is None:
                self._at[p] = [consumer]
                bisect.insort(self._points, p)
            elif consumer not in owners:
                owners.append(consumer)

    def remove(self, consumer: C) -> None:
        placed = self._names.pop(consumer, None)
        if placed is None:
            return
        for p in set(self.points_of(*placed)):
            owners = self._at.get(p)
            if owners is None or consumer not in owners:
                continue
            owners.remove(consumer)
            if not owners:
                del self._at[p]
                del self._points[bisect.bisect_left(self._points, p)]

    def select(self, slot: int) -> C | None:
        if not self._points:
            return None
        i = bisect.bisect_left(self._points, slot)
        point = self._points[i] if i < len(self._points) else self._points[0]
        return self._at[point][0]

    def ranges(self) -> dict[C, list[Range]]:
        out: dict[C, list[Range]] = {c: [] for c in self._names}
        if not self._points:
            return out
        previous = self._points[-1]
        for p in self._points:
            owner = self._at[p][0]
            if previous < p:
                out[owner].append((previous + 1, p))
            else:  # the first point also takes the wrap-around part
                if previous < SLOT_MAX:
                    out[owner].append((previous + 1, SLOT_MAX))
                out[owner].append((0, p))
            previous = p
        return {c: merge_ranges(r) for c, r in out.items()}


def merge_ranges(ranges: Iterable[Range]) -> list[Range]:
    merged: list[Range] = []
    for s, e in sorted(ranges):
        if merged and s <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], e))
        else:
            merged.append((s, e))
    return merged


class StickyRangeSelector(Selector[C]):
    def __init__(self) -> None:
        self._starts: list[int] = []
        self._ends: list[int] = []
        self._owners: list[C] = []

    def add(self, consumer: C, name: str, ranges: list[Range] | None = None) -> None:
        if not ranges:
            raise ConsumerAssignError(
                f"Sticky Key_Shared consumer {name!r} brought no hash ranges; give "
                "sticky_ranges as inclusive (start, end) pairs in 0..65535"
            )
        if consumer in self._owners:
            raise ConsumerAssignError(f"consumer {name!r} is already placed")
        wanted = sorted(ranges)
        for s, e in wanted:
            if not (0 <= s <= e <= SLOT_MAX):
                raise ConsumerAssignError(
                    f"range ({s}, {e}) of consumer {name!r} is not inside 0..{SLOT_MAX} "
                    "with start <= end"
                )
        for (s1, e1), (s2, _) in itertools.pairwise(wanted):
            if s2 <= e1:
                raise ConsumerAssignError(
                    f"ranges of consumer {name!r} overlap each other: ({s1}, {e1}) and ({s2}, ...)"
                )
        for s, e in wanted:
            i = bisect.bisect_right(self._starts, e) - 1
            if i >= 0 and self._ends[i] >= s:
                raise ConsumerAssignError(
                    f"range ({s}, {e}) of consumer {name!r} overlaps "
                    f"({self._starts[i]}, {self._ends[i]}) of a connected consumer"
                )
        for s, e in wanted:
            i = bisect.bisect_left(self._starts, s)
            self._starts.insert(i, s)
            self._ends.insert(i, e)
            self._owners.insert(i, consumer)

    def remove(self, consumer: C) -> None:
        keep = [
            (s, e, c)
            for s, e, c in zip(self._starts, self._ends, self._owners, strict=True)
            if c is not consumer
        ]
        self._starts = [k[0] for k in keep]
        self._ends = [k[1] for k in keep]
        self._owners = [k[2] for k in keep]

    def select(self, slot: int) -> C | None:
        i = bisect.bisect_right(self._starts, slot) - 1
        if i >= 0 and self._ends[i] >= slot:
            return self._owners[i]
        return None

    def ranges(self) -> dict[C, list[Range]]:
        out: dict[C, list[Range]] = {}
        for s, e, c in zip(self._starts, self._ends, self._owners, strict=True):
            out.setdefault(c, []).append((s, e))
        return out


@dataclass
class _Hold(Generic[C]):
    consumer: C
    unacked: int = 0
    blocked_attempts: int = 0


@dataclass
class DrainingStats:
    count: int = 0
    unacked: int = 0
    cleared_total: int = 0
    hashes: list[dict[str, int]] = field(default_factory=list)


class KeyHashTracker(Generic[C]):
    """Holders of slots with unacknowledged messages (see the module doc)."""

    def __init__(self, selector: Selector[C], allow_out_of_order: bool = False) -> None:
        self.selector = selector
        self.allow_out_of_order = allow_out_of_order
        self._holds: dict[int, _Hold[C]] = {}
        self._cleared_total: dict[C, int] = {}

    def holder(self, slot: int) -> C | None:
        hold = self._holds.get(slot)
        return hold.consumer if hold is not None else None

    def target(self, slot: int, has_room: Callable[[C], bool] = lambda c: True) -> C | None:
        """The consumer that may take a message of ``slot`` now, or None.

        A refusal because another consumer still holds the slot counts as a
        blocked attempt of that slot."""
        chosen = self.selector.select(slot)
        if chosen is None:
            return None
        if not self.allow_out_of_order:
            hold = self._holds.get(slot)
            if hold is not None and hold.consumer != chosen:
                hold.blocked_attempts += 1
                return None
        return chosen if has_room(chosen) else None

    def delivered(self, consumer: C, slot: int, messages: int) -> None:
        hold = self._holds.get(slot)
        if hold is None:
            self._holds[slot] = _Hold(consumer, messages)
        elif hold.consumer == consumer:
            hold.unacked += messages
        else:
            # Only with out-of-order delivery: the newest consumer holds it.
            assert self.allow_out_of_order, "a slot is held by two consumers"
            self._holds[slot] = _Hold(consumer, hold.unacked + messages)

    def acked(self, consumer: C, slot: int, messages: int) -> None:
        hold = self._holds.get(slot)
        if hold is None or hold.consumer != consumer:
            return
        hold.unacked -= messages
        if hold.unacked <= 0:
            del self._holds[slot]
            if self.selector.select(slot) != consumer:
                self._cleared_total[consumer] = self._cleared_total.get(consumer, 0) + 1

    def consumer_added(self, consumer: C) -> None:
        self._cleared_total[consumer] = 0

    def release(self, consumer: C) -> None:
        """Its slots are free: its unacknowledged messages go back for redelivery."""
        for slot in [s for s, h in self._holds.items() if h.consumer == consumer]:
            del self._holds[slot]

    def consumer_removed(self, consumer: C) -> None:
        self.release(consumer)
        self._cleared_total.pop(consumer, None)

    def clear(self) -> None:
        self._holds.clear()

    def draining(self, consumer: C) -> DrainingStats:
        """Slots ``consumer`` holds that now belong to another consumer."""
        stats = DrainingStats(cleared_total=self._cleared_total.get(consumer, 0))
        for slot in sorted(self._holds):
            hold = self._holds[slot]
            if hold.consumer != consumer or self.selector.select(slot) == consumer:
                continue
            stats.count += 1
            stats.unacked += hold.unacked
            stats.hashes.append(
                {"hash": slot, "unackMsgs": hold.unacked, "blockedAttempts": hold.blocked_attempts}
            )
        return stats
