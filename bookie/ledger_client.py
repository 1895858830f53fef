"""The ledger client library brokers use: create, write, recover, read, delete.

Ledger metadata lives at ``/ledgers/{id}`` in the metastore (JSON, changed
only by compare-and-set): quorums, state, and the ensembles as a list of
``(first entry id, bookie ids)`` segments.

Writes. A :class:`LedgerWriter` stripes entry ``e`` over the write set
``(e + i) % E, i < Qw`` of the current ensemble, many entries per bookie
request, and confirms entries in order once Qa bookies of their write set
stored them (:mod:`bookie.quorum`); the LAC travels with every entry. When a
bookie fails, the writer replaces it (ensemble change): a new segment starts
at the first unconfirmed entry, written to the metadata by compare-and-set,
and every unconfirmed entry of the failed bookie's write sets is sent to the
replacement. Only a fence (``LedgerFenced``), a wrong key or no replacement
fails the writer.

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
import collections
import functools
import hashlib
import itertools
import json
import logging
import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import grpc

from bookie.quorum import (
    FOUND,
    UNKNOWN,
    AckTracker,
    check_quorums,
    fence_covers_all_write_sets,
    fence_quorum,
    recovery_read_outcome,
    stripe,
    write_set,
)
from metastore.client import BadVersionError, MetastoreClient
from protos import bookie_pb2, bookie_pb2_grpc, common_pb2, serving
from protos.digest import RECORD_HEADER, encode_record, entry_digest, pack_record
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


# AddRequest.entries is field 9, length-delimited: tag (9 << 3) | 2.
_ENTRIES_TAG = bytes([(9 << 3) | 2])


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


class BookieConnection:
    """One channel to one bookie; adds of every ledger share its stream."""

    def __init__(self, address: str, timeout_s: float) -> None:
        self.address = address
        self.timeout_s = timeout_s
        self._channel = grpc.aio.insecure_channel(address, options=serving.grpc_options())
        self.stub = bookie_pb2_grpc.BookieStub(self._channel)
        # The add stream sends requests already serialised (send_records
        # builds them with one join), so no serializer.
        self._add_entries = self._channel.stream_stream(
            "/magnetar.Bookie/AddEntries",
            request_serializer=None,
            response_deserializer=bookie_pb2.AddResponse.FromString,
        )
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future] = {}
        self._outq: asyncio.Queue | None = None
        self._tasks: list[asyncio.Task] = []

    def send_add(self, req: bookie_pb2.AddRequest) -> asyncio.Future:
        """Send one add request (its request id is set here); the future
        gives the bookie's AddResponse."""
        req.request_id = next(self._ids)
        return self._send_serialized(req.request_id, req.SerializeToString())

    def send_records(
        self, ledger_id: int, key: bytes, records: list[bytes], recovery: bool = False
    ) -> asyncio.Future:
        """An add request of packed ``records`` (protos/digest.py), serialised
        by hand: the fields before ``entries``, then ``entries``' tag, length
        and the records, in one join, so each payload is copied once."""
        request_id = next(self._ids)
        head = bookie_pb2.AddRequest(
            request_id=request_id, ledger_id=ledger_id, master_key=key, recovery=recovery
        ).SerializeToString()
        size = sum(map(len, records))
        parts = [head, _ENTRIES_TAG, _varint(size)]
        parts += records
        return self._send_serialized(request_id, b"".join(parts))

    def _send_serialized(self, request_id: int, data: bytes) -> asyncio.Future:
        if self._outq is None:
            self._open_stream()
        assert self._outq is not None
        fut: asyncio.Future = asyncio.get_running_loop().create_future()
        self._pending[request_id] = fut
        self._outq.put_nowait(data)
        return fut

    def _open_stream(self) -> None:
        outq: asyncio.Queue = asyncio.Queue()
        self._outq = outq
        call = self._add_entries()

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

    async def read_entries(
        self, ledger_id: int, entry_ids: list[int]
    ) -> tuple[list[tuple[int, int, int, bytes]], list[int]]:
        """(entry id, lac, digest, payload) of the entries this bookie holds,
        and the ids it explicitly does not hold."""
        rows: list[tuple[int, int, int, bytes]] = []
        missing: list[int] = []
        call = self.stub.ReadEntries(
            bookie_pb2.ReadEntriesRequest(ledger_id=ledger_id, entry_ids=entry_ids),
            timeout=self.timeout_s,
        )
        while (resp := await call.read()) is not grpc.aio.EOF:
            _check(resp.error, f"read of ledger {ledger_id} on {self.address}")
            rows.extend(zip(resp.entry_ids, resp.lacs, resp.digests, resp.payloads, strict=True))
            missing.extend(resp.missing_entry_ids)
        return rows, missing

    async def entry_sizes(self, ledger_id: int, entry_ids: list[int]) -> dict[int, int]:
        """Payload sizes of the listed entries this bookie holds."""
        out: dict[int, int] = {}
        call = self.stub.ReadEntries(
            bookie_pb2.ReadEntriesRequest(
                ledger_id=ledger_id, entry_ids=entry_ids, sizes_only=True
            ),
            timeout=self.timeout_s,
        )
        while (resp := await call.read()) is not grpc.aio.EOF:
            _check(resp.error, f"sizes of ledger {ledger_id} on {self.address}")
            out.update(zip(resp.entry_ids, resp.sizes, strict=True))
        return out

    async def delete_ledger(self, ledger_id: int, key: bytes) -> bool:
        resp = await self.stub.DeleteLedger(
            bookie_pb2.DeleteLedgerRequest(ledger_id=ledger_id, master_key=key),
            timeout=self.timeout_s,
        )
        _check(resp.error, f"delete of ledger {ledger_id} on {self.address}")
        return bool(resp.existed)

    async def stats(self) -> bookie_pb2.StatsResponse:
        return await self.stub.Stats(bookie_pb2.StatsRequest(), timeout=self.timeout_s)

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await self._channel.close()


class LedgerFencedError(BKError):
    code = common_pb2.LEDGER_FENCED


class LedgerWriter:
    """Appends entries to one open ledger; the ledger's only writer."""

    def __init__(self, client: LedgerClient, metadata: LedgerMetadata) -> None:
        self.client = client
        self.metadata = metadata
        self.ledger_id = metadata.ledger_id
        self._key = master_key(metadata.password)
        self._ensemble = list(metadata.ensembles[-1][1])
        self._tracker = AckTracker(metadata.ack_quorum)
        self._next_entry_id = 0
        self.lac = -1
        self.length = 0
        # (last entry id, future) per add/add_many call, in entry order.
        self._waiters: collections.deque[tuple[int, asyncio.Future]] = collections.deque()
        # Records (protos/digest.py) of the unconfirmed entries, lac + 1 ..
        # _next_entry_id - 1 in order (entries are confirmed in order), kept
        # to resend them after an ensemble change.
        self._unconfirmed: list[bytes] = []
        # Records of the entries not sent yet: always the run of entry ids
        # that ends just before _next_entry_id.
        self._unsent: list[bytes] = []
        self._unsent_bytes = 0
        self._flush_scheduled = False
        self._failure: BaseException | None = None
        self._replacing: set[int] = set()
        # Per ensemble index: (bookie id, send time) of requests not answered yet,
        # in send order (a bookie answers one stream in order).
        self._outstanding: dict[int, collections.deque[tuple[str, float]]] = {}
        self._watchdog: asyncio.Task | None = None
        self._change_lock = asyncio.Lock()
        self._tasks: set[asyncio.Task] = set()
        self.ensemble_changes = 0
        self.closed = False

    @property
    def outstanding(self) -> int:
        """Entries added and not confirmed yet."""
        return len(self._unconfirmed)

    @property
    def ensemble(self) -> list[str]:
        return list(self._ensemble)

    def add(self, payload: bytes) -> asyncio.Future:
        """Append; the future gives the entry id once the entry is confirmed."""
        return self.add_many((payload,))

    def add_many(self, payloads: Iterable[bytes]) -> asyncio.Future:
        """Append entries in order; the future gives the last one's id once all
        are confirmed (one future for the lot: cheaper than one per entry)."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future = loop.create_future()
        if self._failure is not None or self.closed:
            fut.set_exception(
                self._failure
                if isinstance(self._failure, BKError)
                else BKError(f"ledger {self.ledger_id} is closed or failed: {self._failure}")
            )
            return fut
        if not isinstance(payloads, (list, tuple)):
            payloads = list(payloads)
        if not payloads:
            fut.set_result(self.lac)
            return fut
        first = self._next_entry_id
        # map() steps through the entries in C: this runs for every entry.
        records = list(
            map(
                pack_record,
                itertools.repeat(self.ledger_id),
                itertools.count(first),
                itertools.repeat(self.lac),
                payloads,
            )
        )
        self._unconfirmed += records
        self._unsent += records
        length = sum(map(len, payloads))
        self.length += length
        self._unsent_bytes += length + len(records) * RECORD_HEADER.size
        entry_id = self._next_entry_id = first + len(records)
        self._waiters.append((entry_id - 1, fut))
        self._schedule_flush()
        return fut

    def _schedule_flush(self) -> None:
        """Flush unsent entries on the next loop turn (once, however many
        adds and answers arrive in this one)."""
        if self._unsent and not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        """Send the unsent run, unless every bookie already has
        ``max_add_requests_in_flight`` requests unanswered: then the run
        grows until an answer arrives (``_on_response`` flushes again), so
        a busy writer sends fewer, larger requests and an idle one waits
        for nothing."""
        self._flush_scheduled = False
        unsent = self._unsent
        if not unsent or self._failure is not None:
            return
        settings = self.client.settings
        in_flight, max_bytes = settings.max_add_requests_in_flight, settings.max_add_request_bytes
        outstanding, replacing = self._outstanding, self._replacing
        size = self._unsent_bytes
        if size < max_bytes and all(
            len(outstanding.get(idx, ())) >= in_flight
            for idx in range(len(self._ensemble))
            if idx not in replacing
        ):
            return
        self._unsent, self._unsent_bytes = [], 0
        first = self._next_entry_id - len(unsent)
        if size <= max_bytes:
            self._send_run(first, unsent)
            return
        for lo, hi in _runs_under(unsent, max_bytes):
            self._send_run(first + lo, unsent[lo:hi])

    def _send_run(self, first: int, records: list[bytes]) -> None:
        """Add requests for the contiguous entries ``first``.. with ``records``:
        each bookie's share in entry order (bookie.quorum.stripe)."""
        md = self.metadata
        e_size, qw = md.ensemble_size, md.write_quorum
        end = first + len(records)
        for idx in range(e_size):
            if idx in self._replacing:
                continue  # its share is resent to the replacement
            ids: Iterable[int]
            share: list[bytes]
            if qw == e_size:
                ids, share = range(first, end), records
            else:
                # In entry order: a bookie stores a request whose ids ascend
                # as runs (bookie/entry_runs.py).
                share = stripe(records, first, e_size, qw, idx)
                ids = stripe(range(first, end), first, e_size, qw, idx)
            if share:
                self._request(idx, ids, share)

    def _request(self, idx: int, ids: Iterable[int], records: list[bytes]) -> None:
        bookie_id = self._ensemble[idx]
        try:
            fut = self.client.connection(bookie_id).send_records(self.ledger_id, self._key, records)
        except BKError as exc:
            self._bookie_failed(idx, bookie_id, exc)
            return
        self._outstanding.setdefault(idx, collections.deque()).append((bookie_id, time.monotonic()))
        fut.add_done_callback(functools.partial(self._on_response, idx, bookie_id, ids))
        if self._watchdog is None:
            self._watchdog = asyncio.get_running_loop().create_task(self._watch_timeouts())

    def _resend(self, idx: int) -> None:
        """Every unconfirmed entry whose write set holds ``idx``, to that
        index's (new) bookie; the unsent run goes with the next flush."""
        md = self.metadata
        unsent_from = self._next_entry_id - len(self._unsent)
        ids: list[int] = []
        records: list[bytes] = []
        for entry_id, record in enumerate(self._unconfirmed, self.lac + 1):
            if entry_id >= unsent_from:
                break
            if idx in write_set(entry_id, md.ensemble_size, md.write_quorum):
                ids.append(entry_id)
                records.append(record)
        if records:
            for lo, hi in _runs_under(records, self.client.settings.max_add_request_bytes):
                self._request(idx, ids[lo:hi], records[lo:hi])

    def _on_response(
        self, idx: int, bookie_id: str, entry_ids: Iterable[int], fut: asyncio.Future
    ) -> None:
        sent = self._outstanding.get(idx)
        if sent and sent[0][0] == bookie_id:
            sent.popleft()
        if self._failure is not None:
            return
        self._schedule_flush()
        exc = fut.exception()
        if exc is None and fut.result().error.code != common_pb2.OK:
            err = fut.result().error
            cls = LedgerFencedError if err.code == common_pb2.LEDGER_FENCED else BKError
            exc = cls(
                f"bookie {bookie_id} refused ledger {self.ledger_id} adds: {err.message}", err.code
            )
        if exc is not None:
            code = getattr(exc, "code", None)
            if code in (common_pb2.LEDGER_FENCED, common_pb2.UNAUTHORIZED):
                self._fail(exc)
            else:
                self._bookie_failed(idx, bookie_id, exc)
            return
        if self._ensemble[idx] != bookie_id:
            return  # a late answer of a replaced bookie: its copies do not count
        confirmed = self._tracker.ack_many(entry_ids, idx)
        if not confirmed:
            return
        self.lac = lac = confirmed[-1]
        del self._unconfirmed[: len(confirmed)]
        assert len(self._unconfirmed) == self._next_entry_id - lac - 1
        waiters = self._waiters
        while waiters and waiters[0][0] <= lac:
            last, waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(last)

    async def _watch_timeouts(self) -> None:
        """A bookie that leaves an add unanswered for ``timeout_s`` is failed
        (it may hang without closing its stream)."""
        limit = self.client.settings.timeout_s
        while not self.closed and self._failure is None:
            await asyncio.sleep(max(0.05, limit / 4))
            now = time.monotonic()
            for idx, sent in list(self._outstanding.items()):
                if sent and now - sent[0][1] > limit and sent[0][0] == self._ensemble[idx]:
                    bookie_id = sent[0][0]
                    sent.clear()
                    self._bookie_failed(
                        idx, bookie_id, TimeoutError(f"no answer to an add within {limit:g} s")
                    )

    # ------------------------------------------------------------ ensemble change

    def _bookie_failed(self, idx: int, bookie_id: str, exc: BaseException) -> None:
        if self._ensemble[idx] != bookie_id or idx in self._replacing or self.closed:
            return
        log.warning(
            "ledger %d: bookie %s (index %d) failed: %s; changing the ensemble",
            self.ledger_id,
            bookie_id,
            idx,
            exc,
        )
        self._replacing.add(idx)
        task = asyncio.get_running_loop().create_task(self._replace(idx, bookie_id))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _replace(self, idx: int, failed: str) -> None:
        try:
            async with self._change_lock:
                await self._change_ensemble(idx, failed)
        except Exception as exc:
            log.warning("ledger %d: ensemble change failed: %s", self.ledger_id, exc)
            self._fail(exc if isinstance(exc, BKError) else BKError(str(exc)))
        finally:
            self._replacing.discard(idx)
        if self._failure is None:
            # Everything unconfirmed that the failed bookie should hold goes to its replacement.
            self._resend(idx)
            self._schedule_flush()

    async def _change_ensemble(self, idx: int, failed: str) -> None:
        candidates = [b for b in await self.client.writable_bookies() if b not in self._ensemble]
        if not candidates:
            raise NotEnoughBookiesError(
                f"ledger {self.ledger_id}: bookie {failed} failed and no other writable "
                f"bookie can replace it"
            )
        replacement = self.client.settings.rng.choice(candidates)
        first = self._tracker.next_to_confirm
        ensemble = list(self._ensemble)
        ensemble[idx] = replacement

        def change(md: LedgerMetadata) -> bool:
            if md.state != OPEN:
                raise LedgerFencedError(
                    f"ledger {self.ledger_id} is {md.state}: another owner recovers it",
                    common_pb2.LEDGER_FENCED,
                )
            segments = [(f, b) for f, b in md.ensembles if f < first]
            md.ensembles = [*segments, (first, ensemble)]
            return True

        self.metadata = await self.client._update_metadata(self.ledger_id, change)
        self._tracker.forget(idx, first)
        self._ensemble = ensemble
        self.ensemble_changes += 1
        log.info(
            "ledger %d: bookie %s replaced by %s from entry %d",
            self.ledger_id,
            failed,
            replacement,
            first,
        )

    def _fail(self, exc: BaseException) -> None:
        if self._failure is not None:
            return
        self._failure = exc
        if self._watchdog is not None:
            self._watchdog.cancel()
        waiters, self._waiters = self._waiters, collections.deque()
        for _, fut in waiters:
            if not fut.done():
                fut.set_exception(exc)

    async def close(self) -> None:
        """Wait for outstanding adds, then mark the ledger closed at its LAC."""
        if self._waiters:
            await asyncio.gather(*(f for _, f in self._waiters), return_exceptions=True)
        self.closed = True
        for task in list(self._tasks):
            task.cancel()
        if self._watchdog is not None:
            self._watchdog.cancel()
        await self.client.close_metadata(self.ledger_id, self.lac, self.length)


@dataclass
class LedgerClientSettings:
    timeout_s: float = 30.0
    max_connections: int = 1000
    # A writer holds new entries back while every bookie of its ensemble has
    # this many add requests unanswered (they then go as one larger request).
    max_add_requests_in_flight: int = 2
    # Adds are cut into requests of at most this many record bytes (a bigger
    # single entry goes alone); gRPC messages are bounded at 16 MiB.
    max_add_request_bytes: int = 4 << 20
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
        """Fence the ledger, recover its tail, and close it (see the module doc)."""
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

        closed = await self._update_metadata(ledger_id, to_closed)
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
            candidates = [b for b in await self.writable_bookies() if b not in bookies]
            if len(candidates) >= len(failed):
                ensemble = list(bookies)
                for idx in sorted(failed):
                    ensemble[idx] = candidates.pop(self.settings.rng.randrange(len(candidates)))
                first = entries[0][0]

                def change(m: LedgerMetadata) -> bool:
                    if m.state != IN_RECOVERY:
                        raise BKError(f"ledger {m.ledger_id} is {m.state}; recovery lost it")
                    m.ensembles = [
                        *((f, b) for f, b in m.ensembles if f < first),
                        (first, ensemble),
                    ]
                    return True

                md = await self._update_metadata(md.ledger_id, change)
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


def _runs_under(records: list[bytes], limit: int) -> list[tuple[int, int]]:
    """[lo, hi) index runs of ``records`` of at most ``limit`` bytes each (a
    record larger than ``limit`` is a run of its own)."""
    runs = []
    lo, size = 0, 0
    for i, record in enumerate(records):
        if size and size + len(record) > limit:
            runs.append((lo, i))
            lo, size = i, 0
        size += len(record)
    runs.append((lo, len(records)))
    return runs


def entry_id_before(lac: int, seg_first: int) -> int:
    """The last entry of a recovered ledger when nothing past the LAC exists."""
    return max(lac, seg_first - 1)
