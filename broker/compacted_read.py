"""How one Exclusive/Failover subscription reads its topic's compacted view
(``is_read_compacted``; docs/compaction.md), then the live topic.

Theory of operation. The view is a list of entries in position order, read
by index (``next``). A subscription starting from the topic's beginning
reads it from its first entry — including entries of ledgers retention has
deleted since, which no cursor position can name — and otherwise from its
read position. An entry in a ledger still there moves the read position
past it, and the positions between it and the previous one (what the view
left out) are acknowledged at once, so the subscription's backlog and
mark-delete move; an entry in a deleted ledger is delivered without cursor
state (a reconnection before the subscription acknowledges past the
horizon may deliver it again: at-least-once). Read through, the
subscription goes on with the live topic after the view's horizon. A
rewind or a seek works the index out again; a newer view (another run)
goes on from the read position, so nothing is delivered twice across it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from broker.compaction_plan import CompactedEntry, CompactedSource, skipped_spans
from broker.consumer import Consumer
from broker.managed_cursor import ManagedCursor
from broker.managed_ledger import ManagedLedger

log = logging.getLogger(__name__)

Position = tuple[int, int]
Batch = list[tuple[Position, bytes, int]]


class CompactedContext(Protocol):
    compacted: Callable[[], Awaitable[Any]] | None

    @property
    def label(self) -> str: ...

    @property
    def cursor(self) -> ManagedCursor: ...

    @property
    def ledger(self) -> ManagedLedger: ...

    def skip_spans(self, spans: list[tuple[Position, Position]]) -> None: ...

    def compacted_view_failed(self) -> None: ...


class CompactedRead:
    def __init__(self, sub: CompactedContext, messages_in: Callable[[bytes], int]) -> None:
        self.sub = sub
        self.messages_in = messages_in
        self.next: int | None = None  # the view's next entry (None: work it out)
        self.ledger_id = -1  # of the view ``next`` is in

    def restart(self) -> None:
        self.next = None

    async def view(self, consumer: Consumer) -> CompactedSource | None:
        """The view to read from now: the active consumer asked for it and
        the subscription has not read it through."""
        source = self.sub.compacted
        if source is None or not consumer.read_compacted:
            return None
        view: CompactedSource | None = await source()
        if view is None:
            return None
        if self.next is None or self.ledger_id != view.ledger_id:
            self.ledger_id, self.next = view.ledger_id, self._start(view)
        if self.next >= len(view.positions) and self.sub.cursor.read_position > view.horizon:
            return None
        return view

    def _start(self, view: CompactedSource) -> int:
        cursor, ledger = self.sub.cursor, self.sub.ledger
        if cursor.state.mark_delete_position <= ledger.before_first():
            return 0
        return view.index_after(ledger.before(cursor.read_position))

    async def read(self, view: CompactedSource, count: int) -> list[CompactedEntry] | None:
        """Up to ``count`` entries from ``next`` (None: the read failed)."""
        assert self.next is not None
        try:
            return await view.read(self.next, count)
        except Exception as exc:  # e.g. replaced by a newer run: read the record again
            log.warning("%s: reading the compacted view failed: %s", self.sub.label, exc)
            self.sub.compacted_view_failed()
            return None

    def take(
        self, view: CompactedSource, found: list[CompactedEntry], max_bytes: int
    ) -> tuple[Batch, dict[Position, int]]:
        """What of ``found`` to deliver (within ``max_bytes``, at least one),
        with the batch indexes each leaves out; moves on past what it took."""
        assert self.next is not None
        if not found:  # (the ledger holds fewer entries than the view knows)
            self.next = len(view.positions)
        cursor, ledger = self.sub.cursor, self.sub.ledger
        existing = set(ledger.ledger_ids)
        previous = ledger.before(cursor.read_position)
        batch: Batch = []
        left_out: dict[Position, int] = {}
        size = 0
        for ce in found:
            if batch and size >= max_bytes:
                break
            self.next += 1
            if ce.position[0] in existing:  # (else its ledger was deleted: no cursor state)
                if ce.position < cursor.read_position:
                    continue
                self._skip(previous, ce.position)
                previous = ce.position
                cursor.read_position = ledger.next_position(ce.position)
                if cursor.is_acked(ce.position):
                    continue
            n = self.messages_in(ce.entry)
            batch.append((ce.position, ce.entry, n))
            size += len(ce.entry)
            if mask := ce.skipped_mask(n):
                left_out[ce.position] = mask
        if self.next >= len(view.positions):  # read through: on with the live topic
            after = ledger.next_position(view.horizon)
            if cursor.read_position < after:
                self._skip(previous, after)
                cursor.read_position = after
        return batch, left_out

    def _skip(self, after: Position, before: Position) -> None:
        ledger = self.sub.ledger
        spans = skipped_spans(after, before, ledger.ledger_ids, ledger.last_entry_of)
        if spans:
            self.sub.skip_spans(spans)
