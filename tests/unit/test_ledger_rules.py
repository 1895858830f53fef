"""When a managed ledger rolls over, and which ledgers may be deleted
(broker/ledger_rules.py); the clock is an argument, so the tables give it."""

from __future__ import annotations

import pytest

from broker.ledger_rules import (
    NO_RETENTION,
    LedgerFacts,
    RetentionPolicy,
    RolloverPolicy,
    bookie_read_count,
    completion_due,
    deletable_ledgers,
    entries_within,
    idle_rollover_due,
    past_retention,
    should_roll,
    trimmable,
)

P = RolloverPolicy(max_entries=10, max_size_bytes=1000, min_time_s=60, max_time_s=3600)

# (entries, bytes, age in seconds) -> roll over?
ROLLOVER = [
    (10, 0, 61, True),  # full by entries and old enough
    (1, 1000, 61, True),  # full by size and old enough
    (10, 5000, 10, False),  # full, but younger than the minimum rollover time
    (9, 999, 3000, False),  # not full: only the maximum rollover time rolls it
    (1, 1, 3601, True),
    (0, 0, 9999, False),  # an empty ledger never rolls
]


def test_rollover_rule():
    opened_at = 1000.0
    for entries, size, age, expected in ROLLOVER:
        assert should_roll(P, entries, size, opened_at, opened_at + age) is expected, (
            entries,
            size,
            age,
        )


IDLE = RolloverPolicy(inactive_rollover_s=300)

# (last entry written, seconds since the last add, durable marks) -> roll?
IDLE_ROLLOVER = [
    ((5, 9), 301, [(5, 9), (5, 12)], True),  # idle and consumed by every durable cursor
    ((5, 9), 299, [(5, 9)], False),  # written to recently
    ((5, 9), 301, [(5, 9), (5, 8)], False),  # a cursor has not consumed it
    ((5, 9), 301, [], True),  # no durable cursor holds it
    ((5, -1), 9999, [], False),  # nothing written
]


def test_idle_rollover_rule():
    for written, idle_s, marks, expected in IDLE_ROLLOVER:
        assert idle_rollover_due(IDLE, written, 100.0, 100.0 + idle_s, marks) is expected, (
            written,
            idle_s,
            marks,
        )
    never = RolloverPolicy(inactive_rollover_s=0)
    assert not idle_rollover_due(never, (5, 9), 0.0, 1e9, [])


# Ledgers 1, 2, 3 closed (last entries 9, 4, 7), 4 being written.
# (durable marks, dedup hold-back) -> ledgers that may be deleted.
TRIM = [
    ([(2, 4)], None, [1, 2]),
    ([(2, 3)], None, [1]),  # ledger 2 not fully consumed
    ([(3, 7), (1, 9)], None, [1]),  # the slowest cursor decides
    ([(3, 7)], (2, 0), [1]),  # deduplication replays ledger 2 on: keep it
    ([(3, 7)], None, [1, 2, 3]),  # never the ledger being written
    ([], None, [1, 2, 3]),  # no durable cursor holds anything
    ([(0, -1)], None, []),
]


def test_which_ledgers_may_be_deleted():
    closed = {1: 9, 2: 4, 3: 7}
    for marks, hold_back, expected in TRIM:
        assert deletable_ledgers([1, 2, 3, 4], closed, 4, marks, hold_back) == expected, marks
    # Only a prefix goes: an open ledger in the middle stops it.
    assert deletable_ledgers([1, 2, 3], {1: 9, 3: 7}, None, [(9, 0)], None) == [1]


# Retention. Ledgers 1, 2, 3 consumed, 100 bytes each, and they stopped being
# written at 1000, 2000 and 3000 ms; the topic holds 400 bytes (ledger 4,
# being written, has 100). The clock reads 10000 ms.
ENDED = {1: 1_000, 2: 2_000, 3: 3_000}
SIZES = {1: 100, 2: 100, 3: 100}

# (retention time s, retention size bytes) -> ledgers retention lets go
RETENTION = [
    (0, 0, [1, 2, 3]),  # no retention: all consumed ledgers go
    (-1, -1, []),  # infinite: nothing goes
    (8.5, -1, [1]),  # 10000 - 1000 >= 8500 for ledger 1 only
    (7.5, -1, [1, 2]),  # 9000 and 8000 >= 7500; ledger 3's 7000 is not
    (7.0, -1, [1, 2, 3]),  # ledger 3: 10000 - 3000 = 7000 >= 7000, its time is up
    (-1, 250, [1, 2]),  # 400 > 250 after keeping none; 300 > 250; then 200 <= 250
    (-1, 400, []),  # at the limit is not over it
    (-1, 0, [1, 2, 3]),  # size 0: everything consumed is over it
    (8.5, 350, [1]),  # either limit lets a ledger go: time takes 1, size then is 300
    (100, -1, []),  # younger than the retention time
]


def test_retention_rule():
    for time_s, size_bytes, expected in RETENTION:
        policy = RetentionPolicy(time_s, size_bytes)
        got = past_retention(policy, [1, 2, 3], ENDED, SIZES, 400, 10_000)
        assert got == expected, (time_s, size_bytes)
    # Only a prefix goes: a young ledger stops the older-looking ones behind it.
    young_first = {1: 9_000, 2: 1_000, 3: 1_000}
    assert past_retention(RetentionPolicy(5, -1), [1, 2, 3], young_first, SIZES, 400, 10_000) == []


def test_trimming_keeps_consumed_ledgers_within_retention():
    # Ledgers 1..3 closed, created at 0, 1000, 2000 ms; 4 written since 3000 ms.
    closed = {
        1: LedgerFacts(9, 0, 100),
        2: LedgerFacts(4, 1_000, 100),
        3: LedgerFacts(7, 2_000, 100),
    }
    current = (4, LedgerFacts(2, 3_000, 100))
    ids = [1, 2, 3, 4]
    # No durable cursor: all closed ledgers are consumed.
    assert trimmable(ids, closed, current, [], None, NO_RETENTION, 10_000) == [1, 2, 3]
    # A ledger's age counts from its successor's creation: 1 ended at 1000,
    # 2 at 2000, 3 at 3000 (ledger 4's creation).
    week = RetentionPolicy(7 * 86400, -1)
    assert trimmable(ids, closed, current, [], None, week, 10_000) == []
    assert trimmable(ids, closed, current, [], None, RetentionPolicy(8.5, -1), 10_000) == [1]
    assert trimmable(ids, closed, current, [], None, RetentionPolicy(7.0, -1), 10_000) == [1, 2, 3]
    # Retention never lets go of what a durable cursor has not consumed.
    assert trimmable(ids, closed, current, [(2, 4)], None, RetentionPolicy(0, 0), 10_000) == [1, 2]
    assert trimmable(ids, closed, current, [(2, 4)], None, RetentionPolicy(-1, 0), 10_000) == [1, 2]


# (wanted, room bytes, ledger entries, ledger bytes) -> entries asked of the bookies
BOOKIE_READ_COUNT = [
    (100, 5000, 0, 0, 100),  # nothing known of the ledger: all wanted
    (100, 5000, 10, 0, 100),
    (100, 5000, 10, 1000, 50),  # mean 100 bytes: enough to fill the room
    (100, 5050, 10, 1000, 51),  # a part entry rounds up (the read may pass the bound by one)
    (100, 5000, 10, 100, 100),  # small entries: the count bounds it
    (100, 5000, 10, 10_000_000, 1),  # entries bigger than the room: one at a time
    (100, 0, 10, 1000, 1),  # no room left: still one, so a read always progresses
]


@pytest.mark.parametrize(("wanted", "room", "entries", "length", "asked"), BOOKIE_READ_COUNT)
def test_bookie_read_count(wanted, room, entries, length, asked):
    assert bookie_read_count(wanted, room, entries, length) == asked


# (entry sizes, bytes held, max bytes) -> entries taken (each while under the bound)
ENTRIES_WITHIN = [
    ([], 0, 10, 0),
    ([4, 4, 4], 0, 10, 3),  # 8 held is under 10: the third is taken too
    ([4, 4, 4, 4], 0, 10, 3),
    ([20, 1], 0, 10, 1),  # the first is always taken
    ([5, 5, 5], 5, 10, 1),  # the read already held 5
    ([1, 1], 10, 10, 1),  # at the bound already: only the first
]


@pytest.mark.parametrize(("sizes", "held", "max_bytes", "taken"), ENTRIES_WITHIN)
def test_entries_within(sizes, held, max_bytes, taken):
    assert entries_within(sizes, held, max_bytes) == taken


# (position not cached, newest completed add, ledger being written) -> a tailing read stops?
COMPLETION_DUE = [
    ((5, 3), (5, 2), 5, True),  # confirmed by the bookies, its completion still due
    ((5, 2), (5, 2), 5, False),  # completed, then evicted: read from the bookies
    ((5, 1), (5, 2), 5, False),
    ((5, 0), (4, 9), 5, True),  # the first entry of a new ledger, none completed in it yet
    ((5, 0), (-1, -1), 5, True),  # a topic just loaded, nothing completed yet
    ((4, 11), (4, 10), 5, False),  # found stored by a failed writer's recovery: never completes
    ((4, 11), (4, 10), -1, False),  # no ledger being written (a failed writer being replaced)
    ((3, 7), (5, 2), 5, False),  # an older ledger
]


@pytest.mark.parametrize(("pos", "added", "writing", "due"), COMPLETION_DUE)
def test_completion_due(pos, added, writing, due):
    assert completion_due(pos, added, writing) is due
