"""Many producer streams on one gRPC stream: the ``ProduceMany`` RPC.

Each frame names a producer stream by id; the requests of one id are
exactly a ``Produce`` stream's, served by the same
:class:`~broker.producer_stream.ProducerStream` (a task per stream), except
that a stream's producer is authorized before it is created (the gRPC
guard admits the call on its role alone). The answers of every stream that
are ready together go back in one message (of at most ``MESSAGE_BYTES``),
so a client with many producers on a broker (a partitioned producer) pays
for one gRPC message per turn, not one per producer.

No stream can stall the others: each stream's requests wait in a queue of
its own while its producer is busy (a held or throttled publish, a slow
ledger), so the connection keeps being read. What one connection holds is
bounded by ``max_pending_publish_requests_per_connection``: requests read
but not yet taken by their producers, and answers not yet sent. Past the
first the connection is not read (gRPC flow control pushes back on the
client, as a Pulsar connection stops reading past its pending publish
requests); past the second the producers wait to answer. Streams of one
connection are bounded by ``max_producer_streams_per_connection``; a frame
of a stream already over (ids are never reused) is dropped.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import AsyncIterator

from broker.producer_stream import ProducerStream
from protos import broker_pb2, common_pb2
from protos.errors import error
from protos.frames import encode_frame

log = logging.getLogger(__name__)

MESSAGE_BYTES = 4 << 20  # answers per gRPC message (the limit is 16 MiB)


class _Outbox:
    """Answer frames (encoded: protos/frames.py) gathered until the writer
    takes them, at most ``limit``."""

    def __init__(self, limit: int) -> None:
        self.frames: collections.deque[bytes] = collections.deque()
        self.limit = limit
        self.closed = False
        self._ready = asyncio.Event()
        self._room = asyncio.Event()

    async def put(self, frame: bytes) -> None:
        while len(self.frames) >= self.limit and not self.closed:
            self._room.clear()
            await self._room.wait()
        self.put_now(frame)

    def put_now(self, frame: bytes) -> None:
        self.frames.append(frame)
        self._ready.set()

    def close(self) -> None:
        self.closed = True
        self._ready.set()

    async def take(self) -> list[bytes]:
        """The frames gathered, up to MESSAGE_BYTES (waiting for one); []
        once closed and empty."""
        while not self.frames and not self.closed:
            self._ready.clear()
            await self._ready.wait()
        out: list[bytes] = []
        size = 0
        while self.frames:
            n = len(self.frames[0])
            if out and size + n > MESSAGE_BYTES:
                break
            out.append(self.frames.popleft())
            size += n
        self._room.set()
        return out


class _Connection:
    """The streams of one ``ProduceMany`` call."""

    def __init__(self, producers: ProducerStream, max_streams: int, max_pending: int) -> None:
        self.producers = producers
        self.max_streams = max_streams
        self.max_pending = max_pending
        self.outbox = _Outbox(max_pending)
        self.inboxes: dict[int, asyncio.Queue] = {}
        self.tasks: set[asyncio.Task] = set()
        self.highest_id = 0  # ids are never reused: lower ones not open are over
        self.read_ahead = 0  # requests read, not yet taken by their producers
        self._taken = asyncio.Event()

    async def read(self, requests: AsyncIterator[broker_pb2.ProducerRequestFrames]) -> None:
        try:
            async for message in requests:
                for frame in message.frames:
                    self._route(frame)
                while self.read_ahead >= self.max_pending:
                    self._taken.clear()
                    await self._taken.wait()
        except Exception as exc:
            log.debug("producer connection ended: %s", exc)
        # The client ended the call: every stream ends as if half-closed.
        for inbox in list(self.inboxes.values()):
            inbox.put_nowait(None)
        while self.tasks:
            await asyncio.gather(*self.tasks, return_exceptions=True)
        self.outbox.close()

    def _route(self, frame: broker_pb2.ProducerRequestFrame) -> None:
        sid = frame.id
        inbox = self.inboxes.get(sid)
        if inbox is None:
            if sid <= self.highest_id or not frame.HasField("request"):
                return  # a frame of a stream already over
            self.highest_id = sid
            if len(self.inboxes) >= self.max_streams:
                self._refuse(sid)
                return
            inbox = self.inboxes[sid] = asyncio.Queue()
            task = asyncio.create_task(self._serve(sid, inbox))
            self.tasks.add(task)
            task.add_done_callback(self._done)
        if frame.HasField("request"):
            self.read_ahead += 1
            inbox.put_nowait(frame.request)
        if frame.end:
            inbox.put_nowait(None)

    def _done(self, task: asyncio.Task) -> None:
        self.tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("a producer stream failed", exc_info=task.exception())

    def _refuse(self, sid: int) -> None:
        refusal = error(
            common_pb2.TOO_MANY_REQUESTS,
            f"{self.max_streams} producer streams are open on this connection "
            "(max_producer_streams_per_connection)",
        )
        answer = broker_pb2.ProducerResponse(error=refusal).SerializeToString()
        self.outbox.put_now(encode_frame(sid, answer, end=True))

    async def _serve(self, sid: int, inbox: asyncio.Queue) -> None:
        async def requests() -> AsyncIterator[broker_pb2.ProducerRequest]:
            while (req := await inbox.get()) is not None:
                self._took(1)
                yield req

        try:
            async for resp in self.producers.run(requests(), authorize_first=True):
                await self.outbox.put(encode_frame(sid, resp.SerializeToString()))
        finally:
            if self.inboxes.get(sid) is inbox:
                del self.inboxes[sid]
            left = 0
            while not inbox.empty():
                left += inbox.get_nowait() is not None
            self._took(left)
            self.outbox.put_now(encode_frame(sid, None, end=True))

    def _took(self, n: int) -> None:
        if n:
            self.read_ahead -= n
            self._taken.set()


class ProducerMux:
    def __init__(self, producers: ProducerStream, max_streams: int, max_pending: int) -> None:
        self.producers = producers
        self.max_streams = max_streams
        self.max_pending = max_pending

    async def run(
        self, requests: AsyncIterator[broker_pb2.ProducerRequestFrames]
    ) -> AsyncIterator[bytes]:
        """The serialised ``ProducerResponseFrames`` messages of the call."""
        conn = _Connection(self.producers, self.max_streams, self.max_pending)
        reader = asyncio.create_task(conn.read(requests))
        try:
            while frames := await conn.outbox.take():
                yield b"".join(frames)
        finally:
            reader.cancel()
            for task in list(conn.tasks):
                task.cancel()
