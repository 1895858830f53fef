"""The bundle state machine (broker/bundle_state.py): every (state, event)
pair, a bundle's life as step tables, stale records, and that the running
code writes only records the table makes."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from broker.bundle_state import (
    EVENTS,
    FREE,
    BundleRecord,
    BundleState,
    IllegalBundleTransition,
    is_stale,
    transition,
)

S = BundleState
ROOT = Path(__file__).resolve().parents[2]

# Every pair, written out: the state each event leads to from each state
# (None: illegal). Columns in EVENTS order.
COLUMNS = ("own", "release", "free", "split", "done", "abort", "expire")
TABLE = [
    (S.FREE, S.OWNED, None, None, None, None, None, None),
    (S.OWNED, None, S.RELEASING, None, S.SPLITTING, None, None, S.FREE),
    (S.RELEASING, None, None, S.FREE, None, None, None, S.FREE),
    (S.SPLITTING, None, None, None, None, S.DELETED, S.OWNED, S.FREE),
    (S.DELETED, None, None, None, None, None, None, None),
]


def test_the_table_covers_every_state_and_event():
    assert COLUMNS == EVENTS
    assert [row[0] for row in TABLE] == list(S)


@pytest.mark.parametrize(
    "state,event,expected",
    [(row[0], event, to) for row in TABLE for event, to in zip(COLUMNS, row[1:], strict=True)],
)
def test_every_state_and_event(state, event, expected):
    record = BundleRecord(state, "b1")
    if expected is None:
        with pytest.raises(IllegalBundleTransition, match=event):
            transition(record, event, "b2")
        return
    after = transition(record, event, "b2")
    assert after.state == expected
    if event == "own":
        assert after.broker == "b2"  # the new owner
    elif event == "expire":
        assert after.broker == ""  # its session is gone: no one to remember
    else:
        assert after.broker == "b1"  # a freed record remembers its last owner
    assert BundleRecord.decode(after.encode()) == after


def test_own_needs_the_new_owner():
    with pytest.raises(ValueError):
        transition(FREE, "own")


# A bundle's life: (event, broker) -> (state, broker) after it.
LIFE_STEPS = [
    ("own", "b1", S.OWNED, "b1"),
    ("release", "", S.RELEASING, "b1"),
    ("free", "", S.FREE, "b1"),  # unloaded: placement avoids b1 next
    ("own", "b2", S.OWNED, "b2"),
    ("split", "", S.SPLITTING, "b2"),
    ("abort", "", S.OWNED, "b2"),  # the split transaction failed
    ("split", "", S.SPLITTING, "b2"),
    ("done", "", S.DELETED, "b2"),  # the tombstone of the parent
]

# An owner dies at each step of a move or split: its ephemeral record
# expires with its session and the bundle is free for the next lookup.
CRASH_STEPS = [
    (["own"], S.FREE),
    (["own", "release"], S.FREE),
    (["own", "split"], S.FREE),
    (["own", "split", "abort"], S.FREE),
]


def test_a_bundles_life():
    record = FREE
    for event, broker, state, owner in LIFE_STEPS:
        record = transition(record, event, broker)
        assert (record.state, record.broker) == (state, owner), event
    for event in EVENTS:  # a deleted bundle never comes back
        with pytest.raises(IllegalBundleTransition):
            transition(record, event, "b3")


@pytest.mark.parametrize("events,after", CRASH_STEPS)
def test_a_crash_mid_change_leaves_the_bundle_free(events, after):
    record = FREE
    for event in events:
        record = transition(record, event, "b1")
    assert record.ephemeral  # held by the owner's session only
    assert transition(record, "expire").state == after
    assert not FREE.ephemeral and not BundleRecord(S.DELETED).ephemeral


# (record, its session, my session, my address, take over stale) -> stale?
STALE = [
    (BundleRecord(S.OWNED, "me:1"), 7, 9, "me:1", False, True),  # an earlier run of me
    (BundleRecord(S.OWNED, "me:1"), 9, 9, "me:1", False, False),  # my own session
    (BundleRecord(S.OWNED, "other:2"), 7, 9, "me:1", False, False),  # a live peer
    (BundleRecord(S.OWNED, "other:2"), 7, 9, "me:1", True, True),  # standalone's only broker
    (BundleRecord(S.RELEASING, "me:1"), 7, 9, "me:1", False, True),
    (BundleRecord(S.SPLITTING, "me:1"), 7, 0, "me:1", False, True),
    (BundleRecord(S.FREE, "me:1"), 0, 9, "me:1", True, False),  # persistent: never stale
    (BundleRecord(S.DELETED, "me:1"), 0, 9, "me:1", True, False),
]


@pytest.mark.parametrize("record,session,mine,address,take_over,stale", STALE)
def test_stale_records_are_an_earlier_runs(record, session, mine, address, take_over, stale):
    assert is_stale(record, session, mine, address, take_over) is stale
    if stale:
        assert transition(record, "expire").state == S.FREE


def test_only_the_transition_table_makes_bundle_records():
    """The running code never builds a record itself: every ownership write
    is a record that transition() returned."""
    for path in sorted((ROOT / "broker").glob("*.py")):
        if path.name == "bundle_state.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "BundleRecord":
                raise AssertionError(f"{path.name}:{node.lineno} builds a BundleRecord")
