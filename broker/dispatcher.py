"""Dispatch for subscriptions with one active consumer (Exclusive).

Theory of operation. The consumer grants permits (message counts: a batch
entry of N messages costs N). While the active consumer has permits and the
cursor's read position is at or before the last stored entry, the dispatcher
reads up to ``max_read_batch_size`` entries, skips those acknowledged
individually, and pushes them to the consumer in one stream message. When
permits or entries run out it stops; it is woken by new permits, new
entries, or a rewind (when the consumer leaves, its unacknowledged messages
are sent again to the next one). At most one read runs at a time.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from protos import broker_pb2
from protos.entry import CorruptedEntryError, num_messages, parse_metadata

if TYPE_CHECKING:
    from broker.topic import Consumer, Subscription

log = logging.getLogger(__name__)


class SingleActiveConsumerDispatcher:
    def __init__(self, subscription: Subscription, max_entries: int, max_bytes: int) -> None:
        self.sub = subscription
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._task: asyncio.Task | None = None
        self._again = False

    @property
    def active(self) -> Consumer | None:
        consumers = self.sub.consumers
        return consumers[0] if consumers else None

    def trigger(self) -> None:
        if self._task is not None:
            self._again = True
            return
        self._task = asyncio.get_running_loop().create_task(self._run())

    def consumer_removed(self) -> None:
        self.sub.cursor.rewind()
        self.trigger()

    async def _run(self) -> None:
        try:
            while True:
                self._again = False
                progressed = await self._dispatch_once()
                if not progressed and not self._again:
                    return
        except Exception:
            log.exception("dispatch on %s/%s failed", self.sub.topic.name, self.sub.name)
        finally:
            self._task = None

    async def _dispatch_once(self) -> bool:
        consumer = self.active
        cursor = self.sub.cursor
        ledger = self.sub.topic.ledger
        if consumer is None or consumer.permits <= 0 or consumer.closed:
            return False
        if not ledger.has_entry(ledger.normalize(cursor.read_position)):
            return False
        entries = await ledger.read_entries(
            cursor.read_position, min(self.max_entries, max(consumer.permits, 1)), self.max_bytes
        )
        if not entries or consumer is not self.active or consumer.closed:
            return False
        msg = broker_pb2.Deliveries()
        sent = 0
        for pos, data in entries:
            cursor.read_position = ledger.next_position(pos)
            if cursor.is_acked(pos):
                continue
            try:
                count = num_messages(parse_metadata(data))
            except CorruptedEntryError:
                count = 1
            msg.ledger_ids.append(pos[0])
            msg.entry_ids.append(pos[1])
            msg.redelivery_counts.append(0)
            msg.entries.append(data)
            sent += count
        if sent:
            consumer.permits -= sent
            consumer.deliver(broker_pb2.ConsumerResponse(deliveries=msg))
        return True
