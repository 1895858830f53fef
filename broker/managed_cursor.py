"""A subscription's cursor on a managed ledger (Pulsar's ManagedCursor):
its state (:class:`broker.cursor.CursorState`, no I/O) plus the read
position and throttled persistence.

Theory of operation. A durable cursor's record lives at
``/managed-ledgers/<topic path>/<subscription>`` and changes by
compare-and-set. Acknowledgements mark it dirty; it is written at most once
per ``persist_interval_ms`` (and always on close), so a crash redelivers at
most the acknowledgements of the last interval. A cursor of a ledger another
broker fenced never writes: the new owner owns its record now. Non-durable
cursors (readers) keep nothing.
"""

from __future__ import annotations

import asyncio
import logging
import time

from broker.cursor import CursorState, Position
from broker.managed_ledger import ManagedLedger

log = logging.getLogger(__name__)


class ManagedCursor:
    """A durable subscription's cursor: state plus throttled persistence."""

    def __init__(
        self,
        ledger: ManagedLedger,
        name: str,
        state: CursorState,
        *,
        durable: bool,
        version: int,
        persist_interval_ms: int,
        max_ranges: int,
    ) -> None:
        self.ledger = ledger
        self.name = name
        self.state = state
        self.durable = durable
        self._version = version
        self._interval_s = persist_interval_ms / 1000
        self._max_ranges = max_ranges
        self._last_persist = 0.0
        self._dirty = False
        self._timer: asyncio.TimerHandle | None = None
        self._persisting: asyncio.Task | None = None
        self.read_position = ledger.next_position(state.mark_delete_position)
        ledger.cursors.add(self)

    @classmethod
    async def open(
        cls,
        ledger: ManagedLedger,
        name: str,
        *,
        initial_position_latest: bool,
        durable: bool,
        persist_interval_ms: int,
        max_ranges: int,
        mark_delete: Position | None = None,
    ) -> tuple[ManagedCursor, bool]:
        """The cursor and whether it was created now. A new cursor starts after
        ``mark_delete`` when given, else at the initial position."""
        created = False
        version = -1
        stat = await ledger.metastore.get(ledger.cursor_key(name)) if durable else None
        if stat is not None:
            state = CursorState.from_json(stat.value)
            version = stat.version
        else:
            created = True
            if mark_delete is not None:
                start = mark_delete
            else:
                start = ledger.last_confirmed if initial_position_latest else ledger.before_first()
            state = CursorState(start)
        cursor = cls(
            ledger,
            name,
            state,
            durable=durable,
            version=version,
            persist_interval_ms=persist_interval_ms,
            max_ranges=max_ranges,
        )
        if created and durable:
            await cursor.persist()
        return cursor, created

    def is_acked(self, pos: Position) -> bool:
        return self.state.is_acked(pos)

    def ack(self, positions: list[Position], cumulative: bool) -> None:
        changed = False
        nxt = self.ledger.next_position
        for pos in positions:
            if cumulative:
                changed |= self.state.ack_cumulative(pos, nxt)
            else:
                changed |= self.state.ack_individual(pos, nxt)
        if changed:
            self._mark_dirty()
            first = self.ledger.ledger_ids[0] if self.ledger.ledger_ids else None
            if first is not None and self.state.mark_delete_position[0] > first:
                self.ledger.maybe_trim()

    def ack_spans(self, spans: list[tuple[Position, Position]]) -> None:
        """Ranges of positions acknowledged without being delivered (what a
        compacted view leaves out)."""
        if self.state.ack_spans(spans, self.ledger.next_position):
            self._mark_dirty()
            first = self.ledger.ledger_ids[0] if self.ledger.ledger_ids else None
            if first is not None and self.state.mark_delete_position[0] > first:
                self.ledger.maybe_trim()

    def ack_batch_indexes(self, pos: Position, batch_size: int, indexes: list[int]) -> bool:
        """Acknowledge messages of a batch; True if that completed the entry."""
        if self.state.ack_batch_indexes(pos, batch_size, indexes, self.ledger.next_position):
            self._mark_dirty()
        return self.state.is_acked(pos)

    def rewind(self) -> None:
        self.read_position = self.ledger.next_position(self.state.mark_delete_position)

    def reset(self, mark_delete: Position) -> None:
        """Seek: everything after ``mark_delete`` becomes unacknowledged again."""
        self.state = CursorState(mark_delete)
        self.rewind()
        self._mark_dirty()

    def _mark_dirty(self) -> None:
        if not self.durable:
            return
        self._dirty = True
        if self._timer is not None or self._persisting is not None:
            return
        delay = self._last_persist + self._interval_s - time.monotonic()
        loop = asyncio.get_running_loop()
        if delay <= 0:
            self._persisting = loop.create_task(self._persist_soon())
        else:
            self._timer = loop.call_later(delay, self._timer_fired)

    def _timer_fired(self) -> None:
        self._timer = None
        if self._dirty and self._persisting is None:
            self._persisting = asyncio.get_running_loop().create_task(self._persist_soon())

    async def _persist_soon(self) -> None:
        try:
            await self.persist()
        except Exception as exc:
            log.warning(
                "%s/%s: persisting the cursor failed: %s", self.ledger.topic, self.name, exc
            )
        finally:
            self._persisting = None
            if self._dirty:
                self._mark_dirty()

    async def persist(self) -> None:
        # A fenced ledger means another broker serves the topic and owns this
        # cursor's record now: writing it would undo the new owner's state.
        if not self.durable or self.ledger.fenced_by_other:
            return
        self._dirty = False
        self._last_persist = time.monotonic()
        body = self.state.to_json(self._max_ranges)
        self._version = await self.ledger.metastore.put(
            self.ledger.cursor_key(self.name), body, expected_version=self._version
        )

    async def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._persisting is not None:
            await asyncio.gather(self._persisting, return_exceptions=True)
        if self._dirty:
            await self.persist()

    async def delete(self) -> None:
        await self.close()
        self.ledger.cursors.discard(self)
        if self.durable:
            await self.ledger.metastore.delete(self.ledger.cursor_key(self.name))
