"""Every producer of one broker connection on one ``ProduceMany`` stream.

A :class:`ProducerCall` stands for a ``Produce`` call to its engine (write,
read, done_writing, cancel, code, details). The requests every producer
writes in one loop turn travel as one gRPC message, framed by hand around
each request's own serialisation, and each message of answers is dealt
out by stream id. So a partitioned producer costs one message per turn,
not one per partition, on both sides. When the gRPC call fails or ends,
every producer call on it reads that failure (its engine reconnects, and
the next producer call opens a new gRPC call).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable
from typing import Any

import grpc

from client.exceptions import AlreadyClosed
from protos import broker_pb2
from protos.add_request import varint
from protos.frames import encode_frame as encode_frame
from protos.frames import frame_parts
from protos.wire import packed, tag

log = logging.getLogger(__name__)

_SEND_TAG = tag(broker_pb2.ProducerRequest, "send")
_SEQUENCE_IDS_TAG, _NUM_MESSAGES_TAG, _ENTRY_TAG = (
    tag(broker_pb2.SendEntries, f) for f in ("sequence_ids", "num_messages", "entries")
)
METHOD = "/magnetar.Broker/ProduceMany"
MESSAGE_BYTES = 4 << 20  # frames per gRPC message (the limit is 16 MiB)


def encode_send_frame(
    stream_id: int, sequence_ids: list[int], num_messages: list[int], entries: list[bytes]
) -> bytes:
    """``encode_frame`` of a ``ProducerRequest`` whose ``send`` holds these
    entries (counts ≥ 1), written in one join so each entry is copied once.
    (Appending the entries to the protobuf message and serialising it copied
    each one three times: ~3 µs per KiB sent, more than the rest of a send.)"""
    parts = packed(_SEQUENCE_IDS_TAG, sequence_ids) + packed(_NUM_MESSAGES_TAG, num_messages)
    size = sum(map(len, parts))
    for entry in entries:
        length = varint(len(entry))
        parts += (_ENTRY_TAG, length, entry)
        size += 1 + len(length) + len(entry)
    send_size = varint(size)
    request = [_SEND_TAG, send_size, *parts]
    return b"".join(frame_parts(stream_id, request, 1 + len(send_size) + size))


class ProduceMux:
    """The ``ProduceMany`` stream of one connection, opened on first use."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self._method = channel.stream_stream(
            METHOD,
            request_serializer=None,  # messages are joined frames (encode_frame)
            response_deserializer=broker_pb2.ProducerResponseFrames.FromString,
        )
        self._call: Any = None
        self._calls: dict[int, ProducerCall] = {}
        self._ids = itertools.count(1)
        self._out: list[bytes] = []
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task] = []
        self._closed = False

    def open(self) -> ProducerCall:
        """A new producer stream (its first write must create the producer);
        AlreadyClosed once the connection closed."""
        if self._closed:
            raise AlreadyClosed("the client is closed")
        if self._call is None:
            self._call = self._method()
            self._out = []
            self._tasks = [
                asyncio.create_task(self._writer(self._call)),
                asyncio.create_task(self._reader(self._call)),
            ]
        call = ProducerCall(self, next(self._ids), self._call)
        self._calls[call.stream_id] = call
        return call

    def send(self, call: ProducerCall, frame: bytes) -> None:
        if call.grpc_call is self._call:
            self._out.append(frame)
            self._wake.set()
        # else: that gRPC call is over; its producer reads the failure.

    def forget(self, call: ProducerCall) -> None:
        if self._calls.get(call.stream_id) is call:
            del self._calls[call.stream_id]

    async def _writer(self, grpc_call: Any) -> None:
        try:
            while True:
                await self._wake.wait()
                self._wake.clear()
                await self._write_out(grpc_call)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the call is over: its producers read why
            log.info("producer stream to the broker failed to write: %s", exc)
            grpc_call.cancel()

    async def _write_out(self, grpc_call: Any) -> None:
        """Every frame queued, in messages of at most MESSAGE_BYTES (a bigger
        frame goes alone)."""
        out, self._out = self._out, []
        while out:
            size, n = 0, 0
            while n < len(out) and (n == 0 or size + len(out[n]) <= MESSAGE_BYTES):
                size += len(out[n])
                n += 1
            await grpc_call.write(b"".join(out[:n]))
            out = out[n:]

    async def _reader(self, grpc_call: Any) -> None:
        failure: Any = grpc.aio.EOF
        try:
            while (message := await grpc_call.read()) is not grpc.aio.EOF:
                for frame in message.frames:
                    call = self._calls.get(frame.id)
                    if call is None:
                        continue
                    if frame.HasField("response"):
                        call.answer(frame.response)
                    if frame.end:
                        self._calls.pop(frame.id, None)
                        call.answers.put_nowait(grpc.aio.EOF)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            failure = exc
        except BaseException as exc:  # (from a send's callback): every producer hears it
            self._ended(grpc_call, exc)
            raise
        self._ended(grpc_call, failure)

    def _ended(self, grpc_call: Any, failure: Any) -> None:
        grpc_call.cancel()  # (a no-op when it is over already)
        if self._call is grpc_call:
            self._call = None
            for task in self._tasks:
                if task is not asyncio.current_task():
                    task.cancel()
        for stream_id, call in list(self._calls.items()):
            if call.grpc_call is grpc_call:
                del self._calls[stream_id]
                call.answers.put_nowait(failure)

    async def close(self, timeout_s: float = 2.0) -> None:
        """End the gRPC call: half-closed, and its end awaited for up to
        ``timeout_s`` (the broker ends it once its streams are over), so
        nothing of it is left running when the channel closes."""
        self._closed = True
        call, self._call = self._call, None
        tasks = self._tasks
        writer, reader = tasks if tasks else (None, None)
        if writer is not None:
            writer.cancel()
        if call is not None and reader is not None:
            try:
                await asyncio.wait_for(self._finish(call, reader), timeout_s)
            except (Exception, asyncio.CancelledError):
                task = asyncio.current_task()
                if task is not None and task.cancelling():
                    raise
                call.cancel()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _finish(self, call: Any, reader: asyncio.Task) -> None:
        await self._write_out(call)  # the last goodbyes
        await call.done_writing()
        await asyncio.shield(reader)


class ProducerCall:
    """One producer's stream on the connection's ``ProduceMany`` call."""

    def __init__(self, mux: ProduceMux, stream_id: int, grpc_call: Any) -> None:
        self.mux = mux
        self.stream_id = stream_id
        self.grpc_call = grpc_call
        # The broker's answers (bounded by the producer's sends in flight),
        # then EOF or the gRPC call's failure.
        self.answers: asyncio.Queue = asyncio.Queue()
        # Takes an answer as it is read (True), unless answers wait in the
        # queue: then it queues behind them, so the engine sees them in order.
        self.on_answer: Callable[[Any, ProducerCall], bool] | None = None
        self._last: Any = None
        self._ended = False

    def answer(self, response: Any) -> None:
        on_answer = self.on_answer
        try:
            if on_answer is not None and self.answers.empty() and on_answer(response, self):
                return
        except Exception as exc:  # this producer's reader fails on it (and reconnects)
            self.answers.put_nowait(exc)
            return
        self.answers.put_nowait(response)

    async def write(self, request: broker_pb2.ProducerRequest) -> None:
        if self._ended:
            raise asyncio.InvalidStateError("the producer stream was ended")
        self.mux.send(self, encode_frame(self.stream_id, request.SerializeToString()))

    def send_entries(
        self, sequence_ids: list[int], num_messages: list[int], entries: list[bytes]
    ) -> None:
        """``write`` of a send request (``encode_send_frame``), at once."""
        if self._ended:
            raise asyncio.InvalidStateError("the producer stream was ended")
        frame = encode_send_frame(self.stream_id, sequence_ids, num_messages, entries)
        self.mux.send(self, frame)

    async def read(self) -> Any:
        """The next answer; grpc.aio.EOF once the stream ended (again on
        every later read); the gRPC call's failure raised."""
        if self._last is None:
            item = await self.answers.get()
            if item is not grpc.aio.EOF and not isinstance(item, BaseException):
                return item
            self._last = item
        if isinstance(self._last, BaseException):
            raise self._last
        return self._last

    async def done_writing(self) -> None:
        if not self._ended:
            self._ended = True
            self.mux.send(self, encode_frame(self.stream_id, None, end=True))

    def cancel(self) -> bool:
        """End the stream (the broker drops the producer) and stop reading it."""
        was_open = not self._ended
        self._ended = True
        if was_open:
            self.mux.send(self, encode_frame(self.stream_id, None, end=True))
        self.mux.forget(self)
        if self._last is None:
            self._last = grpc.aio.EOF
        return was_open

    async def code(self) -> grpc.StatusCode:
        return await self.grpc_call.code()

    async def details(self) -> str:
        return await self.grpc_call.details()
