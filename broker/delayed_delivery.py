"""Delayed delivery: entries of a Shared or Key_Shared subscription that must
wait for their ``deliver_at_time``.

Theory of operation. When a dispatcher reads an entry whose deliver-at time
has not come, it hands it here instead of to a consumer; the read position
moves on. :meth:`due` gives back the entries whose time has come, oldest
deadline first, and the dispatcher delivers them like redeliveries. With
``strict`` off (Pulsar's default) an entry counts as due up to one tick
early (``deliver_at - tick``), so the broker wakes at most once per tick
for a crowd of nearby deadlines; with ``strict`` on, never before
``deliver_at``. Nothing here is persisted: after a restart the cursor
re-reads the unacknowledged entries and they are tracked again, so delayed
messages survive. At most ``max_tracked`` entries are held; when full the
dispatcher stops reading new entries until some are due.
"""

from __future__ import annotations

from typing import Any

from sortedcontainers import SortedList

Position = tuple[int, int]


class DelayedDeliveryTracker:
    def __init__(self, tick_ms: int, strict: bool, max_tracked: int) -> None:
        self.tick_ms = tick_ms
        self.strict = strict
        self.max_tracked = max_tracked
        self._by_time: SortedList = SortedList()  # (deliver_at_ms, position)
        self._payload: dict[Position, tuple[Any, int]] = {}  # position -> (payload, messages)
        self.messages = 0  # messages of the tracked entries

    def is_delayed(self, deliver_at_ms: int, now_ms: int) -> bool:
        """Does an entry with this deliver-at time wait at ``now_ms``?"""
        if deliver_at_ms <= 0:
            return False
        slack = 0 if self.strict else self.tick_ms
        return deliver_at_ms - slack > now_ms

    @property
    def full(self) -> bool:
        return len(self._payload) >= self.max_tracked

    def add(
        self, pos: Position, deliver_at_ms: int, payload: Any = None, messages: int = 1
    ) -> None:
        assert not self.full, "the caller checks full before reading more entries"
        if pos in self._payload:
            return
        self._payload[pos] = (payload, messages)
        self.messages += messages
        self._by_time.add((deliver_at_ms, pos))

    def due(self, now_ms: int) -> list[tuple[Position, Any]]:
        out = []
        slack = 0 if self.strict else self.tick_ms
        while self._by_time and self._by_time[0][0] - slack <= now_ms:
            _, pos = self._by_time.pop(0)
            payload, messages = self._payload.pop(pos)
            out.append((pos, payload))
            self.messages -= messages
        return out

    def next_wakeup_ms(self) -> int | None:
        """When the earliest entry becomes due (None: nothing tracked)."""
        if not self._by_time:
            return None
        slack = 0 if self.strict else self.tick_ms
        return int(self._by_time[0][0] - slack)

    def clear(self) -> None:
        self._by_time.clear()
        self._payload.clear()
        self.messages = 0

    def __len__(self) -> int:
        return len(self._payload)
