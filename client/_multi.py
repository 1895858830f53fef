"""Partitioned producers and multi-topic consumers, built from the
single-topic engines.

Theory of operation.

:class:`PartitionedProducerEngine` holds one :class:`ProducerEngine` per
partition and picks one for each message (``route``): a CustomPartition
router decides everything; otherwise a message with a partition key goes to
``hash(key) & 0x7FFFFFFF % n`` (``hashing_scheme``: Java's String.hashCode,
the default, or Murmur3-32, Pulsar's choices); a keyless message goes to
the producer's one random partition (UseSinglePartition) or round-robin
(RoundRobinDistribution), moving on when the current partition's open
batch is sealed, so batches stay whole (with batching off, every message
moves on).

:class:`MultiConsumerEngine` holds one :class:`ConsumerEngine` per topic
(the partitions of a partitioned topic, the topics of a list, or those of
a namespace matching a pattern, checked again every
``pattern_auto_discovery_period`` seconds). Children queue what they get
and wake it; ``receive`` takes from them in turn, so no topic starves.
Acknowledgements go to the child of the message's topic (carried in its
MessageId).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
import re
import threading
import time
from collections.abc import Callable
from typing import Any

from client._available import has_available
from client._connection import Connection, Connections, Resolver, call_in_loop
from client._consumer import ConsumerEngine
from client._consumer_options import ConsumerOptions
from client._producer import ProducerEngine
from client._producer_options import ProducerOptions
from client.enums import HashingScheme, PartitionsRoutingMode, RegexSubscriptionMode
from client.exceptions import (
    AlreadyClosed,
    InvalidConfiguration,
    MagnetarError,
    NotAllowedError,
    Timeout,
    from_wire,
)
from client.message import Callback, Message
from protos import broker_pb2
from protos.hashing import java_string_hash, murmur3_32
from protos.message_id import MessageId
from protos.topic_name import TopicName

log = logging.getLogger(__name__)


async def partitions_of(service: Connections, topic: str, timeout_s: float) -> int:
    """How many partitions ``topic`` has (0: not partitioned), from any listed broker."""
    request = broker_pb2.PartitionedTopicMetadataRequest(topic=topic)

    async def ask(conn: Connection) -> broker_pb2.PartitionedTopicMetadata:
        return await conn.stub.GetPartitionedTopicMetadata(  # type: ignore[no-any-return]
            request, timeout=timeout_s
        )

    resp = await service.call_service(ask, f"partition metadata of {topic}")
    if resp.error.code:
        raise from_wire(resp.error)
    return int(resp.partitions)


async def expand_partitions(service: Connections, topic: str, timeout_s: float) -> list[str]:
    """The partitions of a partitioned topic, else the topic itself."""
    n = await partitions_of(service, topic, timeout_s)
    name = TopicName.parse(topic)
    return [name.partition(i).full_name for i in range(n)] if n else [name.full_name]


# ---------------------------------------------------------------- producing


class RoutingMessage:
    """What a ``message_router`` sees (the Pulsar client passes a Message)."""

    __slots__ = ("_data", "_key", "_ordering_key", "_properties")

    def __init__(
        self,
        data: bytes,
        key: str | None,
        ordering_key: bytes | None,
        properties: dict[str, str] | None,
    ) -> None:
        self._data = data
        self._key = key
        self._ordering_key = ordering_key
        self._properties = properties or {}

    def data(self) -> bytes:
        return self._data

    def partition_key(self) -> str:
        return self._key or ""

    def ordering_key(self) -> bytes:
        return self._ordering_key or b""

    def properties(self) -> dict[str, str]:
        return dict(self._properties)


def key_partition(key: str, n: int, scheme: HashingScheme) -> int:
    h = java_string_hash(key) if scheme == HashingScheme.JavaStringHash else murmur3_32(key)
    return (h & 0x7FFFFFFF) % n


class PartitionedProducerEngine:
    def __init__(
        self,
        resolver: Resolver,
        topic: str,
        partitions: int,
        options: ProducerOptions,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        options.validate()
        name = TopicName.parse(topic)
        self.topic = name.full_name
        self.opts = options
        self.loop = loop
        self.resolver = resolver
        self.partitions = partitions
        self.engines: list[ProducerEngine] = []
        self._lock = threading.Lock()
        self._rr = random.randrange(partitions)
        self._rr_used = False
        self._single = random.randrange(partitions)

    async def start(self) -> None:
        name = TopicName.parse(self.topic)
        # The official rule: each partition's queue shrinks so that all of
        # them together stay within max_pending_messages_across_partitions.
        per_partition = max(
            1,
            min(
                self.opts.max_pending_messages,
                self.opts.max_pending_messages_across_partitions // self.partitions,
            ),
        )
        for i in range(self.partitions):
            partition = name.partition(i).full_name
            engine = ProducerEngine(
                await self.resolver(partition),
                partition,
                dataclasses.replace(self.opts, max_pending_messages=per_partition),
                self.loop,
                i,
            )
            engine.resolver = self.resolver
            self.engines.append(engine)
        try:
            await asyncio.gather(*(e.start() for e in self.engines))
        except BaseException:
            await asyncio.gather(*(e.close() for e in self.engines), return_exceptions=True)
            raise

    @property
    def name(self) -> str:
        return self.engines[0].name

    @property
    def closed(self) -> bool:
        return all(e.closed for e in self.engines)

    @property
    def failure(self) -> MagnetarError | None:
        return next((e.failure for e in self.engines if e.failure is not None), None)

    @property
    def connected(self) -> bool:
        return all(e.connected for e in self.engines)

    @property
    def last_sequence_id(self) -> int:
        return max(e.last_sequence_id for e in self.engines)

    def route(
        self,
        payload: bytes,
        partition_key: str | None,
        ordering_key: bytes | None,
        properties: dict[str, str] | None,
    ) -> int:
        n = len(self.engines)
        opts = self.opts
        if opts.message_routing_mode == PartitionsRoutingMode.CustomPartition:
            assert opts.message_router is not None
            chosen = opts.message_router(
                RoutingMessage(payload, partition_key, ordering_key, properties), n
            )
            if not isinstance(chosen, int) or isinstance(chosen, bool) or not 0 <= chosen < n:
                raise InvalidConfiguration(
                    f"message_router returned {chosen!r}; it must be a partition in 0..{n - 1}"
                )
            return chosen
        if partition_key is not None:
            return key_partition(partition_key, n, opts.hashing_scheme)
        if opts.message_routing_mode == PartitionsRoutingMode.UseSinglePartition:
            return self._single
        with self._lock:
            if not opts.batching_enabled:
                chosen, self._rr = self._rr, (self._rr + 1) % n
                return chosen
            if self._rr_used and not self.engines[self._rr].has_open_batch():
                self._rr = (self._rr + 1) % n  # the last batch was sealed: move on
            self._rr_used = True
            return self._rr

    def enqueue(self, payload: bytes, callback: Callback, **kwargs: Any) -> None:
        i = self.route(
            payload,
            kwargs.get("partition_key"),
            kwargs.get("ordering_key"),
            kwargs.get("properties"),
        )
        self.engines[i].enqueue(payload, callback, **kwargs)

    async def flush(self) -> None:
        await asyncio.gather(*(e.flush() for e in self.engines))

    async def close(self) -> None:
        results = await asyncio.gather(*(e.close() for e in self.engines), return_exceptions=True)
        for r in results:
            if isinstance(r, BaseException):
                raise r


# ---------------------------------------------------------------- consuming


def pattern_namespace(pattern: re.Pattern) -> tuple[str, str]:
    """(domain prefix, tenant/namespace) of a topic pattern; one namespace only.

    ``finance-.*`` means ``persistent://public/default/finance-.*``.
    """
    text = pattern.pattern
    if "://" not in text:
        text = (
            f"persistent://{text}"
            if text.count("/") >= 2
            else f"persistent://public/default/{text}"
        )
    domain, _, rest = text.partition("://")
    parts = rest.split("/", 2)
    meta = set(".*+?[](){}|^$\\")
    if (
        len(parts) < 3
        or any(ch in meta for ch in parts[0] + parts[1])
        or domain
        not in (
            "persistent",
            "non-persistent",
        )
    ):
        raise InvalidConfiguration(
            f"topic pattern {pattern.pattern!r} must name one namespace: "
            "persistent://tenant/namespace/<regex> (a pattern spanning namespaces is not allowed)"
        )
    return domain, f"{parts[0]}/{parts[1]}"


class MultiConsumerEngine:
    def __init__(
        self,
        service: Connections,
        label: str,
        subscription: str,
        options: ConsumerOptions,
        loop: asyncio.AbstractEventLoop,
        timeout_s: float,
        resolver: Resolver | None = None,
    ) -> None:
        options.validate()
        self.service = service
        self.resolver: Resolver = resolver or service.lookup
        self.topic = label
        self.subscription = subscription
        self.opts = options
        self.loop = loop
        self.timeout_s = timeout_s
        # One name for every child, so Failover ordering is the same on each.
        self.name = options.consumer_name or f"multi-{random.getrandbits(40):010x}"
        self.children: dict[str, ConsumerEngine] = {}
        self._order: list[ConsumerEngine] = []
        self._next = 0
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._async_waiter: asyncio.Future | None = None
        self._discovery: asyncio.Task | None = None
        self.closed = False
        self.failure: MagnetarError | None = None
        self.last_dequeued: MessageId | None = None

    # ------------------------------------------------------------ children

    async def add_topics(self, topics: list[str]) -> list[str]:
        """Subscribe to each topic not yet followed (partitioned ones by their partitions)."""
        new: list[str] = []
        for t in topics:
            for full in await expand_partitions(self.service, t, self.timeout_s):
                if full not in self.children and full not in new:
                    new.append(full)
        if self.opts.receiver_queue_size == 0:
            raise InvalidConfiguration(
                "receiver_queue_size=0 (no prefetch) is for one non-partitioned topic, as in Pulsar"
            )
        # The official rule: each topic's queue shrinks so that all of them
        # stay within max_total_receiver_queue_size_across_partitions.
        queue_size = max(
            1,
            min(
                self.opts.receiver_queue_size,
                self.opts.max_total_receiver_queue_size_across_partitions
                // max(1, len(self.children) + len(new)),
            ),
        )
        started: list[ConsumerEngine] = []
        try:
            for full in new:
                child = ConsumerEngine(
                    await self.resolver(full),
                    full,
                    self.subscription,
                    dataclasses.replace(
                        self.opts, consumer_name=self.name, receiver_queue_size=queue_size
                    ),
                    self.loop,
                    partition=TopicName.parse(full).partition_index,
                )
                child.on_arrival = self._wake
                child.resolver = self.resolver
                await asyncio.wait_for(child.start(), self.timeout_s)
                started.append(child)
        except BaseException:
            for child in started:
                await child.close()
            raise
        with self._lock:
            for child in started:
                self.children[child.topic] = child
                self._order.append(child)
        return [c.topic for c in started]

    def start_discovery(self, domain: str, namespace: str, pattern: re.Pattern) -> None:
        mode = {
            RegexSubscriptionMode.PersistentOnly: broker_pb2.PERSISTENT_ONLY,
            RegexSubscriptionMode.NonPersistentOnly: broker_pb2.NON_PERSISTENT_ONLY,
        }.get(self.opts.regex_subscription_mode, broker_pb2.ALL_DOMAINS)

        request = broker_pb2.TopicsOfNamespaceRequest(namespace=namespace, mode=mode)

        async def ask(conn: Connection) -> broker_pb2.TopicsOfNamespace:
            return await conn.stub.GetTopicsOfNamespace(  # type: ignore[no-any-return]
                request, timeout=self.timeout_s
            )

        async def matching() -> list[str]:
            resp = await self.service.call_service(ask, f"topics of {namespace}")
            if resp.error.code:
                raise from_wire(resp.error)
            bases = {TopicName.parse(t).partitioned_topic_name.full_name for t in resp.topics}
            return sorted(b for b in bases if pattern.fullmatch(b))

        async def loop() -> None:
            while not self.closed:
                await asyncio.sleep(self.opts.pattern_auto_discovery_period)
                try:
                    added = await self.add_topics(await matching())
                    if added:
                        log.info("%s: now also consuming %s", self.topic, ", ".join(added))
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    log.warning("%s: topic discovery failed: %s", self.topic, exc)

        self._matching = matching
        self._discovery = self.loop.create_task(loop())

    async def discover_now(self) -> None:
        await self.add_topics(await self._matching())

    def _wake(self) -> None:
        with self._arrived:
            self._arrived.notify_all()
        waiter = self._async_waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _child_for(self, target: Message | MessageId) -> ConsumerEngine:
        mid = target.message_id() if isinstance(target, Message) else target
        if not isinstance(mid, MessageId):
            raise TypeError(f"expected a Message or MessageId, not {type(target).__name__}")
        topic = mid.topic_name()
        child = self.children.get(topic) if topic else None
        if child is None and not topic and mid.partition() >= 0:
            child = next((c for c in self._order if c.partition == mid.partition()), None)
        if child is None:
            raise InvalidConfiguration(
                f"message id {mid} does not belong to a topic of this consumer"
                + ("" if topic else ": acknowledge the Message (or its message_id())")
            )
        return child

    # ------------------------------------------------------------ receiving

    def _check(self) -> None:
        if self.closed:
            raise AlreadyClosed(f"consumer {self.name} of {self.subscription} is closed")

    def _poll(self) -> Message | None:
        order = self._order
        for k in range(len(order)):
            child = order[(self._next + k) % len(order)]
            msg = child.try_take()
            if msg is not None:
                self._next = (self._next + k + 1) % len(order)
                self.last_dequeued = msg.message_id()
                return msg
        return None

    def receive_blocking(self, timeout_millis: int | None) -> Message:
        deadline = None if timeout_millis is None else time.monotonic() + timeout_millis / 1000
        while True:
            self._check()
            msg = self._poll()
            if msg is not None:
                return msg
            with self._arrived:
                if deadline is None:
                    self._arrived.wait(0.2)
                    continue
                left = deadline - time.monotonic()
                if left <= 0:
                    raise Timeout(f"no message within {timeout_millis} ms on {self.topic}")
                self._arrived.wait(min(left, 0.2))

    async def receive_async(self, timeout_millis: int | None) -> Message:
        deadline = None if timeout_millis is None else time.monotonic() + timeout_millis / 1000
        while True:
            self._check()
            msg = self._poll()
            if msg is not None:
                return msg
            self._async_waiter = self.loop.create_future()
            try:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise Timeout(f"no message within {timeout_millis} ms on {self.topic}")
                try:
                    await asyncio.wait_for(self._async_waiter, min(left or 0.2, 0.2))
                except TimeoutError:
                    pass  # poll again (a child may have been added meanwhile)
            finally:
                self._async_waiter = None

    def queued(self) -> int:
        return sum(c.queued() for c in self._order)

    # ------------------------------------------------------------ acknowledging

    def acknowledge(self, target: Message | MessageId) -> None:
        self._check()
        self._child_for(target).acknowledge(target)

    def acknowledge_cumulative(self, target: Message | MessageId) -> None:
        self._check()
        self._child_for(target).acknowledge_cumulative(target)

    def negative_acknowledge(self, target: Message | MessageId) -> None:
        self._check()
        self._child_for(target).negative_acknowledge(target)

    async def redeliver_unacknowledged(self) -> None:
        for c in self._order:
            await c.redeliver_unacknowledged()

    async def unsubscribe(self, timeout_s: float) -> None:
        for c in self._order:
            await c.unsubscribe(timeout_s)
        await self.close()

    async def seek(self, target: MessageId | int, timeout_s: float) -> None:
        if isinstance(target, MessageId) and target not in (MessageId.earliest, MessageId.latest):
            await self._child_for(target).seek(target, timeout_s)
            return
        for c in self._order:
            await c.seek(target, timeout_s)

    async def get_last_message_id(self, timeout_s: float) -> MessageId:
        raise NotAllowedError(
            f"{self.topic} spans {len(self._order)} topics: ask each topic's consumer for its "
            "last message id"
        )

    async def has_message_available(self, timeout_s: float) -> bool:
        for c in self._order:
            if await has_available(c, timeout_s):
                return True
        return False

    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self._discovery is not None:
            self._discovery.cancel()
        for c in self._order:
            try:
                await c.close()
            except Exception as exc:
                log.debug("closing %s: %s", c.topic, exc)
        call_in_loop(self.loop, self._wake)


MessageRouter = Callable[[RoutingMessage, int], int]
