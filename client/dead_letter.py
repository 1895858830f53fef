"""Dead letter topic publishing for a consumer (ConsumerDeadLetterPolicy).

A message whose redelivery count is over ``max_redeliver_count`` is not
given to the application: it is published to the dead letter topic (by one
producer per consumer, named ``<topic>-<subscription>-<consumer>-<random>-DLQ``,
created on first use) with its payload, key and properties plus
``REAL_TOPIC`` and ``ORIGIN_MESSAGE_ID``, and only then acknowledged. If the
publish fails the message stays unacknowledged and comes back later.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING

from client._producer import ProducerEngine, ProducerOptions
from client.message import Message

if TYPE_CHECKING:
    from client._connection import Connection

REAL_TOPIC = "REAL_TOPIC"
ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"


def default_dead_letter_topic(topic: str, subscription: str) -> str:
    return f"{topic}-{subscription}-DLQ"


class DeadLetterPublisher:
    def __init__(
        self,
        connection: Connection,
        loop: asyncio.AbstractEventLoop,
        topic: str,
        producer_name: str,
    ) -> None:
        self.connection = connection
        self.loop = loop
        self.topic = topic
        self.producer_name = producer_name
        self._producer: ProducerEngine | None = None
        self._lock = asyncio.Lock()

    @classmethod
    def for_consumer(
        cls,
        connection: Connection,
        loop: asyncio.AbstractEventLoop,
        topic: str,
        subscription: str,
        consumer_name: str,
        dead_letter_topic: str | None,
    ) -> DeadLetterPublisher:
        name = f"{topic}-{subscription}-{consumer_name}-{uuid.uuid4().hex[:5]}-DLQ"
        return cls(
            connection,
            loop,
            dead_letter_topic or default_dead_letter_topic(topic, subscription),
            name,
        )

    async def _ready(self) -> ProducerEngine:
        async with self._lock:
            if self._producer is None:
                producer = ProducerEngine(
                    self.connection,
                    self.topic,
                    ProducerOptions(producer_name=self.producer_name, batching_enabled=False),
                    self.loop,
                )
                await producer.start()
                self._producer = producer
            return self._producer

    async def publish(self, messages: list[Message]) -> None:
        """Publish every message; raises if any publish fails."""
        producer = await self._ready()
        futures = []
        for m in messages:
            fut: asyncio.Future = self.loop.create_future()

            def done(exc: BaseException | None, mid: object, fut: asyncio.Future = fut) -> None:
                def settle() -> None:
                    if fut.done():
                        return
                    if exc is not None:
                        fut.set_exception(exc)
                    else:
                        fut.set_result(mid)

                self.loop.call_soon_threadsafe(settle)

            props = dict(m.properties())
            props[REAL_TOPIC] = m.topic_name()
            props[ORIGIN_MESSAGE_ID] = str(m.message_id())
            producer.enqueue(
                m.data(),
                done,
                properties=props,
                partition_key=m.partition_key() or None,
                ordering_key=m.ordering_key() or None,
                event_timestamp=m.event_timestamp() or None,
                may_block=False,
            )
            futures.append(fut)
        await asyncio.gather(*futures)

    async def close(self) -> None:
        if self._producer is not None:
            await self._producer.close()
