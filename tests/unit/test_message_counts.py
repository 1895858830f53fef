"""Messages per entry of a managed ledger's ledgers (broker/message_counts.py):
what backlogs count, since a batch entry holds many messages."""

from __future__ import annotations

import pytest

from broker import ledger_list
from broker.message_counts import LedgerCounts, MessageCounts, TableBudget

# Entries stored in order with these message counts -> (first, last) -> messages.
WRITTEN = [
    # unbatched: one number, no table
    ([1, 1, 1, 1], [((0, 3), 4), ((1, 2), 2), ((3, 3), 1), ((9, 2), 0)]),
    # full batches of 100: still one number
    ([100, 100, 100], [((0, 2), 300), ((1, 1), 100)]),
    # batches of varying size: cumulative table
    ([3, 1, 5, 2], [((0, 3), 11), ((1, 2), 6), ((2, 2), 5), ((3, 3), 2), ((0, 0), 3)]),
    # uniform at first, then a different one: the table keeps the first ones right
    ([2, 2, 2, 7], [((0, 2), 6), ((2, 3), 9), ((3, 3), 7)]),
    ([], [((0, -1), 0)]),
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
    assert counts.totals([7]) == ({7: total} if total is not None else {})


def test_a_recorded_total_below_the_entries_is_ignored():
    counts = MessageCounts()
    counts.inherited(1, 10, 3)  # not a total of 10 entries of >= 1 message each
    assert counts.messages(1, 0, 9) == 10


def test_totals_are_only_those_of_closed_ledgers():
    counts = MessageCounts()
    counts.inherited(1, 10, 40)  # recorded: kept as it was
    counts.inherited(2, 10, None)  # unknown: not recorded
    for ledger in (3, 4):
        counts.new_ledger(ledger)
        for entry_id, n in enumerate([3, 4]):
            counts.added(ledger, entry_id, n)
    # 4 is still being written: its total is not final, so it is never recorded.
    assert counts.totals([1, 2, 3]) == {1: 40, 3: 7}
    counts.drop(1)
    assert counts.totals([1, 2, 3]) == {3: 7}
    assert counts.messages(99, 0, 4) == 5  # a ledger it knows nothing of: one per entry


def test_entries_past_what_is_known_count_one_each():
    ledger = LedgerCounts()
    for entry_id, n in enumerate([5, 5]):
        ledger.added(entry_id, n)
    assert ledger.messages(0, 4) == 10 + 3  # entries 2..4 not counted (yet)
    assert ledger.messages(3, 4) == 2


def test_a_send_claiming_no_messages_counts_one():
    ledger = LedgerCounts()
    ledger.added(0, 0)
    ledger.added(1, -4)
    assert ledger.total == 2


def test_entries_read_back_after_a_failed_write_count_their_messages():
    from protos import common_pb2
    from protos.entry import encode_entry

    def entry(n: int) -> bytes:
        meta = common_pb2.MessageMetadata(producer_name="p", sequence_id=0, publish_time=1)
        meta.num_messages_in_batch = n
        return encode_entry(meta, b"x")

    counts = MessageCounts()
    counts.new_ledger(5)
    counts.added(5, 0, 2)
    counts.recovered([((5, 1), entry(7)), ((5, 2), b"garbage")])
    assert [counts.messages(5, i, i) for i in range(3)] == [2, 7, 1]


def test_tables_stay_within_the_brokers_bound():
    budget = TableBudget(max_entries=10)
    a, b = MessageCounts(budget), MessageCounts(budget)
    for counts, ledger in ((a, 1), (b, 2)):
        counts.new_ledger(ledger)
        for entry_id, n in enumerate([1, 2, 3, 4]):  # varying: a table (5 entries)
            counts.added(ledger, entry_id, n)
    assert budget.used == 10 and a.exact(1) and b.exact(2)
    a.new_ledger(3)
    a.added(3, 0, 1)
    a.added(3, 1, 2)  # a second table: over the bound, a folds its oldest
    assert budget.used <= 10
    assert not a.exact(1) and a.exact(3) and b.exact(2)
    assert a.messages(1, 0, 3) == 10  # the whole ledger: still exact
    assert a.messages(1, 0, 1) == 5  # a part of it: entries times the average (2.5)
    a.release()
    assert budget.used == b.budget.used == 5


def test_ledgers_behind_every_durable_cursor_keep_only_their_totals():
    counts = MessageCounts()
    for ledger in (1, 2):
        counts.new_ledger(ledger)
        for entry_id, n in enumerate([1, 3]):
            counts.added(ledger, entry_id, n)
    counts.fold_before(2)
    assert not counts.exact(1) and counts.exact(2)
    assert counts.budget.used == 3
    assert counts.totals([1, 2]) == {1: 4, 2: 4}
    counts.added(1, 2, 5)  # a folded ledger still being written keeps its total right
    assert counts.totals([1]) == {1: 9}


LISTS = [
    (b'{"ledgers": [3, 4], "messages": {"3": 100}}', ([3, 4], {3: 100})),
    (b'{"ledgers": [3]}', ([3], {})),  # written before totals existed
    (b'{"ledgers": [3], "messages": [1, 2]}', ([3], {})),  # not ours: estimates
    (b'{"ledgers": [3], "messages": {"x": 1, "3": "y", "4": 2}}', ([3], {4: 2})),
]


@pytest.mark.parametrize(("record", "expected"), LISTS)
def test_ledger_list_records(record, expected):
    assert ledger_list.decode(record) == expected


def test_ledger_list_round_trip():
    assert ledger_list.decode(ledger_list.encode([1, 2, 9], {1: 5, 9: 7, 42: 1})) == (
        [1, 2, 9],
        {1: 5, 9: 7},
    )
