"""AutoRecovery's records in the metastore, shared by the auditor, the
replication workers and the broker's ``bookies`` admin verbs.

- ``/underreplication/ledgers/{id}``: a ledger to repair (:class:`ReplicationTask`),
  put and widened by the auditor (compare-and-set), deleted by the worker
  that finished it;
- ``/underreplication/locks/{id}``: the worker repairing it, an ephemeral key
  of that worker's session, so a worker that dies releases its task;
- ``/bookies/retiring/{id}``: an operator's decommission or recover of a
  bookie (:class:`~bookie.replication_rules.Retire`).

The cluster's view (:class:`BookieView`) is read from the registrations,
the cookies and these marks, each time it is needed.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Collection
from dataclasses import dataclass, field

from bookie.ledger_metadata import LedgerMetadata
from bookie.replication_rules import Retire
from metastore.client import BadVersionError, MetastoreClient
from protos import metadata_paths

# Ledger metadata read concurrently when scanning every ledger.
_SCAN_CONCURRENCY = 32


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class ReplicationTask:
    ledger_id: int
    bookies: list[str] = field(default_factory=list)  # replicas to move elsewhere
    holes: list[tuple[int, str]] = field(default_factory=list)  # (fragment first, bookie)
    created_ms: int = 0
    version: int = -1  # metastore version; not stored

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "bookies": sorted(self.bookies),
                "holes": sorted([first, b] for first, b in self.holes),
                "created_ms": self.created_ms,
            }
        ).encode()

    @classmethod
    def from_json(cls, ledger_id: int, data: bytes, version: int) -> ReplicationTask:
        d = json.loads(data)
        return cls(
            ledger_id,
            list(d.get("bookies", [])),
            [(int(first), str(b)) for first, b in d.get("holes", [])],
            int(d.get("created_ms", 0)),
            version,
        )

    def covers(self, bookies: Collection[str], holes: Collection[tuple[int, str]]) -> bool:
        return set(bookies) <= set(self.bookies) and set(holes) <= set(self.holes)


async def mark_under_replicated(
    metastore: MetastoreClient,
    ledger_id: int,
    bookies: Collection[str] = (),
    holes: Collection[tuple[int, str]] = (),
) -> bool:
    """Put or widen the ledger's task; True when it changed."""
    key = metadata_paths.under_replicated(ledger_id)
    for _ in range(20):
        stat = await metastore.get(key)
        if stat is None:
            task = ReplicationTask(ledger_id, sorted(bookies), sorted(holes), now_ms())
            expected = -1
        else:
            task = ReplicationTask.from_json(ledger_id, stat.value, stat.version)
            if task.covers(bookies, holes):
                return False
            task.bookies = sorted(set(task.bookies) | set(bookies))
            task.holes = sorted(set(task.holes) | set(holes))
            expected = stat.version
        try:
            await metastore.put(key, task.to_json(), expected_version=expected)
            return True
        except BadVersionError:
            continue
    return False


async def tasks(metastore: MetastoreClient) -> list[ReplicationTask]:
    """Every filed task, read in one call."""
    records = await _records(metastore, metadata_paths.UNDER_REPLICATED)
    return [
        ReplicationTask.from_json(int(name), value, version)
        for name, (value, version) in records.items()
        if name.isdigit()
    ]


async def ledger_ids(metastore: MetastoreClient) -> list[int]:
    """Every ledger with metadata (the id counter is not one)."""
    return sorted(int(n) for n in await metastore.children(metadata_paths.LEDGERS) if n.isdigit())


async def all_ledgers(metastore: MetastoreClient) -> AsyncIterator[LedgerMetadata]:
    """The metadata of every ledger, read a few dozen at a time."""
    ids = await ledger_ids(metastore)
    for i in range(0, len(ids), _SCAN_CONCURRENCY):
        chunk = ids[i : i + _SCAN_CONCURRENCY]
        stats = await asyncio.gather(*(metastore.get(metadata_paths.ledger(x)) for x in chunk))
        for ledger_id, stat in zip(chunk, stats, strict=True):
            if stat is not None:
                yield LedgerMetadata.from_json(ledger_id, stat.value, stat.version)


@dataclass
class BookieView:
    """The bookies as the metastore knows them."""

    available: dict[str, dict]  # registered bookie -> its registration
    known: set[str]  # bookies with a cookie (ever started, not forgotten)
    retiring: dict[str, Retire]

    def read_only(self) -> dict[str, bool]:
        return {b: bool(info.get("read_only")) for b, info in self.available.items()}

    def writable(self) -> list[str]:
        """Registered, not read-only, and not being retired."""
        return sorted(
            b
            for b, info in self.available.items()
            if not info.get("read_only") and b not in self.retiring
        )


async def _records(metastore: MetastoreClient, parent: str) -> dict[str, tuple[bytes, int]]:
    """(value, version) of ``parent``'s children by name, read in one call."""
    records, _ = await metastore.list_prefix(parent + "/")
    return {r.key.removeprefix(parent + "/"): (r.value, r.version) for r in records}


async def bookie_view(metastore: MetastoreClient) -> BookieView:
    available = {
        b: json.loads(v)
        for b, (v, _) in (await _records(metastore, metadata_paths.BOOKIES_AVAILABLE)).items()
    }
    retiring = {
        b: Retire(json.loads(v)["action"])
        for b, (v, _) in (await _records(metastore, metadata_paths.BOOKIES_RETIRING)).items()
    }
    known = set(await metastore.children(metadata_paths.BOOKIE_COOKIES))
    return BookieView(available, known, retiring)


async def mark_retiring(metastore: MetastoreClient, bookie: str, action: Retire) -> None:
    await metastore.put(
        metadata_paths.bookie_retiring(bookie),
        json.dumps({"action": action.value, "since_ms": now_ms()}).encode(),
    )


async def unmark_retiring(metastore: MetastoreClient, bookie: str, forget: bool) -> None:
    """Drop the mark; with ``forget`` also the cookie, so the id may start
    again with an empty data dir (nothing refers to its old copies)."""
    await metastore.delete(metadata_paths.bookie_retiring(bookie))
    if forget:
        await metastore.delete(metadata_paths.bookie_cookie(bookie))
