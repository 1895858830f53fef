"""The producer engine shared by the sync and asyncio APIs.

Theory of operation. Messages are added to an open batch under a lock, from
any thread; the batch is sealed into one entry when it reaches
``batching_max_messages`` or ``batching_max_allowed_size_in_bytes``, when its
``batching_max_publish_delay_ms`` timer fires, on ``flush()``, or at once
for a synchronous ``send``. Sealed entries wait in ``_ready`` until the
loop sends everything ready in one request (``_send_ready``, once per loop
turn). Receipts come back in send order and complete each message's
callback with its MessageId as the connection reads them (``_on_answer``).
``max_pending_messages`` bounds the messages between ``send`` and receipt.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import math
import threading
import time

import grpc

from client._connection import (
    PRODUCER_RECONNECT_CODES,
    Connection,
    Resolver,
    call_in_loop,
    call_soon_in_loop,
    open_stream,
    retry_with_backoff,
)
from client._produce_mux import ProducerCall
from client._producer_batch import Batch, group_by_key, send_batches
from client._producer_options import ProducerOptions
from client._schema_use import schema_data
from client.compression import wire_type
from client.enums import BatchingType
from client.exceptions import (
    AlreadyClosed,
    BrokerPersistenceError,
    ConnectError,
    MagnetarError,
    MessageTooBig,
    ProducerBusy,
    ProducerQueueIsFull,
    ServiceUnitNotReady,
    Timeout,
    from_wire,
    from_wire_or,
)
from client.message import (
    Callback,
    PendingMessage,
    build_chunk_entries,
    build_entry,
    settle,
    settle_failed,
    settle_stored,
)
from protos import broker_pb2
from protos.entry import key_values
from protos.message_id import entry_ids

log = logging.getLogger(__name__)


def _as_bytes(payload: object) -> bytes:
    """A message's content as bytes (copied from a bytearray or memoryview)."""
    if not isinstance(payload, bytes | bytearray | memoryview):
        raise TypeError(f"message content must be bytes, not {type(payload).__name__}")
    return bytes(payload)


RECONNECT_ERRORS = (ServiceUnitNotReady, ConnectError, ProducerBusy, BrokerPersistenceError)
CLOSE_TIMEOUT_S = 2.0  # how long close() waits for the broker to hear it


class ProducerEngine:
    def __init__(
        self,
        connection: Connection,
        topic: str,
        options: ProducerOptions,
        loop: asyncio.AbstractEventLoop,
        partition: int = -1,
    ) -> None:
        options.validate()
        self.connection = connection
        self.topic = topic
        self.opts = options
        self.loop = loop
        self.partition = partition
        self._compression = wire_type(options.compression_type)
        self.name = ""
        self.max_message_size = 5 * 1024 * 1024
        self._schema_version = b""  # the registry's version of opts.schema, if any
        self._lock = threading.Lock()
        self._space = threading.Condition(self._lock)
        self._open: list[PendingMessage] = []
        self._open_bytes = 0
        self._timer_armed = False
        self._ready: collections.deque[Batch] = collections.deque()
        self._inflight: collections.deque[Batch] = collections.deque()
        self._pending = 0
        self._kicked = False
        self._wake = asyncio.Event()
        self._next_seq = 0
        self._last_seq_published = -1
        self.closed = False
        self.failure: MagnetarError | None = None
        self._call: ProducerCall | None = None
        self._tasks: list[asyncio.Task] = []
        self._drained = asyncio.Event()
        self._drained.set()
        # Reconnection: the broker serving the topic, looked up again.
        self.resolver: Resolver | None = None
        self._started = False
        self._connected = asyncio.Event()

    @property
    def connected(self) -> bool:
        """Its stream to the broker serves (it is not reconnecting)."""
        return self._connected.is_set()

    # ------------------------------------------------------------ lifecycle

    async def _open_stream(self) -> broker_pb2.ProducerCreated:
        """A stream with this producer created on it (at start and after a
        reconnection, when the topic is looked up again)."""
        if self.resolver is not None and self._started:
            self.connection = await self.resolver(self.topic)
        await self.connection.ensure_ready()
        call = self.connection.producer_call()
        try:
            return await self._create_on(call)
        except BaseException:
            call.cancel()  # a create cancelled or refused leaves no producer behind
            raise

    async def _create_on(self, call: ProducerCall) -> broker_pb2.ProducerCreated:
        create = broker_pb2.ProducerRequest(
            create=broker_pb2.CreateProducer(
                topic=self.topic,
                producer_name=self.name or self.opts.producer_name or "",
                access_mode=int(self.opts.access_mode),  # type: ignore[arg-type]
                properties=key_values(self.opts.properties),
                schema=schema_data(self.opts.schema),
            )
        )
        resp = await open_stream(self.connection, call, create)
        if resp is grpc.aio.EOF:
            raise from_wire_or(None, f"the broker closed the producer stream on {self.topic}")
        if resp.HasField("error"):
            raise from_wire(resp.error)
        self._call = call
        return resp.created

    async def start(self) -> None:
        created = await self._open_stream()
        self.name = created.producer_name
        self.max_message_size = created.max_message_size
        self.topic = created.topic
        self._schema_version = created.schema_version
        if self.opts.initial_sequence_id is not None:
            self._next_seq = self.opts.initial_sequence_id + 1
            self._last_seq_published = self.opts.initial_sequence_id
        elif created.last_sequence_id >= 0:
            self._next_seq = created.last_sequence_id + 1
            self._last_seq_published = created.last_sequence_id
        self._started = True
        self._connected.set()
        self._tasks = [
            self.loop.create_task(self._writer()),
            self.loop.create_task(self._reader()),
        ]
        if self.opts.send_timeout_millis:
            self._tasks.append(self.loop.create_task(self._timeouts()))

    async def close(self) -> None:
        if self.closed:
            return
        try:
            # While reconnecting there is no broker to flush to: what is
            # pending fails with AlreadyClosed below instead of waiting.
            if self.failure is None and self._connected.is_set():
                await self.flush()
        finally:
            self.closed = True
            with self._space:
                self._space.notify_all()
            for task in self._tasks:
                task.cancel()  # also a reconnection in progress
            if self._call is not None and self._connected.is_set():
                try:
                    await asyncio.wait_for(self._say_goodbye(self._call), CLOSE_TIMEOUT_S)
                except Exception:
                    pass  # the broker drops the producer with the stream anyway
            self._fail_all(AlreadyClosed(f"producer {self.name} on {self.topic} is closed"))

    @staticmethod
    async def _say_goodbye(call: ProducerCall) -> None:
        await call.write(broker_pb2.ProducerRequest(close=broker_pb2.CloseProducer()))
        await call.done_writing()

    @property
    def last_sequence_id(self) -> int:
        return self._last_seq_published

    # ------------------------------------------------------------ sending (any thread)

    def enqueue(
        self,
        payload: bytes,
        callback: Callback,
        *,
        properties: dict[str, str] | None = None,
        partition_key: str | None = None,
        ordering_key: bytes | None = None,
        sequence_id: int | None = None,
        event_timestamp: int | None = None,
        deliver_at: int | None = None,
        flush_now: bool = False,
        may_block: bool = True,
        key_b64: bool = False,
    ) -> None:
        # The checks a message needs are inline on this path (it runs once
        # per message); what is rare is in functions of its own.
        null_value = payload is None  # a tombstone: no value, a key
        if type(payload) is not bytes:
            payload = b"" if null_value else _as_bytes(payload)
        if len(payload) > self.max_message_size and not self.opts.chunking_enabled:
            raise self._too_big(len(payload))
        with self._lock:  # (_space's lock; taken bare, it costs less per message)
            if self.closed or self.failure is not None:
                self._check_open()
            if self._pending >= self.opts.max_pending_messages:
                self._wait_for_room_locked(may_block)
            seq = self._next_seq if sequence_id is None else int(sequence_id)
            self._next_seq = seq + 1
            msg = PendingMessage(
                payload,
                seq,
                callback,
                properties,
                partition_key,
                ordering_key,
                int(event_timestamp) if event_timestamp is not None else 0,
                deliver_at,
                null_value,
                key_b64,
            )
            self._pending += 1
            # A batch that fills the pending queue of a sender that would
            # block can grow no more: it goes now.
            full = self.opts.block_if_queue_full and self._pending >= self.opts.max_pending_messages
            sealed = self._add_locked(msg, flush_now or full)
            arm = bool(self._open) and not self._timer_armed
            if arm:
                self._timer_armed = True
        if sealed:
            self._kick()
        if arm:
            call_in_loop(self.loop, self._arm_timer)

    def _too_big(self, size: int) -> MessageTooBig:
        return MessageTooBig(
            f"message of {size} bytes is over the broker's max_message_size "
            f"({self.max_message_size} bytes)"
        )

    def _wait_for_room_locked(self, may_block: bool) -> None:
        """Return once fewer than ``max_pending_messages`` are pending: at once,
        or after blocking (``block_if_queue_full``), or raise."""
        limit = self.opts.max_pending_messages
        if self._pending < limit:
            return
        if not (self.opts.block_if_queue_full and may_block):
            raise ProducerQueueIsFull(
                f"{self._pending} messages are pending on {self.topic} "
                f"(max_pending_messages = {limit})"
            )
        # (The batch that filled the queue was sealed as it did: enqueue.)
        while self._pending >= limit:
            self._space.wait(timeout=0.5)
            self._check_open()

    def _add_locked(self, msg: PendingMessage, flush_now: bool) -> bool:
        """Add ``msg`` to the open batch; True when a batch was sealed."""
        opts = self.opts
        size = len(msg.payload)
        sealed = False
        if self._open and (
            msg.deliver_at is not None
            or self._open_bytes + size > opts.batching_max_allowed_size_in_bytes
        ):
            self._seal_locked()  # a delayed message is never batched
            sealed = True
        self._open.append(msg)
        self._open_bytes += size
        if (
            flush_now
            or msg.deliver_at is not None
            or not opts.batching_enabled
            or len(self._open) >= opts.batching_max_messages
            or self._open_bytes >= opts.batching_max_allowed_size_in_bytes
        ):
            self._seal_locked()
            sealed = True
        return sealed

    def has_open_batch(self) -> bool:
        with self._lock:
            return bool(self._open)

    def _check_open(self) -> None:
        if self.closed:
            raise AlreadyClosed(f"producer {self.name} on {self.topic} is closed")
        if self.failure is not None:
            raise self.failure

    def _seal_locked(self) -> None:
        messages, self._open, self._open_bytes = self._open, [], 0
        if not messages:
            return
        now_ms = int(time.time() * 1000)
        if self.opts.batching_type == BatchingType.KeyBased and len(messages) > 1:
            groups = group_by_key(messages)
        else:
            groups = [messages]
        for group in groups:
            entry = build_entry(group, self.name, now_ms, self._compression, self._schema_version)
            if len(entry) > self.max_message_size and self.opts.chunking_enabled:
                self._add_chunks(group[0], now_ms)
            else:
                self._ready.append(Batch(group, entry))

    def _add_chunks(self, msg: PendingMessage, now_ms: int) -> None:
        try:
            chunks = build_chunk_entries(
                msg,
                self.name,
                now_ms,
                self._compression,
                self.max_message_size,
                self._schema_version,
            )
        except MagnetarError as exc:
            self._pending -= 1
            error = exc
            call_in_loop(self.loop, lambda: settle(msg.callback, error, None))
            return
        failure: list[BaseException] = []
        for i, chunk in enumerate(chunks):
            last = i == len(chunks) - 1
            self._ready.append(
                Batch([msg] if last else [], chunk, msg.sequence_id, chunk_failure=failure)
            )

    def _kick(self) -> None:
        with self._lock:
            if self._kicked:
                return
            self._kicked = True
        call_soon_in_loop(self.loop, self._send_ready)

    def _arm_timer(self) -> None:
        self.loop.call_later(self.opts.batching_max_publish_delay_ms / 1000, self._timer_fired)

    def _timer_fired(self) -> None:
        with self._lock:
            self._timer_armed = False
            self._seal_locked()
            has_ready = bool(self._ready)
        if has_ready:
            self._kick()

    def seal_open_batch(self) -> None:
        with self._lock:
            self._seal_locked()
            has_ready = bool(self._ready)
        if has_ready:
            self._kick()

    async def flush(self) -> None:
        self.seal_open_batch()
        while True:
            with self._lock:
                if not self._ready and not self._inflight:
                    return
                self._drained.clear()
            await self._drained.wait()

    # ------------------------------------------------------------ loop side

    def _send_ready(self) -> None:
        """The sealed batches go on the stream, in one request (once per
        loop turn: _kick); while the producer reconnects, the writer sends
        them once it is back."""
        if not self._connected.is_set():
            self._wake.set()
            return
        with self._lock:
            self._kicked = False
            batches = list(self._ready)
            self._ready.clear()
        if not batches:
            return
        now = time.monotonic()
        for b in batches:
            b.sent_at = now
            self._inflight.append(b)
        try:
            assert self._call is not None
            send_batches(self._call, batches)
        except Exception as exc:
            # The stream broke: the reader reconnects and sends them again.
            log.debug("%s: sending failed (%s); resent after reconnecting", self.topic, exc)

    async def _writer(self) -> None:
        """What was sealed while the producer reconnected, once it is back."""
        while True:
            await self._wake.wait()
            self._wake.clear()
            await self._connected.wait()
            self._send_ready()

    async def _reader(self) -> None:
        while not self.closed and self.failure is None:
            why = await self._read_until_broken()
            if isinstance(why, MagnetarError):
                self._fail_all(why)
                return
            if self.closed or self.failure is not None:
                return
            log.info("%s: producer %s reconnects (%s)", self.topic, self.name, why)
            await self._reconnect()

    async def _read_until_broken(self) -> str | MagnetarError:
        """Complete sends from the receipts until the stream ends: why (to
        reconnect), or the broker's final error."""
        call = self._call
        assert call is not None
        call.on_answer = self._on_answer  # receipts are taken as they are read
        try:
            while (resp := await call.read()) is not grpc.aio.EOF:
                if self._on_answer(resp, call):
                    continue
                if resp.WhichOneof("response") == "error":
                    if resp.error.code not in PRODUCER_RECONNECT_CODES:
                        return from_wire(resp.error)
                    return str(resp.error.message)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            return f"the connection failed: {exc}"
        return "the broker closed the stream"

    def _on_answer(self, resp: broker_pb2.ProducerResponse, call: ProducerCall) -> bool:
        """Complete the sends a receipt or a send error answers (True);
        anything else is for the reader (False). Called by the connection
        as it reads them, or by the reader."""
        if call is not self._call:
            return False  # a stream given up: its answers are not read
        if self.closed:
            return True  # what was in flight failed with AlreadyClosed
        kind = resp.WhichOneof("response")
        if kind == "receipts":
            r = resp.receipts
            for seq, ledger_id, entry_id in zip(
                r.sequence_ids, r.ledger_ids, r.entry_ids, strict=True
            ):
                self._complete(seq, ledger_id, entry_id, None)
            return True
        if kind == "send_error":
            error = from_wire(resp.send_error.error)
            self._complete(resp.send_error.sequence_id, -1, -1, error)
            return True
        return False

    async def _reconnect(self) -> None:
        """Look the topic up again, recreate the producer, resend what has no
        receipt yet; retried with backoff until it works or the producer is
        closed or failed (a send timeout fails the sends, not the producer)."""
        self._connected.clear()
        if self._call is not None:
            self._call.cancel()

        async def attempt() -> None:
            await self._open_stream()
            if self._inflight:
                send_batches(self._call, list(self._inflight))  # type: ignore[arg-type]

        await retry_with_backoff(
            attempt,
            RECONNECT_ERRORS,
            lambda: self.closed or self.failure is not None,
            lambda exc: self._fail_all(from_wire_or(exc, "reconnecting failed")),
            f"reconnecting producer {self.name} on {self.topic}",
        )
        self._connected.set()
        self._wake.set()

    def _complete(self, seq: int, ledger_id: int, entry_id: int, exc: MagnetarError | None) -> None:
        if not self._inflight or self._inflight[0].sequence_id != seq:
            log.warning("%s: receipt for unexpected sequence id %d", self.topic, seq)
            return
        batch = self._inflight.popleft()
        if batch.chunk_failure is not None:
            if exc is not None:
                batch.chunk_failure.append(exc)
            elif batch.chunk_failure:
                exc = from_wire_or(batch.chunk_failure[0], "a chunk of the message failed")
        n = batch.num_messages
        with self._space:
            self._pending -= n
            self._space.notify_all()
            drained = not self._inflight and not self._ready
        if exc is None and batch.messages:
            self._last_seq_published = max(self._last_seq_published, batch.messages[-1].sequence_id)
        if exc is None:
            settle_stored(batch.messages, entry_ids(self.partition, ledger_id, entry_id, n))
        else:
            settle_failed(batch.messages, exc)
        if drained:
            self._drained.set()

    def _fail_all(self, exc: MagnetarError, fatal: bool = True) -> None:
        """Fail what is pending; ``fatal``: the producer too (a timeout is not)."""
        if fatal and self.failure is None and not isinstance(exc, AlreadyClosed):
            self.failure = exc
        with self._space:
            batches = list(self._inflight) + list(self._ready)
            self._inflight.clear()
            self._ready.clear()
            if self._open:
                batches.append(Batch(self._open, b""))
                self._open, self._open_bytes = [], 0
            self._pending = 0
            self._space.notify_all()
        for b in batches:
            settle_failed(b.messages, exc)
        self._drained.set()

    async def _timeouts(self) -> None:
        limit = self.opts.send_timeout_millis / 1000
        while True:
            await asyncio.sleep(min(limit / 4, 0.5))
            with self._lock:  # the oldest sent, or sealed while the producer reconnects
                since = min(q[0].sent_at if q else math.inf for q in (self._inflight, self._ready))
            if time.monotonic() - since > limit:
                ms = self.opts.send_timeout_millis
                why = f"no receipt from the broker within send_timeout_millis ({ms} ms)"
                self._fail_all(Timeout(f"{why} on {self.topic}"), fatal=False)
