"""The asyncio API: ``client.aio.Client`` and its producers and consumers.

Everything that waits is a coroutine. ``Producer.send`` returns an awaitable
future instead of being a coroutine, so a caller can keep many sends in
flight without a task per message (``await producer.send(b"x")`` reads the
same either way).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import re
import uuid
import weakref
from collections.abc import Callable, Coroutine
from typing import Any

from client._batch_receive import batch_receive_async
from client._client_options import client_transport
from client._connection import Connection, Connections, parse_service_url
from client._consumer import ConsumerEngine
from client._consumer_options import ConsumerOptions
from client._factory_options import check_options, check_topic, pattern_topic, prepare_send
from client._gc import tune_gc, tune_malloc
from client._multi import (
    MultiConsumerEngine,
    PartitionedProducerEngine,
    expand_partitions,
    partitions_of,
    pattern_namespace,
)
from client._producer import ProducerEngine
from client._producer_options import ProducerOptions
from client._reader import close_reader, has_message_available, reached_end_of_topic
from client.authentication import token_of
from client.dead_letter import (
    DEFAULT_MAX_RECONSUME_TIMES,
    RetryLetters,
    default_dead_letter_topic,
    default_retry_letter_topic,
)
from client.enums import ConsumerType, InitialPosition, ProducerAccessMode, SubscriptionMode
from client.exceptions import (
    AlreadyClosed,
    InvalidConfiguration,
    InvalidTopicName,
    MagnetarError,
    Timeout,
)
from client.message import Message
from client.policies import ConsumerDeadLetterPolicy
from protos.message_id import MessageId
from protos.topic_name import TopicName

log = logging.getLogger(__name__)


AnyProducerEngine = ProducerEngine | PartitionedProducerEngine
AnyConsumerEngine = ConsumerEngine | MultiConsumerEngine


class Producer:
    def __init__(self, engine: AnyProducerEngine) -> None:
        self._engine = engine

    def send(self, content: Any, **kwargs: Any) -> asyncio.Future[MessageId]:
        """Publish; the returned future resolves to the MessageId once stored."""
        engine = self._engine
        fut: asyncio.Future[MessageId] = engine.loop.create_future()
        # The engine settles the future itself (client.message.settle).
        if kwargs or engine.opts.schema is not None:
            payload, args = prepare_send(engine.opts.schema, content, kwargs)
            engine.enqueue(payload, fut, may_block=False, **args)
        else:  # the common send, once per message: no keywords to pass on
            engine.enqueue(content, fut, may_block=False)
        return fut

    async def flush(self) -> None:
        await self._engine.flush()

    async def close(self) -> None:
        await self._engine.close()

    def topic(self) -> str:
        return self._engine.topic

    def producer_name(self) -> str:
        return self._engine.name

    def last_sequence_id(self) -> int:
        return self._engine.last_sequence_id

    def is_connected(self) -> bool:
        """Open, and its stream to the broker is up (not reconnecting)."""
        engine = self._engine
        return not engine.closed and engine.failure is None and engine.connected


class Consumer:
    def __init__(self, engine: AnyConsumerEngine) -> None:
        self._engine = engine
        self._listener_task: asyncio.Task | None = None
        self._resumed = asyncio.Event()
        self._resumed.set()
        self._retry: RetryLetters | None = None

    async def reconsume_later(
        self, message: Message, delay_ms: int, properties: dict[str, str] | None = None
    ) -> None:
        """Consume ``message`` again after ``delay_ms`` through the retry letter
        topic (or, past ``max_redeliver_count`` tries, the dead letter topic),
        then acknowledge it here. Needs ``retry_enable=True``."""
        if self._retry is None:
            raise InvalidConfiguration("reconsume_later needs subscribe(..., retry_enable=True)")
        if not isinstance(delay_ms, int) or delay_ms < 0:
            raise InvalidConfiguration(f"delay_ms must be an int >= 0, not {delay_ms!r}")
        await self._retry.reconsume_later(message, delay_ms, properties)
        self._engine.acknowledge(message)

    def _start_listener(self, listener: Callable[[Consumer, Message], Any]) -> None:
        """Call ``listener(consumer, message)`` for each message (awaited when
        it returns an awaitable); an exception in it is logged."""

        async def run() -> None:
            while not self._engine.closed:
                await self._resumed.wait()
                try:
                    msg = await self._engine.receive_async(200)
                except Timeout:
                    continue
                except MagnetarError:
                    return
                try:
                    result = listener(self, msg)
                    if inspect.isawaitable(result):
                        await result
                except Exception:
                    log.exception("message_listener failed on %s", msg.message_id())

        self._listener_task = asyncio.get_running_loop().create_task(run())

    def pause_message_listener(self) -> None:
        self._resumed.clear()

    def resume_message_listener(self) -> None:
        self._resumed.set()

    async def receive(self, timeout_millis: int | None = None) -> Message:
        return await self._engine.receive_async(timeout_millis)

    async def batch_receive(self) -> list[Message]:
        """Messages per the consumer's ``batch_receive_policy`` (maybe none)."""
        return await batch_receive_async(self._engine, self._engine.opts.batch_receive_policy)

    async def negative_acknowledge(self, message: Message | MessageId) -> None:
        self._engine.negative_acknowledge(message)

    async def acknowledge(self, message: Message | MessageId) -> None:
        self._engine.acknowledge(message)

    async def acknowledge_cumulative(self, message: Message | MessageId) -> None:
        self._engine.acknowledge_cumulative(message)

    async def redeliver_unacknowledged_messages(self) -> None:
        """Have every unacknowledged message delivered again (redelivery count + 1)."""
        await self._engine.redeliver_unacknowledged()

    async def unsubscribe(self) -> None:
        """Delete the subscription; refused while other consumers are connected."""
        await self._engine.unsubscribe(30.0)

    async def seek(self, target: MessageId | int) -> None:
        """Next message: ``target`` (a MessageId) or the first published at or after it (ms)."""
        await self._engine.seek(target, 30.0)

    async def get_last_message_id(self) -> MessageId:
        return await self._engine.get_last_message_id(30.0)

    async def close(self) -> None:
        if self._listener_task is not None:
            self._listener_task.cancel()
        await self._engine.close()
        if self._retry is not None:
            await self._retry.close()

    def topic(self) -> str:
        return self._engine.topic

    def subscription_name(self) -> str:
        return self._engine.subscription

    def consumer_name(self) -> str:
        return self._engine.name

    def is_connected(self) -> bool:
        return not self._engine.closed and self._engine.failure is None


class Reader:
    """A non-durable exclusive subscription read from a chosen position."""

    def __init__(self, engine: AnyConsumerEngine, timeout_s: float) -> None:
        self._engine = engine
        self._timeout_s = timeout_s

    async def read_next(self, timeout_millis: int | None = None) -> Message:
        msg = await self._engine.receive_async(timeout_millis)
        # The cursor of a reader lives only in the broker's memory; acknowledging
        # keeps the unacked-message limits from stalling a long read.
        self._engine.acknowledge_cumulative(msg)
        return msg

    async def has_message_available(self) -> bool:
        return await has_message_available(self._engine, self._timeout_s)

    async def has_reached_end_of_topic(self) -> bool:
        """The topic was terminated (``topics terminate``) and everything in
        it has been read (beyond Pulsar's Python client: Java's
        ``hasReachedEndOfTopic``)."""
        return await reached_end_of_topic(self._engine, self._timeout_s)

    async def seek(self, target: MessageId | int) -> None:
        await self._engine.seek(target, self._timeout_s)

    def topic(self) -> str:
        return self._engine.topic

    def is_connected(self) -> bool:
        return not self._engine.closed and self._engine.failure is None

    async def close(self) -> None:
        await close_reader(self._engine, self._timeout_s)


class Client:
    def __init__(
        self,
        service_url: str,
        authentication: Any = None,
        operation_timeout_seconds: int = 30,
        connection_timeout_ms: int = 10000,
        **kwargs: Any,
    ) -> None:
        tls, keep_alive_s = client_transport(service_url, kwargs)
        tune_gc()  # client/_gc.py
        tune_malloc()
        self._operation_timeout_s = operation_timeout_seconds
        # What the connection pool is made with, when first needed.
        self._pool_args = (
            parse_service_url(service_url), connection_timeout_ms, operation_timeout_seconds,
            token_of(authentication), tls, keep_alive_s,
        )  # fmt: skip
        self._connections: Connections | None = None
        self._producers: list[AnyProducerEngine] = []
        self._consumers: list[AnyConsumerEngine] = []
        # Their producers close with the client (weakly: a consumer dropped
        # unclosed takes its retry letters with it).
        self._retry_letters: weakref.WeakSet[RetryLetters] = weakref.WeakSet()
        # Producers and consumers being started (close() cancels them).
        self._starting: set[asyncio.Task] = set()
        self._closing = False
        self._closed = False

    def _pool(self) -> Connections:
        if self._closed:
            raise AlreadyClosed("the client is closed")
        if self._connections is None:
            self._connections = Connections(*self._pool_args)
        return self._connections

    async def _owner(self, topic: str) -> Connection:
        """The connection to the broker serving ``topic`` (after a lookup)."""
        return await self._pool().lookup(topic)

    async def create_producer(self, topic: str, **options: Any) -> Producer:
        options = check_options("create_producer", options)
        name = check_topic(topic)
        if options.get("chunking_enabled") and "batching_enabled" not in options:
            options["batching_enabled"] = False  # chunking alone: as the official client
        opts = ProducerOptions(**options)
        if opts.chunking_enabled and not TopicName.parse(name).is_persistent:
            raise InvalidConfiguration("chunking_enabled is for persistent topics only")
        loop = asyncio.get_running_loop()
        n = await partitions_of(self._pool(), name, self._operation_timeout_s)
        engine: AnyProducerEngine = (
            PartitionedProducerEngine(self._owner, name, n, opts, loop)
            if n
            else ProducerEngine(await self._owner(name), name, opts, loop)
        )
        if isinstance(engine, ProducerEngine):
            engine.resolver = self._owner
        # WaitForExclusive is pending until this producer is the only one.
        waits = opts.access_mode == ProducerAccessMode.WaitForExclusive
        await self._start(engine.start(), engine, None if waits else self._operation_timeout_s)
        self._producers.append(engine)
        return Producer(engine)

    async def get_topic_partitions(self, topic: str) -> list[str]:
        """The partitions of a partitioned topic, else ``[topic]`` (full names)."""
        return await expand_partitions(self._pool(), check_topic(topic), self._operation_timeout_s)

    async def subscribe(
        self, topic: str | list[str] | re.Pattern, subscription_name: str, **options: Any
    ) -> Consumer:
        """Subscribe to a topic (all partitions of a partitioned one), a list of
        topics, or the topics of one namespace matching a compiled pattern."""
        options = check_options("subscribe", options)
        if not isinstance(subscription_name, str) or not subscription_name:
            raise InvalidConfiguration("subscription_name must be a non-empty str")
        topic = pattern_topic(topic, options.pop("is_pattern_topic", False))
        listener = options.pop("message_listener", None)
        if listener is not None and not callable(listener):
            raise InvalidConfiguration("message_listener must be callable (consumer, message)")
        retry = options.pop("retry_enable", False)
        opts = ConsumerOptions(**options)
        if retry:
            consumer = await self._subscribe_with_retry(topic, subscription_name, opts)
        else:
            consumer = await self._subscribe(topic, subscription_name, opts)
        if listener is not None:
            consumer._start_listener(listener)
        return consumer

    async def _subscribe(
        self, topic: str | list[str] | re.Pattern, subscription_name: str, opts: ConsumerOptions
    ) -> Consumer:
        service = self._pool()
        loop = asyncio.get_running_loop()
        timeout = self._operation_timeout_s
        if isinstance(topic, str):
            name = check_topic(topic)
            if await partitions_of(service, name, timeout) == 0:
                engine = ConsumerEngine(
                    await self._owner(name), name, subscription_name, opts, loop
                )
                engine.resolver = self._owner
                await self._start(engine.start(), engine, timeout)
                self._consumers.append(engine)
                return Consumer(engine)
            multi = MultiConsumerEngine(
                service, name, subscription_name, opts, loop, timeout, self._owner
            )
            await self._start_multi(multi, [name])
        elif isinstance(topic, list | tuple):
            if not topic:
                raise InvalidConfiguration("subscribe got an empty list of topics")
            names = [check_topic(t) for t in topic]
            multi = MultiConsumerEngine(
                service, ",".join(names), subscription_name, opts, loop, timeout, self._owner
            )
            await self._start_multi(multi, names)
        elif isinstance(topic, re.Pattern):
            domain, namespace = pattern_namespace(topic)
            multi = MultiConsumerEngine(
                service, topic.pattern, subscription_name, opts, loop, timeout, self._owner
            )
            multi.start_discovery(domain, namespace, topic)
            try:
                await multi.discover_now()
            except BaseException:
                await multi.close()
                raise
            self._consumers.append(multi)
        else:
            raise InvalidTopicName(
                f"subscribe takes a topic name, a list of them or a compiled pattern, not "
                f"{type(topic).__name__}"
            )
        return Consumer(multi)

    async def _subscribe_with_retry(
        self, topic: Any, subscription_name: str, opts: ConsumerOptions
    ) -> Consumer:
        """The topic and its retry letter topic, as one consumer."""
        if not isinstance(topic, str):
            raise InvalidConfiguration("retry_enable works with one topic name")
        name = check_topic(topic)
        policy = opts.dead_letter_policy
        retry_topic = check_topic(
            (policy.retry_letter_topic if policy else None)
            or default_retry_letter_topic(name, subscription_name)
        )
        dead_topic = (policy.dead_letter_topic if policy else None) or default_dead_letter_topic(
            name, subscription_name
        )
        max_times = policy.max_redeliver_count if policy else DEFAULT_MAX_RECONSUME_TIMES
        # Both topics dead-letter to the main topic's DLQ.
        opts.dead_letter_policy = ConsumerDeadLetterPolicy(
            max_times,
            dead_letter_topic=dead_topic,
            retry_letter_topic=retry_topic,
            initial_subscription_name=policy.initial_subscription_name if policy else None,
        )
        loop = asyncio.get_running_loop()
        multi = MultiConsumerEngine(
            self._pool(),
            name,
            subscription_name,
            opts,
            loop,
            self._operation_timeout_s,
            self._owner,
        )
        await self._start_multi(multi, [name, retry_topic])
        consumer = Consumer(multi)
        consumer._retry = RetryLetters(
            self._owner,
            loop,
            name,
            subscription_name,
            multi.name,
            retry_topic,
            dead_topic,
            max_times,
        )
        self._retry_letters.add(consumer._retry)
        return consumer

    async def _start_multi(self, multi: MultiConsumerEngine, topics: list[str]) -> None:
        try:
            await self._start(multi.add_topics(topics), multi, None)
        except BaseException:
            await multi.close()
            raise
        self._consumers.append(multi)

    async def _start(
        self, start: Coroutine[Any, Any, Any], engine: Any, timeout: float | None
    ) -> None:
        """An engine's start, run as a task that close() cancels: a producer
        or consumer still being created when the client closes fails with
        AlreadyClosed instead of outliving the client (one started as the
        client closed is closed again)."""
        task = asyncio.get_running_loop().create_task(start)
        self._starting.add(task)
        try:
            await asyncio.wait_for(task, timeout)
        except asyncio.CancelledError:
            me = asyncio.current_task()
            if self._closing and task.cancelled() and not (me is not None and me.cancelling()):
                raise AlreadyClosed("the client was closed while this was being created") from None
            raise
        finally:
            self._starting.discard(task)
        if self._closing:
            await engine.close()
            raise AlreadyClosed("the client was closed while this was being created")

    async def create_reader(
        self, topic: str, start_message_id: MessageId, **options: Any
    ) -> Reader:
        """A non-durable exclusive subscription from ``start_message_id``
        (named ``<subscription_role_prefix>-reader-<random>``, as Pulsar)."""
        options = check_options("create_reader", options)
        if options.pop("reader_listener", None) is not None:
            raise InvalidConfiguration(
                "reader_listener is for the sync Client (as in the official client); "
                "await read_next() here"
            )
        if not isinstance(start_message_id, MessageId):
            raise InvalidConfiguration(
                f"start_message_id must be a MessageId (or MessageId.earliest/latest), "
                f"not {start_message_id!r}"
            )
        name = check_topic(topic)
        prefix = options.pop("subscription_role_prefix", None)
        if prefix is not None and (not isinstance(prefix, str) or not prefix):
            raise InvalidConfiguration(
                f"subscription_role_prefix must be a non-empty str, not {prefix!r}"
            )
        opts = ConsumerOptions(
            consumer_type=ConsumerType.Exclusive,
            receiver_queue_size=options.pop("receiver_queue_size", 1000),
            consumer_name=options.pop("reader_name", None),
            subscription_mode=SubscriptionMode.NonDurable,
            start_message_id=start_message_id,
            start_message_id_inclusive=bool(options.pop("start_message_id_inclusive", False)),
            **options,
        )
        subscription = (
            f"{prefix}-reader-{uuid.uuid4().hex[:10]}"
            if prefix
            else f"reader-{uuid.uuid4().hex[:10]}"
        )
        service = self._pool()
        loop = asyncio.get_running_loop()
        timeout = self._operation_timeout_s
        if await partitions_of(service, name, timeout):
            if start_message_id not in (MessageId.earliest, MessageId.latest):
                raise InvalidConfiguration(
                    f"{name} is partitioned: a reader of all its partitions starts at "
                    "MessageId.earliest or MessageId.latest (read one partition for a given id)"
                )
            multi = MultiConsumerEngine(
                service, name, subscription, opts, loop, timeout, self._owner
            )
            await self._start_multi(multi, [name])
            return Reader(multi, timeout)
        engine = ConsumerEngine(await self._owner(name), name, subscription, opts, loop)
        engine.resolver = self._owner
        await self._start(engine.start(), engine, timeout)
        self._consumers.append(engine)
        return Reader(engine, timeout)

    async def close(self) -> None:
        if self._closed:
            return
        self._closing = True
        starting = list(self._starting)
        for task in starting:
            task.cancel()  # its creator hears AlreadyClosed
        await asyncio.gather(*starting, return_exceptions=True)
        for p in self._producers:
            try:
                await p.close()
            except Exception:
                pass
        for c in self._consumers:
            try:
                await c.close()
            except Exception:
                pass
        for letters in list(self._retry_letters):
            try:
                await letters.close()  # (again, if its consumer was closed: a no-op)
            except Exception:
                pass
        self._closed = True
        if self._connections is not None:
            await self._connections.close()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


__all__ = [
    "Client",
    "Consumer",
    "ConsumerType",
    "InitialPosition",
    "Message",
    "MessageId",
    "Producer",
    "SubscriptionMode",
]
