"""Many producer streams on one gRPC stream: the ``ProduceMany`` RPC.

Each frame names a producer stream by id; the requests of one id are
exactly a ``Produce`` stream's: the producer is created as there
(:meth:`~broker.producer_stream.ProducerStream.create`, in a task of its
own), except that it is authorized first (the gRPC guard admits the call on
its role alone); then its requests go, as they are read, to its
:class:`~broker.send_pipeline.SendPipeline`, whose answers are framed here
as they come. No task stands between reading a request and the topic's
publish, or between a stored entry and its answer in the outbox. The
answers of every stream that are ready together go back in one message (of
at most ``MESSAGE_BYTES``), so a client with many producers on a broker (a
partitioned producer) pays for one gRPC message per turn, not one per
producer.

No stream can stall the others: a stream's requests wait in its pipeline
while its producer is busy (a held or throttled publish, a slow ledger), so
the connection keeps being read. What one connection holds is bounded by
``max_pending_publish_requests_per_connection``: requests read but not yet
taken by their producers, and answers not yet sent. Past either the
connection is not read (gRPC flow control pushes back on the client, as a
Pulsar connection stops reading past its pending publish requests). Streams
of one connection are bounded by ``max_producer_streams_per_connection``; a
frame of a stream already over (ids are never reused) is dropped.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import logging
from collections.abc import AsyncIterator, Callable

from broker.producer_stream import ProducerStream, hand_over, response_of
from broker.send_pipeline import Answer, Ended, SendPipeline
from protos import broker_pb2, common_pb2
from protos.errors import error, error_of
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
        self.on_taken: Callable[[], None] | None = None

    def full(self) -> bool:
        return len(self.frames) >= self.limit

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
        if self.on_taken is not None:
            self.on_taken()
        return out


class _Stream:
    """One producer stream of a connection: its requests wait here while
    the producer is being created, then go to its pipeline."""

    __slots__ = ("client_ended", "early", "pipeline", "sid")

    def __init__(self, sid: int) -> None:
        self.sid = sid
        self.pipeline: SendPipeline | None = None
        self.early: list[broker_pb2.ProducerRequest] = []
        self.client_ended = False


class _Connection:
    """The streams of one ``ProduceMany`` call."""

    def __init__(self, producers: ProducerStream, max_streams: int, max_pending: int) -> None:
        self.producers = producers
        self.max_streams = max_streams
        self.max_pending = max_pending
        self.max_pending_entries = producers.settings.max_pending_publish_entries_per_producer
        self.outbox = _Outbox(max_pending)
        self.streams: dict[int, _Stream] = {}
        self.creating: set[asyncio.Task] = set()
        self.highest_id = 0  # ids are never reused: lower ones not open are over
        self.read_ahead = 0  # requests read, not yet taken by their producers
        self._progress = asyncio.Event()  # requests taken, or answers sent
        self._all_over = asyncio.Event()
        self.outbox.on_taken = self._progress.set

    async def read(self, requests: AsyncIterator[broker_pb2.ProducerRequestFrames]) -> None:
        try:
            async for message in requests:
                for frame in message.frames:
                    self._route(frame)
                while self.read_ahead >= self.max_pending or self.outbox.full():
                    self._progress.clear()
                    await self._progress.wait()
        except Exception as exc:
            log.debug("producer connection ended: %s", exc)
        # The client ended the call: every stream ends as if half-closed.
        for stream in list(self.streams.values()):
            self._client_ended(stream)
        while self.streams or self.creating:
            self._all_over.clear()
            await self._all_over.wait()
        self.outbox.close()

    def abort(self) -> None:
        """The call is gone: every producer leaves."""
        for task in list(self.creating):
            task.cancel()
        for stream in list(self.streams.values()):
            if stream.pipeline is not None:
                stream.pipeline.abort()
        self.streams.clear()

    def _route(self, frame: broker_pb2.ProducerRequestFrame) -> None:
        sid = frame.id
        stream = self.streams.get(sid)
        if stream is None:
            if sid <= self.highest_id or not frame.HasField("request"):
                return  # a frame of a stream already over
            self.highest_id = sid
            if len(self.streams) >= self.max_streams:
                self._refuse(sid)
                return
            stream = self.streams[sid] = _Stream(sid)
            task = asyncio.create_task(self._create(stream, frame.request))
            self.creating.add(task)
            task.add_done_callback(self._created)
        elif frame.HasField("request"):
            self.read_ahead += 1
            if stream.pipeline is None:
                stream.early.append(frame.request)
            elif not hand_over(stream.pipeline, frame.request):
                stream.client_ended = True
        if frame.end:
            self._client_ended(stream)

    def _client_ended(self, stream: _Stream) -> None:
        stream.client_ended = True
        if stream.pipeline is not None:
            stream.pipeline.close()

    async def _create(self, stream: _Stream, first: broker_pb2.ProducerRequest) -> None:
        sid = stream.sid
        created, topic, producer = await self.producers.create(first, authorize_first=True)
        if topic is None or producer is None:
            self.outbox.put_now(encode_frame(sid, created.SerializeToString(), end=True))
            self._over(stream)
            return
        if self.streams.get(sid) is not stream:  # the call ended meanwhile
            topic.remove_producer(producer)
            return
        self.outbox.put_now(encode_frame(sid, created.SerializeToString()))
        try:
            pipeline = SendPipeline(
                topic,
                producer,
                self.max_pending_entries,
                functools.partial(self._answer, stream),
                self._took,
            )
        except Exception as exc:
            topic.remove_producer(producer)
            self._answer(stream, Ended(error_of(exc)))
            raise
        stream.pipeline = pipeline
        early, stream.early = stream.early, []
        for req in early:
            if not hand_over(pipeline, req):
                stream.client_ended = True
        if stream.client_ended:
            pipeline.close()

    def _created(self, task: asyncio.Task) -> None:
        self.creating.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("creating a producer failed", exc_info=task.exception())
        if not self.creating and not self.streams:
            self._all_over.set()

    def _answer(self, stream: _Stream, answer: Answer) -> None:
        response = response_of(answer)
        ended = isinstance(answer, Ended)
        if response is not None:
            frame = encode_frame(stream.sid, response.SerializeToString(), end=ended)
        else:
            frame = encode_frame(stream.sid, None, end=True)
        self.outbox.put_now(frame)
        if ended:
            self._over(stream)

    def _over(self, stream: _Stream) -> None:
        if self.streams.get(stream.sid) is stream:
            del self.streams[stream.sid]
        self._took(len(stream.early))
        stream.early = []
        if not self.streams and not self.creating:
            self._all_over.set()

    def _refuse(self, sid: int) -> None:
        refusal = error(
            common_pb2.TOO_MANY_REQUESTS,
            f"{self.max_streams} producer streams are open on this connection "
            "(max_producer_streams_per_connection)",
        )
        answer = broker_pb2.ProducerResponse(error=refusal).SerializeToString()
        self.outbox.put_now(encode_frame(sid, answer, end=True))

    def _took(self, n: int) -> None:
        if n:
            self.read_ahead -= n
            self._progress.set()


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
            conn.abort()
