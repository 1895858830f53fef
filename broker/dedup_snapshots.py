"""Deduplication state across restarts: snapshots in the metastore and the
replay of the entries stored after them.

Every ``broker_deduplication_entries_interval`` stored entries a topic
writes its persisted sequence ids to ``/dedup/<topic path>`` with the
position they cover. A topic that loads reads the snapshot and replays the
entries after that position (producer name, sequence id and message count
from each entry's metadata). The managed ledger keeps every ledger after
the snapshot position (its ``hold_back``), so the replay always finds them.
"""

from __future__ import annotations

from broker.dedup import DedupState
from broker.managed_ledger import ManagedLedger
from metastore.client import MetastoreClient
from protos import metadata_paths

# One replay read: at most this many entries or bytes.
REPLAY_READ_ENTRIES = 500
REPLAY_READ_BYTES = 16 * 1024 * 1024


async def write_snapshot(
    state: DedupState, ledger: ManagedLedger, metastore: MetastoreClient
) -> None:
    position = ledger.last_confirmed
    await metastore.put(
        metadata_paths.dedup_snapshot(ledger.topic), state.snapshot_record(position)
    )
    state.snapshot_written(position)
    ledger.hold_back = position


async def recover(state: DedupState, ledger: ManagedLedger, metastore: MetastoreClient) -> int:
    """Load the snapshot and replay the entries after it; returns the
    entries replayed."""
    stat = await metastore.get(metadata_paths.dedup_snapshot(ledger.topic))
    start = ledger.before_first() if stat is None else state.restore(stat.value)
    replayed = 0
    last = ledger.last_confirmed
    pos = ledger.next_position(start)
    while last[1] >= 0 and pos <= last and ledger.has_entry(pos):
        entries = await ledger.read_entries(pos, REPLAY_READ_ENTRIES, REPLAY_READ_BYTES)
        if not entries:
            break
        pos = ledger.next_position(entries[-1][0])
        replayed += state.observe(entries, in_flight_too=False)
    state.replayed(start)
    ledger.hold_back = start
    return replayed
