"""The ledger client library brokers use: create, write, recover, read, delete.

Metadata and errors are in :mod:`bookie.ledger_metadata`, one bookie's
channel in :mod:`bookie.bookie_connection`, the choice of bookies in
:mod:`bookie.ensemble_placement`, and writing in :mod:`bookie.ledger_writer`
(which sees this client as a :class:`~bookie.client_context.ClientContext`).

Recovery (open with recovery, another owner taking the ledger over): mark
the metadata IN_RECOVERY, fence the last ensemble until every write set has
Qw - Qa + 1 fenced bookies (then the old writer cannot confirm anything
new), read forward from the highest LAC: an entry any bookie holds is kept,
an entry that Qw - Qa + 1 bookies of its write set explicitly lack ends the
ledger, anything else stops recovery (retry later). Kept entries are written
back to their whole write set (recovery adds pass the fence), then the
ledger is closed by compare-and-set.

Reads fail over: each entry is asked from the first bookie of its write set,
and from the next one on an error, a missing entry or a bad digest.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Iterable

import grpc

from bookie import ensemble_placement
from bookie.bookie_connection import BookieConnection
from bookie.client_context import LedgerClientSettings
from bookie.ledger_metadata import (
    CLOSED,
    IN_RECOVERY,
    LEDGER_ID_COUNTER,
    OPEN,
    BKError,
    LedgerMetadata,
    master_key,
)
from bookie.ledger_writer import LedgerWriter
from bookie.quorum import (
    FOUND,
    UNKNOWN,
    check_quorums,
    fence_covers_all_write_sets,
    fence_quorum,
    recovery_read_outcome,
    write_set,
)
from metastore.client import BadVersionError, MetastoreClient
from protos import bookie_pb2, common_pb2
from protos.digest import encode_record, entry_digest

log = logging.getLogger(__name__)


class LedgerClient:
    """Creates, recovers, reads and deletes ledgers; writes go through the
    :class:`LedgerWriter` it returns, which uses it as its
    :class:`~bookie.client_context.ClientContext`."""

    def __init__(self, metastore: MetastoreClient, settings: LedgerClientSettings | None = None):
        self.metastore = metastore
        self.settings = settings or LedgerClientSettings()
        self._connections: dict[str, BookieConnection] = {}
        self._addresses: dict[str, str] = {}

    def connection(self, bookie_id: str) -> BookieConnection:
        address = self._addresses[bookie_id]
        conn = self._connections.get(address)
        if conn is None:
            if len(self._connections) >= self.settings.max_connections:
                raise BKError(
                    f"{len(self._connections)} bookie connections open; the limit is "
                    f"{self.settings.max_connections}"
                )
            conn = self._connections[address] = BookieConnection(address, self.settings.timeout_s)
        return conn

    async def close(self) -> None:
        for conn in self._connections.values():
            await conn.close()
        self._connections.clear()

    async def _resolve(self, bookie_ids: list[str]) -> None:
        """Learn the addresses of bookies; unregistered ones stay unknown."""
        for bookie_id in bookie_ids:
            if bookie_id in self._addresses:
                continue
            stat = await self.metastore.get(f"/bookies/available/{bookie_id}")
            if stat is not None:
                self._addresses[bookie_id] = json.loads(stat.value)["address"]

    async def writable_bookies(self) -> list[str]:
        out = []
        for bookie_id in await self.metastore.children("/bookies/available"):
            stat = await self.metastore.get(f"/bookies/available/{bookie_id}")
            if stat is None:
                continue
            info = json.loads(stat.value)
            if not info.get("read_only"):
                self._addresses[bookie_id] = info["address"]
                out.append(bookie_id)
        return out

    async def replace_bookies(
        self, ensemble: list[str], indexes: Iterable[int]
    ) -> list[str] | None:
        """``ensemble`` with the bookies at ``indexes`` swapped for writable
        bookies outside it; None when too few are writable."""
        return ensemble_placement.replace_bookies(
            ensemble, indexes, await self.writable_bookies(), self.settings.rng
        )

    async def create_ledger(
        self, ensemble_size: int, write_quorum: int, ack_quorum: int, password: bytes = b""
    ) -> LedgerWriter:
        check_quorums(ensemble_size, write_quorum, ack_quorum)
        ensemble = ensemble_placement.new_ensemble(
            await self.writable_bookies(), ensemble_size, self.settings.rng
        )
        ledger_id = await self.metastore.increment(LEDGER_ID_COUNTER)
        md = LedgerMetadata(
            ledger_id=ledger_id,
            ensemble_size=ensemble_size,
            write_quorum=write_quorum,
            ack_quorum=ack_quorum,
            ensembles=[(0, ensemble)],
            password=password,
            ctime_ms=int(time.time() * 1000),
        )
        md.version = await self.metastore.put(
            f"/ledgers/{ledger_id}", md.to_json(), expected_version=-1
        )
        return LedgerWriter(self, md)

    async def metadata(self, ledger_id: int) -> LedgerMetadata:
        stat = await self.metastore.get(f"/ledgers/{ledger_id}")
        if stat is None:
            raise BKError(f"ledger {ledger_id} does not exist", common_pb2.NO_SUCH_LEDGER)
        return LedgerMetadata.from_json(ledger_id, stat.value, stat.version)

    async def update_metadata(
        self, ledger_id: int, change: Callable[[LedgerMetadata], bool]
    ) -> LedgerMetadata:
        """Read-modify-CAS until ``change`` says there is nothing to do."""
        for _ in range(100):
            md = await self.metadata(ledger_id)
            if not change(md):
                return md
            try:
                md.version = await self.metastore.put(
                    f"/ledgers/{ledger_id}", md.to_json(), expected_version=md.version
                )
                return md
            except BadVersionError:
                continue
        raise BKError(f"ledger {ledger_id} metadata keeps changing under us")

    async def close_metadata(self, ledger_id: int, last_entry_id: int, length: int) -> None:
        def change(md: LedgerMetadata) -> bool:
            if md.state == CLOSED:
                if md.last_entry_id != last_entry_id:
                    raise BKError(
                        f"ledger {ledger_id} was closed at {md.last_entry_id} by someone else, "
                        f"not at {last_entry_id}"
                    )
                return False
            if md.state == IN_RECOVERY:
                raise BKError(f"ledger {ledger_id} is being recovered by another owner")
            md.state, md.last_entry_id, md.length = CLOSED, last_entry_id, length
            return True

        await self.update_metadata(ledger_id, change)

    async def open_with_recovery(self, ledger_id: int) -> LedgerMetadata:
        """Fence the ledger, recover its tail, and close it (see the module doc)."""
        md = await self.metadata(ledger_id)
        if md.state == CLOSED:
            return md

        def to_recovery(m: LedgerMetadata) -> bool:
            if m.state != OPEN:
                return False
            m.state = IN_RECOVERY
            return True

        md = await self.update_metadata(ledger_id, to_recovery)
        if md.state == CLOSED:
            return md
        seg_first, bookies = md.ensembles[-1]
        await self._resolve(bookies)
        key = master_key(md.password)

        async def fence(bookie_id: str) -> bookie_pb2.ReadLacResponse | None:
            try:
                return await self.connection(bookie_id).read_lac(ledger_id, True, key)
            except (BKError, grpc.aio.AioRpcError, KeyError) as exc:
                log.warning("ledger %d: fencing %s failed: %s", ledger_id, bookie_id, exc)
                return None

        answers = await asyncio.gather(*(fence(b) for b in bookies))
        fenced = {i for i, a in enumerate(answers) if a is not None}
        if not fence_covers_all_write_sets(
            md.ensemble_size, md.write_quorum, md.ack_quorum, fenced
        ):
            raise BKError(
                f"ledger {ledger_id}: only bookies {sorted(fenced)} of {bookies} could be "
                f"fenced; every write set needs {fence_quorum(md.write_quorum, md.ack_quorum)}. "
                "Retry when more bookies are up.",
                common_pb2.SERVICE_NOT_READY,
            )
        lac = max(a.lac for a in answers if a is not None)
        entry_id = max(lac + 1, seg_first)
        recovered: list[tuple[int, int, int, bytes]] = []
        batch = 100
        done = False
        while not done:
            ids = list(range(entry_id, entry_id + batch))
            found, negatives = await self._probe(md, bookies, ids)
            for e in ids:
                outcome = recovery_read_outcome(
                    md.write_quorum, md.ack_quorum, 1 if e in found else 0, negatives.get(e, 0)
                )
                if outcome == FOUND:
                    recovered.append((e, *found[e]))
                    continue
                if outcome == UNKNOWN:
                    raise BKError(
                        f"ledger {ledger_id}: cannot tell whether entry {e} exists (too few "
                        "bookies of its write set answered); retry recovery later",
                        common_pb2.SERVICE_NOT_READY,
                    )
                done = True
                break
            entry_id += batch
        last = recovered[-1][0] if recovered else entry_id_before(lac, seg_first)
        if recovered:
            md = await self._write_back(md, bookies, key, recovered)
        length = await self._length(md, last)

        def to_closed(m: LedgerMetadata) -> bool:
            if m.state == CLOSED:
                return False
            m.state, m.last_entry_id, m.length = CLOSED, last, length
            return True

        closed = await self.update_metadata(ledger_id, to_closed)
        log.info(
            "ledger %d recovered: closed at entry %d (%d entries past LAC %d written back)",
            ledger_id,
            closed.last_entry_id,
            len(recovered),
            lac,
        )
        return closed

    async def _probe(
        self, md: LedgerMetadata, bookies: list[str], ids: list[int]
    ) -> tuple[dict[int, tuple[int, int, bytes]], dict[int, int]]:
        """Ask every bookie of the ensemble for the ids of its write sets: the
        entries found with a good digest, and explicit negatives per entry."""
        wanted: dict[int, list[int]] = {}
        for e in ids:
            for idx in write_set(e, md.ensemble_size, md.write_quorum):
                wanted.setdefault(idx, []).append(e)

        async def ask(idx: int) -> tuple[int, list[tuple[int, int, int, bytes]], list[int]] | None:
            try:
                rows, missing = await self.connection(bookies[idx]).read_entries(
                    md.ledger_id, wanted[idx]
                )
            except (BKError, grpc.aio.AioRpcError, KeyError):
                return None
            return idx, rows, missing

        found: dict[int, tuple[int, int, bytes]] = {}
        negatives: dict[int, int] = {}
        for got in await asyncio.gather(*(ask(i) for i in wanted)):
            if got is None:
                continue
            _, rows, missing = got
            for eid, lac, digest, payload in rows:
                if entry_digest(md.ledger_id, eid, lac, payload) == digest:
                    found.setdefault(eid, (lac, digest, payload))
            for eid in missing:
                negatives[eid] = negatives.get(eid, 0) + 1
        return found, negatives

    async def _write_back(
        self,
        md: LedgerMetadata,
        bookies: list[str],
        key: bytes,
        entries: list[tuple[int, int, int, bytes]],
    ) -> LedgerMetadata:
        """Recovery adds of ``entries`` to their whole write sets, Qa acks each.

        Bookies of the ensemble that fail are replaced first (a new segment
        from the first recovered entry, by compare-and-set while the ledger is
        IN_RECOVERY), so a writer and a bookie dying together do not leave the
        ledger unrecoverable until that bookie returns.
        """
        e_size, qw = md.ensemble_size, md.write_quorum

        records = [
            (eid, encode_record(eid, lac, digest, payload)) for eid, lac, digest, payload in entries
        ]

        def requests(only: set[int] | None) -> dict[int, bookie_pb2.AddRequest]:
            return add_requests(
                md.ledger_id,
                key,
                records,
                e_size,
                qw,
                lambda idx: only is None or idx in only,
                recovery=True,
            )

        async def add(ensemble: list[str], idx: int, req: bookie_pb2.AddRequest) -> int | None:
            try:
                resp = await asyncio.wait_for(
                    self.connection(ensemble[idx]).send_add(req), self.settings.timeout_s
                )
            except (BKError, grpc.aio.AioRpcError, KeyError, TimeoutError):
                return None
            return idx if resp.error.code == common_pb2.OK else None

        async def send(ensemble: list[str], per_bookie: dict) -> set[int]:  # type: ignore[type-arg]
            got = await asyncio.gather(*(add(ensemble, i, r) for i, r in per_bookie.items()))
            return {i for i in got if i is not None}

        per_bookie = requests(None)
        ok = await send(bookies, per_bookie)
        failed = set(per_bookie) - ok
        if failed:
            replaced = await self.replace_bookies(bookies, failed)
            if replaced is not None:
                ensemble = replaced
                first = entries[0][0]

                def change(m: LedgerMetadata) -> bool:
                    if m.state != IN_RECOVERY:
                        raise BKError(f"ledger {m.ledger_id} is {m.state}; recovery lost it")
                    m.start_segment(first, ensemble)
                    return True

                md = await self.update_metadata(md.ledger_id, change)
                await self._resolve(ensemble)
                log.info(
                    "ledger %d: recovery replaced %s by %s from entry %d",
                    md.ledger_id,
                    [bookies[i] for i in sorted(failed)],
                    [ensemble[i] for i in sorted(failed)],
                    first,
                )
                ok |= await send(ensemble, requests(failed))
        for eid, *_ in entries:
            acks = sum(1 for i in write_set(eid, e_size, qw) if i in ok)
            if acks < md.ack_quorum:
                raise BKError(
                    f"ledger {md.ledger_id}: writing back entry {eid} reached {acks} of "
                    f"{md.ack_quorum} bookies; retry recovery later",
                    common_pb2.SERVICE_NOT_READY,
                )
        return md

    async def _length(self, md: LedgerMetadata, last: int) -> int:
        """Sum of the payload sizes of entries [0, last], asked from the
        bookies (sizes only, no payloads travel)."""
        sizes: dict[int, int] = {}
        for lo, hi, bookies in self._segments(md, 0, last):
            await self._resolve(bookies)
            wanted: dict[int, list[int]] = {}
            for e in range(lo, hi + 1):
                for idx in write_set(e, md.ensemble_size, md.write_quorum):
                    wanted.setdefault(idx, []).append(e)

            async def ask(bookie_id: str, ids: list[int]) -> dict[int, int]:
                try:
                    return await self.connection(bookie_id).entry_sizes(md.ledger_id, ids)
                except (BKError, grpc.aio.AioRpcError, KeyError):
                    return {}

            calls = [
                (bookies[idx], ids[i : i + 10000])
                for idx, ids in wanted.items()
                for i in range(0, len(ids), 10000)
            ]
            for got in await asyncio.gather(*(ask(b, ids) for b, ids in calls)):
                sizes.update(got)
        if len(sizes) < last + 1:
            log.warning(
                "ledger %d: sizes of %d of %d entries unknown; its length is a lower bound",
                md.ledger_id,
                last + 1 - len(sizes),
                last + 1,
            )
        return sum(sizes.values())

    def _segments(
        self, md: LedgerMetadata, first: int, last: int
    ) -> list[tuple[int, int, list[str]]]:
        out = []
        starts = md.ensembles
        for i, (seg_first, bookies) in enumerate(starts):
            seg_last = starts[i + 1][0] - 1 if i + 1 < len(starts) else last
            lo, hi = max(first, seg_first), min(last, seg_last)
            if lo <= hi:
                out.append((lo, hi, bookies))
        return out

    async def read(self, md: LedgerMetadata, first: int, last: int) -> list[tuple[int, bytes]]:
        """Entries [first, last] with their digests checked, failing over between
        the replicas of each entry on errors, missing entries and bad digests."""
        if first > last:
            return []
        out: dict[int, bytes] = {}
        for lo, hi, bookies in self._segments(md, first, last):
            await self._resolve(bookies)
            attempt = dict.fromkeys(range(lo, hi + 1), 0)
            problems: dict[int, list[str]] = {}
            while attempt:
                by_bookie: dict[int, list[int]] = {}
                for e, k in attempt.items():
                    ws = write_set(e, md.ensemble_size, md.write_quorum)
                    if k >= len(ws):
                        raise BKError(
                            f"cannot read ledger {md.ledger_id} entry {e} from any replica: "
                            + "; ".join(problems.get(e, [])),
                            common_pb2.NO_SUCH_ENTRY,
                        )
                    by_bookie.setdefault(ws[k], []).append(e)
                retry: dict[int, int] = {}

                async def ask(idx: int, ids: list[int], bookies: list[str] = bookies):  # type: ignore[no-untyped-def]
                    bookie_id = bookies[idx]
                    try:
                        return bookie_id, await self.connection(bookie_id).read_entries(
                            md.ledger_id, ids
                        )
                    except (BKError, grpc.aio.AioRpcError, KeyError) as exc:
                        return bookie_id, exc

                calls = [
                    (idx, ids[i : i + 1000])
                    for idx, ids in by_bookie.items()
                    for i in range(0, len(ids), 1000)
                ]
                results = await asyncio.gather(*(ask(idx, ids) for idx, ids in calls))
                for (_, ids), (bookie_id, res) in zip(calls, results, strict=True):
                    if isinstance(res, BaseException):
                        for e in ids:
                            problems.setdefault(e, []).append(f"{bookie_id}: {res}")
                            retry[e] = attempt[e] + 1
                        continue
                    rows, _missing = res
                    good = set()
                    for eid, lac, digest, payload in rows:
                        if (
                            eid in attempt
                            and entry_digest(md.ledger_id, eid, lac, payload) == digest
                        ):
                            out[eid] = payload
                            good.add(eid)
                        elif eid in attempt:
                            log.warning(
                                "ledger %d entry %d from %s fails its digest; trying another replica",
                                md.ledger_id,
                                eid,
                                bookie_id,
                            )
                            problems.setdefault(eid, []).append(f"{bookie_id}: digest mismatch")
                    for e in ids:
                        if e not in good:
                            problems.setdefault(e, []).append(f"{bookie_id}: not there or bad")
                            retry[e] = attempt[e] + 1
                attempt = retry
        return sorted(out.items())

    async def delete_ledger(self, ledger_id: int) -> None:
        """Delete the ledger's entries on every bookie that holds some, then its metadata."""
        try:
            md = await self.metadata(ledger_id)
        except BKError:
            return
        key = master_key(md.password)
        bookies = sorted({b for _, bk in md.ensembles for b in bk})
        await self._resolve(bookies)
        for bookie_id in bookies:
            try:
                await self.connection(bookie_id).delete_ledger(ledger_id, key)
            except (BKError, grpc.aio.AioRpcError, KeyError) as exc:
                log.warning(
                    "ledger %d: could not delete its entries on %s: %s", ledger_id, bookie_id, exc
                )
        await self.metastore.delete(f"/ledgers/{ledger_id}")


def add_requests(
    ledger_id: int,
    key: bytes,
    records: Iterable[tuple[int, bytes]],
    ensemble_size: int,
    write_quorum: int,
    wanted: Callable[[int], bool],
    recovery: bool = False,
) -> dict[int, bookie_pb2.AddRequest]:
    """One add request per ensemble index for ``(entry id, record)`` rows:
    each entry goes to the indexes of its write set that ``wanted`` keeps."""
    cols: dict[int, list[bytes]] = {}
    for entry_id, record in records:
        for i in range(write_quorum):
            idx = (entry_id + i) % ensemble_size
            if wanted(idx):
                cols.setdefault(idx, []).append(record)
    return {
        idx: bookie_pb2.AddRequest(
            ledger_id=ledger_id, master_key=key, entries=b"".join(recs), recovery=recovery
        )
        for idx, recs in cols.items()
    }


def entry_id_before(lac: int, seg_first: int) -> int:
    """The last entry of a recovered ledger when nothing past the LAC exists."""
    return max(lac, seg_first - 1)
