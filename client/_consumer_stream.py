"""One consumer's ``Consume`` stream: the gRPC call, its writes, and the
requests the broker answers on it.

Theory of operation. ``open`` subscribes on a new call, grants the first
permits and returns the broker's ``Subscribed``, or raises its typed error (a stream the broker
ends at once is a ``ConnectError``, which reconnection retries). Writes
are serialised, as a gRPC stream takes one at a time; a write on a call
cancelled for a reconnection raises ``ConnectError``, so the caller keeps
what it sent for the next stream. Requests answered on the stream (seek,
unsubscribe, last message id) go one at a time, each paired with the next
answer. ``read_until_broken`` hands deliveries to the consumer, answers
the waiting request, logs refused acks, until the stream ends; it returns
why it ended (to reconnect), or the broker's error when that is final.

No consumer state lives here: the engine decides what deliveries mean and
when to reconnect.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import grpc

from client._ack_grouping import PendingAcks
from client._connection import RECONNECT_CODES, Connection, open_stream
from client.exceptions import ConnectError, MagnetarError, from_wire, from_wire_or
from protos import broker_pb2
from protos.message_id import MessageId, id_fields

log = logging.getLogger(__name__)

# Returns None when done, or an awaitable to wait on before reading on.
OnDeliveries = Callable[[broker_pb2.Deliveries], Awaitable[None] | None]
_ANSWERS = ("unsubscribed", "request_error", "seek_done", "last_message_id")


class ConsumerStream:
    def __init__(self, loop: asyncio.AbstractEventLoop, partition: int) -> None:
        self.loop = loop
        self.partition = partition  # of the message ids answered
        self.call: grpc.aio.StreamStreamCall | None = None
        self.topic = ""
        self.consumer_name = ""
        # The broker said the topic was terminated (with the last message id).
        self.topic_terminated = False
        self._write_lock = asyncio.Lock()
        self._request_lock = asyncio.Lock()
        self._waiting: asyncio.Future | None = None
        self._on_answer: Callable[[], None] | None = None

    async def open(
        self, connection: Connection, subscribe: broker_pb2.ConsumerRequest, permits: int
    ) -> broker_pb2.Subscribed:
        await connection.ensure_ready()
        call = connection.stub.Consume()
        resp = await open_stream(connection, call, subscribe)
        if resp is grpc.aio.EOF:
            raise from_wire_or(
                None, f"the broker closed the consumer stream on {subscribe.subscribe.topic}"
            )
        if resp.HasField("error"):
            call.cancel()
            raise from_wire(resp.error)
        self.call = call
        self.topic = resp.subscribed.topic
        self.consumer_name = resp.subscribed.consumer_name
        if permits:
            await self.write(broker_pb2.ConsumerRequest(flow=broker_pb2.Flow(permits=permits)))
        return resp.subscribed

    async def write(self, req: broker_pb2.ConsumerRequest) -> None:
        assert self.call is not None
        async with self._write_lock:
            try:
                await self.call.write(req)
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if task is not None and task.cancelling():
                    raise
                # The call was cancelled to reconnect: the caller keeps its data.
                raise ConnectError(
                    f"the stream of consumer {self.consumer_name} was replaced"
                ) from None

    async def send_acks(self, acks: PendingAcks) -> None:
        for req in ack_requests(acks):
            await self.write(req)

    async def read_until_broken(self, on_deliveries: OnDeliveries) -> str | MagnetarError:
        """Why the stream ended (reconnect), or the broker's final error."""
        call = self.call
        assert call is not None
        try:
            while (resp := await call.read()) is not grpc.aio.EOF:
                kind = resp.WhichOneof("response")
                if kind == "deliveries":
                    pending = on_deliveries(resp.deliveries)
                    if pending is not None:  # e.g. writer schemas to fetch first
                        await pending
                elif kind == "error":
                    if resp.error.code not in RECONNECT_CODES:
                        return from_wire(resp.error)
                    return str(resp.error.message)
                elif kind in _ANSWERS:
                    self._answer(kind, resp)
                elif kind == "ack_error":
                    log.warning(
                        "%s: the broker refused an ack: %s", self.topic, resp.ack_error.message
                    )
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            return f"the connection failed: {exc}"
        return "the broker closed the stream"

    async def say_goodbye(self) -> None:
        """Close the consumer and half-close the call; the broker ends the
        stream once it processed everything before."""
        await self.write(broker_pb2.ConsumerRequest(close=broker_pb2.CloseConsumer()))
        assert self.call is not None
        await self.call.done_writing()

    async def wait_ended(self) -> None:
        """Until the broker ends the stream (what it still sends is dropped)."""
        assert self.call is not None
        while await self.call.read() is not grpc.aio.EOF:  # bounded by the caller's timeout
            pass

    def cancel(self) -> None:
        if self.call is not None:
            self.call.cancel()

    async def request(
        self,
        req: broker_pb2.ConsumerRequest,
        timeout_s: float,
        check: Callable[[], None],
        on_answer: Callable[[], None] | None = None,
    ) -> Any:
        """Send ``req`` (after ``check()``, in turn) and wait for its answer.
        ``on_answer`` runs in the stream's reader the moment the answer
        arrives, before any later delivery is handled (a seek drops what
        came before its answer, and only that)."""
        async with self._request_lock:
            check()
            self._waiting = self.loop.create_future()
            self._on_answer = on_answer
            await self.write(req)
            try:
                return await asyncio.wait_for(self._waiting, timeout_s)
            finally:
                self._waiting = None
                self._on_answer = None

    def _answer(self, kind: str, resp: broker_pb2.ConsumerResponse) -> None:
        fut = self._waiting
        answered = fut is not None and not fut.done() and kind != "request_error"
        if answered and self._on_answer is not None:
            self._on_answer()
        if fut is None or fut.done():
            if kind == "request_error":
                log.warning(
                    "%s: the broker refused a request: %s", self.topic, resp.request_error.message
                )
        elif kind == "request_error":
            fut.set_exception(from_wire(resp.request_error))
        elif kind == "last_message_id":
            self.topic_terminated = resp.last_message_id.terminated
            ledger_id, entry_id, _, _ = id_fields(resp.last_message_id.message_id)
            fut.set_result(MessageId(self.partition, ledger_id, entry_id))
        else:
            fut.set_result(None)


def ack_requests(acks: PendingAcks) -> list[broker_pb2.ConsumerRequest]:
    """A flushed ack group as the broker takes it: one individual ack (with the
    batch-index acks), one cumulative ack."""
    out = []
    if acks.individual or acks.batch_index:
        ack = broker_pb2.Ack(ack_type=broker_pb2.INDIVIDUAL)
        ack.ledger_ids.extend(p[0] for p in acks.individual)
        ack.entry_ids.extend(p[1] for p in acks.individual)
        for (ledger_id, entry_id), (size, indexes) in acks.batch_index.items():
            ack.batch_acks.add(
                ledger_id=ledger_id, entry_id=entry_id, batch_size=size, indexes=sorted(indexes)
            )
        out.append(broker_pb2.ConsumerRequest(ack=ack))
    if acks.cumulative is not None:
        ack = broker_pb2.Ack(ack_type=broker_pb2.CUMULATIVE)
        ack.ledger_ids.append(acks.cumulative[0])
        ack.entry_ids.append(acks.cumulative[1])
        out.append(broker_pb2.ConsumerRequest(ack=ack))
    return out
