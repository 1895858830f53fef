"""The Key_Shared dispatcher of a persistent subscription.

Theory of operation. Each entry goes to the consumer that
:mod:`broker.key_shared` picks for its key's slot, under the ordering rule
of :class:`broker.dispatch_rules.KeySharedRule`. An entry that cannot go now
(its consumer has no room, or the slot is still held by another consumer)
waits in a *replay* map, and every later entry of the same slot waits behind
it, so per-key order holds. Replay entries come first in every round. The
replay map is bounded by
``key_shared_look_ahead_msg_in_replay_threshold_per_subscription`` (entries):
past it no new entries are read until it shrinks. Entries whose deliver-at
time has not come wait in the delayed-delivery tracker, then join the replay
map. Which slot each delivered, unacknowledged entry belongs to is kept
(``slots``) so that acknowledgements release the slot's holder.
"""

from __future__ import annotations

from sortedcontainers import SortedDict

from broker.consumer import Consumer
from broker.dispatch_rules import Candidate, KeySharedRule, assign
from broker.dispatcher import Batch, DispatchContext, Dispatcher, Position, entry_facts
from broker.key_shared import KeyHashTracker, Selector

# A replay entry: (position, entry or None when not read this round, messages, slot).
_Replay = tuple[Position, bytes | None, int, int]


class KeySharedDispatcher(Dispatcher):
    def __init__(
        self,
        sub: DispatchContext,
        max_entries: int,
        max_bytes: int,
        selector: Selector,
        allow_out_of_order: bool,
        max_replay_entries: int,
    ) -> None:
        super().__init__(sub, max_entries, max_bytes)
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

    def consumer_removed(self, consumer: Consumer, released: list[tuple[Position, int]]) -> None:
        self.redeliver(consumer, released, everything=True)
        self.selector.remove(consumer)
        self.tracker.consumer_removed(consumer)
        self.trigger()

    def redeliver(
        self, consumer: Consumer, released: list[tuple[Position, int]], everything: bool
    ) -> None:
        """Released entries leave their slots; the unacknowledged ones wait in
        the replay map. A consumer giving back everything holds no slot."""
        is_acked = self.sub.cursor.is_acked
        for pos, n in released:
            slot = self.slots.pop(pos, None)
            if slot is None:
                continue
            if not everything:
                self.tracker.acked(consumer, slot, n)  # no longer held there
            if not is_acked(pos):
                self.replay[pos] = (slot, n)
        if everything:
            self.tracker.release(consumer)

    def acked(self, consumer: Consumer, done: list[tuple[Position, int]]) -> None:
        for pos, n in done:
            slot = self.slots.pop(pos, None)
            if slot is not None:
                self.tracker.acked(consumer, slot, n)
        if self.replay:
            self.trigger()

    def reset(self) -> None:
        super().reset()
        self.replay.clear()
        self.slots.clear()
        self.tracker.clear()
        self._reset_delayed()

    def blocking_positions(self, slot: int) -> list[Position]:
        """Unacknowledged entries of ``slot`` at its holder, oldest first."""
        return sorted(p for p, s in self.slots.items() if s == slot)

    async def _dispatch_once(self) -> bool:
        pending = self.sub.pending
        if pending.check_subscription_blocked():
            return False
        ready = [c for c in self.sub.consumers if self._can_take(c)]
        budget = min(
            self.max_entries,
            sum(min(c.permits, pending.allowance(c)) for c in ready),
            pending.allowance(),
        )
        if budget <= 0:
            return False
        epoch = self._epoch
        limit = self.max_bytes
        data = await self._read_replays(self._replays_to_read(ready, budget), limit)
        fresh: list[tuple[Position, bytes]] = []
        room_for_fresh = budget - len(data)
        room_bytes = limit - sum(map(len, data.values()))
        if (
            room_for_fresh > 0
            and room_bytes > 0
            and len(self.replay) < self.max_replay_entries
            and self._can_read_more()
            and self._has_fresh()
        ):
            fresh = await self.sub.ledger.read_entries(
                self.sub.cursor.read_position, room_for_fresh, room_bytes, tailing=True
            )
        if epoch != self._epoch:
            return True  # a seek overtook the reads: start again from the new position
        return self._assign(data, self._read_fresh(fresh)) or bool(fresh)

    def _replays_to_read(self, ready: list[Consumer], budget: int) -> list[Position]:
        """The replay entries that look deliverable now, oldest first."""
        wanted: list[Position] = []
        for pos, (slot, _n) in self.replay.items():
            if len(wanted) >= budget:
                break
            chosen = self.selector.select(slot)
            holder = self.tracker.holder(slot)
            if chosen is not None and chosen in ready and holder in (None, chosen):
                wanted.append(pos)
        return wanted

    async def _read_replays(self, positions: list[Position], limit: int) -> dict[Position, bytes]:
        """Entries at ``positions``, in order, until ``limit`` bytes are held
        (what is not read stays to replay: one delivery fits a gRPC message)."""
        data: dict[Position, bytes] = {}
        held = 0
        for pos in positions:
            if held >= limit:
                break
            got = await self.sub.ledger.read_entries(pos, 1, limit)
            if got and got[0][0] == pos:
                data[pos] = got[0][1]
                held += len(got[0][1])
        return data

    def _assign(self, data: dict[Position, bytes], fresh: list[tuple[Position, bytes]]) -> bool:
        """Decide, with no await, where the entries read go (see the module doc)."""
        cursor = self.sub.cursor
        candidates: list[Candidate[_Replay]] = []
        for pos, (slot, n) in list(self.replay.items()):
            if cursor.is_acked(pos):
                del self.replay[pos]
            else:
                entry = data.get(pos)
                candidates.append(Candidate((pos, entry, n, slot), slot, n, entry is not None))
        for pos, entry in fresh:
            facts = entry_facts(entry)
            slot, n = facts.slot, facts.messages
            if not self._hold_if_delayed(pos, facts.deliver_at_ms, (slot, n), n):
                candidates.append(Candidate((pos, entry, n, slot), slot, n))
        ready = [c for c in self.sub.consumers if self._can_take(c)]
        out = assign(candidates, KeySharedRule(self.tracker), self._room(ready))
        for consumer, items in out.plan.items():
            batch: Batch = []
            for pos, entry, n, slot in items:
                assert entry is not None
                self.replay.pop(pos, None)
                self.slots[pos] = slot
                batch.append((pos, entry, n))
            self._send(consumer, batch)
        for pos, _, n, slot in out.left:
            self.replay[pos] = (slot, n)
        return bool(out.plan)
