"""When the client asks for redelivery: negative acks and ack timeouts.

Both trackers are plain bookkeeping over entry positions with the time
passed in, so they are unit-tested without clocks. The consumer engine
feeds them (``nack``, ``taken``, ``acked``) and, once per tick, asks what is
``due``; it then sends one redeliver request for those positions.

* :class:`NegativeAckTracker`: a nacked entry is due ``delay`` after the nack
  (``negative_ack_redelivery_delay_ms``, or the backoff of the message's
  redelivery count). Nacking it again keeps the later deadline.
* :class:`AckTimeoutTracker`: an entry taken by the application is due
  ``timeout + backoff(count)`` after it was taken, unless acknowledged.

Both are bounded by what the consumer holds (its queue and the broker's
unacked limits); a position leaves on ack, on redelivery, or on clear().
"""

from __future__ import annotations

Position = tuple[int, int]


class _Deadlines:
    """Positions with a due time; ``due`` hands each out once."""

    def __init__(self) -> None:
        self._due: dict[Position, float] = {}

    def acked(self, pos: Position) -> None:
        self._due.pop(pos, None)

    def due(self, now_s: float) -> list[Position]:
        out = sorted(p for p, t in self._due.items() if t <= now_s)
        for p in out:
            del self._due[p]
        return out

    def clear(self) -> None:
        self._due.clear()

    def __len__(self) -> int:
        return len(self._due)


class NegativeAckTracker(_Deadlines):
    def nack(self, pos: Position, now_s: float, delay_s: float) -> None:
        self._due[pos] = max(self._due.get(pos, 0.0), now_s + delay_s)


class AckTimeoutTracker(_Deadlines):
    def __init__(self, timeout_s: float) -> None:
        super().__init__()
        self.timeout_s = timeout_s

    def taken(self, pos: Position, now_s: float, backoff_s: float = 0.0) -> None:
        # Every message of a batch counts from the first one taken.
        self._due.setdefault(pos, now_s + self.timeout_s + backoff_s)
