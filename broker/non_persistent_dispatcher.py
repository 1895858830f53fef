"""The dispatcher of a subscription on a non-persistent topic.

An entry goes out the moment it is published, to the consumer the
subscription's type picks (:mod:`broker.dispatch_rules`, the same rules as
persistent subscriptions) among those with permits, or is dropped (and
counted) when none can take it. Nothing is pending, nothing is redelivered
and nothing is read back: there is no storage to catch up from.
"""

from __future__ import annotations

from broker.consumer import Consumer, Deliveries
from broker.dispatch_rules import (
    Candidate,
    KeySharedRule,
    Room,
    RoundRobin,
    Rule,
    SharedRule,
    SingleActiveRule,
    assign,
)
from broker.dispatcher import DispatchContext, Dispatcher, EntryFacts, Position
from broker.key_shared import KeyHashTracker, Selector
from broker.meter import Meter
from broker.modes import SubscriptionType


class NonPersistentDispatcher(Dispatcher):
    def __init__(
        self, sub: DispatchContext, sub_type: SubscriptionType, selector: Selector | None
    ) -> None:
        super().__init__(sub, 0, 0)
        self.sub_type = sub_type
        self.selector = selector
        # Nothing stays pending, so no slot ever has a holder.
        self.tracker = KeyHashTracker(selector) if selector is not None else None
        self.turn = RoundRobin()
        self.dropped = Meter(sub.settings.stats_update_frequency_in_secs)

    def trigger(self) -> None:
        pass  # nothing is stored, so there is nothing to catch up on

    def consumer_removed(self, consumer: Consumer, released: list[tuple[Position, int]]) -> None:
        if self.selector is not None:
            self.selector.remove(consumer)

    def redeliver(
        self, consumer: Consumer, released: list[tuple[Position, int]], everything: bool
    ) -> None:
        pass  # delivered messages are not kept

    def place(self, consumer: Consumer, ranges: list[tuple[int, int]]) -> None:
        if self.selector is not None:
            self.selector.add(consumer, consumer.name, ranges)

    def _rule(self) -> Rule[Consumer]:
        if self.tracker is not None:
            return KeySharedRule(self.tracker, record=False)
        if self.sub_type == SubscriptionType.SHARED:
            return SharedRule(self.sub.consumers, lambda c: c.priority_level, self.turn)
        return SingleActiveRule(self.sub.active_consumer())

    def dispatch_entry(self, pos: Position, entry: bytes, facts: EntryFacts) -> None:
        messages = facts.messages
        room = Room({c: c.permits for c in self.sub.consumers if not c.closed and c.permits > 0})
        out = assign([Candidate(entry, facts.slot, messages)], self._rule(), room)
        if not out.plan:
            self.dropped.add(messages, len(entry))
            return
        (consumer,) = out.plan
        deliveries = Deliveries([pos[0]], [pos[1]], [0], [entry])
        self.sub.count_out(messages, len(entry), 0)
        consumer.deliver(deliveries, messages, len(entry))
