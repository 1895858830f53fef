"""When a managed ledger rolls over, and which of its ledgers may be deleted.

Theory of operation. A topic writes into the last ledger of its list. It
closes that ledger and starts a new one (*rolls over*) by Pulsar's rule:
when the ledger is full (``max_entries`` entries or ``max_size_bytes``
bytes) and older than ``min_time_s``, or older than ``max_time_s`` whatever
its size. An empty ledger never rolls. A ledger nobody has written for
``inactive_rollover_s`` also rolls once every durable cursor has consumed
it, so its data can go. Ledgers are deleted from the front of the list
only, and only closed ones that every durable cursor has moved past and
that deduplication does not still replay (its ``hold_back`` position):
the list stays a contiguous suffix of the topic's history.

Retention (Pulsar's ``RetentionPolicies``) keeps such consumed ledgers a
while longer: a consumed ledger goes only once it is older than the
retention time or the topic is over the retention size, oldest first; -1
means no limit of that kind, and both 0 (the default) means no retention.
A ledger's age counts from when it stopped being written, which is when
the next ledger of the list was created (a topic always writes its last
ledger, so every closed ledger has a successor).

These are decisions only: the caller passes the clock (``now_s``, seconds
of a monotonic clock) and the state, and does the I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from bookie.ledger_metadata import LedgerMetadata

Position = tuple[int, int]


@dataclass(frozen=True)
class RetentionPolicy:
    """Pulsar's retentionTimeInMinutes and retentionSizeInMB, in seconds and
    bytes; -1 = no limit of that kind."""

    time_s: float = 0.0
    size_bytes: int = 0

    @property
    def keeps_nothing(self) -> bool:
        return self.time_s == 0 and self.size_bytes == 0


NO_RETENTION = RetentionPolicy()


@dataclass(frozen=True)
class RolloverPolicy:
    """Pulsar's managedLedgerMaxEntriesPerLedger, ...MaxSizePerLedgerMbytes,
    ...MinLedgerRolloverTimeMinutes, ...MaxLedgerRolloverTimeMinutes and
    ...InactiveLedgerRolloverTimeSeconds (0 = never)."""

    max_entries: int = 50000
    max_size_bytes: int = 2048 * 1024 * 1024
    min_time_s: float = 600.0
    max_time_s: float = 4 * 3600.0
    inactive_rollover_s: float = 300.0


def should_roll(
    policy: RolloverPolicy, entries: int, size_bytes: int, opened_at_s: float, now_s: float
) -> bool:
    """Roll a ledger of ``entries`` entries and ``size_bytes`` bytes, opened at ``opened_at_s``?"""
    if entries <= 0:
        return False
    age_s = now_s - opened_at_s
    full = entries >= policy.max_entries or size_bytes >= policy.max_size_bytes
    return (full and age_s >= policy.min_time_s) or age_s >= policy.max_time_s


def idle_rollover_due(
    policy: RolloverPolicy,
    written: Position,
    last_add_s: float,
    now_s: float,
    durable_marks: Iterable[Position],
) -> bool:
    """Roll the current ledger, whose last entry is ``written``, because
    nobody wrote to it for a while and every durable cursor consumed it?"""
    if written[1] < 0 or policy.inactive_rollover_s <= 0:
        return False
    if now_s - last_add_s < policy.inactive_rollover_s:
        return False
    return all(mark >= written for mark in durable_marks)


def deletable_ledgers(
    ledger_ids: Sequence[int],
    closed_last_entries: Mapping[int, int],
    current: int | None,
    durable_marks: Sequence[Position],
    hold_back: Position | None,
) -> list[int]:
    """The ledgers at the front of ``ledger_ids`` that may go: closed (in
    ``closed_last_entries``, ledger -> its last entry id), not ``current``,
    consumed by every durable cursor and not held back."""
    doomed = []
    for ledger_id in ledger_ids:
        last_entry = closed_last_entries.get(ledger_id)
        if ledger_id == current or last_entry is None:
            break
        last = (ledger_id, last_entry)
        if hold_back is not None and last > hold_back:
            break
        if not all(mark >= last for mark in durable_marks):
            break
        doomed.append(ledger_id)
    return doomed


class LedgerFacts(NamedTuple):
    """What trimming needs of a ledger: where it ends, when it was created
    (ms since the epoch) and its size in bytes."""

    last_entry: int
    ctime_ms: int
    length: int


def trimmable(
    ledger_ids: Sequence[int],
    closed: Mapping[int, LedgerFacts],
    current: tuple[int, LedgerFacts] | None,
    durable_marks: Sequence[Position],
    hold_back: Position | None,
    retention: RetentionPolicy,
    now_ms: int,
) -> list[int]:
    """The ledgers to delete now: consumed (:func:`deletable_ledgers`) and
    past retention (:func:`past_retention`). ``current`` is the ledger being
    written, if any."""
    consumed = deletable_ledgers(
        ledger_ids,
        {i: f.last_entry for i, f in closed.items()},
        current[0] if current is not None else None,
        durable_marks,
        hold_back,
    )
    if retention.keeps_nothing or not consumed:
        return consumed
    facts = dict(closed)
    if current is not None:
        facts[current[0]] = current[1]
    ended = {
        ledger_ids[i]: facts[ledger_ids[i + 1]].ctime_ms
        for i in range(len(ledger_ids) - 1)
        if ledger_ids[i + 1] in facts
    }
    sizes = {i: f.length for i, f in facts.items()}
    return past_retention(retention, consumed, ended, sizes, sum(sizes.values()), now_ms)


def past_retention(
    policy: RetentionPolicy,
    consumed: Sequence[int],
    ended_ms: Mapping[int, int],
    sizes: Mapping[int, int],
    total_size: int,
    now_ms: int,
) -> list[int]:
    """Of ``consumed`` (the deletable ledgers, oldest first), the leading
    ones retention lets go: each older than ``policy.time_s`` (it stopped
    being written at ``ended_ms[ledger]``) or, while it is kept, leaving the
    topic's ``total_size`` bytes over ``policy.size_bytes``."""
    if policy.keeps_nothing:
        return list(consumed)
    doomed: list[int] = []
    remaining = total_size
    for ledger_id in consumed:
        ended = ended_ms.get(ledger_id)
        expired = (
            policy.time_s >= 0 and ended is not None and now_ms - ended >= policy.time_s * 1000
        )
        over_size = policy.size_bytes >= 0 and remaining > policy.size_bytes
        if not (expired or over_size):
            break
        doomed.append(ledger_id)
        remaining -= sizes[ledger_id]
    return doomed


def normalize_position(
    ledger_ids: Sequence[int], closed: Mapping[int, LedgerMetadata], pos: Position
) -> Position:
    """The first existing-or-future position at or after ``pos`` in a topic
    of ``ledger_ids`` whose ``closed`` ledgers end where their metadata says."""
    ledger_id, entry_id = pos
    for idx, lid in enumerate(ledger_ids):
        if lid < ledger_id:
            continue
        if lid > ledger_id:
            return lid, 0
        md = closed.get(lid)
        if md is None or entry_id <= md.last_entry_id:
            return lid, max(entry_id, 0)
        if idx + 1 < len(ledger_ids):
            return ledger_ids[idx + 1], 0
        return lid, entry_id
    return pos


# A read's entries: the cache's come one at a time and the read stops once
# ``max_bytes`` are held (so it may pass the bound by one entry); a miss asks
# the bookies for a run of entries, sized by the ledger's mean entry size so
# that the run does not carry far past the bound, and what the run brings
# past the bound is dropped by the same rule.


def bookie_read_count(wanted: int, room_bytes: int, entries: int, length: int) -> int:
    """Entries to ask the bookies for when ``wanted`` more are wanted with
    ``room_bytes`` left, in a ledger whose ``entries`` entries so far hold
    ``length`` bytes (nothing known: all ``wanted``); at least one."""
    if entries <= 0 or length <= 0:
        return max(1, wanted)
    mean = max(1, length // entries)
    return max(1, min(wanted, -(-room_bytes // mean)))


def entries_within(sizes: Sequence[int], held: int, max_bytes: int) -> int:
    """How many of ``sizes`` a read holding ``held`` bytes takes: each while
    it holds less than ``max_bytes`` (the first always)."""
    taken = 0
    for size in sizes:
        if taken and held >= max_bytes:
            break
        held += size
        taken += 1
    return taken


def completion_due(pos: Position, added: Position, writing: int) -> bool:
    """Whether a tailing read stops before ``pos`` (not in the entry cache):
    an entry of the ledger being written (id ``writing``; -1: none) past
    ``added``, the newest entry whose add completed here. The bookies have
    confirmed it, and its completion, due in a moment, caches it and
    triggers the dispatch again. An entry of any other ledger never completes
    here (one a failed writer's recovery found stored, say): it is read."""
    return pos[0] == writing and pos > added
