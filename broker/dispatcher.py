"""Dispatchers: the I/O shell around the dispatch rules of a persistent
subscription.

Theory of operation. Consumers grant permits (message counts: a batch entry
of N messages costs N). A dispatcher reads entries from the cursor's read
position (at most ``max_entries`` entries or ``max_bytes`` per read), skips
those acknowledged individually, asks :mod:`broker.dispatch_rules` who gets
each one, and pushes them to consumers in one :class:`Deliveries` per
consumer. It stops when permits or entries run out and is woken by new
permits, new entries, acknowledgements or a consumer change. At most one
read runs at a time per subscription; a read that a seek or a rewind
overtook is dropped (its entries are read again from the new position).

Every delivered, unacknowledged entry is pending at the consumer that got it
(:class:`broker.pending_acks.PendingAcks`, which also applies the unacked
limits). When that consumer leaves, its pending entries are delivered again
(to the next active consumer, or to the others for Shared) with their
redelivery count raised by one.

* :class:`SingleActiveConsumerDispatcher` (Exclusive, Failover): one active
  consumer gets everything. When it changes, the cursor is rewound so the
  new one gets every unacknowledged message.
* :class:`SharedDispatcher` (Shared): round-robin by priority level; entries
  given back (a consumer left, a negative ack) are redelivered first.
* Shared and Key_Shared hold entries whose deliver-at time has not come in
  a :class:`~broker.delayed_delivery.DelayedDeliveryTracker` and deliver
  them like redeliveries when due; Exclusive and Failover deliver at once.
* Key_Shared and non-persistent topics: :mod:`broker.key_shared_dispatcher`
  and :mod:`broker.non_persistent_dispatcher`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from sortedcontainers import SortedSet

from broker import rate_limits
from broker.compacted_read import CompactedRead
from broker.compaction_plan import CompactedSource
from broker.consumer import Consumer, Deliveries
from broker.delayed_delivery import DelayedDeliveryTracker
from broker.dispatch_rules import (
    Candidate,
    Room,
    RoundRobin,
    SharedRule,
    SingleActiveRule,
    assign,
)
from broker.key_shared import slot_of, sticky_key
from broker.managed_cursor import ManagedCursor
from broker.managed_ledger import ManagedLedger
from broker.pending_acks import PendingAcks
from broker.rate_limits import Throttle
from broker.settings import BrokerSettings
from protos.entry import CorruptedEntryError, num_messages, parse_metadata

log = logging.getLogger(__name__)

Position = tuple[int, int]
Batch = list[tuple[Position, bytes, int]]  # (position, entry, messages)


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


class DispatchContext(Protocol):
    """What a dispatcher needs of its subscription."""

    consumers: list[Consumer]
    pending: PendingAcks[Consumer]
    settings: BrokerSettings
    batch_index_acks: bool
    throttles: tuple[Throttle, ...]  # dispatch rates in force (broker.rate_limits)
    # Reads the topic's compacted view first (is_read_compacted), else None.
    compacted: Callable[[], Awaitable[CompactedSource | None]] | None

    def skip_spans(self, spans: list[tuple[Position, Position]]) -> None: ...

    def compacted_view_failed(self) -> None: ...

    @property
    def label(self) -> str:
        """``topic/subscription``, for logs."""
        ...

    @property
    def cursor(self) -> ManagedCursor: ...

    @property
    def ledger(self) -> ManagedLedger: ...

    def active_consumer(self) -> Consumer | None: ...

    def count_out(self, messages: int, size: int, redelivered: int) -> None: ...


class Dispatcher:
    def __init__(self, sub: DispatchContext, max_entries: int, max_bytes: int) -> None:
        self.sub = sub
        self._max_entries = max_entries
        self._max_bytes = max_bytes
        self._throttle_timer: asyncio.TimerHandle | None = None
        self._task: asyncio.Task | None = None
        self._again = False
        self._epoch = 0  # moved on by a seek, rewind or retire: a read in flight is stale
        self.retired = False
        self.delayed: DelayedDeliveryTracker | None = None
        self._delayed_timer: asyncio.TimerHandle | None = None
        self._delayed_timer_at = 0

    # ------------------------------------------------------------ the loop

    def trigger(self) -> None:
        if self.retired:
            return
        if self._task is not None:
            self._again = True
            return
        self._task = asyncio.get_running_loop().create_task(self._run())

    def retire(self) -> None:
        """Another dispatcher replaces this one (the subscription changed
        type): it delivers nothing more, and a read in flight is dropped."""
        self.retired = True
        self._epoch += 1
        self._reset_delayed()
        if self._throttle_timer is not None:
            self._throttle_timer.cancel()
            self._throttle_timer = None

    # A dispatch rate in force caps each read at what the rate lets go now
    # (at least one entry), and a dispatch waits while the rate allows nothing.

    @property
    def max_entries(self) -> int:
        if not self.sub.throttles:
            return self._max_entries
        msgs, _ = rate_limits.allowance(self.sub.throttles, time.monotonic())
        return max(1, min(self._max_entries, msgs))

    @property
    def max_bytes(self) -> int:
        if not self.sub.throttles:
            return self._max_bytes
        _, nbytes = rate_limits.allowance(self.sub.throttles, time.monotonic())
        return max(1, min(self._max_bytes, nbytes))

    def _throttled(self) -> bool:
        """True (and a wake-up armed) while a dispatch rate allows nothing."""
        if not self.sub.throttles:
            return False
        wait = rate_limits.wait_s(self.sub.throttles, time.monotonic())
        if wait <= 0:
            return False
        if self._throttle_timer is None:
            self._throttle_timer = asyncio.get_running_loop().call_later(wait, self._throttle_due)
        return True

    def throttles_changed(self) -> None:
        """The rates changed: a wake-up armed under the old ones no longer holds."""
        if self._throttle_timer is not None:
            self._throttle_timer.cancel()
            self._throttle_timer = None
        self.trigger()

    def _throttle_due(self) -> None:
        self._throttle_timer = None
        self.trigger()

    async def _run(self) -> None:
        try:
            while not self.retired:
                self._again = False
                if self._throttled():
                    return
                progressed = await self._dispatch_once()
                if not progressed and not self._again:
                    return
        except Exception:
            log.exception("dispatch on %s failed", self.sub.label)
        finally:
            self._task = None

    async def _dispatch_once(self) -> bool:
        raise NotImplementedError

    def _rewind(self) -> None:
        self._epoch += 1
        self.sub.cursor.rewind()

    # ------------------------------------------------------------ events

    def consumer_added(self, consumer: Consumer) -> None:
        self.trigger()

    # Ordered types cannot skip: a consumer's request to redeliver some of
    # its messages gives back everything it holds.
    redelivers_everything = False

    def consumer_removed(self, consumer: Consumer, released: list[tuple[Position, int]]) -> None:
        """``consumer`` left; ``released`` (position, messages) is what it held."""
        raise NotImplementedError

    def redeliver(
        self, consumer: Consumer, released: list[tuple[Position, int]], everything: bool
    ) -> None:
        """``consumer`` gave back ``released`` (everything it held, or some of
        it); what the cursor has not acknowledged goes out again."""
        raise NotImplementedError

    def _unacked(self, released: list[tuple[Position, int]]) -> list[Position]:
        is_acked = self.sub.cursor.is_acked
        return [pos for pos, _ in released if not is_acked(pos)]

    def acked(self, consumer: Consumer, done: list[tuple[Position, int]]) -> None:
        """``consumer``'s pending entries ``done`` (position, messages) were acked."""

    def reset(self) -> None:
        """The cursor was moved (seek): forget what waits for redelivery."""
        self._epoch += 1

    def place(self, consumer: Consumer, ranges: list[tuple[int, int]]) -> None:
        """Key_Shared: give a joining consumer its hash ranges (ConsumerAssignError
        when it cannot have them; nothing changes then)."""

    # ------------------------------------------------------------ delayed delivery

    def _init_delayed(self) -> None:
        s = self.sub.settings
        if s.delayed_delivery_enabled:
            self.delayed = DelayedDeliveryTracker(
                s.delayed_delivery_tick_time_ms,
                s.is_delayed_delivery_deliver_at_time_strict,
                s.delayed_delivery_max_num_tracked_messages,
            )

    def _can_read_more(self) -> bool:
        return self.delayed is None or not self.delayed.full

    def _hold_if_delayed(
        self, pos: Position, deliver_at: int, payload: object = None, messages: int = 1
    ) -> bool:
        """Keep an entry whose deliver-at time has not come; True if kept."""
        if self.delayed is None:
            return False
        if not self.delayed.is_delayed(deliver_at, int(time.time() * 1000)):
            return False
        self.delayed.add(pos, deliver_at, payload, messages)
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

    # ------------------------------------------------------------ shared helpers

    def _can_take(self, consumer: Consumer) -> bool:
        if consumer.closed or consumer.permits <= 0:
            return False
        return self.sub.pending.can_take(consumer)

    def _room(self, ready: list[Consumer]) -> Room[Consumer]:
        pending = self.sub.pending
        return Room({c: min(c.permits, pending.allowance(c)) for c in ready}, pending.allowance())

    def _read_fresh(self, entries: list[tuple[Position, bytes]]) -> list[tuple[Position, bytes]]:
        """Move the read position past entries just read; those not yet acked."""
        cursor = self.sub.cursor
        ledger = self.sub.ledger
        out = []
        for pos, data in entries:
            cursor.read_position = ledger.next_position(pos)
            if not cursor.is_acked(pos):
                out.append((pos, data))
        return out

    def _has_fresh(self) -> bool:
        ledger = self.sub.ledger
        return ledger.has_entry(ledger.normalize(self.sub.cursor.read_position))

    def _send(
        self, consumer: Consumer, batch: Batch, left_out: dict[Position, int] | None = None
    ) -> None:
        """Deliver ``batch``; ``left_out`` adds batch indexes a compacted view
        does not hold, delivered as acknowledged ones are."""
        pending = self.sub.pending
        masks = self.sub.cursor.state.batch_acked if self.sub.batch_index_acks else None
        if left_out:
            masks = {
                **(masks or {}),
                **{p: m | (masks or {}).get(p, 0) for p, m in left_out.items()},
            }
        out = Deliveries(acked_batch_indexes=[] if masks is not None else None)
        sent = size = 0
        for pos, data, n in batch:
            out.ledger_ids.append(pos[0])
            out.entry_ids.append(pos[1])
            out.redelivery_counts.append(pending.redelivery_count(pos))
            out.entries.append(data)
            if masks is not None:
                mask = masks.get(pos, 0)
                out.acked_batch_indexes.append(  # type: ignore[union-attr]
                    mask.to_bytes((mask.bit_length() + 7) // 8, "little") if mask else b""
                )
            sent += n
            size += len(data)
        again = pending.delivered(consumer, [(pos, n) for pos, _, n in batch])
        self.sub.count_out(sent, size, again)
        consumer.deliver(out, sent, size)


class SingleActiveConsumerDispatcher(Dispatcher):
    def __init__(self, sub: DispatchContext, max_entries: int, max_bytes: int) -> None:
        super().__init__(sub, max_entries, max_bytes)
        self._last_active: Consumer | None = None
        self._compacted = CompactedRead(sub, lambda data: entry_facts(data).messages)

    def _rewind(self) -> None:
        self._compacted.restart()
        super()._rewind()

    def reset(self) -> None:
        self._compacted.restart()
        super().reset()

    @property
    def active(self) -> Consumer | None:
        return self.sub.active_consumer()

    def consumer_added(self, consumer: Consumer) -> None:
        self._check_active_change()
        self.trigger()

    redelivers_everything = True

    def consumer_removed(self, consumer: Consumer, released: list[tuple[Position, int]]) -> None:
        self._check_active_change(force=True)
        self.trigger()

    def redeliver(
        self, consumer: Consumer, released: list[tuple[Position, int]], everything: bool
    ) -> None:
        if consumer is self.active:
            self._rewind()

    def _check_active_change(self, force: bool = False) -> None:
        active = self.active
        if active is self._last_active and not force:
            return
        previous, self._last_active = self._last_active, active
        if previous is not None and previous is not active:
            # The old active consumer's unacknowledged messages go to the new
            # one, also when it is closing but not removed yet (it no longer
            # counts as active, and what it holds must be free to go).
            self.sub.pending.give_back_all(previous, self.sub.cursor.is_acked)
        self._rewind()

    async def _dispatch_once(self) -> bool:
        self._check_active_change()
        consumer = self.active
        pending = self.sub.pending
        if consumer is None or not self._can_take(consumer) or pending.check_subscription_blocked():
            return False
        view = await self._compacted.view(consumer)
        if view is None and not self._has_fresh():
            return False
        count = min(self.max_entries, max(consumer.permits, 1), pending.allowance(consumer))
        if count <= 0:
            return False
        epoch = self._epoch
        if view is not None:
            return await self._dispatch_compacted(consumer, view, count, epoch)
        cursor = self.sub.cursor
        entries = await self.sub.ledger.read_entries(
            cursor.read_position, count, self.max_bytes, tailing=True
        )
        if not entries or consumer is not self.active or consumer.closed or epoch != self._epoch:
            return False
        batch = [(pos, data, entry_facts(data).messages) for pos, data in self._read_fresh(entries)]
        candidates = [Candidate(item, 0, item[2]) for item in batch]
        plan = assign(candidates, SingleActiveRule(consumer), self._room([consumer])).plan
        for target, batch in plan.items():
            self._send(target, batch)
        return True

    async def _dispatch_compacted(
        self, consumer: Consumer, view: CompactedSource, count: int, epoch: int
    ) -> bool:
        """Deliver from the compacted view (broker.compacted_read)."""
        found = await self._compacted.read(view, count)
        if found is None:
            return False
        if consumer is not self.active or consumer.closed or epoch != self._epoch:
            return False
        batch, left_out = self._compacted.take(view, found, self.max_bytes)
        if batch:
            candidates = [Candidate(item, 0, item[2]) for item in batch]
            plan = assign(candidates, SingleActiveRule(consumer), self._room([consumer])).plan
            for target, items in plan.items():
                self._send(target, items, left_out)
        return True


class SharedDispatcher(Dispatcher):
    def __init__(self, sub: DispatchContext, max_entries: int, max_bytes: int) -> None:
        super().__init__(sub, max_entries, max_bytes)
        self.redeliveries: SortedSet = SortedSet()
        self.turn = RoundRobin()
        self._init_delayed()

    def _release_delayed(self, pos: Position, payload: object) -> None:
        self.redeliveries.add(pos)

    def consumer_removed(self, consumer: Consumer, released: list[tuple[Position, int]]) -> None:
        self.redeliveries.update(self._unacked(released))
        self.trigger()

    def redeliver(
        self, consumer: Consumer, released: list[tuple[Position, int]], everything: bool
    ) -> None:
        self.redeliveries.update(self._unacked(released))

    def reset(self) -> None:
        super().reset()
        self.redeliveries.clear()
        self._reset_delayed()

    def _ready_consumers(self) -> list[Consumer]:
        """Consumers that can take entries now."""
        return [c for c in self.sub.consumers if self._can_take(c)]

    async def _dispatch_once(self) -> bool:
        if self.sub.pending.check_subscription_blocked():
            return False
        ready = self._ready_consumers()
        if not ready:
            return False
        best = min(c.priority_level for c in ready)
        budget = min(
            self.max_entries,
            sum(c.permits for c in ready if c.priority_level == best),
            self.sub.pending.allowance(),
        )
        if budget <= 0:
            return False
        epoch = self._epoch
        limit = self.max_bytes
        batch = await self._read_redeliveries(budget, limit)
        fresh: list[tuple[Position, bytes]] = []
        room = limit - sum(len(data) for _, data, _ in batch)
        if len(batch) < budget and room > 0 and self._can_read_more() and self._has_fresh():
            fresh = await self.sub.ledger.read_entries(
                self.sub.cursor.read_position, budget - len(batch), room, tailing=True
            )
        if epoch != self._epoch:
            return True  # a seek overtook the reads: start again from the new position
        batch += self._take_fresh(fresh)
        if not batch:
            return bool(fresh)  # all delayed (or acked): read on
        return self._hand_out(batch)

    async def _read_redeliveries(self, budget: int, limit: int) -> Batch:
        """Entries to deliver again, oldest first, until ``limit`` bytes are
        held (the rest wait for the next dispatch: one delivery fits a gRPC message)."""
        batch: Batch = []
        held = 0
        while self.redeliveries and len(batch) < budget and held < limit:
            pos = self.redeliveries.pop(0)
            if self.sub.cursor.is_acked(pos):
                continue
            got = await self.sub.ledger.read_entries(pos, 1, limit)
            if got and got[0][0] == pos:
                batch.append((pos, got[0][1], entry_facts(got[0][1]).messages))
                held += len(got[0][1])
        return batch

    def _take_fresh(self, fresh: list[tuple[Position, bytes]]) -> Batch:
        batch: Batch = []
        for pos, data in self._read_fresh(fresh):
            facts = entry_facts(data)
            if not self._hold_if_delayed(pos, facts.deliver_at_ms, None, facts.messages):
                batch.append((pos, data, facts.messages))
        return batch

    def _hand_out(self, batch: Batch) -> bool:
        rule = SharedRule(self.sub.consumers, lambda c: c.priority_level, self.turn)
        out = assign(
            [Candidate(item, 0, item[2]) for item in batch],
            rule,
            self._room(self._ready_consumers()),
        )
        for consumer, items in out.plan.items():
            self._send(consumer, items)
        # Entries read but with no consumer left to take them: deliver later.
        self.redeliveries.update(pos for pos, _, _ in out.left)
        return bool(out.plan)
