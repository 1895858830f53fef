import asyncio
from collections.abc import Callable

import pytest

from broker.held_adds import HeldAdds, PendingAdd, answer_stored, split_held


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


def test_adds_found_stored_are_not_failed_by_the_timer_and_answered_with_their_place():
    async def main() -> None:
        outcomes: list[tuple[bytes, bool]] = []
        hold = HeldAdds(0.05, lambda: RuntimeError("too late"), "t")
        loop = asyncio.get_running_loop()
        for entry_id in (5, 6, 7):
            data = f"add-{entry_id}".encode()
            hold.adds.append(
                PendingAdd(entry_id, data, 1, 0.0, loop.create_future(), _told(outcomes, data))
            )
        stored = hold.take_stored(6)  # recovery closed the failed ledger at 6
        assert [a.entry_id for a in stored] == [5, 6] and hold.open
        late = hold.adds[0]
        with pytest.raises(RuntimeError, match="too late"):  # the hold ends meanwhile
            await asyncio.wait_for(late.out, 10)
        assert not any(a.out.done() for a in stored)
        answer_stored(3, stored)
        assert [a.out.result() for a in stored] == [(3, 5), (3, 6)]
        assert outcomes == [(b"add-7", False), (b"add-5", True), (b"add-6", True)]

    asyncio.run(main())


def _told(outcomes: list[tuple[bytes, bool]], data: bytes) -> Callable[[bool], None]:
    return lambda ok: outcomes.append((data, ok))
