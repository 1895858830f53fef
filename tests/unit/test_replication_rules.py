"""AutoRecovery's decisions (bookie/replication_rules.py) as step tables."""

import random

import pytest

from bookie.ledger_metadata import CLOSED, IN_RECOVERY, OPEN, LedgerMetadata
from bookie.replication_rules import (
    Cleanup,
    LostBookies,
    Outcome,
    Retire,
    bookie_state,
    entries_held,
    fragments,
    pick_target,
    plan_ledger,
    read_sources,
    references,
    retire_refusal,
    retirement_cleanup,
)

GRACE = 30_000


def ledger(ensembles, state=CLOSED, last=9, e=3, qw=2, qa=2):
    return LedgerMetadata(
        ledger_id=7,
        ensemble_size=e,
        write_quorum=qw,
        ack_quorum=qa,
        ensembles=[(first, list(b)) for first, b in ensembles],
        state=state,
        last_entry_id=last,
    )


def test_fragments_end_where_the_next_begins_and_the_last_at_the_closed_end():
    md = ledger([(0, "abc"), (4, "abd"), (8, "ebd")], last=9)
    got = [(f.first, f.last, "".join(f.ensemble), f.open) for f in fragments(md)]
    assert got == [(0, 3, "abc", False), (4, 7, "abd", False), (8, 9, "ebd", False)]


def test_the_last_fragment_of_an_open_ledger_is_open_and_has_no_known_end():
    md = ledger([(0, "abc"), (5, "abd")], state=OPEN, last=-1)
    assert [(f.first, f.last, f.open) for f in fragments(md)] == [(0, 4, False), (5, -1, True)]


@pytest.mark.parametrize(
    ("first", "last", "index", "e", "qw", "expected"),
    [
        (0, 5, 0, 3, 2, [0, 2, 3, 5]),  # write sets {0,1} {1,2} {2,0} ...
        (0, 5, 1, 3, 2, [0, 1, 3, 4]),
        (0, 5, 2, 3, 2, [1, 2, 4, 5]),
        (4, 7, 0, 2, 2, [4, 5, 6, 7]),  # Qw == E: every entry everywhere
        (3, 2, 0, 2, 2, []),  # empty fragment
    ],
)
def test_an_index_holds_the_entries_whose_write_set_has_it(first, last, index, e, qw, expected):
    md = ledger([(first, "abcd"[:e])], last=last, e=e, qw=qw)
    assert list(entries_held(fragments(md)[0], index, e, qw)) == expected


# (ledger, replaced, holes, task age ms) -> (outcome, [(fragment first, index, bookie, replace)])
PLANS = [
    # Nothing on a replaced bookie: done.
    (ledger([(0, "abc")]), {"x"}, set(), 0, Outcome.DONE, []),
    # A closed ledger: every fragment with the lost bookie, at once.
    (
        ledger([(0, "abc"), (4, "xbd")]),
        {"a", "x"},
        set(),
        0,
        Outcome.COPY,
        [(0, 0, "a", True), (4, 0, "x", True)],
    ),
    # Holes on a live bookie: refilled in place.
    (ledger([(0, "abc")]), set(), {(0, "b")}, 0, Outcome.COPY, [(0, 1, "b", False)]),
    # An open ledger: its closed fragments at once, the open one is left alone.
    (
        ledger([(0, "abc"), (4, "abd")], state=OPEN, last=-1),
        {"a"},
        set(),
        0,
        Outcome.COPY,
        [(0, 0, "a", True)],
    ),
    # ... then the open fragment waits for its writer during the grace period,
    (ledger([(0, "abd")], state=OPEN, last=-1), {"a"}, set(), GRACE - 1, Outcome.WAIT, []),
    # ... and after it, the ledger is fenced and closed first.
    (ledger([(0, "abd")], state=OPEN, last=-1), {"a"}, set(), GRACE, Outcome.FENCE, []),
    # A ledger another owner is recovering is treated the same way.
    (ledger([(0, "abd")], state=IN_RECOVERY, last=-1), {"d"}, set(), GRACE, Outcome.FENCE, []),
    # Holes are never looked for in an open fragment.
    (ledger([(0, "abd")], state=OPEN, last=-1), set(), {(0, "b")}, GRACE, Outcome.DONE, []),
]


@pytest.mark.parametrize(("md", "replaced", "holes", "age", "outcome", "repairs"), PLANS)
def test_plan_ledger(md, replaced, holes, age, outcome, repairs):
    plan = plan_ledger(md, replaced, holes, age, GRACE)
    assert plan.outcome is outcome
    assert [(r.fragment.first, r.index, r.bookie, r.replace) for r in plan.repairs] == repairs


def test_a_plan_is_done_once_the_metadata_no_longer_names_the_bookie():
    md = ledger([(0, "abc")])
    assert plan_ledger(md, {"a"}, set(), 0, GRACE).outcome is Outcome.COPY
    md.ensembles[0][1][0] = "d"  # what the worker's compare-and-set does
    assert plan_ledger(md, {"a"}, set(), 0, GRACE).outcome is Outcome.DONE
    assert references(md, {"a", "d"}) == {"d"}


@pytest.mark.parametrize(
    ("ensemble", "writable", "excluded", "local", "expected"),
    [
        ("abc", "abcd", "a", "d", "d"),  # the local bookie when it qualifies
        ("abc", "abcde", "a", "a", "de"),  # not the local one when it is being replaced
        ("abc", "abc", "a", "d", None),  # everyone writable is in the ensemble
        ("abc", "abcd", "ad", "z", None),  # d is itself being retired
        ("abc", "abcde", "a", "b", "de"),  # local is in the ensemble: one of the others
    ],
)
def test_pick_target(ensemble, writable, excluded, local, expected):
    got = pick_target(ensemble, writable, excluded, local, random.Random(1))
    assert got in expected if expected else got is None


def test_reads_prefer_replicas_that_are_not_being_replaced():
    assert read_sources(["a", "b", "c"], "z", {"a"}) == ["b", "c", "a"]
    assert read_sources(["a", "b"], "b", set()) == ["a"]  # a hole: not the bookie itself


def test_a_bookie_is_lost_only_after_the_delay_without_a_break():
    lost = LostBookies(delay_ms=1000)
    steps = [
        # (known, available, now) -> lost
        ("abc", "abc", 0, ""),
        ("abc", "ab", 100, ""),
        ("abc", "ab", 1099, ""),
        ("abc", "ab", 1100, "c"),
        ("abc", "abc", 1200, ""),  # came back: the clock restarts
        ("abc", "ab", 1300, ""),
        ("abc", "ab", 2300, "c"),
        ("ab", "ab", 2400, ""),  # forgotten (cookie deleted)
    ]
    for known, available, now, expected in steps:
        lost.observe(set(known), set(available), now)
        assert lost.lost(now) == frozenset(expected), (known, available, now)


@pytest.mark.parametrize(
    ("action", "bookie", "available", "needed", "force", "refused_with"),
    [
        (Retire.DECOMMISSION, "c", {"a": False, "b": False, "c": False}, (2, 5), False, None),
        (
            Retire.DECOMMISSION,
            "c",
            {"a": False, "c": False},
            (2, 5),
            False,
            "would leave 1 writable bookie(s) (a) to hold its replicas, but ledger 5",
        ),
        (Retire.DECOMMISSION, "a", {"a": False}, (1, 5), False, "the last writable bookie"),
        (
            Retire.DECOMMISSION,
            "a",
            {"a": False, "b": True},
            (0, -1),
            False,
            "the last writable bookie",
        ),
        (Retire.RECOVER, "c", {"a": False, "b": False}, (2, 5), False, None),  # c is gone
        (Retire.RECOVER, "c", {"a": False, "b": False, "c": False}, (2, 5), False, "--force"),
        (Retire.RECOVER, "c", {"a": False, "b": False, "c": False}, (2, 5), True, None),
    ],
)
def test_retire_refusal(action, bookie, available, needed, force, refused_with):
    why = retire_refusal(action, bookie, available, needed, force)
    if refused_with is None:
        assert why is None
    else:
        assert why is not None and refused_with in why


@pytest.mark.parametrize(
    ("action", "registered", "ledgers", "cleanup", "state"),
    [
        (Retire.DECOMMISSION, True, 3, Cleanup.KEEP, "decommissioning"),
        (Retire.DECOMMISSION, True, 0, Cleanup.KEEP, "decommissioned"),  # until it stops
        (Retire.DECOMMISSION, False, 0, Cleanup.FORGET, "decommissioned"),
        (Retire.RECOVER, False, 2, Cleanup.KEEP, "recovering"),
        (Retire.RECOVER, False, 0, Cleanup.FORGET, "recovering"),
        (Retire.RECOVER, True, 0, Cleanup.UNMARK, "recovering"),  # recover --force
    ],
)
def test_retirement_ends_when_no_ledger_names_the_bookie(
    action, registered, ledgers, cleanup, state
):
    assert retirement_cleanup(action, registered, ledgers) is cleanup
    assert bookie_state(registered, False, action, ledgers) == state


def test_states_of_bookies_nobody_retires():
    assert bookie_state(True, False, None, 4) == "available"
    assert bookie_state(True, True, None, 4) == "read-only"
    assert bookie_state(False, False, None, 4) == "lost"
