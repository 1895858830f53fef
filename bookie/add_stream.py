"""The answering side of an add stream (``AddEntries``, ``AddBatches``).

Requests are taken as they arrive, each turned at once into the future of
its answer (:meth:`BookieService._add` checks it and hands it to the group
commit); at most ``max_pending`` wait for their answer, past that the
stream is not read (gRPC flow control pushes back on the writer). Answers
go back in request order, every answer already known in one group, so a
stream whose requests are committed together is answered in one message.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

from protos import bookie_pb2
from protos.add_request import AddRequestView

Add = Callable[[AddRequestView], "asyncio.Future[bookie_pb2.AddResponse]"]


async def answers_in_order(
    add: Add, requests: AsyncIterator[list[AddRequestView]], max_pending: int
) -> AsyncIterator[list[bookie_pb2.AddResponse]]:
    """The answers to ``requests`` (lists of requests), in order: each time
    every answer already known (at least one)."""
    pending: asyncio.Queue = asyncio.Queue(maxsize=max_pending)

    async def read_requests() -> None:
        try:
            async for batch in requests:
                for req in batch:
                    await pending.put(add(req))
        finally:
            await pending.put(None)

    reader = asyncio.create_task(read_requests())
    try:
        async for answers in _in_order(pending):
            yield answers
    finally:
        reader.cancel()


async def _in_order(pending: asyncio.Queue) -> AsyncIterator[list[bookie_pb2.AddResponse]]:
    held: asyncio.Future | None = None
    while True:
        fut = held if held is not None else await pending.get()
        held = None
        if fut is None:
            return
        answers = [await fut]
        while not pending.empty():
            nxt = pending.get_nowait()
            if nxt is None:
                yield answers
                return
            if not nxt.done():
                held = nxt
                break
            answers.append(nxt.result())
        yield answers


async def one_each(requests: AsyncIterator[AddRequestView]) -> AsyncIterator[list[AddRequestView]]:
    """``AddEntries``' requests in the shape of ``AddBatches``'."""
    async for req in requests:
        yield [req]
