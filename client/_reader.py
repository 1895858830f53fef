"""What a reader asks beyond its messages: is anything left to read, has
it reached the end of a terminated topic, and closing it (its subscription
goes with it).

A reader subscribes under a name of its own (``reader-<random>``), non-durable.
Closing only the stream would leave that cursor on the broker until the topic
unloads, counted against ``max_subscriptions_per_topic`` and listed in the
topic's stats; a reader that is closed therefore unsubscribes, as Pulsar's
broker drops a reader's subscription when the reader disconnects.
"""

from __future__ import annotations

import logging

from client._available import has_available
from client._consumer import ConsumerEngine
from client._multi import MultiConsumerEngine
from client.exceptions import MagnetarError

log = logging.getLogger(__name__)


async def close_reader(engine: ConsumerEngine | MultiConsumerEngine, timeout_s: float) -> None:
    """Unsubscribe and close; closed all the same when the broker cannot be asked."""
    if engine.closed:
        return
    try:
        await engine.unsubscribe(timeout_s)  # closes the engine too
    except (MagnetarError, TimeoutError) as exc:
        log.debug(
            "reader of %s: its subscription stays until the topic unloads: %s", engine.topic, exc
        )
    await engine.close()


async def reached_end_of_topic(
    engine: ConsumerEngine | MultiConsumerEngine, timeout_s: float
) -> bool:
    """Terminated and read to its end (every partition of a partitioned topic)."""
    engines = (
        list(engine.children.values()) if isinstance(engine, MultiConsumerEngine) else [engine]
    )
    for one in engines:
        # has_available asks the broker for the last message id, which says
        # whether the topic was terminated.
        if await has_available(one, timeout_s) or not one._stream.topic_terminated:
            return False
    return bool(engines)


async def has_message_available(
    engine: ConsumerEngine | MultiConsumerEngine, timeout_s: float
) -> bool:
    if isinstance(engine, MultiConsumerEngine):
        return await engine.has_message_available(timeout_s)
    return await has_available(engine, timeout_s)
