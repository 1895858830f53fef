"""Dispatchers: which consumer of a subscription gets which entry.

Theory of operation. Consumers grant permits (message counts: a batch entry
of N messages costs N). A dispatcher reads entries from the cursor's read
position (at most ``max_read_batch_size`` entries or ``max_bytes`` per read),
skips those acknowledged individually, and pushes them to consumers in one
stream message per consumer. It stops when permits or entries run out and is
woken by new permits, new entries, acknowledgements or a consumer change. At
most one read runs at a time per subscription.

Every delivered, unacknowledged entry is *pending* at the consumer that got
it. When that consumer leaves, its pending entries are delivered again (to
the next active consumer, or to the others for Shared) with their redelivery
count raised by one. A consumer (and a subscription) holding
``max_unacked_messages_per_consumer`` (``..._per_subscription``) unacked
messages gets nothing more until half of them are acknowledged; 0 = no limit.

* :class:`SingleActiveConsumerDispatcher` (Exclusive, Failover): one active
  consumer gets everything; which one is the subscription's choice
  (:meth:`Subscription.active_consumer`). When it changes, the cursor is
  rewound so the new one gets every unacknowledged message.
* :class:`SharedDispatcher` (Shared): entries go round-robin to consumers
  with permits, those of the best priority level (lowest number) first;
  pending entries of a consumer that leaves are redelivered first.
* :class:`NonPersistentDispatcher` (every type on a non-persistent topic):
  an entry goes out the moment it is published, to the consumer the type
  picks among those with permits, or is dropped (and counted) when none
  has any. Nothing is pending and nothing is redelivered.
* Shared and Key_Shared hold entries whose deliver-at time has not come in
  a :class:`~broker.delayed_delivery.DelayedDeliveryTracker` and deliver
  them like redeliveries when due; Exclusive and Failover deliver at once.
* :class:`KeySharedDispatcher` (Key_Shared): each entry goes to the consumer
  that :mod:`broker.key_shared` picks for its key's slot. An entry that
  cannot go now (its consumer has no permits, or the slot is still held by
  another consumer) waits in a replay set, and every later entry of the
  same slot waits behind it, so per-key order holds. The replay set is
  bounded by ``key_shared_look_ahead_msg_in_replay_threshold_per_subscription``
  (entries): past it no new entries are read until it shrinks.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sortedcontainers import SortedDict, SortedSet

from broker.delayed_delivery import DelayedDeliveryTracker
from broker.key_shared import KeyHashTracker, Selector, slot_of, sticky_key
from broker.meter import Meter
from protos import broker_pb2
from protos.entry import CorruptedEntryError, num_messages, parse_metadata

if TYPE_CHECKING:
    from broker.topic import Consumer, Subscription

log = logging.getLogger(__name__)

Position = tuple[int, int]


@dataclass(frozen=True, slots=True)
class EntryFacts:
    """What dispatch needs from an entry's metadata, parsed once."""

    messages: int
    deliver_at_ms: int  # 0: at once
    key: bytes  # Key_Shared sticky key (its first message's)

    @property
    def slot(self) -> int:
        return slot_of(self.key)


def entry_facts(data: bytes) -> EntryFacts:
    try:
        meta = parse_metadata(data)
    except CorruptedEntryError:
        return EntryFacts(1, 0, sticky_key(None, None))
    key = sticky_key(
        meta.ordering_key if meta.HasField("ordering_key") else None,
        meta.partition_key if meta.HasField("partition_key") else None,
    )
    return EntryFacts(num_messages(meta), int(meta.deliver_at_time), key)


class Dispatcher:
    def __init__(self, subscription: Subscription, max_entries: int, max_bytes: int) -> None:
        self.sub = subscription
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._task: asyncio.Task | None = None
        self._again = False

    # ------------------------------------------------------------ delayed delivery

    def _init_delayed(self) -> None:
        s = self.sub.topic.settings
        self.delayed: DelayedDeliveryTracker | None = None
        if s.delayed_delivery_enabled:
            self.delayed = DelayedDeliveryTracker(
                s.delayed_delivery_tick_time_ms,
                s.is_delayed_delivery_deliver_at_time_strict,
                s.delayed_delivery_max_num_tracked_messages,
            )
        self._delayed_timer: asyncio.TimerHandle | None = None
        self._delayed_timer_at = 0

    def _can_read_more(self) -> bool:
        return self.delayed is None or not self.delayed.full

    def _hold_if_delayed(self, pos: Position, deliver_at: int, payload: object = None) -> bool:
        """Keep an entry whose deliver-at time has not come; True if kept."""
        if self.delayed is None:
            return False
        if not self.delayed.is_delayed(deliver_at, int(time.time() * 1000)):
            return False
        self.delayed.add(pos, deliver_at, payload)
        self._arm_delayed()
        return True

    def _arm_delayed(self) -> None:
        assert self.delayed is not None
        wake = self.delayed.next_wakeup_ms()
        if wake is None:
            return
        if self._delayed_timer is not None:
            if self._delayed_timer_at <= wake:
                return
            self._delayed_timer.cancel()
        delay_s = max(0.0, wake / 1000 - time.time())
        self._delayed_timer = asyncio.get_running_loop().call_later(delay_s, self._delayed_due)
        self._delayed_timer_at = wake

    def _delayed_due(self) -> None:
        self._delayed_timer = None
        assert self.delayed is not None
        for pos, payload in self.delayed.due(int(time.time() * 1000)):
            self._release_delayed(pos, payload)
        self._arm_delayed()
        self.trigger()

    def _release_delayed(self, pos: Position, payload: object) -> None:
        raise NotImplementedError

    def _reset_delayed(self) -> None:
        if self.delayed is not None:
            self.delayed.clear()
        if self._delayed_timer is not None:
            self._delayed_timer.cancel()
            self._delayed_timer = None

    def trigger(self) -> None:
        if self._task is not None:
            self._again = True
            return
        self._task = asyncio.get_running_loop().create_task(self._run())

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
        raise NotImplementedError

    def consumer_added(self, consumer: Consumer) -> None:
        self.trigger()

    def consumer_removed(self, consumer: Consumer) -> None:
        raise NotImplementedError

    def redeliver_consumer(self, consumer: Consumer) -> None:
        """Deliver again everything ``consumer`` holds unacknowledged."""
        raise NotImplementedError

    def redeliver_positions(self, consumer: Consumer, positions: list[Position]) -> None:
        """Deliver these of ``consumer``'s pending entries again (negative acks,
        ack timeouts). Ordered types cannot skip: they redeliver everything."""
        self.redeliver_consumer(consumer)

    def take_pending(
        self, consumer: Consumer, positions: list[Position]
    ) -> list[tuple[Position, int]]:
        """Remove these entries from ``consumer``'s pending ones, counting one
        more redelivery: [(position, messages)] of those it held unacked."""
        counts = self.sub.redelivery_counts
        out = []
        for pos in positions:
            n = consumer.pending.pop(pos, None)
            if n is None:
                continue
            consumer.unacked -= n
            if not self.sub.cursor.is_acked(pos):
                counts[pos] = counts.get(pos, 0) + 1
                out.append((pos, n))
        return out

    def acked(self, consumer: Consumer, done: list[tuple[Position, int]]) -> None:
        """``consumer``'s pending entries ``done`` (position, messages) were acked."""

    def reset(self) -> None:
        """The cursor was moved (seek): forget what waits for redelivery."""

    def place(self, consumer: Consumer, ranges: list[tuple[int, int]]) -> None:
        """Key_Shared: give a joining consumer its hash ranges (ConsumerAssignError
        when it cannot have them; nothing changes then)."""

    # ------------------------------------------------------------ shared helpers

    def _can_take(self, consumer: Consumer) -> bool:
        if consumer.closed or consumer.permits <= 0:
            return False
        limit = self.sub.topic.settings.max_unacked_messages_per_consumer
        if limit > 0:
            if consumer.unacked >= limit:
                consumer.blocked = True
            elif consumer.blocked and consumer.unacked <= limit // 2:
                consumer.blocked = False
            if consumer.blocked:
                return False
        return True

    def _subscription_blocked(self) -> bool:
        sub = self.sub
        limit = sub.topic.settings.max_unacked_messages_per_subscription
        if limit <= 0:
            return False
        unacked = sub.unacked
        if unacked >= limit:
            sub.blocked = True
        elif sub.blocked and unacked <= limit // 2:
            sub.blocked = False
        return sub.blocked

    def _allowance(self, consumer: Consumer | None = None) -> int:
        """Messages that may still go out before an unacked limit is reached
        (entries are read up to it; a batch entry may overshoot it once)."""
        settings = self.sub.topic.settings
        room = 1 << 62
        if settings.max_unacked_messages_per_subscription > 0:
            room = settings.max_unacked_messages_per_subscription - self.sub.unacked
        if consumer is not None and settings.max_unacked_messages_per_consumer > 0:
            room = min(room, settings.max_unacked_messages_per_consumer - consumer.unacked)
        return max(room, 0)

    def _send(self, consumer: Consumer, batch: list[tuple[Position, bytes, int]]) -> None:
        msg = broker_pb2.Deliveries()
        sent = size = 0
        counts = self.sub.redelivery_counts
        masks = self.sub.cursor.state.batch_acked if self.sub.batch_index_acks else None
        for pos, data, n in batch:
            redelivery = counts.get(pos, 0)
            msg.ledger_ids.append(pos[0])
            msg.entry_ids.append(pos[1])
            msg.redelivery_counts.append(redelivery)
            msg.entries.append(data)
            if masks is not None:
                mask = masks.get(pos, 0)
                msg.acked_batch_indexes.append(
                    mask.to_bytes((mask.bit_length() + 7) // 8, "little") if mask else b""
                )
            consumer.pending[pos] = n
            consumer.unacked += n
            if redelivery:
                consumer.redelivered += n
            sent += n
            size += len(data)
        consumer.permits -= sent
        consumer.meter.add(sent, size)
        self.sub.topic.meter_out.add(sent, size)
        consumer.deliver(broker_pb2.ConsumerResponse(deliveries=msg))

    def requeue_pending(self, consumer: Consumer) -> list[Position]:
        """Take a leaving consumer's pending entries, counting one more redelivery."""
        counts = self.sub.redelivery_counts
        out = []
        for pos in consumer.pending:
            if not self.sub.cursor.is_acked(pos):
                counts[pos] = counts.get(pos, 0) + 1
                out.append(pos)
        consumer.pending.clear()
        consumer.unacked = 0
        return out


class SingleActiveConsumerDispatcher(Dispatcher):
    def __init__(self, subscription: Subscription, max_entries: int, max_bytes: int) -> None:
        super().__init__(subscription, max_entries, max_bytes)
        self._last_active: Consumer | None = None

    @property
    def active(self) -> Consumer | None:
        return self.sub.active_consumer()

    def consumer_added(self, consumer: Consumer) -> None:
        self._check_active_change()
        self.trigger()

    def consumer_removed(self, consumer: Consumer) -> None:
        self.requeue_pending(consumer)
        self._check_active_change(force=True)
        self.trigger()

    def redeliver_consumer(self, consumer: Consumer) -> None:
        self.requeue_pending(consumer)
        if consumer is self.active:
            self.sub.cursor.rewind()

    def _check_active_change(self, force: bool = False) -> None:
        active = self.active
        if active is self._last_active and not force:
            return
        previous, self._last_active = self._last_active, active
        if previous is not None and previous is not active and not previous.closed:
            # The old active consumer's unacknowledged messages go to the new one.
            self.requeue_pending(previous)
        self.sub.cursor.rewind()

    async def _dispatch_once(self) -> bool:
        self._check_active_change()
        consumer = self.active
        cursor = self.sub.cursor
        ledger = self.sub.ledger
        if consumer is None or not self._can_take(consumer) or self._subscription_blocked():
            return False
        if not ledger.has_entry(ledger.normalize(cursor.read_position)):
            return False
        count = min(self.max_entries, max(consumer.permits, 1), self._allowance(consumer))
        if count <= 0:
            return False
        entries = await ledger.read_entries(cursor.read_position, count, self.max_bytes)
        if not entries or consumer is not self.active or consumer.closed:
            return False
        batch = []
        for pos, data in entries:
            cursor.read_position = ledger.next_position(pos)
            if cursor.is_acked(pos):
                continue
            batch.append((pos, data, entry_facts(data).messages))
        if batch:
            self._send(consumer, batch)
        return True


class SharedDispatcher(Dispatcher):
    def __init__(self, subscription: Subscription, max_entries: int, max_bytes: int) -> None:
        super().__init__(subscription, max_entries, max_bytes)
        self.redeliver: SortedSet = SortedSet()
        self._next = 0
        self._init_delayed()

    def _release_delayed(self, pos: Position, payload: object) -> None:
        self.redeliver.add(pos)

    def consumer_removed(self, consumer: Consumer) -> None:
        self.redeliver.update(self.requeue_pending(consumer))
        self.trigger()

    def redeliver_consumer(self, consumer: Consumer) -> None:
        self.redeliver.update(self.requeue_pending(consumer))

    def redeliver_positions(self, consumer: Consumer, positions: list[Position]) -> None:
        self.redeliver.update(pos for pos, _ in self.take_pending(consumer, positions))

    def reset(self) -> None:
        self.redeliver.clear()
        self._reset_delayed()

    def _ready_consumers(self) -> list[Consumer]:
        """Consumers that can take entries now, best priority level only."""
        ready = [c for c in self.sub.consumers if self._can_take(c)]
        if not ready:
            return []
        best = min(c.priority_level for c in ready)
        return [c for c in ready if c.priority_level == best]

    def _pick(self, ready: list[Consumer]) -> Consumer:
        self._next = (self._next + 1) % max(len(ready), 1)
        return ready[self._next % len(ready)]

    async def _dispatch_once(self) -> bool:
        if self._subscription_blocked():
            return False
        ready = self._ready_consumers()
        if not ready:
            return False
        cursor = self.sub.cursor
        ledger = self.sub.ledger
        budget = min(self.max_entries, sum(c.permits for c in ready), self._allowance())
        if budget <= 0:
            return False
        entries: list[tuple[Position, bytes, int]] = []  # (position, entry, messages)
        while self.redeliver and len(entries) < budget:
            pos = self.redeliver.pop(0)
            if cursor.is_acked(pos):
                continue
            got = await ledger.read_entries(pos, 1, self.max_bytes)
            if got and got[0][0] == pos:
                entries.append((pos, got[0][1], entry_facts(got[0][1]).messages))
        fresh: list[tuple[Position, bytes]] = []
        if (
            len(entries) < budget
            and self._can_read_more()
            and ledger.has_entry(ledger.normalize(cursor.read_position))
        ):
            fresh = await ledger.read_entries(
                cursor.read_position, budget - len(entries), self.max_bytes
            )
            for pos, data in fresh:
                cursor.read_position = ledger.next_position(pos)
                if cursor.is_acked(pos):
                    continue
                facts = entry_facts(data)
                if not self._hold_if_delayed(pos, facts.deliver_at_ms):
                    entries.append((pos, data, facts.messages))
        if not entries:
            return bool(fresh)  # all delayed (or acked): read on
        per_consumer: dict[int, tuple[Consumer, list[tuple[Position, bytes, int]]]] = {}
        leftovers = []
        for pos, data, n in entries:
            ready = [c for c in self._ready_consumers() if self._allowance(c) > 0]
            if not ready or self._subscription_blocked():
                leftovers.append(pos)
                continue
            consumer = self._pick(ready)
            per_consumer.setdefault(consumer.id, (consumer, []))[1].append((pos, data, n))
            consumer.permits -= n  # reserve; _send charges the real count below
            consumer.unacked += n
        for consumer, batch in per_consumer.values():
            n = sum(b[2] for b in batch)
            consumer.permits += n
            consumer.unacked -= n
            self._send(consumer, batch)
        # Entries read but with no consumer left to take them: deliver later.
        self.redeliver.update(leftovers)
        return bool(per_consumer)


class KeySharedDispatcher(Dispatcher):
    def __init__(
        self,
        subscription: Subscription,
        max_entries: int,
        max_bytes: int,
        selector: Selector,
        allow_out_of_order: bool,
        max_replay_entries: int,
    ) -> None:
        super().__init__(subscription, max_entries, max_bytes)
        self.tracker: KeyHashTracker = KeyHashTracker(selector, allow_out_of_order)
        # Waiting for (re)delivery: position -> (slot, messages), in position order.
        self.replay: SortedDict = SortedDict()
        # Delivered and unacknowledged: position -> slot.
        self.slots: dict[Position, int] = {}
        self.max_replay_entries = max_replay_entries
        self._init_delayed()

    def _release_delayed(self, pos: Position, payload: object) -> None:
        self.replay[pos] = payload

    @property
    def selector(self) -> Selector:
        return self.tracker.selector

    def place(self, consumer: Consumer, ranges: list[tuple[int, int]]) -> None:
        self.selector.add(consumer, consumer.name, ranges)

    def consumer_added(self, consumer: Consumer) -> None:
        self.tracker.consumer_added(consumer)
        self.trigger()

    def consumer_removed(self, consumer: Consumer) -> None:
        self.redeliver_consumer(consumer)
        self.selector.remove(consumer)
        self.tracker.consumer_removed(consumer)
        self.trigger()

    def redeliver_consumer(self, consumer: Consumer) -> None:
        held = dict(consumer.pending)
        for pos in self.requeue_pending(consumer):
            slot = self.slots.get(pos)
            if slot is not None:
                self.replay[pos] = (slot, held[pos])
        for pos in held:
            self.slots.pop(pos, None)
        self.tracker.release(consumer)

    def redeliver_positions(self, consumer: Consumer, positions: list[Position]) -> None:
        for pos, n in self.take_pending(consumer, positions):
            slot = self.slots.pop(pos, None)
            if slot is not None:
                self.tracker.acked(consumer, slot, n)  # no longer held there
                self.replay[pos] = (slot, n)

    def acked(self, consumer: Consumer, done: list[tuple[Position, int]]) -> None:
        for pos, n in done:
            slot = self.slots.pop(pos, None)
            if slot is not None:
                self.tracker.acked(consumer, slot, n)
        if self.replay:
            self.trigger()

    def reset(self) -> None:
        self.replay.clear()
        self.slots.clear()
        self.tracker.clear()
        self._reset_delayed()

    def blocking_positions(self, slot: int) -> list[Position]:
        """Unacknowledged entries of ``slot`` at its holder, oldest first."""
        return sorted(p for p, s in self.slots.items() if s == slot)

    async def _dispatch_once(self) -> bool:
        if self._subscription_blocked():
            return False
        ready = [c for c in self.sub.consumers if self._can_take(c)]
        budget = min(
            self.max_entries,
            sum(min(c.permits, self._allowance(c)) for c in ready),
            self._allowance(),
        )
        if budget <= 0:
            return False
        cursor = self.sub.cursor
        ledger = self.sub.ledger
        # Read the replay entries that look deliverable now, then new ones.
        wanted: list[Position] = []
        for pos, (slot, _n) in self.replay.items():
            if len(wanted) >= budget:
                break
            chosen = self.selector.select(slot)
            holder = self.tracker.holder(slot)
            if chosen is not None and chosen in ready and holder in (None, chosen):
                wanted.append(pos)
        data: dict[Position, bytes] = {}
        for pos in wanted:
            got = await ledger.read_entries(pos, 1, self.max_bytes)
            if got and got[0][0] == pos:
                data[pos] = got[0][1]
        fresh: list[tuple[Position, bytes]] = []
        room_for_fresh = budget - len(data)
        if (
            room_for_fresh > 0
            and len(self.replay) < self.max_replay_entries
            and self._can_read_more()
            and ledger.has_entry(ledger.normalize(cursor.read_position))
        ):
            fresh = await ledger.read_entries(cursor.read_position, room_for_fresh, self.max_bytes)
            for pos, _ in fresh:
                cursor.read_position = ledger.next_position(pos)
        return self._assign(data, fresh) or bool(fresh)

    def _assign(self, data: dict[Position, bytes], fresh: list[tuple[Position, bytes]]) -> bool:
        """Decide, with no await, where the entries read go (see the module doc)."""
        cursor = self.sub.cursor
        room = {
            c: min(c.permits, self._allowance(c)) for c in self.sub.consumers if self._can_take(c)
        }
        subscription_room = self._allowance()

        def has_room(c: Consumer) -> bool:
            return room.get(c, 0) > 0 and subscription_room > 0

        plan: dict[int, tuple[Consumer, list[tuple[Position, bytes, int]]]] = {}
        waiting: set[int] = set()  # slots with an older entry still waiting

        def place(pos: Position, slot: int, n: int, entry: bytes | None) -> bool:
            nonlocal subscription_room
            if entry is None or slot in waiting:
                waiting.add(slot)
                return False
            consumer = self.tracker.target(slot, has_room)
            if consumer is None:
                waiting.add(slot)
                return False
            room[consumer] -= n
            subscription_room -= n
            plan.setdefault(consumer.id, (consumer, []))[1].append((pos, entry, n))
            self.tracker.delivered(consumer, slot, n)
            self.slots[pos] = slot
            return True

        for pos, (slot, n) in list(self.replay.items()):
            if cursor.is_acked(pos) or place(pos, slot, n, data.get(pos)):
                del self.replay[pos]
        for pos, entry in fresh:
            if cursor.is_acked(pos):
                continue
            facts = entry_facts(entry)
            slot, n = facts.slot, facts.messages
            if self._hold_if_delayed(pos, facts.deliver_at_ms, (slot, n)):
                continue
            if not place(pos, slot, n, entry):
                self.replay[pos] = (slot, n)
        for consumer, batch in plan.values():
            self._send(consumer, batch)
        return bool(plan)


class NonPersistentDispatcher(Dispatcher):
    def __init__(
        self, subscription: Subscription, sub_type: int, selector: Selector | None
    ) -> None:
        super().__init__(subscription, 0, 0)
        self.sub_type = sub_type
        self.selector = selector
        self._next = 0
        self.dropped = Meter()

    def trigger(self) -> None:
        pass  # nothing is stored, so there is nothing to catch up on

    def consumer_removed(self, consumer: Consumer) -> None:
        if self.selector is not None:
            self.selector.remove(consumer)

    def redeliver_consumer(self, consumer: Consumer) -> None:
        pass  # delivered messages are not kept

    def place(self, consumer: Consumer, ranges: list[tuple[int, int]]) -> None:
        if self.selector is not None:
            self.selector.add(consumer, consumer.name, ranges)

    def _pick(self, facts: EntryFacts) -> Consumer | None:
        live = [c for c in self.sub.consumers if not c.closed and c.permits > 0]
        if not live:
            return None
        if self.sub_type == broker_pb2.KEY_SHARED:
            assert self.selector is not None
            chosen = self.selector.select(facts.slot)
            return chosen if chosen in live else None
        if self.sub_type == broker_pb2.SHARED:
            best = min(c.priority_level for c in live)
            ready = [c for c in live if c.priority_level == best]
            self._next = (self._next + 1) % len(ready)
            return ready[self._next]
        active = self.sub.active_consumer()
        return active if active in live else None

    def dispatch_entry(self, pos: Position, entry: bytes, facts: EntryFacts) -> None:
        messages = facts.messages
        consumer = self._pick(facts)
        if consumer is None:
            self.dropped.add(messages, len(entry))
            return
        msg = broker_pb2.Deliveries(
            ledger_ids=[pos[0]], entry_ids=[pos[1]], redelivery_counts=[0], entries=[entry]
        )
        consumer.permits -= messages
        consumer.meter.add(messages, len(entry))
        self.sub.topic.meter_out.add(messages, len(entry))
        consumer.deliver(broker_pb2.ConsumerResponse(deliveries=msg))
