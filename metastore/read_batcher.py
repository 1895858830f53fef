"""Reads made together go to the metastore as one call.

Theory of operation. Loading a topic, a broker reads a few independent
records at once (``asyncio.gather``): the partitioned-topic record, the
topic's overrides, its ledger list, its schemas. Each was its own gRPC call,
and for such small reads the call is most of the cost, on both sides. Here
every get and list asked for in one event-loop turn waits until the end of
that turn (``loop.call_soon``), and then they leave together:

- a lone read goes as the plain ``Get`` or ``List`` it always was;
- two or more go as one ``Read`` (:mod:`metastore.batch_read`), at most
  ``max_items`` to a call (further calls take the rest at once);
- a ``Read`` answer may stop short of the items asked for (the metastore
  bounds its size): the rest are asked for again, in the same way, until
  all are answered (each answer takes at least one item);
- a metastore that does not know ``Read`` (an older version, while a
  cluster is being upgraded) answers UNIMPLEMENTED: from then on every read
  goes as its own call, as before.

Each caller gets the answer its own call would have given (errors
included); a ``Read`` that fails (after the client's retries, within one
call's timeout) fails every read it carried with that error. A metastore
whose ``max_reads_per_call`` is below ``max_items`` refuses the ``Read``:
those reads go one by one, and the next calls carry half as many. The
pending reads are those of the current loop turn only (the client is used
on one event loop), and each ``Read`` carries at most ``max_items`` of
them. Once the client is closed, reads pending, in flight or new fail
with ``MetastoreUnavailableError``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import grpc

from protos import common_pb2, metastore_pb2

# The client's unary call with its retries (MetastoreClient._call).
Call = Callable[[str, Any], Awaitable[Any]]
_Item = tuple[metastore_pb2.ReadItem, "asyncio.Future[Any]"]


class ReadBatcher:
    def __init__(self, call: Call, max_items: int, unavailable: Callable[[str], Exception]) -> None:
        self._call = call
        self.max_items = max_items
        self.supported = max_items > 1  # else: every read on its own
        # What a read fails with once the client closed (MetastoreUnavailableError).
        self._unavailable = unavailable
        self._closed: Exception | None = None
        self._pending: list[_Item] = []
        self._armed_on: asyncio.AbstractEventLoop | None = None  # a flush is due there
        self._sending: set[asyncio.Task[None]] = set()

    async def get(self, key: str) -> metastore_pb2.GetResponse:
        if not self.supported:
            return await self._call("Get", metastore_pb2.GetRequest(key=key))  # type: ignore[no-any-return]
        result: metastore_pb2.ReadResult = await self._enqueue(metastore_pb2.ReadItem(get=key))
        return result.get

    async def listing(self, request: metastore_pb2.ListRequest) -> metastore_pb2.ListResponse:
        if not self.supported:
            return await self._call("List", request)  # type: ignore[no-any-return]
        result: metastore_pb2.ReadResult = await self._enqueue(metastore_pb2.ReadItem(list=request))
        return result.list

    def _enqueue(self, item: metastore_pb2.ReadItem) -> asyncio.Future[Any]:
        loop = asyncio.get_running_loop()
        if self._armed_on is not None and self._armed_on is not loop:
            # (the loop those reads were made on stopped before their turn ended)
            stale, self._pending = self._pending, []
            self._give_up(stale)
            self._armed_on = None
        future: asyncio.Future[Any] = loop.create_future()
        if self._closed is not None:
            future.set_exception(self._closed)
            return future
        self._pending.append((item, future))
        if self._armed_on is None:
            self._armed_on = loop
            loop.call_soon(self._flush)
        return future

    def _flush(self) -> None:
        self._armed_on = None
        pending, self._pending = self._pending, []
        for i in range(0, len(pending), self.max_items):
            self._start(pending[i : i + self.max_items])

    def _start(self, batch: list[_Item]) -> None:
        task = asyncio.get_running_loop().create_task(self._send(batch))
        self._sending.add(task)
        task.add_done_callback(lambda t: self._done(t, batch))

    def _done(self, task: asyncio.Task[None], batch: list[_Item]) -> None:
        self._sending.discard(task)
        self._give_up(batch)  # (a task cancelled before it ran answered none)

    def _give_up(self, batch: list[_Item]) -> None:
        for _, future in batch:
            if future.done():
                continue
            if self._closed is not None:
                future.set_exception(self._closed)
            else:
                future.cancel()

    async def _send(self, batch: list[_Item]) -> None:
        try:
            while batch:
                batch = [(item, f) for item, f in batch if not f.done()]  # (callers gone)
                if not batch:
                    return
                if len(batch) == 1 or not self.supported:
                    await asyncio.gather(*(self._send_one(item, f) for item, f in batch))
                    return
                batch = await self._send_read(batch)
        except asyncio.CancelledError:
            self._give_up(batch)
            raise
        except Exception as exc:  # every read it carried fails as its own call would
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)

    async def _send_read(self, batch: list[_Item]) -> list[_Item]:
        """One Read; the items it left unanswered."""
        try:
            resp = await self._call("Read", metastore_pb2.ReadRequest(items=[i for i, _ in batch]))
        except grpc.aio.AioRpcError as exc:
            if exc.code() != grpc.StatusCode.UNIMPLEMENTED:
                raise
            self.supported = False  # an older metastore: each read on its own from now on
            return batch
        if resp.error.code != common_pb2.OK:
            # Too many items for this metastore's max_reads_per_call: fewer
            # from now on (down to none), and these each on its own.
            self.max_items = max(1, len(batch) // 2)
            self.supported = self.max_items > 1
            await asyncio.gather(*(self._send_one(item, f) for item, f in batch))
            return []
        if not resp.results:
            raise self._unavailable("the metastore answered a Read with no result")
        for (_, future), result in zip(batch, resp.results, strict=False):
            if not future.done():
                future.set_result(result)
        return batch[len(resp.results) :]

    async def _send_one(self, item: metastore_pb2.ReadItem, future: asyncio.Future[Any]) -> None:
        try:
            if item.WhichOneof("what") == "list":
                result = metastore_pb2.ReadResult(list=await self._call("List", item.list))
            else:
                get = metastore_pb2.GetRequest(key=item.get)
                result = metastore_pb2.ReadResult(get=await self._call("Get", get))
        except Exception as exc:
            if not future.done():
                future.set_exception(exc)
            return
        if not future.done():
            future.set_result(result)

    async def close(self) -> None:
        """Reads pending or in flight fail as unavailable; later ones too."""
        self._closed = self._unavailable("the metastore client is closed")
        pending, self._pending = self._pending, []
        self._give_up(pending)
        tasks = list(self._sending)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
