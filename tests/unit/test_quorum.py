import pytest

from bookie.quorum import (
    AckTracker,
    QuorumConfigError,
    check_quorums,
    entries_by_index,
    first_unconfirmed,
    recovery_scan,
    replicas_to_ask,
    stripe,
    stripe_offsets,
    write_set,
)


@pytest.mark.parametrize(
    ("entry", "e", "qw", "expected"),
    [
        (0, 4, 3, [0, 1, 2]),
        (1, 4, 3, [1, 2, 3]),
        (2, 4, 3, [2, 3, 0]),
        (3, 4, 3, [3, 0, 1]),
        (5, 3, 3, [2, 0, 1]),
        (9, 1, 1, [0]),
    ],
)
def test_write_sets_stripe_over_the_ensemble(entry, e, qw, expected):
    assert write_set(entry, e, qw) == expected


@pytest.mark.parametrize(("e", "qw", "qa"), [(2, 3, 2), (3, 2, 3), (1, 1, 0), (0, 0, 0)])
def test_quorum_sizes_must_nest(e, qw, qa):
    with pytest.raises(QuorumConfigError):
        check_quorums(e, qw, qa)


def test_entries_confirm_in_order_once_qa_acked():
    t = AckTracker(ack_quorum=2)
    assert t.ack(1, 0) == []
    assert t.ack(1, 1) == []  # entry 0 is not confirmed yet
    assert t.ack(0, 2) == []
    assert t.ack(0, 0) == [0, 1]
    assert t.ack(0, 1) == []  # late duplicate
    assert t.ack(2, 1) == []
    assert t.ack(2, 1) == []  # the same bookie twice is one ack
    assert t.ack(2, 2) == [2]


@pytest.mark.parametrize(
    ("e", "qw", "qa", "answered", "covered"),
    [
        (1, 1, 1, {0}, True),
        (1, 1, 1, set(), False),
        (3, 3, 2, {0, 1}, True),  # need Qw-Qa+1 = 2 of the one write set
        (3, 3, 2, {0}, False),
        (3, 2, 2, {0, 1}, True),  # need 1 per write set {0,1} {1,2} {2,0}
        (3, 2, 2, {1}, False),  # {2,0} has none
        (3, 2, 1, {0, 1}, False),  # need 2 per write set: {1,2} has 1
        (3, 2, 1, {0, 1, 2}, True),
        (4, 2, 2, {0, 2}, True),  # {0,1} {1,2} {2,3} {3,0}
        (4, 2, 2, {0, 1}, False),  # {2,3} has none
        (5, 3, 2, {0, 2, 4}, False),  # need 2 per write set: {2,3,4} ok, {3,4,0} ok, {1,2,3} has 1
        (5, 3, 2, {0, 1, 2, 3}, True),
    ],
)
def test_fence_coverage(e, qw, qa, answered, covered):
    from bookie.quorum import fence_covers_all_write_sets

    assert fence_covers_all_write_sets(e, qw, qa, answered) is covered


@pytest.mark.parametrize(
    ("qw", "qa", "found", "no_entry", "outcome"),
    [
        (1, 1, 1, 0, "FOUND"),
        (1, 1, 0, 1, "MISSING"),
        (1, 1, 0, 0, "UNKNOWN"),  # the only bookie did not answer
        (2, 2, 1, 1, "FOUND"),  # one copy is enough: it may have been confirmed
        (2, 2, 0, 1, "MISSING"),  # Qw-Qa+1 = 1 explicit negative: never had 2 acks
        (2, 2, 0, 0, "UNKNOWN"),
        (3, 2, 0, 1, "UNKNOWN"),  # need 2 negatives
        (3, 2, 0, 2, "MISSING"),
        (3, 3, 0, 1, "MISSING"),
        (3, 1, 0, 2, "UNKNOWN"),  # need all 3
        (3, 1, 0, 3, "MISSING"),
    ],
)
def test_recovery_read_outcome(qw, qa, found, no_entry, outcome):
    from bookie.quorum import recovery_read_outcome

    assert recovery_read_outcome(qw, qa, found, no_entry) == outcome


def test_forgetting_a_replaced_bookie_drops_its_acks_from_the_new_ensemble_on():
    t = AckTracker(ack_quorum=2)
    assert t.ack(0, 0) == [] and t.ack(0, 1) == [0]
    t.ack(1, 1)  # bookie 1 acked entries 1 and 2, then was replaced from entry 1 on
    t.ack(2, 1)
    t.forget(1, from_entry=1)
    assert t.ack(1, 2) == []  # only one ack counts now
    assert t.ack(1, 1) == [1]  # the replacement (same index) acks
    assert t.ack(2, 2) == [] and t.ack(2, 1) == [2]


@pytest.mark.parametrize(
    ("first", "e", "qw", "index", "expected"),
    [
        (0, 3, 2, 0, [0, 2]),  # entries 0, 2, 3, 5, ... are on index 0
        (0, 3, 2, 1, [0, 1]),
        (1, 3, 2, 0, [1, 2]),  # from entry 1: entries 2, 3, 5, 6, ...
        (7, 5, 3, 4, [0, 1, 2]),  # entries 7, 8, 9 (mod 5: 2, 3, 4)
        (4, 2, 2, 1, [0, 1]),  # Qw == E: every offset
        (9, 1, 1, 0, [0]),
    ],
)
def test_stripe_offsets(first, e, qw, index, expected):
    assert stripe_offsets(first, e, qw, index) == expected


@pytest.mark.parametrize(("e", "qw"), [(1, 1), (2, 1), (2, 2), (3, 2), (4, 2), (5, 3), (5, 5)])
def test_stripe_slices_give_each_bookie_exactly_its_write_sets_entries(e, qw):
    for first in range(0, 12):
        run = list(range(first, first + 17))
        for index in range(e):
            expected = [x for x in run if index in write_set(x, e, qw)]
            got = sorted(x for k in stripe_offsets(first, e, qw, index) for x in run[k::e])
            assert got == expected, (first, index)
            # stripe() gives the same share in entry order (from a list or a range)
            assert stripe(run, first, e, qw, index) == expected, (first, index)
            assert stripe(range(first, first + 17), first, e, qw, index) == expected


def test_entries_by_index_gives_each_bookie_the_entries_of_its_write_sets():
    # E=3, Qw=2: entry e goes to e % 3 and (e + 1) % 3.
    assert entries_by_index([4, 5, 6], 3, 2) == {1: [4, 6], 2: [4, 5], 0: [5, 6]}
    assert entries_by_index(range(3), 2, 2) == {0: [0, 1, 2], 1: [0, 1, 2]}
    assert entries_by_index([], 3, 2) == {}


@pytest.mark.parametrize(
    ("entries", "acked", "e", "qw", "qa", "expected"),
    [
        ([0, 1, 2], {0, 1, 2}, 3, 2, 2, None),  # every bookie stored its request
        ([0, 1, 2], {0, 1}, 3, 2, 2, (1, 1)),  # entry 1 is on {1, 2}: one ack
        ([0, 1, 2], {0, 1}, 3, 2, 1, None),  # one ack is enough with Qa=1
        ([3, 4], {1}, 3, 3, 2, (3, 1)),  # Qw = E: every entry has index 1 only
        ([5], set(), 1, 1, 1, (5, 0)),
    ],
)
def test_first_unconfirmed_names_the_first_entry_short_of_qa(entries, acked, e, qw, qa, expected):
    assert first_unconfirmed(entries, acked, e, qw, qa) == expected


@pytest.mark.parametrize(
    ("attempts", "e", "qw", "asks", "exhausted"),
    [
        # First tries: each entry from the first bookie of its write set.
        ({0: 0, 1: 0, 2: 0}, 3, 2, {0: [0], 1: [1], 2: [2]}, []),
        # Entry 1 failed once: its second replica (index 2) next.
        ({1: 1, 2: 0}, 3, 2, {2: [1, 2]}, []),
        # Entry 1 failed on both replicas: nothing left to ask.
        ({1: 2, 2: 1}, 3, 2, {0: [2]}, [1]),
        ({0: 0, 1: 0}, 1, 1, {0: [0, 1]}, []),
        ({0: 1}, 1, 1, {}, [0]),
    ],
)
def test_replicas_to_ask_walks_each_write_set_in_order(attempts, e, qw, asks, exhausted):
    assert replicas_to_ask(attempts, e, qw) == (asks, exhausted)


@pytest.mark.parametrize(
    ("qw", "qa", "found", "no_entry", "expected"),
    [
        # Entries 10..13 asked: 10 and 11 held somewhere, 12 lacked by Qw-Qa+1 = 1.
        (2, 2, {10, 11}, {12: 1, 13: 2}, (2, "MISSING")),
        # 12 lacked by one bookie only, where 2 must say so: cannot decide.
        (3, 2, {10, 11}, {12: 1}, (2, "UNKNOWN")),
        # Every entry held: read on.
        (2, 2, {10, 11, 12, 13}, {}, (4, "FOUND")),
        # A copy wins over negatives (it may have been confirmed).
        (2, 2, {10}, {10: 1, 11: 1}, (1, "MISSING")),
        # Nothing past the LAC, nobody answered.
        (1, 1, set(), {}, (0, "UNKNOWN")),
    ],
)
def test_recovery_scan_keeps_entries_until_one_is_missing_or_unknown(
    qw, qa, found, no_entry, expected
):
    assert recovery_scan([10, 11, 12, 13], found, no_entry, qw, qa) == expected
