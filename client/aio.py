"""The asyncio API: ``client.aio.Client`` and its producers and consumers.

Everything that waits is a coroutine. ``Producer.send`` returns an awaitable
future instead of being a coroutine, so a caller can keep many sends in
flight without a task per message (``await producer.send(b"x")`` reads the
same either way).
"""

from __future__ import annotations

import asyncio
from typing import Any

from client._connection import Connection, parse_service_url
from client._consumer import ConsumerEngine, ConsumerOptions
from client._producer import ProducerEngine, ProducerOptions
from client.enums import ConsumerType, InitialPosition, SubscriptionMode
from client.exceptions import AlreadyClosed, InvalidConfiguration, InvalidTopicName
from client.message import Message
from protos.errors import InvalidTopicNameError
from protos.message_id import MessageId
from protos.topic_name import TopicName


def check_topic(topic: Any) -> str:
    if not isinstance(topic, str):
        raise InvalidTopicName(f"a topic name must be a str, not {type(topic).__name__}")
    try:
        return TopicName.parse(topic).full_name
    except InvalidTopicNameError as exc:
        raise InvalidTopicName(str(exc)) from None


def check_options(fn: str, opts: dict[str, Any], known: set[str]) -> None:
    unknown = set(opts) - known
    if unknown:
        raise InvalidConfiguration(
            f"{fn}() got unknown or not yet supported options: {', '.join(sorted(unknown))}"
        )


PRODUCER_OPTIONS = {
    "producer_name",
    "initial_sequence_id",
    "send_timeout_millis",
    "max_pending_messages",
    "block_if_queue_full",
    "batching_enabled",
    "batching_max_messages",
    "batching_max_allowed_size_in_bytes",
    "batching_max_publish_delay_ms",
}
CONSUMER_OPTIONS = {
    "consumer_type",
    "receiver_queue_size",
    "consumer_name",
    "initial_position",
    "subscription_mode",
    "priority_level",
}


class Producer:
    def __init__(self, engine: ProducerEngine) -> None:
        self._engine = engine

    def send(self, content: bytes, **kwargs: Any) -> asyncio.Future[MessageId]:
        """Publish; the returned future resolves to the MessageId once stored."""
        loop = self._engine.loop
        fut: asyncio.Future[MessageId] = loop.create_future()

        def done(exc: BaseException | None, mid: MessageId | None) -> None:
            if fut.done():
                return
            if exc is not None:
                fut.set_exception(exc)
            else:
                fut.set_result(mid)  # type: ignore[arg-type]

        self._engine.enqueue(content, done, may_block=False, **_send_kwargs(kwargs))
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
        return not self._engine.closed and self._engine.failure is None


def _send_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    allowed = {"properties", "partition_key", "ordering_key", "sequence_id", "event_timestamp"}
    unknown = set(kwargs) - allowed
    if unknown:
        raise InvalidConfiguration(
            f"send() got unknown or not yet supported arguments: {', '.join(sorted(unknown))}"
        )
    out = dict(kwargs)
    props = out.get("properties")
    if props is not None and (
        not isinstance(props, dict)
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in props.items())
    ):
        raise InvalidConfiguration("properties must be a dict of str to str")
    okey = out.get("ordering_key")
    if isinstance(okey, str):
        out["ordering_key"] = okey.encode()
    return out


class Consumer:
    def __init__(self, engine: ConsumerEngine) -> None:
        self._engine = engine

    async def receive(self, timeout_millis: int | None = None) -> Message:
        return await self._engine.receive_async(timeout_millis)

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

    async def close(self) -> None:
        await self._engine.close()

    def topic(self) -> str:
        return self._engine.topic

    def subscription_name(self) -> str:
        return self._engine.subscription

    def consumer_name(self) -> str:
        return self._engine.name

    def is_connected(self) -> bool:
        return not self._engine.closed and self._engine.failure is None


class Client:
    def __init__(
        self,
        service_url: str,
        authentication: Any = None,
        operation_timeout_seconds: int = 30,
        connection_timeout_ms: int = 10000,
        **kwargs: Any,
    ) -> None:
        if authentication is not None:
            raise InvalidConfiguration("authentication is not available yet")
        self._addresses = parse_service_url(service_url)
        self._operation_timeout_s = operation_timeout_seconds
        self._connection_timeout_ms = connection_timeout_ms
        self._connection: Connection | None = None
        self._producers: list[ProducerEngine] = []
        self._consumers: list[ConsumerEngine] = []
        self._closed = False

    def _conn(self) -> Connection:
        if self._closed:
            raise AlreadyClosed("the client is closed")
        if self._connection is None:
            self._connection = Connection(self._addresses[0], self._connection_timeout_ms)
        return self._connection

    async def create_producer(self, topic: str, **options: Any) -> Producer:
        check_options("create_producer", options, PRODUCER_OPTIONS)
        name = check_topic(topic)
        engine = ProducerEngine(
            self._conn(), name, ProducerOptions(**options), asyncio.get_running_loop()
        )
        await asyncio.wait_for(engine.start(), self._operation_timeout_s)
        self._producers.append(engine)
        return Producer(engine)

    async def subscribe(self, topic: str, subscription_name: str, **options: Any) -> Consumer:
        check_options("subscribe", options, CONSUMER_OPTIONS)
        name = check_topic(topic)
        if not isinstance(subscription_name, str) or not subscription_name:
            raise InvalidConfiguration("subscription_name must be a non-empty str")
        opts = ConsumerOptions(**options)
        if opts.consumer_type == ConsumerType.KeyShared:
            raise InvalidConfiguration(
                "consumer_type KeyShared is not available yet; use Exclusive, Failover or Shared"
            )
        engine = ConsumerEngine(
            self._conn(), name, subscription_name, opts, asyncio.get_running_loop()
        )
        await asyncio.wait_for(engine.start(), self._operation_timeout_s)
        self._consumers.append(engine)
        return Consumer(engine)

    async def close(self) -> None:
        if self._closed:
            return
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
        self._closed = True
        if self._connection is not None:
            await self._connection.close()

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
