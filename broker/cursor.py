"""Cursor state of a subscription, with no I/O (Pulsar's ManagedCursor).

Theory of operation. A position is ``(ledger id, entry id)``. Everything at
or before ``mark_delete_position`` is acknowledged. Acknowledged positions
above it are kept in ``individually_deleted``, a set of closed ranges within
one ledger each (a ``sortedcontainers.SortedDict`` from range start to range
end). Whenever the position right after mark-delete becomes acknowledged,
mark-delete jumps over the whole range that starts there, so the set only
holds the "islands" above the first gap. Which position follows another
depends on the ledger list, so the caller passes ``next_position``.

With batch-index acknowledgement, ``batch_acked`` maps an entry not yet
acknowledged to the bitmask of its acknowledged batch indexes; when the
mask covers the whole batch the entry is acknowledged like any other, and
masks of acknowledged entries are dropped, so the map never holds more
entries than are unacknowledged.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Protocol

from sortedcontainers import SortedDict

Position = tuple[int, int]
NextPosition = Callable[[Position], Position]


class PositionRangeSet:
    def __init__(self) -> None:
        self._ranges: SortedDict = SortedDict()  # start -> end (inclusive), same ledger

    def __len__(self) -> int:
        return len(self._ranges)

    def __iter__(self) -> Iterator[tuple[Position, Position]]:
        return iter(self._ranges.items())

    def _floor(self, pos: Position) -> tuple[Position, Position] | None:
        idx = self._ranges.bisect_right(pos) - 1
        if idx < 0:
            return None
        return self._ranges.peekitem(idx)

    def __contains__(self, pos: Position) -> bool:
        found = self._floor(pos)
        return found is not None and found[1][0] == pos[0] and found[1] >= pos

    def add(self, pos: Position) -> None:
        if pos in self:
            return
        start, end = pos, pos
        below = self._floor(pos)
        if below is not None and below[1] == (pos[0], pos[1] - 1):
            start = below[0]
        above = (pos[0], pos[1] + 1)
        if above in self._ranges:
            end = self._ranges.pop(above)
        self._ranges[start] = end

    def add_range(self, start: Position, end: Position) -> None:
        """Every position from ``start`` to ``end`` (one ledger), merged with
        the ranges it overlaps or touches."""
        assert start[0] == end[0] and start <= end, (start, end)
        lo, hi = start, end
        below = self._floor(start)
        if below is not None and below[1][0] == start[0] and below[1][1] >= start[1] - 1:
            lo, hi = below[0], max(hi, below[1])
            del self._ranges[below[0]]
        for s in list(self._ranges.irange(start, (end[0], end[1] + 1))):
            hi = max(hi, self._ranges.pop(s))
        self._ranges[lo] = hi

    def range_starting_at(self, pos: Position) -> Position | None:
        return self._ranges.get(pos)

    def remove_through(self, pos: Position) -> None:
        """Forget everything at or before ``pos``."""
        while self._ranges:
            start, end = self._ranges.peekitem(0)
            if start > pos:
                return
            del self._ranges[start]
            if end > pos and end[0] == pos[0]:
                self._ranges[(pos[0], pos[1] + 1)] = end
                return

    def to_list(self, limit: int) -> list[list[int]]:
        return [[s[0], s[1], e[1]] for s, e in list(self._ranges.items())[:limit]]

    @classmethod
    def from_list(cls, items: list[list[int]]) -> PositionRangeSet:
        rs = cls()
        for ledger, first, last in items:
            rs._ranges[(ledger, first)] = (ledger, last)
        return rs


class CursorMark(Protocol):
    """What trimming needs of a cursor: whether it holds data back, and up
    to where everything is acknowledged."""

    durable: bool
    state: CursorState


class CursorState:
    def __init__(self, mark_delete_position: Position) -> None:
        self.mark_delete_position = mark_delete_position
        self.individually_deleted = PositionRangeSet()
        self.batch_acked: dict[Position, int] = {}

    def ack_batch_indexes(
        self, pos: Position, batch_size: int, indexes: list[int], next_position: NextPosition
    ) -> bool:
        """Acknowledge some messages of a batch entry; True if the state changed."""
        if self.is_acked(pos) or batch_size < 1:
            return False
        mask = self.batch_acked.get(pos, 0)
        new = mask
        for i in indexes:
            if 0 <= i < batch_size:
                new |= 1 << i
        if new == mask:
            return False
        if new == (1 << batch_size) - 1:
            self.batch_acked.pop(pos, None)
            return self.ack_individual(pos, next_position)
        self.batch_acked[pos] = new
        return True

    def acked_batch_mask(self, pos: Position) -> int:
        return self.batch_acked.get(pos, 0)

    def _forget_acked_masks(self) -> None:
        if self.batch_acked:
            for pos in [p for p in self.batch_acked if self.is_acked(p)]:
                del self.batch_acked[pos]

    def is_acked(self, pos: Position) -> bool:
        return pos <= self.mark_delete_position or pos in self.individually_deleted

    def ack_individual(self, pos: Position, next_position: NextPosition) -> bool:
        """True if the state changed."""
        if self.is_acked(pos):
            return False
        self.individually_deleted.add(pos)
        self._advance(next_position)
        self._forget_acked_masks()
        return True

    def ack_spans(
        self, spans: list[tuple[Position, Position]], next_position: NextPosition
    ) -> bool:
        """Acknowledge whole ranges (one ledger each) at once: what a reader of
        a compacted view skips. True if the state changed."""
        changed = False
        for start, end in spans:
            mark = self.mark_delete_position
            if end <= mark:
                continue
            if start <= mark:  # then mark is in this span's ledger: clip to after it
                start = (start[0], mark[1] + 1)
            self.individually_deleted.add_range(start, end)
            changed = True
        if changed:
            self._advance(next_position)
            self._forget_acked_masks()
        return changed

    def ack_cumulative(self, pos: Position, next_position: NextPosition) -> bool:
        if pos <= self.mark_delete_position:
            return False
        self.mark_delete_position = pos
        self.individually_deleted.remove_through(pos)
        self._advance(next_position)
        self._forget_acked_masks()
        return True

    def _advance(self, next_position: NextPosition) -> None:
        while True:
            nxt = next_position(self.mark_delete_position)
            end = self.individually_deleted.range_starting_at(nxt)
            if end is None:
                return
            self.mark_delete_position = end
            self.individually_deleted.remove_through(end)

    def to_json(self, max_ranges: int) -> bytes:
        return json.dumps(
            {
                "mark_delete": list(self.mark_delete_position),
                "individually_deleted": self.individually_deleted.to_list(max_ranges),
                "batch_acked": [
                    [p[0], p[1], format(m, "x")]
                    for p, m in sorted(self.batch_acked.items())[:max_ranges]
                ],
            }
        ).encode()

    @classmethod
    def from_json(cls, data: bytes) -> CursorState:
        d = json.loads(data)
        state = cls(tuple(d["mark_delete"]))  # type: ignore[arg-type]
        state.individually_deleted = PositionRangeSet.from_list(d.get("individually_deleted", []))
        state.batch_acked = {
            (ledger, entry): int(mask, 16) for ledger, entry, mask in d.get("batch_acked", [])
        }
        return state
