"""A persistent topic served by this broker: producers, subscriptions and
their consumers, on top of its managed ledger."""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from broker.dedup import Deduplication
from broker.dispatcher import (
    Dispatcher,
    KeySharedDispatcher,
    NonPersistentDispatcher,
    SharedDispatcher,
    SingleActiveConsumerDispatcher,
)
from broker.key_shared import (
    AutoSplitHashRangeSelector,
    ConsistentHashingSelector,
    ConsumerAssignError,
    Selector,
    StickyRangeSelector,
)
from broker.managed_ledger import ManagedCursor, ManagedLedger
from broker.meter import Meter
from broker.settings import BrokerSettings
from protos import broker_pb2, common_pb2
from protos.errors import MagnetarServerError
from protos.topic_name import TopicName

log = logging.getLogger(__name__)

SUB_TYPE_NAMES: dict[int, str] = {
    broker_pb2.EXCLUSIVE: "Exclusive",
    broker_pb2.SHARED: "Shared",
    broker_pb2.FAILOVER: "Failover",
    broker_pb2.KEY_SHARED: "Key_Shared",
}


class BrokerError(MagnetarServerError):
    pass


def _err(code: int, message: str) -> BrokerError:
    return BrokerError(message, code)


@dataclass(frozen=True)
class KeySharedPolicy:
    mode: int = broker_pb2.AUTO_SPLIT
    allow_out_of_order: bool = False
    ranges: tuple[tuple[int, int], ...] = ()

    @classmethod
    def from_proto(cls, meta: broker_pb2.KeySharedMeta) -> KeySharedPolicy:
        if meta.mode not in broker_pb2.KeySharedMode.values():
            raise _err(common_pb2.INVALID_ARGUMENT, f"unknown Key_Shared mode {meta.mode}")
        if len(meta.range_starts) != len(meta.range_ends):
            raise _err(
                common_pb2.INVALID_ARGUMENT,
                f"{len(meta.range_starts)} range starts but {len(meta.range_ends)} range ends",
            )
        return cls(
            meta.mode,
            meta.allow_out_of_order_delivery,
            tuple(zip(meta.range_starts, meta.range_ends, strict=True)),
        )

    def describe(self) -> str:
        mode = "STICKY" if self.mode == broker_pb2.STICKY else "AUTO_SPLIT"
        return f"{mode}, allow_out_of_order_delivery={self.allow_out_of_order}"


_producer_ids = itertools.count(1)
_consumer_ids = itertools.count(1)


@dataclass(eq=False)
class Producer:
    topic: TopicBase
    name: str
    access_mode: int = broker_pb2.ACCESS_SHARED
    id: int = field(default_factory=lambda: next(_producer_ids))
    last_sequence_id: int = -1
    # Called when a newer ExclusiveWithFencing producer takes the topic.
    on_fenced: Callable[[], None] | None = None
    # Called when the topic closes here (unload, shutdown): the stream ends
    # with a retryable error after the sends already taken.
    on_topic_closed: Callable[[], None] | None = None
    meter: Meter = field(default_factory=Meter)


@dataclass(eq=False)
class Consumer:
    subscription: Subscription
    name: str
    priority_level: int = 0
    id: int = field(default_factory=lambda: next(_consumer_ids))
    permits: int = 0
    closed: bool = False
    outbox: asyncio.Queue = field(default_factory=asyncio.Queue)
    # Delivered, not yet acknowledged: position -> messages in the entry.
    pending: dict[tuple[int, int], int] = field(default_factory=dict)
    unacked: int = 0
    blocked: bool = False
    redelivered: int = 0
    meter: Meter = field(default_factory=Meter)

    def deliver(self, response: broker_pb2.ConsumerResponse) -> None:
        # Bounded by permits: the dispatcher only delivers against them.
        self.outbox.put_nowait(response)

    def add_permits(self, n: int) -> None:
        self.permits += n
        self.subscription.dispatcher.trigger()


class Subscription:
    def __init__(
        self,
        topic: TopicBase,
        name: str,
        sub_type: int,
        cursor: ManagedCursor,
        key_shared: KeySharedPolicy | None = None,
    ) -> None:
        self.topic = topic
        self.name = name
        self.sub_type = sub_type
        self.cursor = cursor
        self.consumers: list[Consumer] = []
        self.redelivery_counts: dict[tuple[int, int], int] = {}
        self.blocked = False
        self.key_shared = key_shared or KeySharedPolicy()
        self.batch_index_acks = (
            topic.persistent and topic.settings.acknowledgment_at_batch_index_level_enabled
        )
        self.dispatcher: Dispatcher = self._new_dispatcher(sub_type, self.key_shared)

    def _new_dispatcher(self, sub_type: int, key_shared: KeySharedPolicy) -> Dispatcher:
        s = self.topic.settings
        entries, size = s.dispatcher_max_read_batch_size, s.dispatcher_max_read_size_bytes
        selector: Selector | None = None
        if sub_type == broker_pb2.KEY_SHARED:
            if key_shared.mode == broker_pb2.STICKY:
                selector = StickyRangeSelector()
            elif s.subscription_key_shared_use_consistent_hashing:
                selector = ConsistentHashingSelector()
            else:
                selector = AutoSplitHashRangeSelector()
        if not self.topic.persistent:
            return NonPersistentDispatcher(self, sub_type, selector)
        if selector is not None:
            return KeySharedDispatcher(
                self,
                entries,
                size,
                selector,
                key_shared.allow_out_of_order,
                s.key_shared_look_ahead_msg_in_replay_threshold_per_subscription,
            )
        if sub_type == broker_pb2.SHARED:
            return SharedDispatcher(self, entries, size)
        return SingleActiveConsumerDispatcher(self, entries, size)

    @property
    def unacked(self) -> int:
        return sum(c.unacked for c in self.consumers)

    @property
    def ledger(self) -> ManagedLedger:
        """The managed ledger of a persistent topic (its dispatchers read it)."""
        assert isinstance(self.topic, Topic), f"{self.topic.name} has no ledger"
        return self.topic.ledger

    def active_consumer(self) -> Consumer | None:
        """Exclusive and Failover: the one consumer that gets the messages.

        Failover on a partition of a partitioned topic: consumers sorted by
        priority level, then name; partition i goes to consumer i mod n.
        Otherwise the first consumer to subscribe (the others wait in line).
        """
        live = [c for c in self.consumers if not c.closed]
        if not live:
            return None
        index = self.topic.name.partition_index
        if self.sub_type == broker_pb2.FAILOVER and index >= 0:
            ordered = sorted(live, key=lambda c: (c.priority_level, c.name))
            return ordered[index % len(ordered)]
        return live[0]

    def add_consumer(
        self,
        name: str,
        sub_type: int,
        priority_level: int = 0,
        key_shared: KeySharedPolicy | None = None,
    ) -> Consumer:
        key_shared = key_shared or KeySharedPolicy()
        if self.consumers and sub_type != self.sub_type:
            raise _err(
                common_pb2.CONSUMER_BUSY,
                f"subscription {self.name!r} on {self.topic.name} is "
                f"{SUB_TYPE_NAMES[self.sub_type]} with consumers connected; "
                f"a {SUB_TYPE_NAMES.get(sub_type, sub_type)} consumer cannot join",
            )
        if (
            self.consumers
            and sub_type == broker_pb2.KEY_SHARED
            and (key_shared.mode, key_shared.allow_out_of_order)
            != (self.key_shared.mode, self.key_shared.allow_out_of_order)
        ):
            raise _err(
                common_pb2.CONSUMER_BUSY,
                f"Key_Shared subscription {self.name!r} on {self.topic.name} is "
                f"{self.key_shared.describe()}; a consumer with {key_shared.describe()} "
                "cannot join",
            )
        if sub_type == broker_pb2.EXCLUSIVE and self.consumers:
            raise _err(
                common_pb2.CONSUMER_BUSY,
                f"exclusive subscription {self.name!r} on {self.topic.name} already has a "
                f"consumer ({self.consumers[0].name})",
            )
        if len(self.consumers) >= self.topic.settings.max_consumers_per_subscription:
            raise _err(common_pb2.TOO_MANY_REQUESTS, "max_consumers_per_subscription reached")
        # The first consumer sets the type (again, once every consumer has left).
        switching = not self.consumers and (
            sub_type != self.sub_type
            or (sub_type == broker_pb2.KEY_SHARED and key_shared != self.key_shared)
        )
        dispatcher = self._new_dispatcher(sub_type, key_shared) if switching else self.dispatcher
        consumer = Consumer(self, name, priority_level)
        try:
            dispatcher.place(consumer, list(key_shared.ranges))
        except ConsumerAssignError as exc:
            raise _err(common_pb2.CONSUMER_ASSIGN_ERROR, str(exc)) from None
        if switching:
            self.sub_type, self.key_shared, self.dispatcher = sub_type, key_shared, dispatcher
            self.cursor.rewind()
        self.consumers.append(consumer)
        self.dispatcher.consumer_added(consumer)
        return consumer

    def remove_consumer(self, consumer: Consumer) -> None:
        if consumer not in self.consumers:
            return
        consumer.closed = True
        self.consumers.remove(consumer)
        self.dispatcher.consumer_removed(consumer)
        if not self.consumers:
            self.topic.subscription_idle(self)

    def ack(
        self, positions: list[tuple[int, int]], cumulative: bool, consumer: Consumer | None = None
    ) -> None:
        if not positions:
            return
        if cumulative and self.sub_type in (broker_pb2.SHARED, broker_pb2.KEY_SHARED):
            raise _err(
                common_pb2.NOT_ALLOWED,
                "cumulative acknowledgement is not allowed on "
                f"{SUB_TYPE_NAMES[self.sub_type]} subscription {self.name!r}",
            )
        self.cursor.ack(positions, cumulative)
        counts = self.redelivery_counts
        holders = [consumer] if consumer is not None and not cumulative else self.consumers
        unblock = False
        for pos in positions:
            counts.pop(pos, None)
        for c in holders:
            if not c.pending:
                continue
            if cumulative:
                top = max(positions)
                done = [p for p in c.pending if p <= top]
            else:
                done = [p for p in positions if p in c.pending]
            acked = [(p, c.pending.pop(p)) for p in done]
            for p, n in acked:
                c.unacked -= n
                counts.pop(p, None)
            if acked:
                self.dispatcher.acked(c, acked)
            unblock |= bool(done) and c.blocked
        if cumulative and counts:
            top = max(positions)
            for p in [p for p in counts if p <= top]:
                del counts[p]
        if unblock or self.blocked:
            self.dispatcher.trigger()

    def ack_batch_indexes(
        self, acks: list[tuple[tuple[int, int], int, list[int]]], consumer: Consumer
    ) -> None:
        """Acknowledge single messages of batch entries (when the broker keeps
        them); an entry whose every message is acknowledged is acked as a whole."""
        if not self.batch_index_acks:
            return
        completed = [
            pos for pos, size, indexes in acks if self.cursor.ack_batch_indexes(pos, size, indexes)
        ]
        if completed:
            self.ack(completed, False, consumer)

    def seek(self, mark_delete: tuple[int, int]) -> None:
        """Reset the cursor; what consumers hold is forgotten (no redelivery count)."""
        for c in self.consumers:
            c.pending.clear()
            c.unacked = 0
            c.blocked = False
        self.redelivery_counts.clear()
        self.dispatcher.reset()
        self.cursor.reset(mark_delete)
        self.dispatcher.trigger()

    def redeliver_unacked(
        self, consumer: Consumer, positions: list[tuple[int, int]] | None = None
    ) -> None:
        """Everything ``consumer`` holds, or only ``positions`` of it."""
        if positions:
            self.dispatcher.redeliver_positions(consumer, positions)
        else:
            self.dispatcher.redeliver_consumer(consumer)
        self.dispatcher.trigger()

    def on_new_entries(self) -> None:
        if self.consumers:
            self.dispatcher.trigger()


class TopicBase:
    """What persistent and non-persistent topics share: producers and their
    access modes, subscriptions and their consumers, counters."""

    persistent = True

    def __init__(self, name: TopicName, settings: BrokerSettings) -> None:
        self.name = name
        self.settings = settings
        self.producers: dict[str, Producer] = {}
        self._producers_changed = asyncio.Event()
        self.meter_in = Meter()
        self.meter_out = Meter()
        self.dedup = Deduplication(
            settings.broker_deduplication_entries_interval,
            settings.broker_deduplication_max_number_of_producers,
        )
        self.subscriptions: dict[str, Subscription] = {}
        self._sub_lock = asyncio.Lock()
        self.closing = False

    @property
    def last_position(self) -> tuple[int, int]:
        raise NotImplementedError

    async def wait_for_room(self) -> None:
        """Publishes wait here while too many are in flight."""

    def publish(self, entry: bytes) -> asyncio.Future:
        """Store (or, non-persistent, dispatch) one entry: a future of its position."""
        raise NotImplementedError

    def subscription_idle(self, sub: Subscription) -> None:
        """``sub``'s last consumer left."""

    async def _open_cursor(
        self, sub_name: str, latest: bool, durable: bool, mark_delete: tuple[int, int] | None
    ) -> ManagedCursor:
        raise NotImplementedError

    async def create_subscription(self, sub_name: str, latest: bool) -> bool:
        """A durable subscription with no consumer (admin); False if it exists."""
        async with self._sub_lock:
            if sub_name in self.subscriptions:
                return False
            self._check_room_for_subscription()
            cursor = await self._open_cursor(sub_name, latest, True, None)
            self.subscriptions[sub_name] = Subscription(
                self, sub_name, broker_pb2.EXCLUSIVE, cursor
            )
            return True

    async def subscribe(
        self,
        sub_name: str,
        sub_type: int,
        latest: bool,
        durable: bool,
        consumer_name: str,
        priority_level: int = 0,
        mark_delete: tuple[int, int] | None = None,
        key_shared: KeySharedPolicy | None = None,
    ) -> Consumer:
        async with self._sub_lock:
            sub = self.subscriptions.get(sub_name)
            if sub is not None:
                return sub.add_consumer(consumer_name, sub_type, priority_level, key_shared)
            if durable and not self.settings.allow_auto_subscription_creation:
                raise _err(
                    common_pb2.SUBSCRIPTION_NOT_FOUND,
                    f"subscription {sub_name!r} does not exist on {self.name} and "
                    "allow_auto_subscription_creation is off (create it with "
                    "topics create-subscription)",
                )
            self._check_room_for_subscription()
            cursor = await self._open_cursor(sub_name, latest, durable, mark_delete)
            sub = Subscription(self, sub_name, sub_type, cursor, key_shared)
            try:
                consumer = sub.add_consumer(consumer_name, sub_type, priority_level, key_shared)
            except BrokerError:
                await cursor.delete()  # refused: as if it never tried to subscribe
                raise
            self.subscriptions[sub_name] = sub
            return consumer

    async def close(self) -> None:
        raise NotImplementedError

    def _check_room_for_subscription(self) -> None:
        if len(self.subscriptions) >= self.settings.max_subscriptions_per_topic:
            raise _err(
                common_pb2.TOO_MANY_REQUESTS,
                f"{self.name} already has {len(self.subscriptions)} subscriptions",
            )

    def _close_consumers(self) -> None:
        self.closing = True
        for producer in list(self.producers.values()):
            if producer.on_topic_closed is not None:
                producer.on_topic_closed()
        for sub in list(self.subscriptions.values()):
            for consumer in list(sub.consumers):
                consumer.closed = True
                consumer.outbox.put_nowait(None)

    # ---------------------------------------------------------------- producers

    def _exclusive_holder(self) -> Producer | None:
        for p in self.producers.values():
            if p.access_mode != broker_pb2.ACCESS_SHARED:
                return p
        return None

    async def add_producer(
        self, requested_name: str, broker_name: str, access_mode: int = broker_pb2.ACCESS_SHARED
    ) -> Producer:
        """Register a producer under the topic's access rules (seed: Access mode).

        Shared: refused while an exclusive producer holds the topic. Exclusive:
        refused while any producer is connected. WaitForExclusive: waits until
        no producer is connected (the caller's stream may be cancelled
        meanwhile). ExclusiveWithFencing: every other producer is fenced.
        """
        if access_mode == broker_pb2.ACCESS_WAIT_FOR_EXCLUSIVE:
            while self.producers:
                self._producers_changed.clear()
                await self._producers_changed.wait()
        elif access_mode == broker_pb2.ACCESS_EXCLUSIVE_WITH_FENCING:
            for old in list(self.producers.values()):
                log.info("%s: producer %s fenced by a new exclusive producer", self.name, old.name)
                del self.producers[old.name]
                if old.on_fenced is not None:
                    old.on_fenced()
        elif access_mode == broker_pb2.ACCESS_EXCLUSIVE and self.producers:
            raise _err(
                common_pb2.PRODUCER_BUSY,
                f"{self.name} already has {len(self.producers)} producer(s); an Exclusive "
                "producer must be the only one",
            )
        holder = self._exclusive_holder()
        if holder is not None:
            raise _err(
                common_pb2.PRODUCER_BUSY,
                f"{self.name} has an exclusive producer ({holder.name}); no other may connect",
            )
        if len(self.producers) >= self.settings.max_producers_per_topic:
            raise _err(
                common_pb2.TOO_MANY_REQUESTS,
                f"{self.name} already has {len(self.producers)} producers "
                f"(max_producers_per_topic = {self.settings.max_producers_per_topic})",
            )
        if requested_name:
            if requested_name in self.producers:
                raise _err(
                    common_pb2.PRODUCER_BUSY,
                    f"a producer named {requested_name!r} is already connected to {self.name}",
                )
            name = requested_name
        else:
            name = f"{broker_name}-{next(_producer_ids)}"
            while name in self.producers:
                name = f"{broker_name}-{next(_producer_ids)}"
        producer = Producer(self, name, access_mode)
        self.producers[name] = producer
        return producer

    def remove_producer(self, producer: Producer) -> None:
        if self.producers.get(producer.name) is producer:
            del self.producers[producer.name]
            self._producers_changed.set()

    # ---------------------------------------------------------------- consumers

    async def unsubscribe(self, consumer: Consumer) -> None:
        """Delete ``consumer``'s subscription; it must be the only consumer."""
        async with self._sub_lock:
            sub = consumer.subscription
            others = [c for c in sub.consumers if c is not consumer and not c.closed]
            if others:
                raise _err(
                    common_pb2.NOT_ALLOWED,
                    f"subscription {sub.name!r} on {self.name} has {len(others)} other "
                    "consumer(s) connected; close them first",
                )
            if self.subscriptions.get(sub.name) is sub:
                del self.subscriptions[sub.name]
            sub.remove_consumer(consumer)
            await sub.cursor.delete()


class Topic(TopicBase):
    """A persistent topic: its managed ledger and durable cursors."""

    def __init__(self, name: TopicName, ledger: ManagedLedger, settings: BrokerSettings) -> None:
        super().__init__(name, settings)
        self.ledger = ledger
        ledger.on_recovered_entries = self._recovered
        self.ledger.add_listener(self._on_new_entries)

    @property
    def last_position(self) -> tuple[int, int]:
        return self.ledger.last_confirmed

    async def wait_for_room(self) -> None:
        await self.ledger.wait_for_room()

    def publish(self, entry: bytes) -> asyncio.Future:
        return self.ledger.add_entry(entry)

    def _recovered(self, entries: list[tuple[tuple[int, int], bytes]]) -> None:
        if self.dedup.enabled:
            self.dedup.observe_entries(entries)

    def _on_new_entries(self) -> None:
        for sub in self.subscriptions.values():
            sub.on_new_entries()

    async def load_cursors(self) -> None:
        for name in await self.ledger.cursor_names():
            cursor = await self._open_cursor(name, latest=True, durable=True, mark_delete=None)
            self.subscriptions[name] = Subscription(self, name, broker_pb2.EXCLUSIVE, cursor)

    async def _open_cursor(
        self, sub_name: str, latest: bool, durable: bool, mark_delete: tuple[int, int] | None
    ) -> ManagedCursor:
        cursor, _ = await ManagedCursor.open(
            self.ledger,
            sub_name,
            initial_position_latest=latest,
            durable=durable,
            persist_interval_ms=self.settings.managed_ledger_cursor_persist_interval_ms,
            max_ranges=self.settings.managed_ledger_max_unacked_ranges_to_persist,
            mark_delete=mark_delete,
        )
        return cursor

    async def close(self) -> None:
        self.ledger.remove_listener(self._on_new_entries)
        self._close_consumers()
        for sub in list(self.subscriptions.values()):
            await sub.cursor.close()
        await self.ledger.close()
