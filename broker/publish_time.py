"""Finding a topic's first entry published at or after a time (``seek`` by
publish time): a binary search over each ledger's entries, reading one
entry's metadata per step. It takes publish times as growing with the
position, as Pulsar's seek by time does.
"""

from __future__ import annotations

from broker.managed_ledger import ManagedLedger
from protos.entry import parse_metadata

Position = tuple[int, int]


async def find_by_publish_time(ledger: ManagedLedger, publish_time_ms: int) -> Position:
    """The first stored entry published at or after ``publish_time_ms``
    (the position after the last entry when none is)."""
    last = ledger.last_confirmed
    end = ledger.next_position(last) if last[1] >= 0 else ledger.first_position
    for ledger_id in ledger.ledger_ids:
        hi = ledger.last_entry_of(ledger_id)
        if hi < 0:
            continue
        if await publish_time_at(ledger, (ledger_id, hi)) < publish_time_ms:
            continue  # the whole ledger is older
        lo, top = 0, hi
        while lo < top:  # first entry of this ledger with time >= t
            mid = (lo + top) // 2
            if await publish_time_at(ledger, (ledger_id, mid)) >= publish_time_ms:
                top = mid
            else:
                lo = mid + 1
        return ledger_id, lo
    return end


async def publish_time_at(ledger: ManagedLedger, pos: Position) -> int:
    got = await ledger.read_entries(pos, 1, 64 * 1024 * 1024)
    if not got:
        return 0
    return int(parse_metadata(got[0][1]).publish_time)
