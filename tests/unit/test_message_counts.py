"""Messages per entry of a managed ledger's ledgers (broker/message_counts.py):
what backlogs count, since a batch entry holds many messages."""

from __future__ import annotations

import pytest

from broker.message_counts import LedgerCounts, MessageCounts

# Entries stored in order with these message counts -> (first, last) -> messages.
WRITTEN = [
    # unbatched: one number, no table
    ([1, 1, 1, 1], [((0, 3), 4), ((1, 2), 2), ((3, 3), 1), ((2, 9), 2), ((5, 9), 0)]),
    # full batches of 100: still one number
    ([100, 100, 100], [((0, 2), 300), ((1, 1), 100)]),
    # batches of varying size: cumulative table
    ([3, 1, 5, 2], [((0, 3), 11), ((1, 2), 6), ((2, 2), 5), ((3, 3), 2), ((0, 0), 3)]),
    # uniform at first, then a different one: the table keeps the first ones right
    ([2, 2, 2, 7], [((0, 2), 6), ((2, 3), 9), ((3, 3), 7)]),
    ([], [((0, 0), 0)]),
]


@pytest.mark.parametrize(("counts", "queries"), WRITTEN)
def test_a_ledger_written_here_counts_exactly(counts, queries):
    ledger = LedgerCounts()
    for entry_id, n in enumerate(counts):
        ledger.added(entry_id, n)
    assert ledger.exact and ledger.entries == len(counts)
    assert ledger.total == sum(counts)
    for (first, last), expected in queries:
        assert ledger.messages(first, last) == expected, (counts, first, last)


def test_a_repeated_entry_changes_nothing_and_a_gap_counts_one_each():
    ledger = LedgerCounts()
    ledger.added(0, 5)
    ledger.added(0, 9)  # a repeat of entry 0
    ledger.added(3, 2)  # entries 1 and 2 were stored but not counted
    assert ledger.entries == 4
    assert [ledger.messages(i, i) for i in range(4)] == [5, 1, 1, 2]


# An inherited ledger (an earlier owner wrote it): entries, recorded total ->
# (first, last) -> messages.
INHERITED = [
    (10, 50, [((0, 9), 50), ((0, 4), 25), ((8, 9), 10), ((3, 3), 5)]),  # average of 5
    (4, 10, [((0, 3), 10), ((0, 0), 2)]),  # 2.5 per entry, rounded
    (10, None, [((0, 9), 10), ((2, 5), 4)]),  # no record: one message per entry
]


@pytest.mark.parametrize(("entries", "total", "queries"), INHERITED)
def test_an_inherited_ledger_is_exact_in_whole_and_estimated_in_part(entries, total, queries):
    counts = MessageCounts()
    counts.inherited(7, entries, total)
    assert not counts.exact(7)
    for (first, last), expected in queries:
        assert counts.messages(7, first, last) == expected, (entries, total, first, last)
    counts.added(7, entries, 3)  # an inherited ledger takes no new entries
    assert counts.messages(7, 0, entries) == counts.messages(7, 0, entries - 1)


def test_a_recorded_total_below_the_entries_is_ignored():
    counts = MessageCounts()
    counts.inherited(1, 10, 3)  # not a total of 10 entries of >= 1 message each
    assert counts.messages(1, 0, 9) == 10


def test_totals_are_what_the_ledger_list_records():
    counts = MessageCounts()
    counts.inherited(1, 10, 40)  # recorded: kept as it was
    counts.inherited(2, 10, None)  # unknown: not recorded
    counts.new_ledger(3)
    for entry_id, n in enumerate([3, 4]):
        counts.added(3, entry_id, n)
    assert counts.totals() == {1: 40, 3: 7}
    counts.drop(1)
    assert counts.totals() == {3: 7}
    assert counts.messages(99, 0, 4) == 5  # a ledger it knows nothing of: one per entry
