"""Who holds which delivered, unacknowledged entry of a subscription
(Pulsar's per-consumer ``pendingAcks``, with the unacked-message limits and
the redelivery counts).

Theory of operation. An entry a dispatcher hands to a consumer is *pending*
at that consumer until it is acknowledged or given back: position ->
messages in the entry. A position is pending at no more than one consumer
(asserted): it goes to another only after its holder gave it back (a
negative ack, a redelivery request, the holder leaving or losing the active
role) or the cursor was reset. Giving a position back counts one more
redelivery of it, unless the cursor has acknowledged it meanwhile; an
acknowledgement forgets the count.

Unacked limits, with Pulsar's hysteresis: a consumer that reaches
``max_unacked_per_consumer`` unacked messages (a subscription that reaches
``max_unacked_per_subscription``) is *blocked*, and stays blocked until its
unacked count falls to half the limit; 0 means no limit. A batch entry may
overshoot a limit once: the allowance is checked before an entry goes out,
not after.

The class does no I/O and reads no clock. The subscription is its only
caller, so it is the only writer of this state. It holds one record per
pending position, which the unacked limits bound, and one count per position
given back and not acknowledged since.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import Generic, TypeVar

C = TypeVar("C", bound=Hashable)
Position = tuple[int, int]
IsAcked = Callable[[Position], bool]

# "No limit": more messages than any subscription will ever hold.
UNLIMITED = 1 << 62


class PendingAcks(Generic[C]):
    def __init__(self, max_unacked_per_consumer: int, max_unacked_per_subscription: int) -> None:
        self.max_per_consumer = max_unacked_per_consumer
        self.max_per_subscription = max_unacked_per_subscription
        self._holder: dict[Position, C] = {}
        self._pending: dict[C, dict[Position, int]] = {}
        self._unacked: dict[C, int] = {}
        self._blocked: set[C] = set()
        self._redelivered: dict[C, int] = {}  # messages delivered again to each consumer
        self._counts: dict[Position, int] = {}  # redeliveries of each position
        self.total_unacked = 0
        self.subscription_blocked = False

    # ------------------------------------------------------------ what it knows

    def unacked(self, consumer: C) -> int:
        return self._unacked.get(consumer, 0)

    def is_blocked(self, consumer: C) -> bool:
        return consumer in self._blocked

    def redelivered(self, consumer: C) -> int:
        return self._redelivered.get(consumer, 0)

    def redelivery_count(self, pos: Position) -> int:
        return self._counts.get(pos, 0)

    def holder(self, pos: Position) -> C | None:
        return self._holder.get(pos)

    def pending(self, consumer: C) -> dict[Position, int]:
        """``consumer``'s pending positions -> messages (a copy)."""
        return dict(self._pending.get(consumer, {}))

    def __len__(self) -> int:
        return len(self._holder)

    # ------------------------------------------------------------ consumers

    def add_consumer(self, consumer: C) -> None:
        self._pending.setdefault(consumer, {})
        self._unacked.setdefault(consumer, 0)
        self._redelivered.setdefault(consumer, 0)

    def remove_consumer(self, consumer: C, is_acked: IsAcked) -> list[tuple[Position, int]]:
        """Forget ``consumer``: [(position, messages)] of what it held."""
        back = self.give_back_all(consumer, is_acked)
        self._pending.pop(consumer, None)
        self._unacked.pop(consumer, None)
        self._redelivered.pop(consumer, None)
        self._blocked.discard(consumer)
        return back

    # ------------------------------------------------------------ limits

    def can_take(self, consumer: C) -> bool:
        """False while ``consumer`` is blocked by its unacked limit (updates the flag)."""
        return not self._update_blocked(consumer)

    def check_subscription_blocked(self) -> bool:
        """Whether the subscription is blocked by its unacked limit (updates the flag)."""
        limit = self.max_per_subscription
        if limit <= 0:
            self.subscription_blocked = False
        elif self.total_unacked >= limit:
            self.subscription_blocked = True
        elif self.subscription_blocked and self.total_unacked <= limit // 2:
            self.subscription_blocked = False
        return self.subscription_blocked

    def allowance(self, consumer: C | None = None) -> int:
        """Messages that may still go out (to ``consumer``) before a limit is reached."""
        room = UNLIMITED
        if self.max_per_subscription > 0:
            room = self.max_per_subscription - self.total_unacked
        if consumer is not None and self.max_per_consumer > 0:
            room = min(room, self.max_per_consumer - self.unacked(consumer))
        return max(room, 0)

    def _update_blocked(self, consumer: C) -> bool:
        limit = self.max_per_consumer
        if limit <= 0:
            return False
        unacked = self.unacked(consumer)
        if unacked >= limit:
            self._blocked.add(consumer)
        elif consumer in self._blocked and unacked <= limit // 2:
            self._blocked.discard(consumer)
        return consumer in self._blocked

    # ------------------------------------------------------------ deliveries and acks

    def delivered(self, consumer: C, entries: list[tuple[Position, int]]) -> int:
        """``entries`` (position, messages) went out to ``consumer``: how many
        of those messages went out again (given back before)."""
        holder = self._holder
        assert all(holder.get(pos, consumer) is consumer for pos, _ in entries), (
            f"pending at two consumers: {[p for p, _ in entries if holder.get(p, consumer) is not consumer]}"
        )
        pending = self._pending.setdefault(consumer, {})
        sent = again = 0
        for pos, n in entries:
            self._holder[pos] = consumer
            if pos in pending:
                sent -= pending[pos]  # the same consumer got it again (a rewind)
            pending[pos] = n
            sent += n
            if pos in self._counts:
                again += n
        self._unacked[consumer] = self._unacked.get(consumer, 0) + sent
        self.total_unacked += sent
        if again:
            self._redelivered[consumer] = self._redelivered.get(consumer, 0) + again
        return again

    def acked(
        self, positions: list[Position], cumulative: bool, consumer: C | None
    ) -> list[tuple[C, list[tuple[Position, int]]]]:
        """Forget acknowledged positions: [(holder, [(position, messages)])].

        An individual ack from ``consumer`` clears only what that consumer
        holds; a cumulative ack (or one from no consumer) clears every
        holder's positions up to the highest acknowledged one."""
        if not positions:
            return []
        for pos in positions:
            self._counts.pop(pos, None)
        top = max(positions)
        if cumulative:
            for pos in [p for p in self._counts if p <= top]:
                del self._counts[pos]
        holders = list(self._pending) if cumulative or consumer is None else [consumer]
        out: list[tuple[C, list[tuple[Position, int]]]] = []
        for holder in holders:
            pending = self._pending.get(holder)
            if not pending:
                continue
            if cumulative:
                done = [p for p in pending if p <= top]
            else:
                done = [p for p in dict.fromkeys(positions) if p in pending]
            if done:
                out.append((holder, self._release(holder, done)))
        return out

    def _release(self, consumer: C, positions: list[Position]) -> list[tuple[Position, int]]:
        pending = self._pending[consumer]
        released = [(pos, pending.pop(pos)) for pos in positions]
        for pos, _ in released:
            del self._holder[pos]
        n = sum(m for _, m in released)
        self._unacked[consumer] -= n
        self.total_unacked -= n
        return released

    # ------------------------------------------------------------ giving back

    def give_back(
        self, consumer: C, positions: Iterable[Position], is_acked: IsAcked
    ) -> list[tuple[Position, int]]:
        """These of ``consumer``'s pending positions are no longer pending
        there: [(position, messages)] of those it held. Each one the cursor
        has not acknowledged counts one more redelivery."""
        pending = self._pending.get(consumer, {})
        held = [pos for pos in dict.fromkeys(positions) if pos in pending]
        if not held:
            return []
        return self._count_redeliveries(self._release(consumer, held), is_acked)

    def give_back_all(self, consumer: C, is_acked: IsAcked) -> list[tuple[Position, int]]:
        """Everything ``consumer`` holds is no longer pending there."""
        return self.give_back(consumer, list(self._pending.get(consumer, {})), is_acked)

    def _count_redeliveries(
        self, released: list[tuple[Position, int]], is_acked: IsAcked
    ) -> list[tuple[Position, int]]:
        for pos, _ in released:
            if not is_acked(pos):
                self._counts[pos] = self._counts.get(pos, 0) + 1
        return released

    def clear(self) -> None:
        """The cursor was reset (seek): nothing is pending, nothing counted."""
        for consumer in self._pending:
            self._pending[consumer] = {}
            self._unacked[consumer] = 0
        self._holder.clear()
        self._blocked.clear()
        self._counts.clear()
        self.total_unacked = 0
