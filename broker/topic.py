"""A topic served by this broker: its producers (and their access modes),
its subscriptions, and the publish path; :class:`Topic` is a persistent
topic on its managed ledger.

Theory of operation. Every entry a producer sends goes through
:meth:`TopicBase.publish_now` (after :meth:`TopicBase.publish`'s waits for
a backlog quota, a publish rate or room in the ledger, when there are any),
which asks :func:`broker.dedup.admit` whether to store it (refused,
duplicate, in flight or admitted, as Pulsar's
``PersistentTopic.publishMessage`` decides), stores it and counts it once
stored. Producer access modes follow
the seed: Shared producers coexist; an Exclusive producer must be alone;
WaitForExclusive waits until it is; ExclusiveWithFencing fences the others.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Coroutine
from typing import Any

from broker.consumer import Consumer, Sink
from broker.dedup import DedupState, Outcome, admit
from broker.dedup_snapshots import recover, write_snapshot
from broker.errors import BrokerError
from broker.managed_cursor import ManagedCursor
from broker.managed_ledger import ManagedLedger, Stored
from broker.meter import Meter
from broker.metrics import TopicMetrics
from broker.modes import ProducerAccessMode, SubscriptionType
from broker.policies import AppliedPolicies, Policies, applied
from broker.producer import Producer, PublishGate, unique_producer_name
from broker.publish_time import find_by_publish_time
from broker.rate_limits import TopicRates
from broker.settings import BrokerSettings
from broker.subscription import KeySharedPolicy, Subscription
from metastore.client import MetastoreClient
from protos import common_pb2
from protos.message_id import MessageId
from protos.topic_name import TopicName

log = logging.getLogger(__name__)

Position = tuple[int, int]
MAX_INT64 = (1 << 63) - 1  # MessageId.latest's ledger id


def apply_to_ledger(ledger: ManagedLedger, policies: AppliedPolicies) -> None:
    """Retention, and the quorums of the ledgers it makes from now on."""
    p = policies.persistence
    ledger.quorums = (p.ensemble, p.write_quorum, p.ack_quorum)
    ledger.retention = policies.retention


class TopicBase:
    """What persistent and non-persistent topics share."""

    persistent = True

    def __init__(self, name: TopicName, settings: BrokerSettings, metrics: TopicMetrics) -> None:
        self.name = name
        self.settings = settings
        self.metrics = metrics
        self.producers: dict[str, Producer] = {}
        self._producers_changed = asyncio.Event()
        # Published and dispatched messages: the topic's metrics own them, so
        # they go on counting across unloads and reloads on this broker.
        self.meter_in = metrics.meter_in
        self.meter_out = metrics.meter_out
        self.dedup = DedupState(
            settings.broker_deduplication_entries_interval,
            settings.broker_deduplication_max_number_of_producers,
        )
        # What the topic applies (broker.policies), set by the registry at load and
        # on every change, and the topic's overrides (with their version) read last.
        self.policies: AppliedPolicies = applied(None, None, settings)
        self.overrides: tuple[Policies, int] | None = None
        self.overrides_stale = False  # a read of them failed or is in flight: read again
        self.overrides_reads = 0  # reads started; only the latest one's answer is kept
        self.gate: PublishGate | None = None  # set for a persistent topic
        # Rates in force (broker.rate_limits), rebuilt when their policy changes.
        self.rates = TopicRates(self.persistent)
        self.rates.update(None, self.policies, time.monotonic())
        # Monotonic time of the last publish, producer or subscribe (the
        # inactive topic check counts from it).
        self.last_active_s = time.monotonic()
        # The last position of a terminated topic (topics terminate): it
        # takes no more messages.
        self.terminated_at: Position | None = None
        # The newest store (stores complete in order): what a terminate waits for.
        self.last_store: asyncio.Future | None = None
        self.termination: asyncio.Future | None = None  # a terminate running or done
        self.subscriptions: dict[str, Subscription] = {}
        self._sub_lock = asyncio.Lock()
        self.closing = False
        self._background: set[asyncio.Task] = set()

    @property
    def last_position(self) -> Position:
        raise NotImplementedError

    def has_room(self) -> bool:
        """May a publish go ahead at once (no ledger switch running, not too
        many writes in flight)?"""
        return True

    async def wait_for_room(self) -> None:
        """Publishes wait here while too many are in flight."""

    def _store(self, entry: bytes, messages: int, stored: Stored) -> asyncio.Future:
        """Store (or, non-persistent, dispatch) one entry of ``messages``
        messages: a future of its position; ``stored`` hears the outcome as
        soon as it is known."""
        raise NotImplementedError

    def _ledger(self) -> ManagedLedger | None:
        return None

    def subscription_idle(self, sub: Subscription) -> None:
        """``sub``'s last consumer left."""

    async def _open_cursor(
        self, sub_name: str, latest: bool, durable: bool, mark_delete: Position | None
    ) -> ManagedCursor:
        raise NotImplementedError

    async def close(self) -> None:
        raise NotImplementedError

    async def apply_policies(self, policies: AppliedPolicies) -> None:
        """Take new policies: limits apply to the next check, the unacked
        limits to every subscription at once."""
        self.rates.update(self.policies, policies, time.monotonic())
        self.policies = policies
        for sub in self.subscriptions.values():
            sub.apply_policies(policies)
        if self.gate is not None:
            self.gate.judge()

    def on_acked(self) -> None:
        """A subscription acknowledged something."""
        if self.gate is not None:
            self.gate.on_acked()

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # ---------------------------------------------------------------- publishing

    def publish_waits(self) -> bool:
        """Must a publish wait (backlog quota, publish rate, a full ledger)?"""
        return (
            (self.gate is not None and bool(self.policies.backlog_quotas))
            or self.rates.publish is not None
            or not self.has_room()
        )

    async def publish(
        self, producer: Producer, sequence_id: int, messages: int, entry: bytes
    ) -> asyncio.Future:
        """Store one entry of ``producer`` (first sequence id ``sequence_id``,
        ``messages`` messages) after the waits it needs: :meth:`publish_now`."""
        if self.gate is not None and self.policies.backlog_quotas:
            await self.gate.admit()  # refused or held while over a backlog quota
        throttle = self.rates.publish
        if throttle is not None:  # over the rate it waits, as Pulsar stops reading
            wait = throttle.wait_s(time.monotonic())
            if wait > 0:
                self.metrics.publish_throttled += 1
                await asyncio.sleep(wait)  # the rate limit itself, not a synchronisation
            throttle.take(messages, len(entry), time.monotonic())
        if not self.has_room():
            await self.wait_for_room()  # after any ledger switch the dedup state must see
        return self.publish_now(producer, sequence_id, messages, entry)

    def publish_now(
        self, producer: Producer, sequence_id: int, messages: int, entry: bytes
    ) -> asyncio.Future:
        """Store one entry with nothing left to wait for: a future of its
        position, (-1, -1) for a duplicate. BrokerError when it is refused
        or still in flight."""
        self.last_active_s = time.monotonic()
        # After every wait and with none before the store: a terminate that
        # began meanwhile refuses this entry (broker.termination).
        if self.terminated_at is not None:
            raise self._terminated_error()
        admission = admit(
            entry, producer.name, sequence_id, messages, self.dedup, self.settings.max_message_size
        )
        if admission.outcome in (Outcome.REFUSED, Outcome.IN_FLIGHT):
            raise BrokerError(admission.message, admission.code)
        if admission.outcome is Outcome.DUPLICATE:
            done: asyncio.Future = asyncio.get_running_loop().create_future()
            done.set_result((-1, -1))  # Pulsar answers a duplicate with -1:-1
            return done
        tracked = admission.highest if admission.tracked else None
        if tracked is not None:
            self.dedup.pushed_to(producer.name, tracked)
        producer.last_sequence_id = max(producer.last_sequence_id, admission.highest)
        stored = functools.partial(self._stored, producer, messages, len(entry), tracked)
        self.last_store = self._store(entry, messages, stored)
        return self.last_store

    def _terminated_error(self) -> BrokerError:
        return BrokerError(
            f"{self.name} was terminated: it takes no more messages", common_pb2.TOPIC_TERMINATED
        )

    def _stored(
        self,
        producer: Producer,
        messages: int,
        size: int,
        tracked_highest: int | None,
        stored: bool,
    ) -> None:
        """An entry's write ended: count it, and tell deduplication (when it
        tracks the entry) whether it was stored."""
        if not stored:
            if tracked_highest is not None:
                self.dedup.failed(producer.name)
            return
        self.meter_in.add(messages, size)
        producer.meter.add(messages, size)
        if tracked_highest is not None and self.dedup.stored(producer.name, tracked_highest):
            self._snapshot_dedup()

    def count_out(self, messages: int, size: int) -> None:
        self.meter_out.add(messages, size)

    def _snapshot_dedup(self) -> None:
        raise AssertionError(f"{self.name}: deduplication is for persistent topics")

    def start_position(self, start: MessageId, inclusive: bool) -> Position | None:
        """The mark-delete position of a reader starting at ``start`` (None:
        nothing is stored, so a reader starts where a consumer would)."""
        return None

    async def seek_position(self, target: MessageId | int | None, inclusive: bool) -> Position:
        raise BrokerError(
            f"{self.name} is non-persistent: there is nothing stored to seek to",
            common_pb2.NOT_ALLOWED,
        )

    def last_sequence_id(self, producer: Producer) -> int:
        """What a new producer of this name resumes after."""
        if self.dedup.enabled:
            return self.dedup.last_sequence_id(producer.name)
        return producer.last_sequence_id

    # ---------------------------------------------------------------- subscriptions

    async def create_subscription(self, sub_name: str, latest: bool) -> bool:
        """A durable subscription with no consumer (admin); False if it exists."""
        async with self._sub_lock:
            if sub_name in self.subscriptions:
                return False
            self._check_room_for_subscription()
            cursor = await self._open_cursor(sub_name, latest, True, None)
            self.subscriptions[sub_name] = Subscription(
                self, sub_name, SubscriptionType.EXCLUSIVE, cursor, self._ledger()
            )
            return True

    async def subscribe(
        self,
        sub_name: str,
        sub_type: SubscriptionType,
        latest: bool,
        durable: bool,
        consumer_name: str,
        sink: Sink,
        priority_level: int = 0,
        mark_delete: Position | None = None,
        key_shared: KeySharedPolicy | None = None,
    ) -> tuple[Subscription, Consumer]:
        """Join (or create) ``sub_name``; a subscribe over the subscribe rate
        is refused, and only a subscribe that succeeds spends from it."""
        limiter = self.rates.subscribe
        if limiter is not None and not limiter.allows(consumer_name, time.monotonic()):
            rate = self.policies.subscribe_rate
            raise BrokerError(
                f"consumer {consumer_name!r} subscribed to {self.name} more than "
                f"{rate.per_consumer} times in {rate.period_s} s (subscribe rate)",
                common_pb2.TOO_MANY_REQUESTS,
            )
        self.last_active_s = time.monotonic()
        async with self._sub_lock:
            self._check_room_for_consumer()
            sub = self.subscriptions.get(sub_name)
            if sub is not None:
                consumer = sub.add_consumer(
                    consumer_name, sub_type, sink, priority_level, key_shared
                )
                self._spend_subscribe(consumer_name)
                return sub, consumer
            if durable and not self.policies.auto_subscription_creation:
                raise BrokerError(
                    f"subscription {sub_name!r} does not exist on {self.name} and "
                    "auto subscription creation is off (create it with "
                    "topics create-subscription)",
                    common_pb2.SUBSCRIPTION_NOT_FOUND,
                )
            self._check_room_for_subscription()
            cursor = await self._open_cursor(sub_name, latest, durable, mark_delete)
            sub = Subscription(self, sub_name, sub_type, cursor, self._ledger(), key_shared)
            try:
                consumer = sub.add_consumer(
                    consumer_name, sub_type, sink, priority_level, key_shared
                )
            except BrokerError:
                await cursor.delete()  # refused: as if it never tried to subscribe
                raise
            self.subscriptions[sub_name] = sub
            self._spend_subscribe(consumer_name)
            return sub, consumer

    def _spend_subscribe(self, consumer_name: str) -> None:
        if self.rates.subscribe is not None:
            self.rates.subscribe.spend(consumer_name, time.monotonic())

    async def unsubscribe(self, sub: Subscription, consumer: Consumer) -> None:
        """Delete ``sub``; ``consumer`` must be its only consumer."""
        async with self._sub_lock:
            others = [c for c in sub.consumers if c is not consumer and not c.closed]
            if others:
                raise BrokerError(
                    f"subscription {sub.name!r} on {self.name} has {len(others)} other "
                    "consumer(s) connected; close them first",
                    common_pb2.NOT_ALLOWED,
                )
            if self.subscriptions.get(sub.name) is sub:
                del self.subscriptions[sub.name]
                self.metrics.forget_subscription(sub.name)
            sub.remove_consumer(consumer)
            await sub.cursor.delete()
        self.on_acked()  # a backlog went with it

    async def delete_subscription(self, sub: Subscription, force: bool) -> None:
        """Delete ``sub`` (admin): refused while consumers are connected,
        unless ``force`` (they are disconnected)."""
        async with self._sub_lock:
            if sub.consumers and not force:
                raise BrokerError(
                    f"subscription {sub.name!r} on {self.name} has {len(sub.consumers)} "
                    "consumer(s) connected; close them first or use --force",
                    common_pb2.PRECONDITION_FAILED,
                )
            if self.subscriptions.get(sub.name) is sub:
                del self.subscriptions[sub.name]
                self.metrics.forget_subscription(sub.name)
            for consumer in list(sub.consumers):
                consumer.close()
                sub.remove_consumer(consumer)
            await sub.cursor.delete()
        self.on_acked()  # a backlog went with it

    def _check_room_for_subscription(self) -> None:
        limit = self.policies.max_subscriptions_per_topic
        if len(self.subscriptions) >= limit:
            raise BrokerError(
                f"{self.name} already has {len(self.subscriptions)} subscriptions "
                f"(max subscriptions per topic = {limit})",
                common_pb2.TOO_MANY_REQUESTS,
            )

    def _check_room_for_consumer(self) -> None:
        limit = self.policies.max_consumers_per_topic
        connected = sum(len(sub.consumers) for sub in self.subscriptions.values())
        if connected >= limit:
            raise BrokerError(
                f"{self.name} already has {connected} consumers "
                f"(max consumers per topic = {limit})",
                common_pb2.TOO_MANY_REQUESTS,
            )

    def _close_consumers(self) -> None:
        self.closing = True
        if self.gate is not None:
            self.gate.release()
        for producer in list(self.producers.values()):
            if producer.on_topic_closed is not None:
                producer.on_topic_closed()
        for sub in list(self.subscriptions.values()):
            for consumer in list(sub.consumers):
                consumer.close()

    # ---------------------------------------------------------------- producers

    def _exclusive_holder(self) -> Producer | None:
        shared = ProducerAccessMode.SHARED
        return next((p for p in self.producers.values() if p.access_mode != shared), None)

    async def add_producer(
        self,
        requested_name: str,
        broker_name: str,
        access_mode: ProducerAccessMode = ProducerAccessMode.SHARED,
    ) -> Producer:
        """Register a producer under the topic's access rules (module docstring).
        WaitForExclusive waits until no producer is connected (the caller may
        be cancelled meanwhile)."""
        if access_mode == ProducerAccessMode.WAIT_FOR_EXCLUSIVE:
            while self.producers:
                self._producers_changed.clear()
                await self._producers_changed.wait()
        elif access_mode == ProducerAccessMode.EXCLUSIVE_WITH_FENCING:
            self._fence_producers()
        elif access_mode == ProducerAccessMode.EXCLUSIVE and self.producers:
            raise BrokerError(
                f"{self.name} already has {len(self.producers)} producer(s); an Exclusive "
                "producer must be the only one",
                common_pb2.PRODUCER_BUSY,
            )
        self._check_room_for_producer(requested_name)
        name = requested_name or unique_producer_name(broker_name, self.producers)
        producer = Producer(name, access_mode, meter=Meter(self.metrics.window_s))
        self.producers[name] = producer
        self.last_active_s = time.monotonic()
        return producer

    def _fence_producers(self) -> None:
        for old in list(self.producers.values()):
            log.info("%s: producer %s fenced by a new exclusive producer", self.name, old.name)
            del self.producers[old.name]
            if old.on_fenced is not None:
                old.on_fenced()

    def _check_room_for_producer(self, requested_name: str) -> None:
        holder = self._exclusive_holder()
        if holder is not None:
            raise BrokerError(
                f"{self.name} has an exclusive producer ({holder.name}); no other may connect",
                common_pb2.PRODUCER_BUSY,
            )
        if self.terminated_at is not None:
            raise self._terminated_error()
        if self.gate is not None:
            self.gate.check_producer()
        limit = self.policies.max_producers_per_topic
        if len(self.producers) >= limit:
            raise BrokerError(
                f"{self.name} already has {len(self.producers)} producers "
                f"(max producers per topic = {limit})",
                common_pb2.TOO_MANY_REQUESTS,
            )
        if requested_name in self.producers:
            raise BrokerError(
                f"a producer named {requested_name!r} is already connected to {self.name}",
                common_pb2.PRODUCER_BUSY,
            )

    def remove_producer(self, producer: Producer) -> None:
        if self.producers.get(producer.name) is producer:
            del self.producers[producer.name]
            self._producers_changed.set()
            self.last_active_s = time.monotonic()


class Topic(TopicBase):
    """A persistent topic: its managed ledger and durable cursors."""

    def __init__(
        self,
        name: TopicName,
        ledger: ManagedLedger,
        settings: BrokerSettings,
        metastore: MetastoreClient,
        metrics: TopicMetrics,
    ) -> None:
        super().__init__(name, settings, metrics)
        self.ledger = ledger
        self.metastore = metastore
        ledger.on_recovered_entries = self._recovered
        self.ledger.add_listener(self._on_new_entries)

    @property
    def last_position(self) -> Position:
        return self.ledger.last_confirmed

    def _ledger(self) -> ManagedLedger:
        return self.ledger

    def has_room(self) -> bool:
        return self.ledger.has_room()

    async def wait_for_room(self) -> None:
        await self.ledger.wait_for_room()

    def _store(self, entry: bytes, messages: int, stored: Stored) -> asyncio.Future:
        return self.ledger.add_entry(entry, stored, messages)

    def _recovered(self, entries: list[tuple[Position, bytes]]) -> None:
        if self.dedup.enabled:
            self.dedup.observe(entries)

    def _on_new_entries(self) -> None:
        for sub in self.subscriptions.values():
            sub.on_new_entries()

    async def apply_policies(self, policies: AppliedPolicies) -> None:
        """As the base, and: retention and persistence (for the next ledger)
        go to the managed ledger, deduplication turns on or off."""
        await super().apply_policies(policies)
        apply_to_ledger(self.ledger, policies)
        if policies.deduplication_enabled and not self.dedup.enabled:
            await self.enable_dedup()
        elif not policies.deduplication_enabled and self.dedup.enabled:
            self.disable_dedup()

    # ---------------------------------------------------------------- deduplication

    async def enable_dedup(self) -> None:
        replayed = await recover(self.dedup, self.ledger, self.metastore)
        self.dedup.enabled = True
        log.info("%s: deduplication on (%d entries replayed)", self.name, replayed)

    def disable_dedup(self) -> None:
        self.dedup.enabled = False
        self.ledger.hold_back = None

    def _snapshot_dedup(self) -> None:
        self._spawn(write_snapshot(self.dedup, self.ledger, self.metastore))

    # ---------------------------------------------------------------- positions

    def start_position(self, start: MessageId, inclusive: bool) -> Position:
        ledger = self.ledger
        if start.ledger_id() < 0:  # MessageId.earliest
            return ledger.before_first()
        if start.ledger_id() >= MAX_INT64:  # MessageId.latest
            last = ledger.last_confirmed
            return ledger.before(last) if inclusive and last[1] >= 0 else last
        pos = start.position
        # A batched start id delivers its whole entry: the client skips the
        # messages before it (and the start itself when not inclusive).
        if inclusive or start.batch_index() >= 0:
            return ledger.before(pos)
        return pos

    async def seek_position(self, target: MessageId | int | None, inclusive: bool) -> Position:
        """The mark-delete position that makes ``target`` (a message id, or a
        publish time in ms) the next message delivered; a message id that is
        not ``inclusive`` (and not in a batch) makes the one after it next."""
        ledger = self.ledger
        if target is None:
            raise BrokerError(
                "seek needs a message id or a publish time", common_pb2.INVALID_ARGUMENT
            )
        if isinstance(target, int):
            return ledger.before(await find_by_publish_time(ledger, target))
        if target.ledger_id() < 0:
            return ledger.before(ledger.normalize(ledger.first_position))
        if target.ledger_id() >= MAX_INT64:
            return ledger.before(ledger.next_position(ledger.last_confirmed))
        return self.start_position(target, inclusive)

    # ---------------------------------------------------------------- cursors

    async def load_cursors(self, names: list[str] | None = None) -> None:
        for name in await self.ledger.cursor_names() if names is None else names:
            cursor = await self._open_cursor(name, latest=True, durable=True, mark_delete=None)
            self.subscriptions[name] = Subscription(
                self, name, SubscriptionType.EXCLUSIVE, cursor, self.ledger
            )

    def subscription_idle(self, sub: Subscription) -> None:
        """A non-durable subscription (a reader's) goes with its last
        consumer, as in Pulsar; a durable one stays."""
        if sub.cursor.durable or self.closing or self.subscriptions.get(sub.name) is not sub:
            return
        del self.subscriptions[sub.name]
        self.metrics.forget_subscription(sub.name)
        self._spawn(sub.cursor.delete())

    async def _open_cursor(
        self, sub_name: str, latest: bool, durable: bool, mark_delete: Position | None
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
