"""The consumer engine shared by the sync and asyncio APIs.

Theory of operation. The engine wires the consumer's pieces to one gRPC
``Consume`` stream (``_consumer_stream``) and one lock (the application's
threads and the event loop share them):

* It subscribes with its options (``_consumer_options``) and grants
  ``receiver_queue_size`` permits.
* The reader task turns each delivery into messages (``_entry_decoder``:
  chunks, batch-index masks, the dead letter threshold, a start id inside a
  batch) and puts them in the receiver queue (``_receiver_queue``), which
  says when freed permits go back in one ``Flow``.
* Acknowledgements go to the ack grouping tracker (``_ack_grouping``), which
  says when to flush; ``close()``, ``seek`` and redelivery requests flush
  first. A batch entry is acknowledged to the broker only when all its
  messages are (or per index, with batch-index acks).
* Negative acks and ack timeouts (``_redelivery_task``, over the trackers
  of ``redelivery``) are checked once per tick and sent as one redeliver
  request.
* When the stream breaks or the topic moves, the engine looks the topic up,
  subscribes again (a reader from after the last message it read), and
  sends the acknowledgements a failed flush kept; the queue is dropped,
  since the broker delivers its messages again.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from client._ack_grouping import AckGroupingTracker, ack_target, cumulative_position
from client._connection import Connection, Resolver, call_in_loop, retry_with_backoff
from client._consumer_options import ConsumerOptions, id_data_of, subscribe_request
from client._consumer_stream import ConsumerStream
from client._entry_decoder import DecodedEntry, DeliveredEntry, EntryDecoder, StartMessageSkip
from client._receiver_queue import ReceiverQueue
from client._redelivery_task import RedeliveryTask
from client._schema_use import WriterSchemas
from client.chunks import ChunkAssembler
from client.dead_letter import DeadLetterPublisher
from client.enums import ConsumerType, SubscriptionMode
from client.exceptions import (
    AlreadyClosed,
    ConnectError,
    ConsumerBusy,
    CumulativeAcknowledgementNotAllowedError,
    MagnetarError,
    ServiceUnitNotReady,
    Timeout,
    from_wire_or,
)
from client.message import Message
from protos import broker_pb2
from protos.message_id import MessageId
from protos.schema_info import decode_version

log = logging.getLogger(__name__)

# Failures while subscribing again that mean "try again in a moment".
RECONNECT_ERRORS = (ServiceUnitNotReady, ConnectError, ConsumerBusy)
CLOSE_TIMEOUT_S = 5  # how long close() waits for the broker to end the stream
_NO_CUMULATIVE_ACK = (ConsumerType.Shared, ConsumerType.KeyShared)


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
        self._incoming: ReceiverQueue[Message] = ReceiverQueue(options.receiver_queue_size)
        self._async_waiter: asyncio.Future | None = None
        self._stream = ConsumerStream(loop, partition)
        self._start_skip = StartMessageSkip(
            options.start_message_id, options.start_message_id_inclusive
        )
        policy = options.dead_letter_policy
        self._writers = WriterSchemas(options.schema)
        self._decoder = EntryDecoder(
            partition,
            ChunkAssembler(
                options.max_pending_chunked_message,
                options.expire_time_of_incomplete_chunked_message_ms / 1000,
                # One consumer gets every entry, in order (client.chunks).
                remember_completed=options.consumer_type not in _NO_CUMULATIVE_ACK,
            ),
            policy.max_redeliver_count if policy is not None else None,
        )
        self.last_dequeued: MessageId | None = None
        self._acks = AckGroupingTracker(
            options.ack_grouping_time_ms / 1000, options.ack_grouping_max_size
        )
        self.closed = False
        self.failure: MagnetarError | None = None
        self._reader_task: asyncio.Task | None = None
        # A multi-topic consumer's wake-up (called on the loop when messages arrive).
        self.on_arrival: Callable[[], None] | None = None
        # The broker serving a topic (reconnection; dead letter and retry topics).
        self.resolver: Resolver = self._same_connection
        self._started = False
        self._reconnecting = False
        self._redelivery = RedeliveryTask(
            options, loop, self._redeliver_positions, lambda: not self.closed, lambda: self.topic
        )
        self._dead_letters: DeadLetterPublisher | None = None
        self._side_tasks: set[asyncio.Task] = set()
        self._chunk_timer: asyncio.TimerHandle | None = None
        # Chunks given up in this event-loop turn, redelivered in one request.
        self._dropped_chunks: list[tuple[int, int]] = []
        # Last chunk's position -> every chunk's, for acks by MessageId.
        self._chunked: dict[tuple[int, int], list[tuple[int, int]]] = {}

    async def _same_connection(self, topic: str) -> Connection:
        return self.connection

    # ------------------------------------------------------------ the stream

    async def _open_stream(self) -> None:
        """A stream subscribed as this consumer (at start and after a
        reconnection, when the topic is looked up again)."""
        if self.resolver is not None and self._started:
            self.connection = await self.resolver(self.topic)
        start = self.opts.start_message_id
        inclusive = self.opts.start_message_id_inclusive
        if self._started and self.last_dequeued is not None:
            start, inclusive = self.last_dequeued, False  # a reader resumes after what it read,
            if self.opts.subscription_mode == SubscriptionMode.NonDurable:  # in its batch too
                self._start_skip.skip_to(start, inclusive)
        request = subscribe_request(
            self.opts, self.topic, self.subscription, self.name, start, inclusive
        )
        subscribed = await self._stream.open(
            self.connection, request, self._incoming.initial_permits
        )
        self.name = subscribed.consumer_name
        self.topic = subscribed.topic
        self._writers.own_version = decode_version(subscribed.schema_version)

    async def start(self) -> None:
        await self._open_stream()
        self._started = True
        self._reader_task = self.loop.create_task(self._reader())
        if self._redelivery.ack_timeouts_on:
            self._redelivery.start()

    async def _reader(self) -> None:
        while not self.closed:
            why = await self._stream.read_until_broken(self._on_deliveries)
            if isinstance(why, MagnetarError):
                self._fail(why)
                return
            if self.closed:
                return
            log.info("%s: consumer %s reconnects (%s)", self.topic, self.name, why)
            if not await self._reconnect():
                return

    async def _reconnect(self) -> bool:
        """Subscribe again where the topic is served now. Messages queued here
        and not taken are dropped: the broker delivers them again."""
        self._stream.cancel()
        with self._arrived:
            self._incoming.restart()
        self._decoder.chunks.restart()  # what it holds comes again

        async def attempt() -> None:
            await self._open_stream()
            await self.flush_acks()

        self._reconnecting = True
        try:
            return await retry_with_backoff(
                attempt,
                RECONNECT_ERRORS,
                lambda: self.closed,
                lambda exc: self._fail(from_wire_or(exc, "reconnecting failed")),
                f"reconnecting consumer {self.name} on {self.topic}",
            )
        finally:
            self._reconnecting = False

    # ------------------------------------------------------------ deliveries

    def _on_deliveries(self, d: broker_pb2.Deliveries) -> Awaitable[None] | None:
        masks = list(d.acked_batch_indexes) or [b""] * len(d.entries)
        messages: list[Message] = []
        for delivered in zip(
            d.ledger_ids, d.entry_ids, d.redelivery_counts, d.entries, masks, strict=True
        ):
            decoded = self._decoder.decode(DeliveredEntry(*delivered), self.topic, time.monotonic())
            messages.extend(self._apply(decoded))
        messages = self._start_skip.filter(messages)
        missing = self._writers.missing(messages)
        if missing:  # written under schema versions not seen yet: fetch them first
            return self._queue_after_fetch(messages, missing)
        self._queue(messages)
        return None

    async def _queue_after_fetch(self, messages: list[Message], versions: set[int]) -> None:
        await self._writers.fetch(self.connection, self.topic, versions)
        self._queue(messages)

    def _queue(self, messages: list[Message]) -> None:
        self._writers.attach(messages)
        with self._arrived:
            self._incoming.put(messages)
            self._arrived.notify_all()
        waiter = self._async_waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
        if self.on_arrival is not None and messages:
            self.on_arrival()

    def _apply(self, decoded: DecodedEntry) -> list[Message]:
        """Act on one decoded entry; its messages for the queue."""
        self._drop_chunks(decoded.dropped_chunks, decoded.acked_chunks)
        self._release_permits(decoded.freed_permits)
        chunks = self._decoder.chunks
        if decoded.held_chunk and self._chunk_timer is None and len(chunks):
            self._chunk_timer = self.loop.call_later(chunks.expire_s, self._expire_chunks)
        if decoded.error is not None:
            log.error(
                "%s: dropping undecodable entry %d:%d: %s",
                self.topic,
                *decoded.position,
                decoded.error,
            )
            return []
        if decoded.chunk_positions is not None:
            self._chunked[decoded.position] = decoded.chunk_positions
        if decoded.dead_letter:
            self._to_dead_letter_topic(decoded.messages, decoded.position)
            return []
        return decoded.messages

    def _expire_chunks(self) -> None:
        self._chunk_timer = None
        chunks = self._decoder.chunks
        self._drop_chunks(chunks.expire(time.monotonic()), [])
        if len(chunks):
            self._chunk_timer = self.loop.call_later(chunks.expire_s / 4, self._expire_chunks)

    def _drop_chunks(
        self, dropped: list[list[tuple[int, int]]], acked: list[tuple[int, int]]
    ) -> None:
        """Incomplete chunked messages given up: acked, or delivered again
        later; ``acked``: chunks to acknowledge (client.chunks)."""
        positions = [p for group in dropped for p in group]
        if self.opts.auto_ack_oldest_chunked_message_on_queue_full:
            acked, positions = [*acked, *positions], []
        if acked:
            with self._lock:
                self._arm_ack_flush(self._acks.add_individual(acked, time.monotonic()))
        if not positions:
            return
        # One request for everything dropped in this turn, in position order:
        # separate requests could come back in either order, and a later
        # chunk redelivered before its first would be dropped again.
        if not self._dropped_chunks:
            self._side_task(self._redeliver_dropped_chunks())
        self._dropped_chunks.extend(positions)

    async def _redeliver_dropped_chunks(self) -> None:
        positions, self._dropped_chunks = sorted(self._dropped_chunks), []
        try:
            await self._redeliver_positions(positions)
        except Exception as exc:
            log.warning("%s: redelivering dropped chunks failed: %s", self.topic, exc)

    def _to_dead_letter_topic(self, messages: list[Message], pos: tuple[int, int]) -> None:
        """Publish an entry's messages to the dead letter topic, then ack it."""
        if self._dead_letters is None:
            policy = self.opts.dead_letter_policy
            assert policy is not None
            self._dead_letters = DeadLetterPublisher.for_consumer(
                self.resolver,
                self.loop,
                self.topic,
                self.subscription,
                self.name,
                policy.dead_letter_topic,
                policy.initial_subscription_name or None,
            )
        publisher = self._dead_letters

        async def run() -> None:
            try:
                await publisher.publish(messages)
            except Exception as exc:
                # Not acked: it comes back after the nack delay and is tried again.
                log.warning("%s: dead-lettering %s failed: %s", self.topic, pos, exc)
                first = messages[0]
                self._redelivery.nack(
                    first.message_id(), first.redelivery_count(), time.monotonic()
                )
                self._redelivery.start()
                return
            with self._lock:
                positions = self._chunked.pop(pos, None) or [pos]  # a chunked message: all
                self._arm_ack_flush(self._acks.add_individual(positions, time.monotonic()))

        self._release_permits(len(messages))
        self._side_task(run())

    def _side_task(self, coro: Coroutine[Any, Any, None]) -> None:
        task = self.loop.create_task(coro)
        self._side_tasks.add(task)
        task.add_done_callback(self._side_tasks.discard)

    # ------------------------------------------------------------ permits

    def _release_permits(self, n: int) -> None:
        """Messages that used permits but will not be taken by the application."""
        if n <= 0:
            return
        with self._lock:
            self._grant(self._incoming.release(n))

    def _grant(self, permits: int) -> None:
        if permits:
            call_in_loop(self.loop, lambda: self.loop.create_task(self._send_flow(permits)))

    async def _send_flow(self, permits: int) -> None:
        try:
            await self._stream.write(
                broker_pb2.ConsumerRequest(flow=broker_pb2.Flow(permits=permits))
            )
        except Exception as exc:
            log.debug("sending flow failed: %s", exc)

    def _fail(self, exc: MagnetarError) -> None:
        self.failure = exc
        with self._arrived:
            self._arrived.notify_all()
        waiter = self._async_waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
        if self.on_arrival is not None:
            self.on_arrival()

    # ------------------------------------------------------------ receiving

    def _check(self) -> None:
        if self.closed:
            raise AlreadyClosed(f"consumer {self.name} of {self.subscription} is closed")
        if self.failure is not None:
            raise self.failure

    def _take_locked(self) -> Message:
        msg, permits = self._incoming.take()
        self.last_dequeued = msg.message_id()
        self._redelivery.taken(msg, time.monotonic())
        self._grant(permits)
        return msg

    def try_take(self) -> Message | None:
        """A queued message, or None at once (multi-topic consumers poll)."""
        with self._lock:
            self._check()
            return self._take_locked() if self._incoming else None

    def receive_blocking(self, timeout_millis: int | None) -> Message:
        deadline = None if timeout_millis is None else time.monotonic() + timeout_millis / 1000
        with self._arrived:
            while True:
                self._check()
                if self._incoming:
                    return self._take_locked()
                self._grant(self._incoming.want_one())  # zero-prefetch: ask for one
                if deadline is None:
                    self._arrived.wait(0.5)
                    continue
                left = deadline - time.monotonic()
                if left <= 0:
                    raise Timeout(f"no message within {timeout_millis} ms on {self.topic}")
                # (zero-prefetch looks again now and then, as receive_async says)
                self._arrived.wait(min(left, 0.5) if self._incoming.zero_prefetch else left)

    async def receive_async(self, timeout_millis: int | None) -> Message:
        deadline = None if timeout_millis is None else time.monotonic() + timeout_millis / 1000
        # Zero-prefetch looks again now and then: its one permit may have been
        # spent on a message that never reached the queue.
        step_s = 0.5 if self._incoming.zero_prefetch else None
        while True:
            with self._lock:
                self._check()
                if self._incoming:
                    return self._take_locked()
                self._grant(self._incoming.want_one())  # zero-prefetch: ask for one
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise Timeout(f"no message within {timeout_millis} ms on {self.topic}")
            wait_s = left if step_s is None else min(step_s, left if left is not None else step_s)
            self._async_waiter = self.loop.create_future()
            try:
                await asyncio.wait_for(self._async_waiter, wait_s)
            except TimeoutError:
                continue  # the deadline is checked at the top
            finally:
                self._async_waiter = None

    def queued(self) -> int:
        with self._lock:
            return len(self._incoming)

    # ------------------------------------------------------------ acknowledging

    def acknowledge(self, target: Message | MessageId) -> None:
        with self._lock:
            self._check()
            mid, batch = ack_target(target, "acknowledge")
            now_s = time.monotonic()
            if batch is not None and not batch.ack(mid.batch_index()):
                if self.opts.batch_index_ack_enabled:
                    self._arm_ack_flush(
                        self._acks.add_batch_index(
                            mid.position, batch.size, mid.batch_index(), now_s
                        )
                    )
                return
            chunks = self._chunked.pop(mid.position, None)
            if isinstance(target, Message) and target._chunks:
                chunks = target._chunks  # (given back to the broker since, or taken again)
            # A chunked message: all its chunks.
            positions = [*chunks[:-1], mid.position] if chunks else [mid.position]
            self._redelivery.acked(mid.position)
            self._arm_ack_flush(self._acks.add_individual(positions, now_s))

    def acknowledge_cumulative(self, target: Message | MessageId) -> None:
        if self.opts.consumer_type in _NO_CUMULATIVE_ACK:
            raise CumulativeAcknowledgementNotAllowedError(
                f"cumulative acknowledgement is not allowed on a {self.opts.consumer_type.name} "
                "subscription"
            )
        with self._lock:
            self._check()
            pos = cumulative_position(target)
            for done in [p for p in list(self._chunked) if p <= pos]:  # acknowledged with it
                self._chunked.pop(done, None)
            self._arm_ack_flush(self._acks.add_cumulative(pos, time.monotonic()))

    def _arm_ack_flush(self, delay_s: float | None) -> None:
        """The flush timer the ack grouping tracker asked for (if any)."""
        if delay_s is None:
            return

        def arm() -> None:
            self.loop.call_later(delay_s, lambda: self.loop.create_task(self.flush_acks()))

        call_in_loop(self.loop, arm)

    async def flush_acks(self) -> None:
        with self._lock:
            acks = self._acks.take()
        if self._stream.call is None:
            return
        try:
            await self._stream.send_acks(acks)
        except Exception as exc:
            with self._lock:
                self._acks.restore(acks)
            log.debug("%s: sending acks failed (%s); kept for the next flush", self.topic, exc)

    # ------------------------------------------------------------ redelivery

    def negative_acknowledge(self, target: Message | MessageId) -> None:
        """Have this message delivered again after the nack delay (its whole
        entry: every message of a batch comes back)."""
        with self._lock:
            self._check()
            mid, _ = ack_target(target, "negative_acknowledge")
            count = target.redelivery_count() if isinstance(target, Message) else 0
            self._redelivery.nack(mid, count, time.monotonic())
        call_in_loop(self.loop, self._redelivery.start)

    async def _redeliver_positions(self, positions: list[tuple[int, int]]) -> None:
        if self.opts.consumer_type not in (ConsumerType.Shared, ConsumerType.KeyShared):
            # Ordered types cannot skip ahead: everything comes again, in order.
            await self.redeliver_unacknowledged()
            return
        # A chunked message (known by its last chunk): every chunk, first to last.
        positions = sorted({c for p in positions for c in self._chunked.get(p, [p])})
        req = broker_pb2.RedeliverUnacknowledged()
        req.ledger_ids.extend(p[0] for p in positions)
        req.entry_ids.extend(p[1] for p in positions)
        await self.flush_acks()
        await self._stream.write(broker_pb2.ConsumerRequest(redeliver=req))

    async def redeliver_unacknowledged(self) -> None:
        """Drop the local queue and have the broker deliver every unacked message again."""
        self._check()
        await self.flush_acks()
        with self._arrived:
            dropped = self._incoming.drop_all()
            self._redelivery.clear()
        if self.opts.consumer_type in _NO_CUMULATIVE_ACK:  # (ordered types: copies come back)
            self._decoder.chunks.restart()  # another consumer may get what this one held
        req = broker_pb2.ConsumerRequest(redeliver=broker_pb2.RedeliverUnacknowledged())
        await self._stream.write(req)
        await self._give_back_permits(dropped)

    async def _give_back_permits(self, dropped: int) -> None:
        if dropped:  # dropped messages had used permits
            await self._stream.write(
                broker_pb2.ConsumerRequest(flow=broker_pb2.Flow(permits=dropped))
            )

    # ------------------------------------------------------------ requests

    async def seek(self, target: MessageId | int, timeout_s: float) -> None:
        """Reset the subscription: the next message is the one after ``target``
        (a MessageId; ``target`` itself with start_message_id_inclusive, as in
        Pulsar) or the first one published at or after ``target`` (ms)."""
        await self.flush_acks()
        seek = broker_pb2.Seek()
        if isinstance(target, MessageId):
            inclusive = self.opts.start_message_id_inclusive
            seek.message_id.CopyFrom(id_data_of(target))
            seek.inclusive = inclusive
            self._start_skip.skip_to(target, inclusive)
        elif isinstance(target, int) and not isinstance(target, bool):
            seek.publish_time_ms = target
        else:
            raise TypeError(f"seek takes a MessageId or a publish time in ms, not {target!r}")
        dropped: list[int] = []  # what came before the answer (old position)
        req = broker_pb2.ConsumerRequest(seek=seek)
        await self._stream.request(req, timeout_s, self._check, lambda: self._drop(dropped))
        await self._give_back_permits(sum(dropped))

    def _drop(self, dropped: list[int]) -> None:  # on the answer to a seek
        with self._arrived:
            dropped.append(self._incoming.drop_all())
        self._decoder.chunks.restart(forget_completed=True)  # read again as asked
        self.last_dequeued = None

    async def get_last_message_id(self, timeout_s: float) -> MessageId:
        """The id of the last entry stored in the topic (entry granularity)."""
        return await self._stream.request(  # type: ignore[no-any-return]
            broker_pb2.ConsumerRequest(get_last_message_id=broker_pb2.GetLastMessageId()),
            timeout_s,
            self._check,
        )

    async def unsubscribe(self, timeout_s: float) -> None:
        """Delete the subscription (refused while other consumers are connected)."""
        await self.flush_acks()
        await self._stream.request(
            broker_pb2.ConsumerRequest(unsubscribe=broker_pb2.Unsubscribe()), timeout_s, self._check
        )
        self.closed = True
        await self._stop_tasks()
        self._fail(AlreadyClosed(f"consumer {self.name} unsubscribed from {self.subscription}"))

    async def close(self) -> None:
        if self.closed:
            return
        await self.flush_acks()
        self.closed = True
        if self._reconnecting and self._reader_task is not None:
            self._reader_task.cancel()  # nothing to say goodbye to
        elif self._stream.call is not None:
            try:
                await self._stream.say_goodbye()
                # The broker ends the stream once it processed everything before 'close'.
                await asyncio.wait_for(self._reader_task or asyncio.sleep(0), CLOSE_TIMEOUT_S)
            except Exception:
                pass
        await self._stop_tasks()
        self._fail(AlreadyClosed(f"consumer {self.name} is closed"))

    async def _stop_tasks(self) -> None:
        if self._reader_task is not None:
            self._reader_task.cancel()
        self._redelivery.cancel()
        if self._dead_letters is not None:
            await self._dead_letters.close()
