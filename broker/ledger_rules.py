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

These are decisions only: the caller passes the clock (``now_s``, seconds
of a monotonic clock) and the state, and does the I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

Position = tuple[int, int]


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
