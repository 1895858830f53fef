"""Reading a managed ledger's entries: from the entry cache, else from the bookies.

Theory of operation. A read walks the topic's positions from ``start``
(normalized past ledger ends) up to the last confirmed entry, within its
limits of entries and bytes. Each entry comes from the byte-bounded cache of
recent adds (:mod:`broker.entry_cache`) when it is there; a missing one
starts a read of a run from the bookies, as long as the limits allow
(:func:`broker.ledger_rules.bookie_read_count`). What that run brings past
the byte limit is cached for the next read instead of being dropped.

A tailing read (a dispatch of fresh entries) stops before an entry whose
add's callback has not run yet: the bookies confirmed it, but it will be in
the cache a moment later, and reading it from the bookies would be waste
(:func:`broker.ledger_rules.completion_due`).
"""

from __future__ import annotations

from typing import Protocol

from bookie.ledger_client import LedgerClient
from bookie.ledger_metadata import LedgerMetadata
from bookie.ledger_writer import LedgerWriter
from broker.entry_cache import EntryCache
from broker.ledger_rules import bookie_read_count, completion_due, entries_within
from broker.metrics import TopicMetrics

Position = tuple[int, int]


class ReadableLedger(Protocol):
    """What a read needs of :class:`broker.managed_ledger.ManagedLedger`."""

    cache: EntryCache
    closed_ledgers: dict[int, LedgerMetadata]
    ledger_client: LedgerClient
    last_added: Position
    metrics: TopicMetrics
    writer: LedgerWriter | None

    @property
    def last_confirmed(self) -> Position: ...
    def normalize(self, pos: Position) -> Position: ...
    def next_position(self, pos: Position) -> Position: ...


async def read_entries(
    ml: ReadableLedger, start: Position, max_entries: int, max_bytes: int, tailing: bool = False
) -> list[tuple[Position, bytes]]:
    """Stored entries from ``start`` (normalized) on, within the limits; ``tailing``
    (fresh dispatch) stops before an entry whose add's callback (caching it) is due."""
    out: list[tuple[Position, bytes]] = []
    size = 0
    pos = ml.normalize(start)
    last = ml.last_confirmed
    missed = missed_size = 0
    while len(out) < max_entries and size < max_bytes and pos <= last and pos[1] >= 0:
        data = ml.cache.get(pos)
        writing = -1 if ml.writer is None else ml.writer.ledger_id
        if data is None and tailing and completion_due(pos, ml.last_added, writing):
            break
        if data is None:
            want = (max_entries - len(out), size, max_bytes)
            fetched = await _read_from_bookies(ml, pos, want, last)
            if not fetched:
                break
            fetched_size = sum(len(item[1]) for item in fetched)
            missed, missed_size = missed + len(fetched), missed_size + fetched_size
            out.extend(fetched)
            size += fetched_size
            pos = ml.next_position(fetched[-1][0])
            continue
        out.append((pos, data))
        size += len(data)
        pos = ml.next_position(pos)
    if out:
        ml.metrics.reads.add(len(out), size)
        ml.cache.counted(len(out) - missed, size - missed_size, missed, missed_size)
    return out


async def _read_from_bookies(
    ml: ReadableLedger, pos: Position, want: tuple[int, int, int], last: Position
) -> list[tuple[Position, bytes]]:
    (ledger_id, first), (count, held, max_bytes) = pos, want  # want: (entries, held, bound)
    md = ml.closed_ledgers.get(ledger_id)
    writer = ml.writer
    if md is None:
        if writer is None or writer.ledger_id != ledger_id:
            return []
        md, end = writer.metadata, writer.lac
        entries, length = writer.next_entry_id, writer.length
    else:
        end, entries, length = md.last_entry_id, md.last_entry_id + 1, md.length
    end = min(end, first + bookie_read_count(count, max_bytes - held, entries, length) - 1)
    end = min(end, last[1]) if last[0] == ledger_id else end
    if end < first:
        return []
    rows = await ml.ledger_client.read(md, first, end)
    kept = entries_within([len(payload) for _, payload in rows], held, max_bytes)
    for eid, payload in rows[kept:]:
        ml.cache.put((ledger_id, eid), payload)
    return [((ledger_id, eid), payload) for eid, payload in rows[:kept]]
