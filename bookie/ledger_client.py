"""The ledger client library brokers use: create, write, recover, read.

Ledger metadata lives at ``/ledgers/{id}`` in the metastore (JSON, changed
only by compare-and-set). A :class:`LedgerWriter` stripes each entry over its
write set, many entries per bookie request, and confirms entries in order
once Qa bookies of the write set stored them (:mod:`bookie.quorum`).

Scope today: the single-copy case E=Qw=Qa=1 of standalone is complete.
Recovery fences every bookie of the last ensemble and closes the ledger at
the highest entry any of them stores, which is exact when every write set is
one bookie. Ensemble changes, quorum-coverage recovery and read failover
over striped ensembles belong to the bookie replication issue.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import itertools
import json
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import grpc

from bookie.quorum import AckTracker, check_quorums, write_set
from metastore.client import BadVersionError, MetastoreClient
from protos import bookie_pb2, bookie_pb2_grpc, common_pb2, serving
from protos.digest import entry_digest
from protos.errors import MagnetarServerError

log = logging.getLogger(__name__)

OPEN, IN_RECOVERY, CLOSED = "OPEN", "IN_RECOVERY", "CLOSED"
LEDGER_ID_COUNTER = "/ledgers/id-counter"


class BKError(MagnetarServerError):
    code = common_pb2.PERSISTENCE_ERROR


class NotEnoughBookiesError(BKError):
    code = common_pb2.SERVICE_NOT_READY


def master_key(password: bytes) -> bytes:
    return hashlib.sha1(b"ledger" + password).digest()


@dataclass
class LedgerMetadata:
    ledger_id: int
    ensemble_size: int
    write_quorum: int
    ack_quorum: int
    ensembles: list[tuple[int, list[str]]]
    state: str = OPEN
    last_entry_id: int = -1
    length: int = 0
    password: bytes = b""
    ctime_ms: int = 0
    version: int = -1  # metastore version; not stored

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "ensemble_size": self.ensemble_size,
                "write_quorum": self.write_quorum,
                "ack_quorum": self.ack_quorum,
                "ensembles": [[first, list(bk)] for first, bk in self.ensembles],
                "state": self.state,
                "last_entry_id": self.last_entry_id,
                "length": self.length,
                "password": self.password.hex(),
                "ctime_ms": self.ctime_ms,
            }
        ).encode()

    @classmethod
    def from_json(cls, ledger_id: int, data: bytes, version: int) -> LedgerMetadata:
        d = json.loads(data)
        return cls(
            ledger_id=ledger_id,
            ensemble_size=d["ensemble_size"],
            write_quorum=d["write_quorum"],
            ack_quorum=d["ack_quorum"],
            ensembles=[(int(first), list(bk)) for first, bk in d["ensembles"]],
            state=d["state"],
            last_entry_id=d["last_entry_id"],
            length=d.get("length", 0),
            password=bytes.fromhex(d.get("password", "")),
            ctime_ms=d.get("ctime_ms", 0),
            version=version,
        )

    def ensemble_for(self, entry_id: int) -> list[str]:
        chosen = self.ensembles[0][1]
        for first, bookies in self.ensembles:
            if first <= entry_id:
                chosen = bookies
        return chosen


def _check(err: common_pb2.Error, what: str) -> None:
    if err.code != common_pb2.OK:
        raise BKError(f"{what}: {err.message}", err.code)


class BookieConnection:
    """One channel to one bookie; adds of every ledger share its stream."""

    def __init__(self, address: str, timeout_s: float) -> None:
        self.address = address
        self.timeout_s = timeout_s
        self._channel = grpc.aio.insecure_channel(address, options=serving.grpc_options())
        self.stub = bookie_pb2_grpc.BookieStub(self._channel)
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future] = {}
        self._outq: asyncio.Queue | None = None
        self._tasks: list[asyncio.Task] = []

    def send_add(self, req: bookie_pb2.AddRequest) -> asyncio.Future:
        if self._outq is None:
            self._open_stream()
        assert self._outq is not None
        req.request_id = next(self._ids)
        fut: asyncio.Future = asyncio.get_running_loop().create_future()
        self._pending[req.request_id] = fut
        self._outq.put_nowait(req)
        return fut

    def _open_stream(self) -> None:
        outq: asyncio.Queue = asyncio.Queue()
        self._outq = outq
        call = self.stub.AddEntries()

        async def writer() -> None:
            while True:
                req = await outq.get()
                await call.write(req)

        async def reader() -> None:
            try:
                while (resp := await call.read()) is not grpc.aio.EOF:
                    fut = self._pending.pop(resp.request_id, None)
                    if fut is not None and not fut.done():
                        fut.set_result(resp)
                raise BKError(f"bookie {self.address} closed the add stream")
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._broken(exc)

        self._tasks = [asyncio.create_task(writer()), asyncio.create_task(reader())]

    def _broken(self, exc: BaseException) -> None:
        log.warning("add stream to bookie %s failed: %s", self.address, exc)
        for task in self._tasks:
            if task is not asyncio.current_task():
                task.cancel()
        self._outq = None
        pending, self._pending = self._pending, {}
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(
                    BKError(
                        f"bookie {self.address} unreachable: {exc}", common_pb2.SERVICE_NOT_READY
                    )
                )

    async def read_lac(self, ledger_id: int, fence: bool, key: bytes) -> bookie_pb2.ReadLacResponse:
        resp = await self.stub.ReadLac(
            bookie_pb2.ReadLacRequest(ledger_id=ledger_id, fence=fence, master_key=key),
            timeout=self.timeout_s,
        )
        _check(resp.error, f"read-lac of ledger {ledger_id} on {self.address}")
        return resp

    async def read_range(
        self, ledger_id: int, first: int, last: int
    ) -> list[tuple[int, int, int, bytes]]:
        out: list[tuple[int, int, int, bytes]] = []
        call = self.stub.ReadRange(
            bookie_pb2.ReadRangeRequest(
                ledger_id=ledger_id, first_entry_id=first, last_entry_id=last
            ),
            timeout=self.timeout_s,
        )
        while (resp := await call.read()) is not grpc.aio.EOF:
            _check(resp.error, f"read of ledger {ledger_id} on {self.address}")
            out.extend(zip(resp.entry_ids, resp.lacs, resp.digests, resp.payloads, strict=True))
        return out

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await self._channel.close()


class LedgerWriter:
    """Appends entries to one open ledger; the ledger's only writer."""

    def __init__(self, client: LedgerClient, metadata: LedgerMetadata) -> None:
        self.client = client
        self.metadata = metadata
        self.ledger_id = metadata.ledger_id
        self._key = master_key(metadata.password)
        self._bookies = [client.connection(b) for b in metadata.ensembles[-1][1]]
        self._tracker = AckTracker(metadata.ack_quorum)
        self._next_entry_id = 0
        self.lac = -1
        self.length = 0
        self._pending: dict[int, asyncio.Future] = {}
        self._unsent: list[tuple[int, int, int, bytes]] = []
        self._flush_scheduled = False
        self._failure: BaseException | None = None
        self.closed = False

    @property
    def outstanding(self) -> int:
        return len(self._pending)

    def add(self, payload: bytes) -> asyncio.Future:
        """Append; the future gives the entry id once the entry is confirmed."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future = loop.create_future()
        if self._failure is not None or self.closed:
            fut.set_exception(
                BKError(f"ledger {self.ledger_id} is closed or failed: {self._failure}")
            )
            return fut
        entry_id = self._next_entry_id
        self._next_entry_id += 1
        digest = entry_digest(self.ledger_id, entry_id, self.lac, payload)
        self._unsent.append((entry_id, self.lac, digest, payload))
        self._pending[entry_id] = fut
        self.length += len(payload)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            loop.call_soon(self._flush)
        return fut

    def _flush(self) -> None:
        self._flush_scheduled = False
        unsent, self._unsent = self._unsent, []
        if not unsent:
            return
        md = self.metadata
        per_bookie: dict[int, bookie_pb2.AddRequest] = {}
        for entry_id, lac, digest, payload in unsent:
            for idx in write_set(entry_id, md.ensemble_size, md.write_quorum):
                req = per_bookie.get(idx)
                if req is None:
                    req = per_bookie[idx] = bookie_pb2.AddRequest(
                        ledger_id=self.ledger_id, master_key=self._key
                    )
                req.entry_ids.append(entry_id)
                req.lacs.append(lac)
                req.digests.append(digest)
                req.payloads.append(payload)
        for idx, req in per_bookie.items():
            ids = list(req.entry_ids)
            fut = self._bookies[idx].send_add(req)
            fut.add_done_callback(functools.partial(self._on_response, idx, ids))

    def _on_response(self, idx: int, entry_ids: list[int], fut: asyncio.Future) -> None:
        if self._failure is not None:
            return
        exc = fut.exception()
        if exc is None and fut.result().error.code != common_pb2.OK:
            err = fut.result().error
            exc = BKError(f"bookie refused ledger {self.ledger_id} adds: {err.message}", err.code)
        if exc is not None:
            self._fail(exc)
            return
        for eid in entry_ids:
            for confirmed in self._tracker.ack(eid, idx):
                self.lac = confirmed
                waiter = self._pending.pop(confirmed, None)
                if waiter is not None and not waiter.done():
                    waiter.set_result(confirmed)

    def _fail(self, exc: BaseException) -> None:
        self._failure = exc
        pending, self._pending = self._pending, {}
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(exc)

    async def close(self) -> None:
        """Wait for outstanding adds, then mark the ledger closed at its LAC."""
        if self._pending:
            await asyncio.gather(*self._pending.values(), return_exceptions=True)
        self.closed = True
        await self.client.close_metadata(self.ledger_id, self.lac, self.length)


@dataclass
class LedgerClientSettings:
    timeout_s: float = 30.0
    max_connections: int = 1000
    rng: random.Random = field(default_factory=random.Random)


class LedgerClient:
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
        for bookie_id in bookie_ids:
            if bookie_id in self._addresses:
                continue
            stat = await self.metastore.get(f"/bookies/available/{bookie_id}")
            if stat is None:
                raise BKError(f"bookie {bookie_id} is not registered", common_pb2.SERVICE_NOT_READY)
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

    async def create_ledger(
        self, ensemble_size: int, write_quorum: int, ack_quorum: int, password: bytes = b""
    ) -> LedgerWriter:
        check_quorums(ensemble_size, write_quorum, ack_quorum)
        candidates = await self.writable_bookies()
        if len(candidates) < ensemble_size:
            raise NotEnoughBookiesError(
                f"a ledger with ensemble size {ensemble_size} needs {ensemble_size} writable "
                f"bookies; {len(candidates)} are available"
            )
        ensemble = self.settings.rng.sample(candidates, ensemble_size)
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

    async def _update_metadata(
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

        await self._update_metadata(ledger_id, change)

    async def open_with_recovery(self, ledger_id: int) -> LedgerMetadata:
        """Fence the ledger and close it at its last stored entry."""
        md = await self.metadata(ledger_id)
        if md.state == CLOSED:
            return md

        def to_recovery(m: LedgerMetadata) -> bool:
            if m.state != OPEN:
                return False
            m.state = IN_RECOVERY
            return True

        md = await self._update_metadata(ledger_id, to_recovery)
        if md.state == CLOSED:
            return md
        bookies = md.ensembles[-1][1]
        await self._resolve(bookies)
        key = master_key(md.password)
        answers = await asyncio.gather(
            *(self.connection(b).read_lac(ledger_id, True, key) for b in bookies)
        )
        last = max(a.last_entry_id for a in answers)
        length = 0
        if last >= 0:
            length = sum(len(p) for _, p in await self.read(md, 0, last))

        def to_closed(m: LedgerMetadata) -> bool:
            if m.state == CLOSED:
                return False
            m.state, m.last_entry_id, m.length = CLOSED, last, length
            return True

        return await self._update_metadata(ledger_id, to_closed)

    async def read(self, md: LedgerMetadata, first: int, last: int) -> list[tuple[int, bytes]]:
        """Entries [first, last] with their digests checked."""
        if first > last:
            return []
        bookies = md.ensemble_for(first)
        await self._resolve(bookies)
        if md.ensemble_size != md.write_quorum:
            raise BKError(
                f"ledger {md.ledger_id}: reading striped ensembles is not supported yet",
                common_pb2.NOT_ALLOWED,
            )
        errors = []
        for bookie_id in bookies:
            try:
                rows = await self.connection(bookie_id).read_range(md.ledger_id, first, last)
            except (BKError, grpc.aio.AioRpcError) as exc:
                errors.append(f"{bookie_id}: {exc}")
                continue
            out = []
            for eid, lac, digest, payload in rows:
                if entry_digest(md.ledger_id, eid, lac, payload) != digest:
                    raise BKError(
                        f"ledger {md.ledger_id} entry {eid} from {bookie_id} fails its digest",
                        common_pb2.DIGEST_MISMATCH,
                    )
                out.append((eid, payload))
            return out
        raise BKError(f"cannot read ledger {md.ledger_id} [{first}, {last}]: {'; '.join(errors)}")

    async def delete_ledger(self, ledger_id: int) -> None:
        await self.metastore.delete(f"/ledgers/{ledger_id}")
