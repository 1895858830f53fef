"""A subscription of a topic: its cursor, its consumers, its dispatcher and
who holds which unacknowledged message.

Theory of operation. The first consumer sets the subscription's type (and,
for Key_Shared, its mode); later consumers must ask for the same, except
that once every consumer has left the next one may change it (the cursor is
rewound, so the new type starts from the oldest unacknowledged message).
Exclusive admits one consumer. The subscription is the only caller of its
:class:`broker.pending_acks.PendingAcks`: an acknowledgement goes to the
cursor and releases what consumers held; a consumer leaving or asking for
redelivery gives its entries back, and the dispatcher delivers them again.
Cumulative acknowledgement is refused on Shared and Key_Shared (Pulsar's
rule: there is no order to acknowledge up to).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from broker import rate_limits
from broker.consumer import Consumer, Sink
from broker.dispatch_rules import active_consumer
from broker.dispatcher import Dispatcher, SharedDispatcher, SingleActiveConsumerDispatcher
from broker.errors import BrokerError
from broker.key_shared import (
    AutoSplitHashRangeSelector,
    ConsistentHashingSelector,
    ConsumerAssignError,
    Selector,
    StickyRangeSelector,
)
from broker.key_shared_dispatcher import KeySharedDispatcher
from broker.managed_cursor import ManagedCursor
from broker.managed_ledger import ManagedLedger
from broker.meter import Meter
from broker.metrics import TopicMetrics
from broker.modes import KeySharedMode, SubscriptionType
from broker.non_persistent_dispatcher import NonPersistentDispatcher
from broker.pending_acks import PendingAcks
from broker.policies import AppliedPolicies
from broker.policy_values import DispatchRate
from broker.rate_limits import Throttle, TopicRates
from broker.settings import BrokerSettings
from protos import common_pb2
from protos.topic_name import TopicName

Position = tuple[int, int]
VIEW_RETRY_S = 1.0  # after a failed read of the compacted view


@dataclass(frozen=True)
class KeySharedPolicy:
    mode: KeySharedMode = KeySharedMode.AUTO_SPLIT
    allow_out_of_order: bool = False
    ranges: tuple[tuple[int, int], ...] = ()

    def describe(self) -> str:
        return f"{self.mode.name}, allow_out_of_order_delivery={self.allow_out_of_order}"


class TopicView(Protocol):
    """What a subscription needs of its topic."""

    name: TopicName
    settings: BrokerSettings
    persistent: bool
    metrics: TopicMetrics
    policies: AppliedPolicies
    rates: TopicRates  # the topic's dispatch rate is for all its subscriptions together

    def count_out(self, messages: int, size: int) -> None: ...

    def subscription_idle(self, sub: Subscription) -> None: ...

    def on_acked(self) -> None: ...


class Subscription:
    def __init__(
        self,
        topic: TopicView,
        name: str,
        sub_type: SubscriptionType,
        cursor: ManagedCursor,
        ledger: ManagedLedger | None,
        key_shared: KeySharedPolicy | None = None,
    ) -> None:
        self.topic = topic
        self.name = name
        self.sub_type = sub_type
        # Has a consumer set the type since the subscription was loaded? A
        # consumerless subscription shows the last type used here, or none
        # (stats "type": null) when no consumer has come since it loaded.
        self.type_known = False
        self.last_expire_ms = 0  # when expiry last acknowledged something
        # Monotonic time of the last consumer joining or leaving, or ack
        # (subscription expiration counts from it).
        self.last_active_s = time.monotonic()
        self.cursor = cursor
        self._ledger = ledger
        self.settings = topic.settings
        self.consumers: list[Consumer] = []
        self.pending: PendingAcks[Consumer] = PendingAcks(
            topic.policies.max_unacked_messages_per_consumer,
            topic.policies.max_unacked_messages_per_subscription,
        )
        self.key_shared = key_shared or KeySharedPolicy()
        self.batch_index_acks = (
            topic.persistent and self.settings.acknowledgment_at_batch_index_level_enabled
        )
        # Dispatch rates in force: the topic's and this subscription's own.
        self.own_throttle: Throttle | None = None
        self._own_rate: DispatchRate | None = None
        self.throttles: tuple[Throttle, ...] = ()
        # Set when a consumer subscribes with is_read_compacted (broker.compaction):
        # the topic's compacted view, and what to do when reading it failed.
        self.compacted: Callable[[], Awaitable[Any]] | None = None
        self.on_view_failed: Callable[[], None] | None = None
        self._set_throttles(topic.policies, first=True)
        self.dispatcher: Dispatcher = self._new_dispatcher(sub_type, self.key_shared)
        self.metrics = topic.metrics.subscription(name)

    @property
    def label(self) -> str:
        return f"{self.topic.name}/{self.name}"

    @property
    def ledger(self) -> ManagedLedger:
        """The managed ledger of a persistent topic (its dispatchers read it)."""
        assert self._ledger is not None, f"{self.topic.name} has no ledger"
        return self._ledger

    @property
    def unacked(self) -> int:
        return self.pending.total_unacked

    def apply_policies(self, policies: AppliedPolicies) -> None:
        """New unacked limits: a consumer or the subscription blocked under
        the old ones may go on at once."""
        self.pending.max_per_consumer = policies.max_unacked_messages_per_consumer
        self.pending.max_per_subscription = policies.max_unacked_messages_per_subscription
        self._set_throttles(policies)
        self.dispatcher.trigger()

    def _set_throttles(self, policies: AppliedPolicies, first: bool = False) -> None:
        """A changed subscription dispatch rate starts a new bucket; an
        unchanged one keeps its tokens."""
        rate = policies.subscription_dispatch_rate
        if first or rate != self._own_rate:
            self._own_rate = rate
            self.own_throttle = (
                None
                if rate.unlimited or not self.topic.persistent
                else Throttle(rate.msgs, rate.bytes, rate.period_s, time.monotonic())
            )
        found = (self.topic.rates.dispatch, self.own_throttle)
        throttles = tuple(t for t in found if t is not None)
        if throttles != self.throttles and not first:
            self.dispatcher.throttles_changed()  # a wait armed under the old rates ends
        self.throttles = throttles

    def count_out(self, messages: int, size: int, redelivered: int) -> None:
        """Messages went out to a consumer, ``redelivered`` of them again."""
        if self.throttles:
            rate_limits.take(self.throttles, messages, size, time.monotonic())
        self.topic.count_out(messages, size)
        self.metrics.out.add(messages, size)
        if redelivered:
            self.metrics.redelivered.add(redelivered, 0)

    def _new_dispatcher(
        self, sub_type: SubscriptionType, key_shared: KeySharedPolicy
    ) -> Dispatcher:
        s = self.settings
        entries, size = s.dispatcher_max_read_batch_size, s.dispatcher_max_read_size_bytes
        selector: Selector | None = None
        if sub_type == SubscriptionType.KEY_SHARED:
            if key_shared.mode == KeySharedMode.STICKY:
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
        if sub_type == SubscriptionType.SHARED:
            return SharedDispatcher(self, entries, size)
        return SingleActiveConsumerDispatcher(self, entries, size)

    def active_consumer(self) -> Consumer | None:
        """Exclusive and Failover: the one consumer that gets the messages
        (:func:`broker.dispatch_rules.active_consumer`)."""
        failover = self.sub_type == SubscriptionType.FAILOVER
        return active_consumer(
            [c for c in self.consumers if not c.closed],
            self.topic.name.partition_index if failover else -1,
            lambda c: (c.priority_level, c.name),
        )

    # ------------------------------------------------------------ consumers

    def add_consumer(
        self,
        name: str,
        sub_type: SubscriptionType,
        sink: Sink,
        priority_level: int = 0,
        key_shared: KeySharedPolicy | None = None,
    ) -> Consumer:
        key_shared = key_shared or KeySharedPolicy()
        self._check_join(sub_type, key_shared)
        # The first consumer sets the type (again, once every consumer has left).
        switching = not self.consumers and (
            sub_type != self.sub_type
            or (sub_type == SubscriptionType.KEY_SHARED and key_shared != self.key_shared)
        )
        dispatcher = self._new_dispatcher(sub_type, key_shared) if switching else self.dispatcher
        consumer = Consumer(name, sink, priority_level, meter=Meter(self.metrics.out.window_s))
        try:
            dispatcher.place(consumer, list(key_shared.ranges))
        except ConsumerAssignError as exc:
            raise BrokerError(str(exc), common_pb2.CONSUMER_ASSIGN_ERROR) from None
        if switching:
            self.dispatcher.retire()
            self.sub_type, self.key_shared, self.dispatcher = sub_type, key_shared, dispatcher
            self.cursor.rewind()
        self.consumers.append(consumer)
        self.type_known = True
        self.last_active_s = time.monotonic()
        self.pending.add_consumer(consumer)
        self.dispatcher.consumer_added(consumer)
        return consumer

    def _check_join(self, sub_type: SubscriptionType, key_shared: KeySharedPolicy) -> None:
        """Refuse a consumer that cannot join (typed CONSUMER_BUSY and friends)."""
        where = f"subscription {self.name!r} on {self.topic.name}"
        if self.consumers and sub_type != self.sub_type:
            raise BrokerError(
                f"{where} is {self.sub_type.display} with consumers connected; "
                f"a {sub_type.display} consumer cannot join",
                common_pb2.CONSUMER_BUSY,
            )
        mine = (self.key_shared.mode, self.key_shared.allow_out_of_order)
        if (
            self.consumers
            and sub_type == SubscriptionType.KEY_SHARED
            and (key_shared.mode, key_shared.allow_out_of_order) != mine
        ):
            raise BrokerError(
                f"Key_Shared {where} is {self.key_shared.describe()}; a consumer with "
                f"{key_shared.describe()} cannot join",
                common_pb2.CONSUMER_BUSY,
            )
        if sub_type == SubscriptionType.EXCLUSIVE and self.consumers:
            raise BrokerError(
                f"exclusive {where} already has a consumer ({self.consumers[0].name})",
                common_pb2.CONSUMER_BUSY,
            )
        limit = self.topic.policies.max_consumers_per_subscription
        if len(self.consumers) >= limit:
            raise BrokerError(
                f"{where} already has {len(self.consumers)} consumers "
                f"(max consumers per subscription = {limit})",
                common_pb2.TOO_MANY_REQUESTS,
            )

    def remove_consumer(self, consumer: Consumer) -> None:
        if consumer not in self.consumers:
            return
        consumer.detach()
        self.consumers.remove(consumer)
        self.last_active_s = time.monotonic()
        released = self.pending.remove_consumer(consumer, self.cursor.is_acked)
        self.dispatcher.consumer_removed(consumer, released)
        if not self.consumers:
            self.topic.subscription_idle(self)

    def grant_permits(self, consumer: Consumer, permits: int) -> None:
        consumer.grant(permits)
        self.dispatcher.trigger()

    # ------------------------------------------------------------ acknowledgements

    def ack(
        self, positions: list[Position], cumulative: bool, consumer: Consumer | None = None
    ) -> None:
        if not positions:
            return
        if cumulative and self.sub_type in (SubscriptionType.SHARED, SubscriptionType.KEY_SHARED):
            raise BrokerError(
                "cumulative acknowledgement is not allowed on "
                f"{self.sub_type.display} subscription {self.name!r}",
                common_pb2.NOT_ALLOWED,
            )
        self.cursor.ack(positions, cumulative)
        self.last_active_s = time.monotonic()
        unblock = False
        messages = 0
        for holder, done in self.pending.acked(positions, cumulative, consumer):
            self.dispatcher.acked(holder, done)
            unblock |= self.pending.is_blocked(holder)
            messages += sum(n for _, n in done)
        if messages:
            self.metrics.acked.add(messages, 0)
        if unblock or self.pending.subscription_blocked:
            self.dispatcher.trigger()
        self.topic.on_acked()

    def skip_spans(self, spans: list[tuple[Position, Position]]) -> None:
        """Positions acknowledged without delivery: what a compacted view
        leaves out, for a consumer reading it."""
        self.cursor.ack_spans(spans)
        self.topic.on_acked()

    def compacted_view_failed(self) -> None:
        """Read the view's record again, and dispatch again in a second."""
        if self.on_view_failed is not None:
            self.on_view_failed()
        asyncio.get_running_loop().call_later(VIEW_RETRY_S, self.dispatcher.trigger)

    def ack_batch_indexes(
        self, acks: list[tuple[Position, int, list[int]]], consumer: Consumer
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

    def expire_through(self, up_to: Position) -> None:
        """Acknowledge everything up to ``up_to`` for the broker (message
        expiry, clear-backlog): cumulative whatever the type, and what
        consumers held up to there is released."""
        self.cursor.ack([up_to], True)
        for holder, done in self.pending.acked([up_to], True, None):
            self.dispatcher.acked(holder, done)
        self.dispatcher.trigger()
        self.topic.on_acked()

    # ------------------------------------------------------------ redelivery

    def seek(self, mark_delete: Position) -> None:
        """Reset the cursor; what consumers hold is forgotten (no redelivery count)."""
        self.pending.clear()
        self.dispatcher.reset()
        self.cursor.reset(mark_delete)
        self.dispatcher.trigger()
        self.topic.on_acked()

    def redeliver_unacked(
        self, consumer: Consumer, positions: list[Position] | None = None
    ) -> None:
        """Everything ``consumer`` holds, or only ``positions`` of it."""
        everything = not positions or self.dispatcher.redelivers_everything
        is_acked = self.cursor.is_acked
        if everything:
            released = self.pending.give_back_all(consumer, is_acked)
        else:
            released = self.pending.give_back(consumer, positions or [], is_acked)
        self.dispatcher.redeliver(consumer, released, everything)
        self.dispatcher.trigger()

    def on_new_entries(self) -> None:
        if self.consumers:
            self.dispatcher.trigger()
