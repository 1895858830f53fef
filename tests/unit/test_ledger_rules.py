"""When a managed ledger rolls over, and which ledgers may be deleted
(broker/ledger_rules.py); the clock is an argument, so the tables give it."""

from __future__ import annotations

from broker.ledger_rules import (
    RolloverPolicy,
    deletable_ledgers,
    idle_rollover_due,
    should_roll,
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
