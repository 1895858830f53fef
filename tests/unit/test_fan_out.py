"""Work on many items, a bounded number at once (broker/fan_out.py): how
many run together, which start, and what a failure stops."""

from __future__ import annotations

import asyncio

import pytest

from broker import fan_out


class Boom(Exception):
    """The failure an item's action raises here."""


def _run(
    n: int, limit: int, failing: set[int]
) -> tuple[int, list[int], list[int], Exception | None]:
    """(most under way at once, items started, items finished, what was raised)."""
    under_way = [0, 0]
    started: list[int] = []
    finished: list[int] = []

    async def action(item: int) -> None:
        started.append(item)
        under_way[0] += 1
        under_way[1] = max(under_way[1], under_way[0])
        try:
            await asyncio.sleep(0)
            if item in failing:
                raise Boom(item)
            await asyncio.sleep(0)
            finished.append(item)
        finally:
            under_way[0] -= 1

    async def run() -> Exception | None:
        try:
            await fan_out.for_each(list(range(n)), limit, action)
        except Boom as exc:
            return exc
        return None

    raised = asyncio.run(run())
    return under_way[1], started, finished, raised


# (items, limit, failing items) -> (most at once, started, finished, failure raised)
@pytest.mark.parametrize(
    ("n", "limit", "failing", "most", "started", "finished", "raised"),
    [
        (10, 3, set(), 3, list(range(10)), list(range(10)), None),
        (2, 64, set(), 2, [0, 1], [0, 1], None),  # no more workers than items
        (0, 4, set(), 0, [], [], None),
        (5, 1, set(), 1, list(range(5)), list(range(5)), None),  # one by one, in order
        # Item 1 fails: nothing further starts; 0 and 2, under way, finish.
        (10, 3, {1}, 3, [0, 1, 2], [0, 2], 1),
        (10, 3, {1, 2}, 3, [0, 1, 2], [0], 1),  # the first failure is raised
        (3, 1, {0}, 1, [0], [], 0),
    ],
)
def test_items_run_a_bounded_number_at_once_and_a_failure_stops_new_ones(
    n, limit, failing, most, started, finished, raised
):
    got_most, got_started, got_finished, got_raised = _run(n, limit, failing)
    assert (got_most, got_started, sorted(got_finished)) == (most, started, finished)
    assert (got_raised.args[0] if got_raised else None) == raised


def test_a_limit_below_one_is_refused():
    with pytest.raises(ValueError, match="limit is 0; it must be at least 1"):
        asyncio.run(fan_out.for_each([1], 0, lambda item: asyncio.sleep(0)))
