"""Cursor acknowledgement semantics, table-driven (one ledger list, many steps)."""

import pytest

from broker.cursor import CursorState, PositionRangeSet

# Ledgers 1 (entries 0..4) and 3 (entries 0..); ledger 2 was deleted.
LAST = {1: 4}


def next_position(pos):
    ledger, entry = pos
    if ledger in LAST and entry + 1 > LAST[ledger]:
        return (3, 0)
    return (ledger, entry + 1)


@pytest.mark.parametrize(
    ("steps", "mark_delete", "ranges"),
    [
        ([("ind", (1, 0))], (1, 0), []),
        ([("ind", (1, 2))], (1, -1), [[1, 2, 2]]),
        ([("ind", (1, 2)), ("ind", (1, 1))], (1, -1), [[1, 1, 2]]),
        ([("ind", (1, 2)), ("ind", (1, 1)), ("ind", (1, 0))], (1, 2), []),
        ([("ind", (1, 4)), ("ind", (3, 0)), ("ind", (1, 3))], (1, -1), [[1, 3, 4], [3, 0, 0]]),
        ([("ind", (1, 4)), ("ind", (3, 0)), ("cum", (1, 3))], (3, 0), []),
        ([("ind", (3, 5)), ("cum", (1, 1))], (1, 1), [[3, 5, 5]]),
        ([("cum", (1, 3)), ("cum", (1, 1))], (1, 3), []),
        ([("ind", (1, 1)), ("ind", (1, 1))], (1, -1), [[1, 1, 1]]),
        ([("ind", (1, 3)), ("ind", (1, 5)), ("ind", (1, 4))], (1, -1), [[1, 3, 5]]),
    ],
)
def test_ack_steps(steps, mark_delete, ranges):
    state = CursorState((1, -1))
    for kind, pos in steps:
        if kind == "ind":
            state.ack_individual(pos, next_position)
        else:
            state.ack_cumulative(pos, next_position)
    assert state.mark_delete_position == mark_delete
    assert state.individually_deleted.to_list(100) == ranges


def test_is_acked_and_persistence_round_trip():
    state = CursorState((1, 0))
    state.ack_individual((1, 3), next_position)
    assert state.is_acked((1, 0)) and state.is_acked((1, 3))
    assert not state.is_acked((1, 1)) and not state.is_acked((3, 0))
    back = CursorState.from_json(state.to_json(100))
    assert back.mark_delete_position == (1, 0)
    assert back.is_acked((1, 3)) and not back.is_acked((1, 2))


def test_persisted_ranges_are_bounded():
    state = CursorState((1, -1))
    for e in range(2, 40, 2):
        state.ack_individual((3, e), next_position)
    assert len(state.individually_deleted) == 19
    assert len(CursorState.from_json(state.to_json(5)).individually_deleted) == 5


def test_range_set_merges_only_within_a_ledger():
    rs = PositionRangeSet()
    rs.add((1, 4))
    rs.add((2, 0))
    assert len(rs) == 2
    rs.add((1, 3))
    rs.add((1, 5))
    assert rs.to_list(10) == [[1, 3, 5], [2, 0, 0]]
    rs.remove_through((1, 4))
    assert rs.to_list(10) == [[1, 5, 5], [2, 0, 0]]
    assert (1, 5) in rs and (1, 4) not in rs and (2, 1) not in rs


def test_batch_index_acks_complete_an_entry_and_survive_json():
    from broker.cursor import CursorState

    def nxt(p):  # type: ignore[no-untyped-def]
        return (p[0], p[1] + 1)

    state = CursorState((1, -1))
    assert state.ack_batch_indexes((1, 0), 4, [0, 2], nxt)
    assert not state.ack_batch_indexes((1, 0), 4, [2], nxt)  # nothing new
    assert state.acked_batch_mask((1, 0)) == 0b0101 and not state.is_acked((1, 0))
    state.ack_batch_indexes((1, 1), 3, [1], nxt)
    again = CursorState.from_json(state.to_json(100))
    assert again.batch_acked == {(1, 0): 0b0101, (1, 1): 0b010}
    assert again.ack_batch_indexes((1, 0), 4, [1, 3, 9], nxt)  # 9 is out of the batch: ignored
    assert again.is_acked((1, 0)) and again.mark_delete_position == (1, 0)
    assert (1, 0) not in again.batch_acked
    again.ack_cumulative((1, 1), nxt)
    assert again.batch_acked == {}
