"""Dead letter and retry letter topics of a consumer (ConsumerDeadLetterPolicy).

A message whose redelivery count is over ``max_redeliver_count`` is not
given to the application: it is published to the dead letter topic (by one
producer per consumer, named ``<topic>-<subscription>-<consumer>-<random>-DLQ``,
created on first use) with its payload, key and properties plus
``REAL_TOPIC`` and ``ORIGIN_MESSAGE_ID``, and only then acknowledged. If the
publish fails the message stays unacknowledged and comes back later.

As in Pulsar, the policy's ``initial_subscription_name`` is created on the
dead letter topic when that producer is created, before its first send, so
the subscription holds every dead letter.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import TYPE_CHECKING

import grpc

from client._consumer_options import ConsumerOptions, subscribe_request
from client._consumer_stream import ConsumerStream
from client._producer import CLOSE_TIMEOUT_S, ProducerEngine
from client._producer_options import ProducerOptions
from client.enums import InitialPosition
from client.message import Message, settle

if TYPE_CHECKING:
    from client._connection import Resolver
    from protos.message_id import MessageId

REAL_TOPIC = "REAL_TOPIC"
ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
RECONSUMETIMES = "RECONSUMETIMES"
DELAY_TIME = "DELAY_TIME"
# Pulsar's limit on reconsume_later() when no dead letter policy says otherwise.
DEFAULT_MAX_RECONSUME_TIMES = 16


def default_dead_letter_topic(topic: str, subscription: str) -> str:
    return f"{topic}-{subscription}-DLQ"


def default_retry_letter_topic(topic: str, subscription: str) -> str:
    return f"{topic}-{subscription}-RETRY"


class DeadLetterPublisher:
    def __init__(
        self,
        resolver: Resolver,
        loop: asyncio.AbstractEventLoop,
        topic: str,
        producer_name: str,
        initial_subscription_name: str | None = None,
    ) -> None:
        self.resolver = resolver
        self.loop = loop
        self.topic = topic
        self.producer_name = producer_name
        self._initial_subscription = initial_subscription_name
        self._producer: ProducerEngine | None = None
        self._lock = asyncio.Lock()

    @classmethod
    def for_consumer(
        cls,
        resolver: Resolver,
        loop: asyncio.AbstractEventLoop,
        topic: str,
        subscription: str,
        consumer_name: str,
        dead_letter_topic: str | None,
        initial_subscription_name: str | None = None,
    ) -> DeadLetterPublisher:
        name = f"{topic}-{subscription}-{consumer_name}-{uuid.uuid4().hex[:5]}-DLQ"
        return cls(
            resolver,
            loop,
            dead_letter_topic or default_dead_letter_topic(topic, subscription),
            name,
            initial_subscription_name,
        )

    async def _ready(self) -> ProducerEngine:
        async with self._lock:
            if self._producer is None:
                if self._initial_subscription:
                    await self._create_initial_subscription(self._initial_subscription)
                producer = ProducerEngine(
                    await self.resolver(self.topic),
                    self.topic,
                    ProducerOptions(  # as Pulsar's: no batching, chunking on
                        producer_name=self.producer_name,
                        batching_enabled=False,
                        chunking_enabled=True,
                    ),
                    self.loop,
                )
                producer.resolver = self.resolver
                await producer.start()
                self._producer = producer
            return self._producer

    async def _create_initial_subscription(self, name: str) -> None:
        """Subscribe ``name`` (from the earliest message) and leave at once:
        the subscription stays and holds what comes next."""
        stream = ConsumerStream(self.loop, -1)
        opts = ConsumerOptions(initial_position=InitialPosition.Earliest)
        request = subscribe_request(opts, self.topic, name, "", None, False)
        await stream.open(await self.resolver(self.topic), request, 0)
        try:
            await stream.say_goodbye()
            # The broker ends the stream once the consumer is gone: until then
            # the application's own subscribe would meet it (ConsumerBusy).
            await asyncio.wait_for(stream.wait_ended(), CLOSE_TIMEOUT_S)
        except (TimeoutError, grpc.aio.AioRpcError):
            pass  # gone or going: the subscription is made either way
        finally:
            stream.cancel()

    async def publish(
        self,
        messages: list[Message],
        extra: dict[str, str] | None = None,
        deliver_at: int | None = None,
    ) -> None:
        """Publish every message (with ``extra`` properties); raises if any fails."""
        producer = await self._ready()
        futures = []
        for m in messages:
            fut: asyncio.Future = self.loop.create_future()

            def done(
                exc: BaseException | None, mid: MessageId | None, fut: asyncio.Future = fut
            ) -> None:
                self.loop.call_soon_threadsafe(settle, fut, exc, mid)

            props = dict(m.properties())
            props.setdefault(REAL_TOPIC, m.topic_name())
            props.setdefault(ORIGIN_MESSAGE_ID, str(m.message_id()))
            props.update(extra or {})
            producer.enqueue(
                m.data(),
                done,
                properties=props,
                partition_key=m.partition_key() or None,
                ordering_key=m.ordering_key().encode("utf-8", "surrogateescape") or None,
                event_timestamp=m.event_timestamp() or None,
                deliver_at=deliver_at,
                may_block=False,
            )
            futures.append(fut)
        await asyncio.gather(*futures)

    async def close(self) -> None:
        if self._producer is not None:
            await self._producer.close()


class RetryLetters:
    """``reconsume_later``: the message goes to the retry letter topic (which
    the consumer also reads) with a deliver-at time, or to the dead letter
    topic once it was reconsumed ``max_redeliver_count`` times."""

    def __init__(
        self,
        resolver: Resolver,
        loop: asyncio.AbstractEventLoop,
        topic: str,
        subscription: str,
        consumer_name: str,
        retry_topic: str | None,
        dead_letter_topic: str | None,
        max_reconsume_times: int,
    ) -> None:
        suffix = f"{topic}-{subscription}-{consumer_name}-{uuid.uuid4().hex[:5]}"
        self.retry_topic = retry_topic or default_retry_letter_topic(topic, subscription)
        self.max_reconsume_times = max_reconsume_times
        self._retry = DeadLetterPublisher(resolver, loop, self.retry_topic, f"{suffix}-RETRY")
        self._dead = DeadLetterPublisher(
            resolver,
            loop,
            dead_letter_topic or default_dead_letter_topic(topic, subscription),
            f"{suffix}-DLQ",
        )

    async def reconsume_later(
        self, msg: Message, delay_ms: int, properties: dict[str, str] | None = None
    ) -> bool:
        """Publish ``msg`` for a later try; True if it went to the retry topic,
        False if it went to the dead letter topic instead."""
        times = int(msg.properties().get(RECONSUMETIMES, "0")) + 1
        extra = dict(properties or {})
        if times > self.max_reconsume_times:
            await self._dead.publish([msg], extra)
            return False
        extra[RECONSUMETIMES] = str(times)
        extra[DELAY_TIME] = str(delay_ms)
        deliver_at = int(time.time() * 1000) + delay_ms
        await self._retry.publish([msg], extra, deliver_at=deliver_at)
        return True

    async def close(self) -> None:
        await self._retry.close()
        await self._dead.close()
