"""Many producer streams on one gRPC stream: the ``ProduceMany`` RPC.

Each frame names a producer stream by id; the requests of one id are
exactly a ``Produce`` stream's, served by the same
:class:`~broker.producer_stream.ProducerStream` (a task per stream), except
that a stream's producer is authorized before it is created, not only by
the gRPC call's first message. The answers of every stream that are ready
together go back in one message, so a client with many producers on a
broker (a partitioned producer) pays for one gRPC message per turn, not one
per producer.

Back-pressure: a stream reads at most ``INBOX`` requests ahead of its
producer; while one is full the connection is not read, which pushes back
on the client through gRPC flow control (as a Pulsar connection stops
reading while one of its producers is over its pending limit). Streams of
one connection are bounded by ``max_producer_streams_per_connection``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

from broker.producer_stream import ProducerStream
from protos import broker_pb2, common_pb2
from protos.errors import error

log = logging.getLogger(__name__)

INBOX = 4  # requests of one stream read ahead of its producer


class _Outbox:
    """Answer frames gathered until the writer takes them all at once."""

    def __init__(self) -> None:
        self.frames: list[broker_pb2.ProducerResponseFrame] = []
        self.closed = False
        self._ready = asyncio.Event()

    def put(self, frame: broker_pb2.ProducerResponseFrame) -> None:
        self.frames.append(frame)
        self._ready.set()

    def close(self) -> None:
        self.closed = True
        self._ready.set()

    async def take(self) -> list[broker_pb2.ProducerResponseFrame]:
        """Every frame gathered (waiting for one); [] once closed and empty."""
        while not self.frames and not self.closed:
            self._ready.clear()
            await self._ready.wait()
        frames, self.frames = self.frames, []
        return frames


class _Connection:
    """The streams of one ``ProduceMany`` call."""

    def __init__(self, producers: ProducerStream, max_streams: int) -> None:
        self.producers = producers
        self.max_streams = max_streams
        self.outbox = _Outbox()
        self.inboxes: dict[int, asyncio.Queue] = {}
        self.tasks: set[asyncio.Task] = set()

    async def read(self, requests: AsyncIterator[broker_pb2.ProducerRequestFrames]) -> None:
        try:
            async for message in requests:
                for frame in message.frames:
                    await self._route(frame)
        except Exception as exc:
            log.debug("producer connection ended: %s", exc)
        # The client ended the call: every stream ends as if half-closed.
        for inbox in list(self.inboxes.values()):
            await inbox.put(None)
        while self.tasks:
            await asyncio.gather(*self.tasks, return_exceptions=True)
        self.outbox.close()

    async def _route(self, frame: broker_pb2.ProducerRequestFrame) -> None:
        sid = frame.id
        inbox = self.inboxes.get(sid)
        if inbox is None:
            if not frame.HasField("request"):
                return  # the end of a stream already over
            if len(self.inboxes) >= self.max_streams:
                self._refuse(sid)
                return
            inbox = self.inboxes[sid] = asyncio.Queue(INBOX)
            task = asyncio.create_task(self._serve(sid, inbox))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
        if frame.HasField("request"):
            await inbox.put(frame.request)
        if frame.end:
            await inbox.put(None)

    def _refuse(self, sid: int) -> None:
        refusal = error(
            common_pb2.TOO_MANY_REQUESTS,
            f"{self.max_streams} producer streams are open on this connection "
            "(max_producer_streams_per_connection)",
        )
        self.outbox.put(
            broker_pb2.ProducerResponseFrame(
                id=sid, response=broker_pb2.ProducerResponse(error=refusal), end=True
            )
        )

    async def _serve(self, sid: int, inbox: asyncio.Queue) -> None:
        async def requests() -> AsyncIterator[broker_pb2.ProducerRequest]:
            while (req := await inbox.get()) is not None:
                yield req

        try:
            async for resp in self.producers.run(requests(), authorize_first=True):
                self.outbox.put(broker_pb2.ProducerResponseFrame(id=sid, response=resp))
        finally:
            if self.inboxes.get(sid) is inbox:
                del self.inboxes[sid]
            while not inbox.empty():  # frees a reader waiting to put here
                inbox.get_nowait()
            self.outbox.put(broker_pb2.ProducerResponseFrame(id=sid, end=True))


class ProducerMux:
    def __init__(self, producers: ProducerStream, max_streams: int) -> None:
        self.producers = producers
        self.max_streams = max_streams

    async def run(
        self, requests: AsyncIterator[broker_pb2.ProducerRequestFrames]
    ) -> AsyncIterator[broker_pb2.ProducerResponseFrames]:
        conn = _Connection(self.producers, self.max_streams)
        reader = asyncio.create_task(conn.read(requests))
        try:
            while frames := await conn.outbox.take():
                yield broker_pb2.ProducerResponseFrames(frames=frames)
        finally:
            reader.cancel()
            for task in list(conn.tasks):
                task.cancel()
