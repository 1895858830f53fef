"""bookie/add_stream.py: answers go back in request order, and every answer
already known travels in one group (one gRPC message on AddBatches)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from bookie.add_stream import answers_in_order
from protos import bookie_pb2
from protos.add_request import AddRequestView

# Each case: request batches as they arrive (request ids), which requests are
# stored before the answering starts, and the groups of answers expected.
# Requests not stored up front are stored later one at a time, in the order
# given by "later".
CASES = [
    # id, batches, stored up front, later, expected groups
    ("all-ready-one-group", [[1, 2, 3]], {1, 2, 3}, [], [[1, 2, 3]]),
    ("two-batches-all-ready", [[1, 2], [3]], {1, 2, 3}, [], [[1, 2, 3]]),
    ("a-gap-splits-the-group", [[1, 2, 3, 4]], {1, 2, 4}, [3], [[1, 2], [3, 4]]),
    ("out-of-order-stored-in-order-answered", [[1, 2, 3]], set(), [3, 2, 1], [[1, 2, 3]]),
    ("one-at-a-time", [[1], [2], [3]], set(), [1, 2, 3], [[1], [2], [3]]),
    ("nothing", [], set(), [], []),
]


class _Watched(asyncio.Future):
    """A future that knows whether a task waits on it (a task awaiting a
    future registers a done callback)."""

    awaited = False

    def add_done_callback(self, fn, *, context=None):  # type: ignore[no-untyped-def,override]
        self.awaited = True
        super().add_done_callback(fn, context=context)


async def _until(condition) -> None:  # type: ignore[no-untyped-def]
    """Give the other tasks turns until ``condition()`` (the test's
    wait_for is the deadline)."""
    while not condition():
        await asyncio.sleep(0)


async def _store_later(futures: dict[int, _Watched], later: list[int]) -> None:
    def answering_waits() -> bool:
        return any(f.awaited and not f.done() for f in futures.values())

    for i in later:
        # Stored once it was taken and the answering side waits on an answer.
        await _until(lambda i=i: i in futures and answering_waits())
        futures[i].set_result(bookie_pb2.AddResponse(request_id=i))


@pytest.mark.parametrize(
    "batches, ready, later, groups",
    [pytest.param(b, r, lt, g, id=i) for i, b, r, lt, g in CASES],
)
def test_answers_keep_request_order_and_go_together_when_ready(batches, ready, later, groups):
    async def main() -> list[list[int]]:
        futures: dict[int, _Watched] = {}

        def add(req: AddRequestView) -> asyncio.Future:
            fut = futures[req.request_id] = _Watched()
            if req.request_id in ready:
                fut.set_result(bookie_pb2.AddResponse(request_id=req.request_id))
            return fut

        async def requests() -> AsyncIterator[list[AddRequestView]]:
            for batch in batches:
                yield [AddRequestView(i, 1, b"", False, memoryview(b"x")) for i in batch]

        storing = asyncio.create_task(_store_later(futures, later))
        got = []
        async for answers in answers_in_order(add, requests(), max_pending=16):
            got.append([a.request_id for a in answers])
        await storing
        return got

    assert asyncio.run(asyncio.wait_for(main(), 10)) == groups


def test_reading_stops_at_max_pending_unanswered_requests():
    async def main() -> int:
        loop = asyncio.get_running_loop()
        taken: list[int] = []

        def add(req: AddRequestView) -> asyncio.Future:
            taken.append(req.request_id)
            return loop.create_future()  # never stored

        async def requests() -> AsyncIterator[list[AddRequestView]]:
            for i in range(10):
                yield [AddRequestView(i, 1, b"", False, memoryview(b"x"))]

        answering = answers_in_order(add, requests(), max_pending=3)
        first = asyncio.ensure_future(anext(answering))
        await _until(lambda: len(taken) >= 5)
        for _ in range(50):  # turns in which reading must not go on (what is tested)
            await asyncio.sleep(0)
        first.cancel()  # the generator's cleanup stops its reader
        await asyncio.gather(first, return_exceptions=True)
        return len(taken)

    # the one being answered, three queued, and one waiting for room: not ten
    assert asyncio.run(main()) == 5
