"""Key_Shared selectors and the draining-hash tracker (broker/key_shared.py),
checked against the seed's worked examples."""

from __future__ import annotations

import random

import pytest

from broker.key_shared import (
    NO_KEY,
    SLOT_MAX,
    AutoSplitHashRangeSelector,
    ConsistentHashingSelector,
    ConsumerAssignError,
    KeyHashTracker,
    Selector,
    StickyRangeSelector,
    slot_of,
    sticky_key,
)

Q = 16384  # a quarter of the 65536 slots


def test_seed_key_example_lands_in_slot_6067():
    assert slot_of("Order-3459134") == 6067


def test_sticky_key_prefers_ordering_key_then_partition_key_then_none_key():
    assert sticky_key(b"ok", "pk") == b"ok"
    assert sticky_key(None, "pk") == b"pk"
    assert sticky_key(None, None) == NO_KEY == b"NONE_KEY"


# The seed's pictures, step by step: (action, consumer, expected regions
# left to right as (owner, start, end) inclusive).
AUTO_SPLIT_STEPS = [
    ("add", "C1", [("C1", 0, SLOT_MAX)]),
    ("add", "C2", [("C2", 0, 2 * Q - 1), ("C1", 2 * Q, SLOT_MAX)]),
    ("add", "C3", [("C3", 0, Q - 1), ("C2", Q, 2 * Q - 1), ("C1", 2 * Q, SLOT_MAX)]),
    (
        "add",
        "C4",
        [("C3", 0, Q - 1), ("C2", Q, 2 * Q - 1), ("C4", 2 * Q, 3 * Q - 1), ("C1", 3 * Q, SLOT_MAX)],
    ),
    ("remove", "C4", [("C3", 0, Q - 1), ("C2", Q, 2 * Q - 1), ("C1", 2 * Q, SLOT_MAX)]),
    ("remove", "C1", [("C3", 0, Q - 1), ("C2", Q, SLOT_MAX)]),
]


def _regions(selector: AutoSplitHashRangeSelector) -> list[tuple[str, int, int]]:
    out = [(c, s, e) for c, ranges in selector.ranges().items() for s, e in ranges]
    return sorted(out, key=lambda r: r[1])


def test_auto_split_hash_range_follows_the_seed_pictures():
    sel: AutoSplitHashRangeSelector = AutoSplitHashRangeSelector()
    for action, consumer, expected in AUTO_SPLIT_STEPS:
        if action == "add":
            sel.add(consumer, consumer)
        else:
            sel.remove(consumer)
        assert _regions(sel) == expected, (action, consumer)
        for owner, start, end in expected:
            assert sel.select(start) == owner and sel.select(end) == owner


def test_auto_split_seed_example_key_goes_to_c3_of_four():
    sel: AutoSplitHashRangeSelector = AutoSplitHashRangeSelector()
    for c in ("C1", "C2", "C3", "C4"):
        sel.add(c, c)
    assert sel.select(slot_of("Order-3459134")) == "C3"


def test_auto_split_removing_the_last_consumer_leaves_nobody():
    sel: AutoSplitHashRangeSelector = AutoSplitHashRangeSelector()
    sel.add("a", "a")
    sel.remove("a")
    assert sel.select(0) is None and sel.ranges() == {}
    sel.remove("never-added")  # no error, nothing changes


def _covers_everything_once(ranges: dict[str, list[tuple[int, int]]]) -> bool:
    flat = sorted(r for rs in ranges.values() for r in rs)
    position = 0
    for s, e in flat:
        if s != position:
            return False
        position = e + 1
    return position == SLOT_MAX + 1


def test_consistent_hashing_points_come_from_name_index_and_point_number():
    sel: ConsistentHashingSelector = ConsistentHashingSelector()
    name = "orders-aggregator-pod-2345-consumer"
    points = sel.points_of(name, 0)
    assert len(points) == 100
    assert points[0] == slot_of(f"{name}\0" + "0\0" + "1")
    assert points[-1] == slot_of(f"{name}\0" + "0\0" + "100")


def test_consistent_hashing_selects_the_next_point_clockwise_and_wraps():
    sel: ConsistentHashingSelector = ConsistentHashingSelector(points_per_consumer=100)
    sel.add("a", "a")
    sel.add("b", "b")
    owner_at: dict[int, str] = {}
    for c in ("a", "b"):
        for p in sel.points_of(c, 0):
            owner_at.setdefault(p, c)  # earliest added wins a shared point
    ring = sorted(owner_at)
    for slot in (0, ring[0], ring[0] + 1, ring[-1], ring[-1] + 1, SLOT_MAX):
        nxt = next((p for p in ring if p >= slot), ring[0])
        assert sel.select(slot) == owner_at[nxt]
    assert _covers_everything_once(sel.ranges())
    for c, ranges in sel.ranges().items():
        for s, e in ranges:
            assert sel.select(s) == c and sel.select(e) == c


def test_consistent_hashing_a_new_consumer_only_takes_keys_and_leaving_gives_them_back():
    sel: ConsistentHashingSelector = ConsistentHashingSelector()
    for c in ("c1", "c2", "c3"):
        sel.add(c, c)
    before = [sel.select(s) for s in range(0, SLOT_MAX + 1, 7)]
    sel.add("c4", "c4")
    during = [sel.select(s) for s in range(0, SLOT_MAX + 1, 7)]
    moved = [(b, d) for b, d in zip(before, during, strict=True) if b != d]
    assert moved and all(d == "c4" for _, d in moved)
    sel.remove("c4")
    assert [sel.select(s) for s in range(0, SLOT_MAX + 1, 7)] == before


def test_consistent_hashing_collisions_go_to_the_earliest_consumer_until_it_leaves():
    probe: ConsistentHashingSelector = ConsistentHashingSelector()
    # Two consumers with the same name get different points (name index 0 and 1).
    assert set(probe.points_of("same", 0)) != set(probe.points_of("same", 1))
    # Find two names whose rings share a point (~14% of pairs do).
    first = set(probe.points_of("x", 0))
    other, shared = next(
        (f"y{i}", (first & set(probe.points_of(f"y{i}", 0))).pop())
        for i in range(1000)
        if first & set(probe.points_of(f"y{i}", 0))
    )
    for order in (("x", other), (other, "x")):
        sel: ConsistentHashingSelector = ConsistentHashingSelector()
        for c in order:
            sel.add(c, c)
        assert sel.select(shared) == order[0]
        sel.remove(order[0])
        assert sel.select(shared) == order[1]


def test_consistent_hashing_reuses_the_lowest_free_index_of_a_name():
    sel: ConsistentHashingSelector = ConsistentHashingSelector()
    sel.add("a0", "same")
    sel.add("a1", "same")
    sel.remove("a0")
    sel.add("a2", "same")  # takes index 0 again, not 1 (a1's points)
    owners = {sel.select(s) for s in range(0, SLOT_MAX + 1, 13)}
    assert owners == {"a1", "a2"}


def test_sticky_seed_example_and_refusals_change_nothing():
    sel: StickyRangeSelector = StickyRangeSelector()
    sel.add("C1", "C1", [(0, Q - 1), (2 * Q, 3 * Q - 1)])
    sel.add("C2", "C2", [(Q, 2 * Q - 1), (3 * Q, SLOT_MAX)])
    assert sel.select(slot_of("Order-3459134")) == "C1"
    assert sel.select(Q) == "C2" and sel.select(SLOT_MAX) == "C2"
    before = sel.ranges()
    bad = [
        [(100, 200)],  # overlaps C1
        [],  # no ranges
        [(5, 4)],  # start > end
        [(0, SLOT_MAX + 1)],  # outside the space
        [(10, 20), (15, 30)],  # overlaps itself
    ]
    for ranges in bad:
        with pytest.raises(ConsumerAssignError):
            sel.add("C3", "C3", ranges)
        assert sel.ranges() == before
    sel.remove("C1")
    assert sel.select(0) is None
    sel.add("C3", "C3", [(0, 10)])
    assert sel.select(5) == "C3" and sel.select(11) is None


def test_draining_hash_waits_for_the_old_holder_then_moves():
    sel: AutoSplitHashRangeSelector = AutoSplitHashRangeSelector()
    tracker: KeyHashTracker = KeyHashTracker(sel)
    sel.add("C1", "C1")
    tracker.consumer_added("C1")
    slot = 100  # in the lower half: moves to C2 when C2 joins
    assert tracker.target(slot) == "C1"
    tracker.delivered("C1", slot, 2)
    sel.add("C2", "C2")
    tracker.consumer_added("C2")
    assert sel.select(slot) == "C2"
    assert tracker.target(slot) is None  # blocked: C1 still holds it
    assert tracker.target(slot) is None
    other = 40000  # still C1's: not blocked
    assert tracker.target(other) == "C1"
    stats = tracker.draining("C1")
    assert (stats.count, stats.unacked, stats.cleared_total) == (1, 2, 0)
    assert stats.hashes == [{"hash": slot, "unackMsgs": 2, "blockedAttempts": 2}]
    assert tracker.draining("C2").count == 0
    tracker.acked("C1", slot, 1)
    assert tracker.target(slot) is None
    tracker.acked("C1", slot, 1)
    assert tracker.target(slot) == "C2"
    stats = tracker.draining("C1")
    assert (stats.count, stats.cleared_total) == (0, 1)


def test_a_leaving_holder_frees_its_hashes_and_out_of_order_skips_the_wait():
    sel: AutoSplitHashRangeSelector = AutoSplitHashRangeSelector()
    tracker: KeyHashTracker = KeyHashTracker(sel)
    sel.add("C1", "C1")
    tracker.delivered("C1", 7, 3)
    sel.add("C2", "C2")
    assert tracker.target(7) is None
    tracker.consumer_removed("C1")
    sel.remove("C1")
    assert tracker.target(7) == "C2"

    sel2: AutoSplitHashRangeSelector = AutoSplitHashRangeSelector()
    loose: KeyHashTracker = KeyHashTracker(sel2, allow_out_of_order=True)
    sel2.add("C1", "C1")
    loose.delivered("C1", 7, 3)
    sel2.add("C2", "C2")
    assert loose.target(7) == "C2"


def test_no_room_is_not_a_blocked_attempt():
    sel: AutoSplitHashRangeSelector = AutoSplitHashRangeSelector()
    tracker: KeyHashTracker = KeyHashTracker(sel)
    sel.add("C1", "C1")
    assert tracker.target(5, has_room=lambda c: False) is None
    tracker.delivered("C1", 5, 1)
    assert tracker.draining("C1").hashes == []


@pytest.mark.parametrize("seed", range(5))
def test_random_joins_and_leaves_never_give_a_held_slot_to_another_consumer(seed):
    """The invariant at the tracker level: a slot with unacknowledged messages
    is never given to a second consumer, whatever the join/leave order."""
    rng = random.Random(seed)
    selectors: list[Selector[str]] = [AutoSplitHashRangeSelector(), ConsistentHashingSelector()]
    for selector in selectors:
        tracker: KeyHashTracker[str] = KeyHashTracker(selector)
        live: list[str] = []
        held: dict[str, dict[int, int]] = {}
        for step in range(400):
            roll = rng.random()
            if roll < 0.1 or not live:
                c = f"c{step}"
                selector.add(c, c)
                tracker.consumer_added(c)
                live.append(c)
                held[c] = {}
            elif roll < 0.15 and len(live) > 1:
                c = rng.choice(live)
                live.remove(c)
                selector.remove(c)
                tracker.consumer_removed(c)
                del held[c]
            elif roll < 0.6:
                slot = rng.randrange(0, SLOT_MAX + 1, 997)
                to = tracker.target(slot)
                if to is not None:
                    others = [o for o in live if o != to and held[o].get(slot)]
                    assert not others, f"slot {slot} held by {others} given to {to}"
                    tracker.delivered(to, slot, 1)
                    held[to][slot] = held[to].get(slot, 0) + 1
            else:
                c = rng.choice(live)
                if held[c]:
                    slot = rng.choice(list(held[c]))
                    tracker.acked(c, slot, 1)
                    held[c][slot] -= 1
                    if not held[c][slot]:
                        del held[c][slot]
