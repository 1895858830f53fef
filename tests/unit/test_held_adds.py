import asyncio

import pytest

from broker.held_adds import HeldAdds, PendingAdd, split_held


def held(entry_ids: list[int | None], loop: asyncio.AbstractEventLoop) -> list[PendingAdd]:
    """Held adds in the order they failed; the payload names the add."""
    return [
        PendingAdd(e, f"add-{i}".encode(), 1, 0.0, loop.create_future(), None)
        for i, e in enumerate(entry_ids)
    ]


@pytest.mark.parametrize(
    ("entry_ids", "last_entry_id", "stored", "again"),
    [
        # Recovery found nothing past the LAC: every held add goes to the next ledger.
        ([5, 6, 7], 4, [], [5, 6, 7]),
        # The bookies had stored 5 and 6: those are settled, 7 goes on.
        ([5, 6, 7], 6, [5, 6], [7]),
        # All of them were stored.
        ([5, 6, 7], 7, [5, 6, 7], []),
        # Failures reach the ledger in callback order, not always id order.
        ([7, 5, 6], 4, [], [5, 6, 7]),
        # Adds that came after the writer had failed have no id: last, as they came.
        ([5, None, 6, None], 4, [], [5, 6, None, None]),
        ([5, None, 6, None], 5, [5], [6, None, None]),
        # An empty ledger (closed at -1).
        ([0, 1], -1, [], [0, 1]),
        ([], 3, [], []),
    ],
)
def test_held_adds_are_settled_where_recovery_closed_the_failed_ledger(
    entry_ids, last_entry_id, stored, again
):
    loop = asyncio.new_event_loop()
    try:
        adds = held(entry_ids, loop)
        got_stored, got_again = split_held(adds, last_entry_id)
        assert [a.entry_id for a in got_stored] == stored
        assert [a.entry_id for a in got_again] == again
        # Every add is settled exactly once.
        assert sorted(map(id, got_stored + got_again)) == sorted(map(id, adds))
    finally:
        loop.close()


def test_adds_without_an_id_keep_their_order():
    loop = asyncio.new_event_loop()
    try:
        adds = held([None, 3, None, None], loop)
        _, again = split_held(adds, 2)
        assert [a.data for a in again] == [b"add-1", b"add-0", b"add-2", b"add-3"]
    finally:
        loop.close()


def test_held_adds_fail_once_the_hold_runs_out_and_nothing_more_is_held():
    async def main() -> None:
        outcomes: list[bool] = []
        hold = HeldAdds(0.05, lambda: RuntimeError("too late"), "t")
        loop = asyncio.get_running_loop()
        add = PendingAdd(1, b"x", 1, 0.0, loop.create_future(), outcomes.append)
        hold.adds.append(add)
        with pytest.raises(RuntimeError, match="too late"):
            await asyncio.wait_for(add.out, 10)
        assert outcomes == [False] and not hold.open and hold.adds == []

    asyncio.run(main())


def test_taken_adds_are_not_failed_by_the_timer():
    async def main() -> None:
        hold = HeldAdds(0.01, lambda: RuntimeError("too late"), "t")
        add = PendingAdd(1, b"x", 1, 0.0, asyncio.get_running_loop().create_future(), None)
        hold.adds.append(add)
        assert hold.take() == [add] and not hold.open
        assert hold._timer.cancelled()  # the hold's end fails nothing
        assert not add.out.done()

    asyncio.run(main())
