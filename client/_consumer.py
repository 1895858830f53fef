"""The consumer engine shared by the sync and asyncio APIs.

Theory of operation. The broker pushes entries against permits; the engine
unpacks them into messages and queues them (up to ``receiver_queue_size``,
the permits it granted). Each message taken by the application frees a
permit; once half the queue has been taken the permits go back to the broker
in one ``Flow``. Acknowledgements are grouped for up to
``ACK_GROUP_TIME_S`` and sent as one ``Ack`` per type; ``close()`` sends what
is left first. A batch entry is acknowledged to the broker only when all its
messages are.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import grpc

from client._connection import Connection, call_in_loop
from client._producer import from_wire_or
from client.enums import (
    ConsumerType,
    InitialPosition,
    KeySharedMode,
    RegexSubscriptionMode,
    SubscriptionMode,
)
from client.exceptions import (
    AlreadyClosed,
    CumulativeAcknowledgementNotAllowedError,
    InvalidConfiguration,
    MagnetarError,
    Timeout,
    from_wire,
)
from client.message import Message, unpack_entry
from client.policies import ConsumerKeySharedPolicy
from protos import broker_pb2, common_pb2
from protos.message_id import MessageId

log = logging.getLogger(__name__)

ACK_GROUP_TIME_S = 0.1
ACK_GROUP_MAX = 1000

_SUB_TYPES = {
    ConsumerType.Exclusive: broker_pb2.EXCLUSIVE,
    ConsumerType.Shared: broker_pb2.SHARED,
    ConsumerType.Failover: broker_pb2.FAILOVER,
    ConsumerType.KeyShared: broker_pb2.KEY_SHARED,
}


@dataclass
class ConsumerOptions:
    consumer_type: ConsumerType = ConsumerType.Exclusive
    receiver_queue_size: int = 1000
    consumer_name: str | None = None
    initial_position: InitialPosition = InitialPosition.Latest
    subscription_mode: SubscriptionMode = SubscriptionMode.Durable
    priority_level: int = 0
    key_shared_policy: ConsumerKeySharedPolicy | None = None
    # Readers: where to start (None = initial_position).
    start_message_id: MessageId | None = None
    start_message_id_inclusive: bool = False
    # Regex subscriptions.
    pattern_auto_discovery_period: float = 60
    regex_subscription_mode: RegexSubscriptionMode = RegexSubscriptionMode.PersistentOnly

    def validate(self) -> None:
        if not isinstance(self.pattern_auto_discovery_period, int | float) or not (
            self.pattern_auto_discovery_period > 0
        ):
            raise InvalidConfiguration(
                f"pattern_auto_discovery_period is {self.pattern_auto_discovery_period!r}; it "
                "must be a number of seconds > 0"
            )
        if not isinstance(self.regex_subscription_mode, RegexSubscriptionMode):
            raise InvalidConfiguration(
                f"regex_subscription_mode {self.regex_subscription_mode!r} is not a "
                "RegexSubscriptionMode"
            )
        if not isinstance(self.priority_level, int) or self.priority_level < 0:
            raise InvalidConfiguration(
                f"priority_level is {self.priority_level!r}; it must be an int >= 0 "
                "(0 = the highest priority)"
            )
        if self.receiver_queue_size < 1:
            raise InvalidConfiguration(
                f"receiver_queue_size is {self.receiver_queue_size}; it must be >= 1"
            )
        if not isinstance(self.consumer_type, ConsumerType):
            raise InvalidConfiguration(
                f"consumer_type {self.consumer_type!r} is not a ConsumerType"
            )
        if self.key_shared_policy is not None:
            if not isinstance(self.key_shared_policy, ConsumerKeySharedPolicy):
                raise InvalidConfiguration(
                    f"key_shared_policy {self.key_shared_policy!r} is not a ConsumerKeySharedPolicy"
                )
            if self.consumer_type != ConsumerType.KeyShared:
                raise InvalidConfiguration(
                    f"key_shared_policy is for ConsumerType.KeyShared, not {self.consumer_type.name}"
                )
        if not isinstance(self.initial_position, InitialPosition):
            raise InvalidConfiguration(
                f"initial_position {self.initial_position!r} is not an InitialPosition"
            )


def _key_shared_meta(policy: ConsumerKeySharedPolicy | None) -> broker_pb2.KeySharedMeta:
    if policy is None:
        return broker_pb2.KeySharedMeta()
    ranges = policy.sticky_ranges()
    return broker_pb2.KeySharedMeta(
        mode=(
            broker_pb2.STICKY
            if policy.key_shared_mode() == KeySharedMode.Sticky
            else broker_pb2.AUTO_SPLIT
        ),
        allow_out_of_order_delivery=policy.allow_out_of_order_delivery(),
        range_starts=[r[0] for r in ranges],
        range_ends=[r[1] for r in ranges],
    )


class ConsumerEngine:
    def __init__(
        self,
        connection: Connection,
        topic: str,
        subscription: str,
        options: ConsumerOptions,
        loop: asyncio.AbstractEventLoop,
        partition: int = -1,
    ) -> None:
        options.validate()
        self.connection = connection
        self.topic = topic
        self.subscription = subscription
        self.opts = options
        self.loop = loop
        self.partition = partition
        self.name = options.consumer_name or ""
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._incoming: collections.deque[Message] = collections.deque()
        self._async_waiter: asyncio.Future | None = None
        self._request_result: asyncio.Future | None = None
        self._request_lock = asyncio.Lock()
        # A batched start id: messages of its entry before it are skipped.
        self._skip_before: MessageId | None = None
        self._skip_inclusive = options.start_message_id_inclusive
        start = options.start_message_id
        if start is not None and start.batch_index() >= 0 and start.ledger_id() >= 0:
            self._skip_before = start
        self.last_dequeued: MessageId | None = None
        self._taken_since_flow = 0
        self._individual: list[tuple[int, int]] = []
        self._cumulative: tuple[int, int] | None = None
        self._ack_flush_scheduled = False
        self._flow_scheduled = False
        self.closed = False
        self.failure: MagnetarError | None = None
        self._call: grpc.aio.StreamStreamCall | None = None
        self._reader_task: asyncio.Task | None = None
        self._write_lock = asyncio.Lock()
        # A multi-topic consumer's wake-up (called on the loop when messages arrive).
        self.on_arrival: Callable[[], None] | None = None

    async def start(self) -> None:
        await self.connection.ensure_ready()
        self._call = self.connection.stub.Consume()
        await self._call.write(
            broker_pb2.ConsumerRequest(
                subscribe=broker_pb2.Subscribe(
                    topic=self.topic,
                    subscription=self.subscription,
                    sub_type=_SUB_TYPES[self.opts.consumer_type],  # type: ignore[arg-type]
                    initial_position=(
                        broker_pb2.EARLIEST
                        if self.opts.initial_position == InitialPosition.Earliest
                        else broker_pb2.LATEST
                    ),
                    consumer_name=self.name,
                    durable=self.opts.subscription_mode == SubscriptionMode.Durable,
                    priority_level=self.opts.priority_level,
                    start_message_id=_id_data(self.opts.start_message_id),
                    start_message_id_inclusive=self.opts.start_message_id_inclusive,
                    key_shared=_key_shared_meta(self.opts.key_shared_policy),
                )
            )
        )
        resp = await self._call.read()
        if resp is grpc.aio.EOF:
            raise from_wire_or(None, f"the broker closed the consumer stream on {self.topic}")
        if resp.HasField("error"):
            self._call.cancel()
            raise from_wire(resp.error)
        self.name = resp.subscribed.consumer_name
        self.topic = resp.subscribed.topic
        await self._write(
            broker_pb2.ConsumerRequest(flow=broker_pb2.Flow(permits=self.opts.receiver_queue_size))
        )
        self._reader_task = self.loop.create_task(self._reader())

    async def _write(self, req: broker_pb2.ConsumerRequest) -> None:
        assert self._call is not None
        async with self._write_lock:
            await self._call.write(req)

    async def _reader(self) -> None:
        assert self._call is not None
        try:
            while (resp := await self._call.read()) is not grpc.aio.EOF:
                kind = resp.WhichOneof("response")
                if kind == "deliveries":
                    self._on_deliveries(resp.deliveries)
                elif kind == "ack_error":
                    log.warning(
                        "%s: the broker refused an ack: %s", self.topic, resp.ack_error.message
                    )
                elif kind == "error":
                    self._fail(from_wire(resp.error))
                    return
                elif kind in ("unsubscribed", "request_error", "seek_done", "last_message_id"):
                    fut = self._request_result
                    if fut is not None and not fut.done():
                        if kind == "request_error":
                            fut.set_exception(from_wire(resp.request_error))
                        elif kind == "last_message_id":
                            m = resp.last_message_id.message_id
                            fut.set_result(MessageId(m.ledger_id, m.entry_id, self.partition))
                        else:
                            fut.set_result(None)
                    elif kind == "request_error":
                        log.warning(
                            "%s: the broker refused a request: %s",
                            self.topic,
                            resp.request_error.message,
                        )
            if not self.closed:
                self._fail(from_wire_or(None, f"the broker closed consumer {self.name}"))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if not self.closed:
                self._fail(from_wire_or(exc, "the connection to the broker failed"))

    def _on_deliveries(self, d: broker_pb2.Deliveries) -> None:
        messages: list[Message] = []
        for ledger_id, entry_id, redelivery, entry in zip(
            d.ledger_ids, d.entry_ids, d.redelivery_counts, d.entries, strict=True
        ):
            try:
                messages.extend(
                    unpack_entry(entry, ledger_id, entry_id, self.partition, self.topic, redelivery)
                )
            except MagnetarError as exc:
                log.error(
                    "%s: dropping undecodable entry %d:%d: %s", self.topic, ledger_id, entry_id, exc
                )
        skip = self._skip_before
        if skip is not None and messages:
            keep_self = self._skip_inclusive
            kept = []
            for m in messages:
                mid = m.message_id()
                if mid.position != skip.position:
                    if mid.position > skip.position:
                        self._skip_before = None
                    kept.append(m)
                elif mid.batch_index() > skip.batch_index() or (
                    keep_self and mid.batch_index() == skip.batch_index()
                ):
                    kept.append(m)
            messages = kept
        with self._arrived:
            self._incoming.extend(messages)
            self._arrived.notify_all()
        waiter = self._async_waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
        if self.on_arrival is not None and messages:
            self.on_arrival()

    def _fail(self, exc: MagnetarError) -> None:
        self.failure = exc
        with self._arrived:
            self._arrived.notify_all()
        waiter = self._async_waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
        if self.on_arrival is not None:
            self.on_arrival()

    def try_take(self) -> Message | None:
        """A queued message, or None at once (multi-topic consumers poll)."""
        with self._lock:
            self._check()
            return self._took(self._incoming.popleft()) if self._incoming else None

    # ------------------------------------------------------------ receiving

    def _check(self) -> None:
        if self.closed:
            raise AlreadyClosed(f"consumer {self.name} of {self.subscription} is closed")
        if self.failure is not None:
            raise self.failure

    def _took(self, msg: Message) -> Message:
        self.last_dequeued = msg.message_id()
        self._taken_since_flow += 1
        if self._taken_since_flow >= max(1, self.opts.receiver_queue_size // 2):
            permits, self._taken_since_flow = self._taken_since_flow, 0
            call_in_loop(self.loop, lambda: self.loop.create_task(self._send_flow(permits)))
        return msg

    async def _send_flow(self, permits: int) -> None:
        try:
            await self._write(broker_pb2.ConsumerRequest(flow=broker_pb2.Flow(permits=permits)))
        except Exception as exc:
            log.debug("sending flow failed: %s", exc)

    def receive_blocking(self, timeout_millis: int | None) -> Message:
        deadline = None if timeout_millis is None else time.monotonic() + timeout_millis / 1000
        with self._arrived:
            while True:
                self._check()
                if self._incoming:
                    return self._took(self._incoming.popleft())
                if deadline is None:
                    self._arrived.wait(0.5)
                    continue
                left = deadline - time.monotonic()
                if left <= 0:
                    raise Timeout(f"no message within {timeout_millis} ms on {self.topic}")
                self._arrived.wait(left)

    async def receive_async(self, timeout_millis: int | None) -> Message:
        deadline = None if timeout_millis is None else time.monotonic() + timeout_millis / 1000
        while True:
            with self._lock:
                self._check()
                if self._incoming:
                    return self._took(self._incoming.popleft())
            self._async_waiter = self.loop.create_future()
            try:
                if deadline is None:
                    await self._async_waiter
                else:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise Timeout(f"no message within {timeout_millis} ms on {self.topic}")
                    try:
                        await asyncio.wait_for(self._async_waiter, left)
                    except TimeoutError:
                        raise Timeout(
                            f"no message within {timeout_millis} ms on {self.topic}"
                        ) from None
            finally:
                self._async_waiter = None

    # ------------------------------------------------------------ acknowledging

    def acknowledge(self, target: Message | MessageId) -> None:
        with self._lock:
            self._check()
            if isinstance(target, Message):
                batch = target._batch
                mid = target.message_id()
                if batch is not None and not batch.ack(mid.batch_index()):
                    return
            elif isinstance(target, MessageId):
                mid = target
            else:
                raise TypeError(
                    f"acknowledge takes a Message or MessageId, not {type(target).__name__}"
                )
            self._individual.append(mid.position)
            self._schedule_ack_flush_locked(len(self._individual) >= ACK_GROUP_MAX)

    def acknowledge_cumulative(self, target: Message | MessageId) -> None:
        if self.opts.consumer_type in (ConsumerType.Shared, ConsumerType.KeyShared):
            raise CumulativeAcknowledgementNotAllowedError(
                f"cumulative acknowledgement is not allowed on a {self.opts.consumer_type.name} "
                "subscription"
            )
        with self._lock:
            self._check()
            if isinstance(target, Message):
                mid = target.message_id()
                batch = target._batch
                if (
                    batch is not None
                    and not batch.ack_through(mid.batch_index())
                    and batch.outstanding
                ):
                    # Part of a batch: everything before this entry is acknowledged.
                    pos = (mid.ledger_id(), mid.entry_id() - 1)
                else:
                    pos = mid.position
            elif isinstance(target, MessageId):
                pos = target.position
            else:
                raise TypeError(
                    f"acknowledge_cumulative takes a Message or MessageId, not {type(target).__name__}"
                )
            if self._cumulative is None or pos > self._cumulative:
                self._cumulative = pos
            self._schedule_ack_flush_locked(False)

    def _schedule_ack_flush_locked(self, now: bool) -> None:
        if self._ack_flush_scheduled and not now:
            return
        self._ack_flush_scheduled = True
        delay = 0.0 if now else ACK_GROUP_TIME_S

        def arm() -> None:
            self.loop.call_later(delay, lambda: self.loop.create_task(self.flush_acks()))

        call_in_loop(self.loop, arm)

    async def flush_acks(self) -> None:
        with self._lock:
            individual, self._individual = self._individual, []
            cumulative, self._cumulative = self._cumulative, None
            self._ack_flush_scheduled = False
        if self._call is None:
            return
        try:
            if individual:
                ack = broker_pb2.Ack(ack_type=broker_pb2.INDIVIDUAL)
                ack.ledger_ids.extend(p[0] for p in individual)
                ack.entry_ids.extend(p[1] for p in individual)
                await self._write(broker_pb2.ConsumerRequest(ack=ack))
            if cumulative is not None:
                ack = broker_pb2.Ack(ack_type=broker_pb2.CUMULATIVE)
                ack.ledger_ids.append(cumulative[0])
                ack.entry_ids.append(cumulative[1])
                await self._write(broker_pb2.ConsumerRequest(ack=ack))
        except Exception as exc:
            log.warning("%s: sending acks failed: %s", self.topic, exc)

    async def redeliver_unacknowledged(self) -> None:
        """Drop the local queue and have the broker deliver every unacked message again."""
        self._check()
        await self.flush_acks()
        with self._arrived:
            dropped = len(self._incoming)
            self._incoming.clear()
        await self._write(
            broker_pb2.ConsumerRequest(redeliver=broker_pb2.RedeliverUnacknowledged())
        )
        if dropped:
            # The dropped messages had used permits: give them back.
            await self._write(broker_pb2.ConsumerRequest(flow=broker_pb2.Flow(permits=dropped)))

    async def _request(self, req: broker_pb2.ConsumerRequest, timeout_s: float):  # type: ignore[no-untyped-def]
        """Send a request the broker answers on the stream; one at a time."""
        async with self._request_lock:
            self._check()
            self._request_result = self.loop.create_future()
            await self._write(req)
            try:
                return await asyncio.wait_for(self._request_result, timeout_s)
            finally:
                self._request_result = None

    async def seek(self, target: MessageId | int, timeout_s: float) -> None:
        """Reset the subscription: the next message is ``target`` (a MessageId,
        inclusive) or the first one published at or after ``target`` (ms)."""
        await self.flush_acks()
        seek = broker_pb2.Seek()
        if isinstance(target, MessageId):
            seek.message_id.CopyFrom(_id_data(target))
            if target.batch_index() >= 0 and target.ledger_id() >= 0:
                self._skip_before = target
                self._skip_inclusive = True  # seek: the target is the next message
        elif isinstance(target, int) and not isinstance(target, bool):
            seek.publish_time_ms = target
        else:
            raise TypeError(f"seek takes a MessageId or a publish time in ms, not {target!r}")
        await self._request(broker_pb2.ConsumerRequest(seek=seek), timeout_s)
        with self._arrived:
            dropped = len(self._incoming)
            self._incoming.clear()
        self.last_dequeued = None
        if dropped:
            await self._write(broker_pb2.ConsumerRequest(flow=broker_pb2.Flow(permits=dropped)))

    async def get_last_message_id(self, timeout_s: float) -> MessageId:
        """The id of the last entry stored in the topic (entry granularity)."""
        return await self._request(  # type: ignore[no-any-return]
            broker_pb2.ConsumerRequest(get_last_message_id=broker_pb2.GetLastMessageId()),
            timeout_s,
        )

    def queued(self) -> int:
        with self._lock:
            return len(self._incoming)

    async def unsubscribe(self, timeout_s: float) -> None:
        """Delete the subscription (refused while other consumers are connected)."""
        await self.flush_acks()
        await self._request(
            broker_pb2.ConsumerRequest(unsubscribe=broker_pb2.Unsubscribe()), timeout_s
        )
        self.closed = True
        if self._reader_task is not None:
            self._reader_task.cancel()
        self._fail(AlreadyClosed(f"consumer {self.name} unsubscribed from {self.subscription}"))

    async def close(self) -> None:
        if self.closed:
            return
        await self.flush_acks()
        self.closed = True
        if self._call is not None:
            try:
                await self._write(broker_pb2.ConsumerRequest(close=broker_pb2.CloseConsumer()))
                await self._call.done_writing()
                # The broker ends the stream once it processed everything before 'close'.
                await asyncio.wait_for(self._reader_task or asyncio.sleep(0), 5)
            except Exception:
                pass
        if self._reader_task is not None:
            self._reader_task.cancel()
        self._fail(AlreadyClosed(f"consumer {self.name} is closed"))


def _id_data(mid: MessageId | None) -> common_pb2.MessageIdData | None:
    if mid is None:
        return None
    return common_pb2.MessageIdData(
        ledger_id=mid.ledger_id(),
        entry_id=mid.entry_id(),
        partition=mid.partition(),
        batch_index=mid.batch_index(),
    )


async def has_available(engine: ConsumerEngine, timeout_s: float) -> bool:
    """Messages queued here, or stored past the last one read (entry granularity:
    every message of an entry arrives together)."""
    if engine.queued():
        return True
    last = await engine.get_last_message_id(timeout_s)
    if last.entry_id() < 0:
        return False
    read = engine.last_dequeued
    if read is not None:
        return last.position > read.position
    start = engine.opts.start_message_id
    if start is None or start.ledger_id() < 0:
        return True  # earliest: the topic holds an entry
    if start == MessageId.latest:
        return engine.opts.start_message_id_inclusive
    if engine.opts.start_message_id_inclusive or start.batch_index() >= 0:
        return last.position >= start.position
    return last.position > start.position
