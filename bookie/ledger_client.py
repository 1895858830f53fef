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
from bookie.bookie_list import BookieList
from bookie.client_context import LedgerClientSettings
from bookie.ledger_ids import LedgerIds
from bookie.ledger_metadata import (
    CLOSED,
    IN_RECOVERY,
    OPEN,
    BKError,
    LedgerMetadata,
    master_key,
)
from bookie.ledger_writer import LedgerWriter
from bookie.quorum import (
    MISSING,
    UNKNOWN,
    check_quorums,
    entries_by_index,
    fence_covers_all_write_sets,
    fence_quorum,
    first_unconfirmed,
    recovery_scan,
    replicas_to_ask,
)
from bookie.replica_rows import keep_good_rows
from metastore.client import BadVersionError, Compare, MetastoreClient, Op
from protos import bookie_pb2, common_pb2, metadata_paths
from protos.add_request import add_requests
from protos.digest import encode_record, entry_digest

log = logging.getLogger(__name__)

# Entries recovery reads past the LAC per round (from every bookie of each write set).
_RECOVERY_READ_ENTRIES = 100
# Entry ids per ReadEntries call: payloads when reading, sizes when measuring a ledger.
_READ_REQUEST_ENTRIES = 1000
_SIZE_REQUEST_ENTRIES = 10000

# A bookie's answer to ReadEntries (rows, ids it lacks), or the error met instead.
_ReadAnswer = tuple[list[tuple[int, int, int, bytes]], list[int]] | Exception
# A recovered entry: (entry id, lac, digest, payload).
_Recovered = tuple[int, int, int, bytes]


class LedgerClient:
    """Creates, recovers, reads and deletes ledgers; writes go through the
    :class:`LedgerWriter` it returns, which uses it as its
    :class:`~bookie.client_context.ClientContext`."""

    def __init__(self, metastore: MetastoreClient, settings: LedgerClientSettings | None = None):
        self.metastore = metastore
        self.settings = settings or LedgerClientSettings()
        self._connections: dict[str, BookieConnection] = {}
        self._addresses: dict[str, str] = {}
        self.ledger_ids = LedgerIds(metastore, self.settings.ledger_id_block)
        self.bookie_list = BookieList(metastore, self.settings.bookie_list_max_age_s)

    def connection(self, bookie_id: str) -> BookieConnection:
        address = self._addresses[bookie_id]
        conn = self._connections.get(address)
        if conn is None:
            if len(self._connections) >= self.settings.max_connections:
                raise BKError(
                    f"{len(self._connections)} bookie connections open; the limit is "
                    f"{self.settings.max_connections}"
                )
            conn = self._connections[address] = BookieConnection(
                address,
                self.settings.timeout_s,
                self.settings.token,
                self.settings.tls,
                self.settings.max_add_request_bytes,
            )
        return conn

    async def close(self) -> None:
        for conn in self._connections.values():
            await conn.close()
        self._connections.clear()

    def _learn(self, bookie_id: str, info: dict) -> bool:
        """Remember where a registered bookie listens: its TLS port when this
        client speaks TLS (a bookie without one is left out), else its
        plaintext port."""
        address = info.get("address_tls") if self.settings.tls is not None else info["address"]
        if not address:
            return False
        self._addresses[bookie_id] = address
        return True

    async def resolve(self, bookie_ids: list[str]) -> None:
        """Learn the addresses of bookies; unregistered ones stay unknown."""
        for bookie_id in bookie_ids:
            if bookie_id in self._addresses:
                continue
            stat = await self.metastore.get(metadata_paths.bookie_available(bookie_id))
            if stat is not None:
                self._learn(bookie_id, json.loads(stat.value))

    async def writable_bookies(self, fresh: bool = True) -> list[str]:
        """Bookies a new ensemble may use; ``fresh=False`` may answer from a
        list read up to ``bookie_list_max_age_s`` ago (:mod:`bookie.bookie_list`)."""
        return [
            bookie_id
            for bookie_id, info in await self.bookie_list.registered(fresh)
            if not info.get("read_only") and self._learn(bookie_id, info)
        ]

    async def bookie_stats(self) -> dict[str, bookie_pb2.StatsResponse]:
        """Disk and store figures of every available bookie (read-only ones
        too) that answers; one that does not is left out."""
        out = {}
        for bookie_id, info in await self.bookie_list.registered():
            if not self._learn(bookie_id, info):
                continue
            try:
                out[bookie_id] = await self.connection(bookie_id).stats()
            except (grpc.RpcError, BKError) as exc:
                log.info("bookie %s gave no stats: %s", bookie_id, exc)
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
        md = await self._new_metadata(ensemble_size, write_quorum, ack_quorum, password, -1)
        md.version = await self.metastore.put(
            metadata_paths.ledger(md.ledger_id), md.to_json(), expected_version=-1
        )
        return LedgerWriter(self, md)

    async def create_ledger_listed(
        self,
        quorums: tuple[int, int, int],
        listing: Callable[[int], tuple[Compare, Op]],
        after: int | None = -1,
    ) -> LedgerWriter | None:
        """A new ledger whose metadata is written in one metastore
        transaction with the record that lists it: ``listing(ledger_id)``
        gives that record's write and the condition it needs, evaluated just
        before the transaction goes out. None (nothing written) when the
        condition does not hold. Its id is above ``after`` (None: above every id
        handed out so far; :meth:`bookie.ledger_ids.LedgerIds.take`)."""
        md = await self._new_metadata(*quorums, b"", after)
        key = metadata_paths.ledger(md.ledger_id)
        unchanged, record = listing(md.ledger_id)
        created, _ = await self.metastore.txn(
            [Compare(key, version=-1), unchanged], [Op(key, md.to_json()), record]
        )
        if not created:
            return None
        md.version = 0  # a record's first version
        return LedgerWriter(self, md)

    async def _new_metadata(
        self,
        ensemble_size: int,
        write_quorum: int,
        ack_quorum: int,
        password: bytes,
        after: int | None,
    ) -> LedgerMetadata:
        """A new ledger's id (above ``after``) and ensemble (not stored yet)."""
        check_quorums(ensemble_size, write_quorum, ack_quorum)
        writable = await self.writable_bookies(fresh=False)
        if len(writable) < ensemble_size:  # a list kept for a while may miss a new bookie
            writable = await self.writable_bookies()
        ensemble = ensemble_placement.new_ensemble(writable, ensemble_size, self.settings.rng)
        return LedgerMetadata(
            ledger_id=await self.ledger_ids.take(after),
            ensemble_size=ensemble_size,
            write_quorum=write_quorum,
            ack_quorum=ack_quorum,
            ensembles=[(0, ensemble)],
            password=password,
            ctime_ms=int(time.time() * 1000),
        )

    async def metadata(self, ledger_id: int) -> LedgerMetadata:
        stat = await self.metastore.get(metadata_paths.ledger(ledger_id))
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
                    metadata_paths.ledger(ledger_id), md.to_json(), expected_version=md.version
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

    async def _read_entries(self, ledger_id: int, bookie_id: str, ids: list[int]) -> _ReadAnswer:
        try:
            return await self.connection(bookie_id).read_entries(ledger_id, ids)
        except (BKError, grpc.aio.AioRpcError, KeyError) as exc:
            return exc

    # ------------------------------------------------------------ recovery

    async def open_with_recovery(self, ledger_id: int) -> LedgerMetadata:
        """Fence the ledger, recover its tail, and close it (see the module doc)."""
        md = await self.metadata(ledger_id)
        if md.state == CLOSED:
            return md
        md = await self.update_metadata(ledger_id, _to_recovery)
        if md.state == CLOSED:
            return md
        seg_first, bookies = md.ensembles[-1]
        await self.resolve(bookies)
        key = master_key(md.password)
        lac = await self._fence(md, bookies, key)
        recovered = await self._read_tail(md, bookies, max(lac + 1, seg_first))
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

    async def _fence(self, md: LedgerMetadata, bookies: list[str], key: bytes) -> int:
        """Fence the ledger on the bookies of its last ensemble; the highest
        LAC they report. A retryable BKError unless every write set has
        Qw - Qa + 1 fenced bookies."""
        answers = await asyncio.gather(*(self._fence_one(md.ledger_id, b, key) for b in bookies))
        fenced = {i for i, a in enumerate(answers) if a is not None}
        if not fence_covers_all_write_sets(
            md.ensemble_size, md.write_quorum, md.ack_quorum, fenced
        ):
            raise BKError(
                f"ledger {md.ledger_id}: only bookies {sorted(fenced)} of {bookies} could be "
                f"fenced; every write set needs {fence_quorum(md.write_quorum, md.ack_quorum)}. "
                "Retry when more bookies are up.",
                common_pb2.SERVICE_NOT_READY,
            )
        return max(a.lac for a in answers if a is not None)

    async def _fence_one(
        self, ledger_id: int, bookie_id: str, key: bytes
    ) -> bookie_pb2.ReadLacResponse | None:
        try:
            return await self.connection(bookie_id).read_lac(ledger_id, True, key)
        except (BKError, grpc.aio.AioRpcError, KeyError) as exc:
            log.warning("ledger %d: fencing %s failed: %s", ledger_id, bookie_id, exc)
            return None

    async def _read_tail(
        self, md: LedgerMetadata, bookies: list[str], first: int
    ) -> list[_Recovered]:
        """The entries from ``first`` on that some bookie holds, up to the
        first one that Qw - Qa + 1 bookies of its write set explicitly lack."""
        recovered: list[_Recovered] = []
        while True:
            ids = list(range(first, first + _RECOVERY_READ_ENTRIES))
            found, negatives = await self._probe(md, bookies, ids)
            kept, outcome = recovery_scan(ids, found, negatives, md.write_quorum, md.ack_quorum)
            recovered += [(e, *found[e]) for e in ids[:kept]]
            if outcome == UNKNOWN:
                raise BKError(
                    f"ledger {md.ledger_id}: cannot tell whether entry {ids[kept]} exists (too "
                    "few bookies of its write set answered); retry recovery later",
                    common_pb2.SERVICE_NOT_READY,
                )
            if outcome == MISSING:
                return recovered
            first += _RECOVERY_READ_ENTRIES

    async def _probe(
        self, md: LedgerMetadata, bookies: list[str], ids: list[int]
    ) -> tuple[dict[int, tuple[int, int, bytes]], dict[int, int]]:
        """Ask every bookie of the ensemble for the ids of its write sets: the
        entries found with a good digest, and explicit negatives per entry."""
        wanted = entries_by_index(ids, md.ensemble_size, md.write_quorum)
        answers = await asyncio.gather(
            *(self._read_entries(md.ledger_id, bookies[i], wanted[i]) for i in wanted)
        )
        found: dict[int, tuple[int, int, bytes]] = {}
        negatives: dict[int, int] = {}
        for answer in answers:
            if isinstance(answer, Exception):
                continue
            rows, missing = answer
            for eid, lac, digest, payload in rows:
                if entry_digest(md.ledger_id, eid, lac, payload) == digest:
                    found.setdefault(eid, (lac, digest, payload))
            for eid in missing:
                negatives[eid] = negatives.get(eid, 0) + 1
        return found, negatives

    async def _write_back(
        self, md: LedgerMetadata, bookies: list[str], key: bytes, entries: list[_Recovered]
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
        per_bookie = add_requests(
            md.ledger_id, key, records, e_size, qw, lambda idx: True, recovery=True
        )
        acked = await self._recovery_adds(bookies, per_bookie)
        failed = set(per_bookie) - acked
        if failed:
            ensemble = await self.replace_bookies(bookies, failed)
            if ensemble is not None:
                md = await self._recovery_segment(md, entries[0][0], bookies, ensemble, failed)
                resend = add_requests(
                    md.ledger_id, key, records, e_size, qw, failed.__contains__, recovery=True
                )
                acked |= await self._recovery_adds(ensemble, resend)
        short = first_unconfirmed((e for e, *_ in entries), acked, e_size, qw, md.ack_quorum)
        if short is not None:
            raise BKError(
                f"ledger {md.ledger_id}: writing back entry {short[0]} reached {short[1]} of "
                f"{md.ack_quorum} bookies; retry recovery later",
                common_pb2.SERVICE_NOT_READY,
            )
        return md

    async def _recovery_adds(
        self, ensemble: list[str], per_bookie: dict[int, bookie_pb2.AddRequest]
    ) -> set[int]:
        """Send each ensemble index its request; the indexes that stored theirs."""
        got = await asyncio.gather(
            *(self._recovery_add(ensemble, i, req) for i, req in per_bookie.items())
        )
        return {i for i in got if i is not None}

    async def _recovery_add(
        self, ensemble: list[str], idx: int, req: bookie_pb2.AddRequest
    ) -> int | None:
        try:
            resp = await asyncio.wait_for(
                self.connection(ensemble[idx]).send_add(req), self.settings.timeout_s
            )
        except (BKError, grpc.aio.AioRpcError, KeyError, TimeoutError):
            return None
        return idx if resp.error.code == common_pb2.OK else None

    async def _recovery_segment(
        self,
        md: LedgerMetadata,
        first: int,
        bookies: list[str],
        ensemble: list[str],
        failed: set[int],
    ) -> LedgerMetadata:
        """Write the replacement ``ensemble`` from entry ``first`` on into the
        metadata, while the ledger is still IN_RECOVERY."""

        def change(m: LedgerMetadata) -> bool:
            if m.state != IN_RECOVERY:
                raise BKError(f"ledger {m.ledger_id} is {m.state}; recovery lost it")
            m.start_segment(first, ensemble)
            return True

        md = await self.update_metadata(md.ledger_id, change)
        await self.resolve(ensemble)
        log.info(
            "ledger %d: recovery replaced %s by %s from entry %d",
            md.ledger_id,
            [bookies[i] for i in sorted(failed)],
            [ensemble[i] for i in sorted(failed)],
            first,
        )
        return md

    async def _length(self, md: LedgerMetadata, last: int) -> int:
        """Sum of the payload sizes of entries [0, last], asked from the
        bookies (sizes only, no payloads travel)."""
        sizes: dict[int, int] = {}
        for lo, hi, bookies in self._segments(md, 0, last):
            await self.resolve(bookies)
            wanted = entries_by_index(range(lo, hi + 1), md.ensemble_size, md.write_quorum)
            calls = [
                (bookies[idx], ids[i : i + _SIZE_REQUEST_ENTRIES])
                for idx, ids in wanted.items()
                for i in range(0, len(ids), _SIZE_REQUEST_ENTRIES)
            ]
            for got in await asyncio.gather(
                *(self._entry_sizes(md.ledger_id, b, ids) for b, ids in calls)
            ):
                sizes.update(got)
        if len(sizes) < last + 1:
            log.warning(
                "ledger %d: sizes of %d of %d entries unknown; its length is a lower bound",
                md.ledger_id,
                last + 1 - len(sizes),
                last + 1,
            )
        return sum(sizes.values())

    async def _entry_sizes(self, ledger_id: int, bookie_id: str, ids: list[int]) -> dict[int, int]:
        try:
            return await self.connection(bookie_id).entry_sizes(ledger_id, ids)
        except (BKError, grpc.aio.AioRpcError, KeyError):
            return {}

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

    # ------------------------------------------------------------ reads

    async def read(self, md: LedgerMetadata, first: int, last: int) -> list[tuple[int, bytes]]:
        """Entries [first, last] with their digests checked, failing over between
        the replicas of each entry on errors, missing entries and bad digests.
        When no replica has an entry, ``md`` may be stale (AutoRecovery moved
        replicas since it was read): it is refreshed in place and read again."""
        try:
            return await self._read(md, first, last)
        except BKError as exc:
            fresh = await self.metadata(md.ledger_id)
            if exc.code != common_pb2.NO_SUCH_ENTRY or fresh.version == md.version:
                raise
            md.ensembles, md.version = fresh.ensembles, fresh.version
            return await self._read(md, first, last)

    async def _read(self, md: LedgerMetadata, first: int, last: int) -> list[tuple[int, bytes]]:
        if first > last:
            return []
        out: dict[int, bytes] = {}
        for lo, hi, bookies in self._segments(md, first, last):
            await self.resolve(bookies)
            attempts = dict.fromkeys(range(lo, hi + 1), 0)
            problems: dict[int, list[str]] = {}
            while attempts:
                attempts = await self._read_round(md, bookies, attempts, problems, out)
        return sorted(out.items())

    async def _read_round(
        self,
        md: LedgerMetadata,
        bookies: list[str],
        attempts: dict[int, int],
        problems: dict[int, list[str]],
        out: dict[int, bytes],
    ) -> dict[int, int]:
        """Ask each entry of ``attempts`` from the replica its attempt number
        picks (:func:`~bookie.quorum.replicas_to_ask`), keep what arrives with
        a good digest in ``out``; the entries to ask again, one replica on.
        Why each try failed is noted in ``problems``, for the error raised
        once an entry has no replica left."""
        by_index, exhausted = replicas_to_ask(attempts, md.ensemble_size, md.write_quorum)
        if exhausted:
            raise BKError(
                f"cannot read ledger {md.ledger_id} entry {exhausted[0]} from any replica: "
                + "; ".join(problems.get(exhausted[0], [])),
                common_pb2.NO_SUCH_ENTRY,
            )
        calls = [
            (bookies[idx], ids[i : i + _READ_REQUEST_ENTRIES])
            for idx, ids in by_index.items()
            for i in range(0, len(ids), _READ_REQUEST_ENTRIES)
        ]
        answers = await asyncio.gather(
            *(self._read_entries(md.ledger_id, b, ids) for b, ids in calls)
        )
        retry: dict[int, int] = {}
        for (bookie_id, ids), answer in zip(calls, answers, strict=True):
            if isinstance(answer, Exception):
                good: set[int] = set()
                why = f"{bookie_id}: {answer}"
            else:
                good = keep_good_rows(md.ledger_id, bookie_id, answer[0], attempts, out, problems)
                why = f"{bookie_id}: not there or bad"
            for e in ids:
                if e not in good:
                    problems.setdefault(e, []).append(why)
                    retry[e] = attempts[e] + 1
        return retry

    async def delete_ledger(self, ledger_id: int) -> None:
        """Delete the ledger's metadata, then its entries on every bookie of
        its ensembles. In that order, an interrupted delete leaves entries
        nothing refers to (space), never metadata whose entries are gone
        (which a reader or AutoRecovery would take for lost data)."""
        try:
            md = await self.metadata(ledger_id)
        except BKError:
            return
        await self.metastore.delete(metadata_paths.ledger(ledger_id))
        key = master_key(md.password)
        bookies = sorted({b for _, bk in md.ensembles for b in bk})
        await self.resolve(bookies)
        for bookie_id in bookies:
            try:
                await self.connection(bookie_id).delete_ledger(ledger_id, key)
            except (BKError, grpc.aio.AioRpcError, KeyError) as exc:
                log.warning(
                    "ledger %d: could not delete its entries on %s: %s", ledger_id, bookie_id, exc
                )


def entry_id_before(lac: int, seg_first: int) -> int:
    """The last entry of a recovered ledger when nothing past the LAC exists."""
    return max(lac, seg_first - 1)


def _to_recovery(md: LedgerMetadata) -> bool:
    if md.state != OPEN:
        return False
    md.state = IN_RECOVERY
    return True
