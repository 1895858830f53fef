"""Broker-side message deduplication (Pulsar's PIP-6, seed: Message deduplication).

Theory of operation. Per topic, for every producer name the broker keeps the
highest sequence id *pushed* (handed to the managed ledger) and *persisted*
(stored). A send whose highest sequence id is at or below the persisted one
is a duplicate: it is answered as stored (message id -1:-1) and not written
again. One at or below the pushed one is still in flight: it is refused with
a retryable error. When a write fails, pushed falls back to persisted, so the
retry of that send is not taken for a duplicate.

The map survives restarts: every ``snapshot_interval`` stored entries it is
written to ``/dedup/<topic path>`` with the position it covers, and a topic
that loads replays the entries after that position (producer name, sequence
id and message count from each entry's metadata). The managed ledger keeps
every ledger after the snapshot position. At most ``max_producers`` names
are tracked (the oldest are forgotten first).
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING

from metastore.client import MetastoreClient
from protos.entry import CorruptedEntryError, num_messages, parse_metadata

if TYPE_CHECKING:
    from broker.managed_ledger import ManagedLedger

log = logging.getLogger(__name__)

NEW, DUPLICATE, IN_FLIGHT = "new", "duplicate", "in-flight"
Position = tuple[int, int]


class Deduplication:
    def __init__(self, snapshot_interval: int = 1000, max_producers: int = 10000) -> None:
        self.enabled = False
        self.pushed: dict[str, int] = {}
        self.persisted: dict[str, int] = {}
        self.snapshot_interval = snapshot_interval
        self.max_producers = max_producers
        self.since_snapshot = 0
        self.covered: Position | None = None  # position the last snapshot covers

    def check(self, producer: str, highest: int) -> str:
        if highest <= self.persisted.get(producer, -1):
            return DUPLICATE
        if highest <= self.pushed.get(producer, -1):
            return IN_FLIGHT
        return NEW

    def pushed_to(self, producer: str, highest: int) -> None:
        self.pushed[producer] = max(self.pushed.get(producer, -1), highest)
        self._bound(self.pushed)

    def stored(self, producer: str, highest: int) -> bool:
        """Record a stored send; True when a snapshot is due."""
        self.persisted[producer] = max(self.persisted.get(producer, -1), highest)
        self._bound(self.persisted)
        self.since_snapshot += 1
        return self.since_snapshot >= self.snapshot_interval

    def failed(self, producer: str) -> None:
        """A write failed: its retry must not look like a duplicate."""
        self.pushed[producer] = self.persisted.get(producer, -1)

    def observe_entries(self, entries: list[tuple[Position, bytes]]) -> None:
        """Entries found stored after all (a failed ledger's recovery)."""
        for _, data in entries:
            got = _producer_and_highest(data)
            if got is not None:
                name, highest = got
                self.persisted[name] = max(self.persisted.get(name, -1), highest)
                self.pushed[name] = max(self.pushed.get(name, -1), highest)

    def last_sequence_id(self, producer: str) -> int:
        return self.persisted.get(producer, -1)

    def _bound(self, d: dict[str, int]) -> None:
        """Forget the oldest names over the limit, from both maps."""
        while len(d) > self.max_producers:
            name = next(iter(d))
            self.pushed.pop(name, None)
            self.persisted.pop(name, None)

    # ------------------------------------------------------------ persistence

    @staticmethod
    def key(ledger: ManagedLedger) -> str:
        return f"/dedup/{ledger.topic.persistence_path}"

    async def snapshot(self, ledger: ManagedLedger, metastore: MetastoreClient) -> None:
        position = ledger.last_confirmed
        body = json.dumps({"position": list(position), "producers": self.persisted})
        await metastore.put(self.key(ledger), body.encode())
        self.since_snapshot = 0
        self.covered = position
        ledger.hold_back = position

    async def recover(self, ledger: ManagedLedger, metastore: MetastoreClient) -> int:
        """Load the snapshot and replay the entries after it; returns entries replayed."""
        stat = await metastore.get(self.key(ledger))
        start = ledger.before_first()
        if stat is not None:
            data = json.loads(stat.value)
            self.persisted = {str(k): int(v) for k, v in data["producers"].items()}
            start = (int(data["position"][0]), int(data["position"][1]))
        replayed = 0
        last = ledger.last_confirmed
        pos = ledger.next_position(start)
        while last[1] >= 0 and pos <= last and ledger.has_entry(pos):
            entries = await ledger.read_entries(pos, 500, 16 * 1024 * 1024)
            if not entries:
                break
            for p, data in entries:
                pos = ledger.next_position(p)
                got = _producer_and_highest(data)
                if got is None:
                    continue
                name, highest = got
                self.persisted[name] = max(self.persisted.get(name, -1), highest)
                replayed += 1
        self._bound(self.persisted)
        self.pushed = dict(self.persisted)
        self.covered = start
        ledger.hold_back = start
        return replayed


def _producer_and_highest(entry: bytes) -> tuple[str, int] | None:
    """(producer name, highest sequence id) of a stored entry."""
    try:
        meta = parse_metadata(entry)
    except CorruptedEntryError:
        return None
    return meta.producer_name, meta.sequence_id + num_messages(meta) - 1
