"""The bookie process: stores ledger entries for brokers (DESIGN §4).

Adds arrive on a stream, many entries per request. Each request is checked
whole (digests, master key, fence) before anything of it is queued, so a bad
request changes nothing; accepted requests go to the group committer and
are answered, in order, once their group is synced.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
from grpc_health.v1 import health as grpc_health

from bookie.add_stream import answers_in_order, one_each
from bookie.auto_recovery import AutoRecovery
from bookie.entry_runs import check_records
from bookie.group_commit import GroupCommitter
from bookie.metrics import BookieMetrics
from bookie.read_responses import entries_responses, range_responses
from bookie.registration import (
    check_cookie,
    load_cookie,
    register_forever,
    wait_registered,
    watch_disk,
)
from bookie.settings import BookieSettings
from bookie.storage import EntryStore, LedgerState, StoreTuning, Write
from metastore.client import MetastoreClient
from protos import bookie_pb2, bookie_pb2_grpc, common_pb2, serving
from protos.add_request import AddRequestView, decode_add_batch, decode_add_request
from protos.data_dir_lock import DataDirLock
from protos.digest import RecordError, entry_digest
from protos.errors import error
from protos.http_endpoint import HttpEndpoint
from protos.security_settings import (
    add_cluster_servicer,
    client_token,
    internal_tls,
    server_tls,
)
from protos.serving import Listeners

log = logging.getLogger("bookie")


class _RequestError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class BookieService(bookie_pb2_grpc.BookieServicer):
    def __init__(self, store: EntryStore, settings: BookieSettings) -> None:
        self.store = store
        self.settings = settings
        self.loop = asyncio.get_running_loop()
        self.metrics = BookieMetrics(store)
        self.committer = GroupCommitter(
            store,
            max_entries=settings.group_commit_max_entries,
            max_bytes=settings.group_commit_max_bytes,
            max_wait_ms=settings.group_commit_max_wait_ms,
            on_group_done=self._group_done,
            observe=self._group_written,
        )
        self.readers = ThreadPoolExecutor(max_workers=2, thread_name_prefix="bookie-read")
        self.bookie_id = ""
        self.read_only = False
        self.write_failed = False

    def _group_done(
        self, callbacks: list[Callable[[BaseException | None], None]], exc: BaseException | None
    ) -> None:
        def run() -> None:
            for cb in callbacks:
                cb(exc)

        self.loop.call_soon_threadsafe(run)

    def _group_written(self, entries: int, size: int, seconds: float, ok: bool) -> None:
        sync_s = self.store.journal.last_sync_s if ok and self.settings.journal_sync else None
        self.write_failed = self.write_failed or not ok
        self.metrics.group_written(entries, size, sync_s)

    def render_metrics(self) -> bytes:
        """``/metrics`` (called in a thread)."""
        self.metrics.queued_entries = self.committer.queued_entries
        self.metrics.read_only = self.read_only
        return self.metrics.render()

    def stop(self) -> None:
        self.committer.stop()
        self.readers.shutdown(wait=True)

    # ---------------------------------------------------------------- adds

    def _prepare_add(self, req: AddRequestView) -> tuple[Write, LedgerState]:
        """The request's write (checked records, and the ledger's state if
        that changes) and the ledger state; :class:`_RequestError` (and
        nothing changed) if any of it is refused."""
        if not req.entries:
            raise _RequestError(
                common_pb2.INVALID_ARGUMENT, f"add request {req.request_id} carries no entries"
            )
        if req.ledger_id < 0:
            raise _RequestError(common_pb2.INVALID_ARGUMENT, f"ledger id {req.ledger_id} < 0")
        state = self.store.ledger_state(req.ledger_id)
        if state.master_key is not None and state.master_key != req.master_key:
            raise _RequestError(
                common_pb2.UNAUTHORIZED,
                f"wrong master key for ledger {req.ledger_id}",
            )
        if state.fenced and not req.recovery:
            raise _RequestError(
                common_pb2.LEDGER_FENCED,
                f"ledger {req.ledger_id} is fenced; only recovery adds are accepted",
            )
        if self.read_only and not req.recovery:
            raise _RequestError(
                common_pb2.BOOKIE_READ_ONLY,
                f"bookie {self.bookie_id} is read-only (disk usage over "
                f"{self.settings.read_only_disk_usage_percent}%)",
            )
        try:
            records = check_records(req.ledger_id, req.entries, self.settings.entry_run_max_bytes)
        except RecordError as exc:
            code = common_pb2.DIGEST_MISMATCH if exc.digest else common_pb2.INVALID_ARGUMENT
            raise _RequestError(code, f"add request {req.request_id}: {exc}") from None
        if state.master_key is None:  # the first add of a ledger sets its key
            state.master_key = bytes(req.master_key)
            return Write(records, (req.ledger_id, state.encode())), state
        return Write(records), state

    def _add(self, req: AddRequestView) -> asyncio.Future:
        fut: asyncio.Future = self.loop.create_future()
        received = time.perf_counter()
        try:
            write, state = self._prepare_add(req)  # checks every record's digest
        except _RequestError as exc:
            latency_ms = (time.perf_counter() - received) * 1000
            self.metrics.add_request.record(False, latency_ms, max(1, len(req.entries)))
            fut.set_result(
                bookie_pb2.AddResponse(
                    request_id=req.request_id,
                    ledger_id=req.ledger_id,
                    error=error(exc.code, str(exc)),
                )
            )
            return fut
        started = time.perf_counter()
        assert write.records is not None
        size, n, max_lac = len(write.records.data), write.records.entries, write.records.max_lac

        def done(exc: BaseException | None) -> None:
            now = time.perf_counter()
            latency_ms = (now - started) * 1000  # accepted (checked) to durable
            m = self.metrics
            m.add_request.record(exc is None, (now - received) * 1000, n)
            m.add_entry.record(exc is None, latency_ms, n)
            if exc is None:
                state.lac = max(state.lac, max_lac)
                m.journal_add_entry.record(latency_ms, n)
                m.write_bytes += size
                resp = bookie_pb2.AddResponse(request_id=req.request_id, ledger_id=req.ledger_id)
            else:
                resp = bookie_pb2.AddResponse(
                    request_id=req.request_id,
                    ledger_id=req.ledger_id,
                    error=error(common_pb2.PERSISTENCE_ERROR, f"write failed: {exc}"),
                )
            if not fut.done():
                fut.set_result(resp)

        self.committer.submit(write, n, size, done)
        return fut

    async def AddEntries(
        self, request_iterator: AsyncIterator[AddRequestView], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[bookie_pb2.AddResponse]:
        """One answer per message (``AddBatches`` is what writers use)."""
        limit = self.settings.max_pending_adds_per_stream
        async for answers in answers_in_order(self._add, one_each(request_iterator), limit):
            for answer in answers:
                yield answer

    async def AddBatches(
        self,
        request_iterator: AsyncIterator[list[AddRequestView]],
        context: grpc.aio.ServicerContext,
    ) -> AsyncIterator[bookie_pb2.AddResponses]:
        """Several requests per message; the answers already known together
        in one (bookie/add_stream.py)."""
        limit = self.settings.max_pending_adds_per_stream
        async for answers in answers_in_order(self._add, request_iterator, limit):
            yield bookie_pb2.AddResponses(responses=answers)

    # ---------------------------------------------------------------- reads

    def _count_read(
        self, started: float, read_at: float, entries: int, size: int, ok: bool = True
    ) -> None:
        """A read of ``entries`` entries (``size`` bytes) that began at
        ``started``, whose storage read ended at ``read_at`` and whose answer
        is ready now."""
        if entries == 0 and ok:
            return
        n = max(entries, 1)
        self.metrics.read_request.record(ok, (time.perf_counter() - started) * 1000, n)
        self.metrics.read_entry.record(ok, (read_at - started) * 1000, n)
        self.metrics.read_bytes += size

    async def ReadEntry(
        self, request: bookie_pb2.ReadEntryRequest, context: grpc.aio.ServicerContext
    ) -> bookie_pb2.ReadEntryResponse:
        started = time.perf_counter()
        got = await self.loop.run_in_executor(
            self.readers, self.store.get, request.ledger_id, request.entry_id
        )
        read_at = time.perf_counter()
        if got is None:
            self._count_read(started, read_at, 1, 0, ok=False)
            return bookie_pb2.ReadEntryResponse(
                error=error(
                    common_pb2.NO_SUCH_ENTRY,
                    f"no entry {request.entry_id} of ledger {request.ledger_id} on this bookie",
                )
            )
        digest, lac, payload = got
        if entry_digest(request.ledger_id, request.entry_id, lac, payload) != digest:
            self._count_read(started, read_at, 1, 0, ok=False)
            return bookie_pb2.ReadEntryResponse(
                error=error(
                    common_pb2.DIGEST_MISMATCH,
                    f"stored entry {request.entry_id} of ledger {request.ledger_id} is corrupt",
                )
            )
        self._count_read(started, read_at, 1, len(payload))
        return bookie_pb2.ReadEntryResponse(
            entry_id=request.entry_id, lac=lac, digest=digest, payload=payload
        )

    async def ReadRange(
        self, request: bookie_pb2.ReadRangeRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[bookie_pb2.ReadRangeResponse]:
        if request.first_entry_id < 0 or request.last_entry_id < request.first_entry_id:
            yield bookie_pb2.ReadRangeResponse(
                error=error(
                    common_pb2.INVALID_ARGUMENT,
                    f"bad range [{request.first_entry_id}, {request.last_entry_id}]",
                )
            )
            return
        per_msg = min(
            request.max_entries_per_response or self.settings.max_entries_per_read_response,
            self.settings.max_entries_per_read_response,
        )
        first = request.first_entry_id
        while first <= request.last_entry_id:
            started = time.perf_counter()
            rows = await self.loop.run_in_executor(
                self.readers,
                self.store.scan,
                request.ledger_id,
                first,
                request.last_entry_id,
                per_msg,
            )
            read_at = time.perf_counter()
            if not rows or rows[0][0] != first:
                yield bookie_pb2.ReadRangeResponse(
                    error=error(
                        common_pb2.NO_SUCH_ENTRY,
                        f"no entry {first} of ledger {request.ledger_id} on this bookie",
                    )
                )
                return
            responses, ended_at, corrupt = range_responses(
                request.ledger_id, first, rows, self.settings.max_bytes_per_read_response
            )
            good = rows[: ended_at - first]
            self._count_read(started, read_at, len(good), sum(len(row[3]) for row in good))
            if corrupt:
                self._count_read(started, read_at, 1, 0, ok=False)
            for resp in responses:
                yield resp
            if corrupt:
                return
            first = ended_at

    async def _write_state(self, ledger_id: int, state: LedgerState) -> BaseException | None:
        """Persist a ledger's state (fence flag, master key) in the group
        committer's order, after every add queued before it; its error."""
        fut: asyncio.Future = self.loop.create_future()

        def done(exc: BaseException | None) -> None:
            if not fut.done():
                fut.set_result(exc)

        self.committer.submit(Write(state=(ledger_id, state.encode())), 0, 0, done)
        return await fut  # type: ignore[no-any-return]

    async def ReadLac(
        self, request: bookie_pb2.ReadLacRequest, context: grpc.aio.ServicerContext
    ) -> bookie_pb2.ReadLacResponse:
        state = self.store.ledger_state(request.ledger_id)
        if request.fence:
            if state.master_key is not None and state.master_key != request.master_key:
                return bookie_pb2.ReadLacResponse(
                    error=error(
                        common_pb2.UNAUTHORIZED, f"wrong master key for ledger {request.ledger_id}"
                    )
                )
            if not state.fenced:
                state.fenced = True
                if state.master_key is None:
                    state.master_key = bytes(request.master_key)
                exc = await self._write_state(request.ledger_id, state)
                if exc is not None:
                    state.fenced = False
                    return bookie_pb2.ReadLacResponse(
                        error=error(common_pb2.PERSISTENCE_ERROR, f"fence failed: {exc}")
                    )
        last = await self.loop.run_in_executor(
            self.readers, self.store.last_entry, request.ledger_id
        )
        return bookie_pb2.ReadLacResponse(lac=state.lac, last_entry_id=last, fenced=state.fenced)

    async def ReadEntries(
        self, request: bookie_pb2.ReadEntriesRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[bookie_pb2.ReadRangeResponse]:
        ids = list(request.entry_ids)
        if len(ids) > self.settings.max_entries_per_read_request or any(e < 0 for e in ids):
            yield bookie_pb2.ReadRangeResponse(
                error=error(
                    common_pb2.INVALID_ARGUMENT,
                    f"{len(ids)} entry ids (max_entries_per_read_request = "
                    f"{self.settings.max_entries_per_read_request}), none may be < 0",
                )
            )
            return
        per_msg = self.settings.max_entries_per_read_response
        for start in range(0, len(ids), per_msg):
            started = time.perf_counter()
            rows = await self.loop.run_in_executor(
                self.readers, self.store.get_many, request.ledger_id, ids[start : start + per_msg]
            )
            read_at = time.perf_counter()
            responses = entries_responses(
                rows, request.sizes_only, self.settings.max_bytes_per_read_response
            )
            found = [got[2] for _, got in rows if got is not None]
            size = 0 if request.sizes_only else sum(map(len, found))
            self._count_read(started, read_at, len(found), size)
            for resp in responses:
                yield resp

    async def DeleteLedger(
        self, request: bookie_pb2.DeleteLedgerRequest, context: grpc.aio.ServicerContext
    ) -> bookie_pb2.DeleteLedgerResponse:
        state = self.store.ledger_state(request.ledger_id)
        if state.master_key is not None and state.master_key != request.master_key:
            return bookie_pb2.DeleteLedgerResponse(
                error=error(
                    common_pb2.UNAUTHORIZED, f"wrong master key for ledger {request.ledger_id}"
                )
            )
        existed = await self.loop.run_in_executor(
            self.readers, self.store.delete_ledger, request.ledger_id
        )
        # The ledger stays fenced here (a state record, no entries): a writer
        # that was cut off while its ledger was recovered, closed and deleted
        # must get LedgerFenced for its late adds, not a fresh ledger to fill.
        tomb = self.store.ledger_state(request.ledger_id)
        tomb.fenced, tomb.master_key = True, bytes(request.master_key)
        await self._write_state(request.ledger_id, tomb)
        log.info("deleted ledger %d (existed: %s)", request.ledger_id, existed)
        return bookie_pb2.DeleteLedgerResponse(existed=existed)

    async def Stats(
        self, request: bookie_pb2.StatsRequest, context: grpc.aio.ServicerContext
    ) -> bookie_pb2.StatsResponse:
        entries, size = self.store.size_estimate()
        usage = shutil.disk_usage(self.store.path)
        ledgers = await self.loop.run_in_executor(self.readers, self.store.ledger_count, 10_000_000)
        return bookie_pb2.StatsResponse(
            bookie_id=self.bookie_id,
            ledgers=ledgers,
            entries=entries,
            bytes=size,
            disk_used_bytes=usage.used,
            disk_free_bytes=usage.free,
            read_only=self.read_only,
        )

    def check_disk(self) -> bool:
        """Update read-only mode from disk usage and failed writes; True when
        it changed. A bookie whose disk failed a write (a read-only or broken
        file system) stays read-only until it is restarted."""
        usage = shutil.disk_usage(self.store.path)
        percent = 100.0 * usage.used / usage.total if usage.total else 0.0
        read_only = percent >= self.settings.read_only_disk_usage_percent or self.write_failed
        if read_only == self.read_only:
            return False
        self.read_only = read_only
        why = "; a write to its disk failed" if self.write_failed else ""
        log.warning("bookie %s is now %s (disk usage %.1f%%, threshold %s%%%s)", self.bookie_id,
                    "read-only" if read_only else "writable", percent,
                    self.settings.read_only_disk_usage_percent, why)  # fmt: skip
        return True


def open_service(settings: BookieSettings) -> BookieService:
    """The bookie's entry store and service over its data dir (whose cookie
    says which bookie it is)."""
    data_dir = Path(settings.data_dir)
    bookie_id = load_cookie(data_dir, settings.bookie_id)
    store = EntryStore(
        data_dir / "entries",
        sync=settings.journal_sync,
        max_cached_ledger_states=settings.max_cached_ledger_states,
        tuning=StoreTuning.from_settings(settings),
    )
    service = BookieService(store, settings)
    service.bookie_id = bookie_id
    service.check_disk()
    return service


async def start_grpc(
    settings: BookieSettings, service: BookieService
) -> tuple[grpc.aio.Server, grpc_health.HealthServicer, Listeners, HttpEndpoint | None, int]:
    """The started gRPC server (health NOT_SERVING), its health servicer,
    its listeners, HTTP endpoint and its port."""
    tls = server_tls(settings)
    server = grpc.aio.server(options=serving.grpc_options())
    # Add requests are read without copying their entries (protos/add_request.py).
    add_cluster_servicer(
        server,
        service,
        bookie_pb2.DESCRIPTOR,
        "Bookie",
        settings,
        {"AddEntries": decode_add_request, "AddBatches": decode_add_batch},
    )
    health = serving.add_health(server)
    serving.set_serving(health, False)
    listeners = await serving.bind_listeners(
        server,
        settings.bind_address,
        settings.advertised_address,
        settings.port,
        settings.bookie_port_tls,
        tls.credentials,
    )
    endpoint, metrics_port = await serving.start_http_endpoint(
        settings.bind_address,
        settings,
        serving.thread_render(service.render_metrics),
        listeners,
        tls.metrics,
        tls.health,
    )
    await server.start()
    serving.tune_gc()
    return server, health, listeners, endpoint, metrics_port


async def serve(settings: BookieSettings, ready_file: str | None = None) -> None:
    serving.setup_logging("bookie", settings.log_level)
    lock = DataDirLock(Path(settings.data_dir), "bookie")
    try:
        serving.check_port_free(settings.bind_address, settings.port, "gRPC")
        if settings.tls_certificate_file_path:
            serving.check_port_free(settings.bind_address, settings.bookie_port_tls, "gRPC TLS")
        serving.check_port_free(settings.bind_address, settings.metrics_port, "metrics")
        await _serve(settings, ready_file)
    finally:
        lock.release()


def _background(
    service: BookieService, metastore: MetastoreClient, info: dict, stop: asyncio.Event
) -> tuple[asyncio.Task, asyncio.Task, asyncio.Task | None]:
    """The registration, the disk watch and AutoRecovery (when enabled), started."""
    settings, changed = service.settings, asyncio.Event()
    registration = asyncio.create_task(
        register_forever(metastore, service.bookie_id, info, settings.session_ttl_ms, stop, changed)
    )

    def disk_read_only() -> bool:
        service.check_disk()
        return service.read_only

    interval_s = settings.disk_check_interval_ms / 1000
    disk_watch = asyncio.create_task(
        watch_disk(disk_read_only, interval_s, service.bookie_id, info, changed, metastore)
    )
    if not settings.auto_recovery_daemon_enabled:
        return registration, disk_watch, None
    daemon = AutoRecovery(metastore, settings, service.bookie_id, service.metrics.recovery)
    return registration, disk_watch, asyncio.create_task(daemon.run(stop))


async def _serve(settings: BookieSettings, ready_file: str | None) -> None:
    if not serving.tune_malloc(settings.malloc_trim_threshold_mb, settings.malloc_arenas):
        log.warning("mallopt is not available; the C library's malloc defaults stay")
    service = open_service(settings)
    store, bookie_id, data_dir = service.store, service.bookie_id, Path(settings.data_dir)
    server, health, listeners, endpoint, metrics_port = await start_grpc(settings, service)
    stop = asyncio.Event()
    serving.install_shutdown(asyncio.get_running_loop(), stop.set)
    address = listeners.identity
    metastore = MetastoreClient(
        settings.metastore,
        token=client_token(settings.broker_client_auth_params),
        tls=internal_tls(settings, settings.broker_client_tls_enabled),
    )
    try:
        await check_cookie(metastore, data_dir, bookie_id)
    except SystemExit:
        await server.stop(grace=0)
        store.close()
        await metastore.close()
        raise
    info = {
        "bookie_id": bookie_id,
        "address": address,
        "address_tls": listeners.tls,  # brokers whose calls use TLS go there
        "read_only": service.read_only,
        "data_dir": str(data_dir),
    }
    registration, disk_watch, recovery = _background(service, metastore, info, stop)
    await wait_registered(metastore, bookie_id, stop)
    serving.set_serving(health, True)
    local = listeners.local
    ready = {
        "grpc": address,
        "local": local,
        "grpc_tls": listeners.tls,
        "local_tls": listeners.local_tls,
        "metrics": metrics_port,
        "bookie_id": bookie_id,
    }
    serving.write_ready_file(ready_file, ready)
    log.info("bookie %s serving on %s as %s (metrics %d, data %s)",
             bookie_id, local, address, metrics_port, data_dir)  # fmt: skip
    await stop.wait()
    log.info("bookie stopping")
    serving.exit_deadline(settings.shutdown_timeout_s)
    deadline = serving.stop_deadline(settings.shutdown_timeout_s, share=0.6)

    async def leave() -> None:
        disk_watch.cancel()
        serving.set_serving(health, False)
        if endpoint is not None:  # before the store closes: no scrape reads a closed store
            await endpoint.close()
        await server.stop(grace=min(2.0, settings.shutdown_timeout_s / 5))
        await registration  # closes the session: the bookie leaves the registry at once
        if recovery is not None:  # a copy in progress is abandoned; its task stays filed
            recovery.cancel()
            await asyncio.gather(recovery, return_exceptions=True)

    try:
        await serving.bounded_shutdown(leave, deadline, log, "leaving the registry")
    finally:
        registration.cancel()
        service.stop()
        store.close()  # the journal and RocksDB close cleanly whatever the metastore does
    last = deadline + settings.shutdown_timeout_s * 0.1
    await serving.bounded_shutdown(metastore.close, last, log, "closing the client")
    log.info("bookie stopped")
