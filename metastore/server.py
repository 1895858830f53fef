"""The metastore process: a Raft node plus its gRPC front end.

Theory of operation. The servicer translates requests into calls on the replicated store
(metastore/store.py, applied by metastore/raft_node.py): only a ready leader answers reads
and writes, and a write is one Raft command answered once committed and applied
(metastore/leadership.py). Behind the access guard when authentication is on.

Watches may be served by any node: each one replays the kept history from its
revision, then waits for the Raft thread to signal applied changes.

Session liveness is tracked only by the leader, in memory
(metastore/session_deadlines.py): each keep-alive refreshes a deadline, and
a session whose deadline passes is ended through a replicated
``end_session`` command. A node that becomes leader gives every session a
fresh TTL before expiring any.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc

from metastore import metrics
from metastore.batch_read import answer_get, answer_list, answer_read
from metastore.cluster_layout import ClusterLayout
from metastore.leadership import Leadership
from metastore.metrics import timed
from metastore.process_setup import bind_grpc, ports_of, raft_password, start_http
from metastore.raft_node import MetastoreNode
from metastore.session_deadlines import SessionDeadlines
from metastore.settings import MetastoreSettings
from metastore.store import CMP_VALUE, CMP_VERSION, CompactedError, validate_key
from protos import common_pb2, metastore_pb2, metastore_pb2_grpc, serving
from protos.data_dir_lock import DataDirLock
from protos.errors import error
from protos.security_settings import add_cluster_servicer, server_tls

log = logging.getLogger("metastore")


class MetastoreService(metastore_pb2_grpc.MetastoreServicer):
    def __init__(
        self, node: MetastoreNode, settings: MetastoreSettings, layout: ClusterLayout
    ) -> None:
        self.node = node
        self.settings = settings
        self.layout = layout
        self.loop = asyncio.get_running_loop()
        self.leadership = Leadership(node, layout, settings)
        self._deadlines = SessionDeadlines()
        self._seen_role: tuple[bool, int] = (False, -1)
        self._changed = asyncio.Event()
        self._notify_lock = threading.Lock()
        self._notify_pending = False
        self._watches: collections.Counter[str] = collections.Counter()
        self._kept_alive: dict[str, list[set[int]]] = {}

    # ---------------------------------------------------------------- change signal

    def on_apply(self) -> None:
        """Raft thread: a command was applied; wake the watchers (coalesced)."""
        with self._notify_lock:
            if self._notify_pending:
                return
            self._notify_pending = True
        try:
            self.loop.call_soon_threadsafe(self._wake_watchers)
        except RuntimeError:  # the loop is closed: shutting down
            pass

    def _wake_watchers(self) -> None:
        with self._notify_lock:
            self._notify_pending = False
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    # ---------------------------------------------------------------- checks

    def _check_key(self, key: str) -> common_pb2.Error | None:
        problem = validate_key(key)
        return error(common_pb2.INVALID_KEY, problem) if problem else None

    def _check_value(self, key: str, value: bytes) -> common_pb2.Error | None:
        if len(value) > self.settings.max_value_size_bytes:
            return error(
                common_pb2.VALUE_TOO_LARGE,
                f"value of {len(value)} bytes for {key}; "
                f"max_value_size_bytes is {self.settings.max_value_size_bytes}",
            )
        return None

    # ---------------------------------------------------------------- reads

    @timed("get")
    async def Get(
        self, request: metastore_pb2.GetRequest, context: grpc.aio.ServicerContext
    ) -> metastore_pb2.GetResponse:
        bad = self._check_key(request.key) or await self.leadership.ready()
        if bad:
            return metastore_pb2.GetResponse(error=bad)
        return answer_get(self.node.store, request.key, self._check_key)

    @timed("children")
    async def Children(
        self, request: metastore_pb2.ChildrenRequest, context: grpc.aio.ServicerContext
    ) -> metastore_pb2.ChildrenResponse:
        bad = self._check_key(request.path) if request.path != "/" else None
        bad = bad or await self.leadership.ready()
        if bad:
            return metastore_pb2.ChildrenResponse(error=bad)
        return metastore_pb2.ChildrenResponse(names=self.node.store.children(request.path))

    @timed("list")
    async def List(
        self, request: metastore_pb2.ListRequest, context: grpc.aio.ServicerContext
    ) -> metastore_pb2.ListResponse:
        bad = await self.leadership.ready() if request.prefix.startswith("/") else None
        if bad:
            return metastore_pb2.ListResponse(error=bad)
        return answer_list(self.node.store, request, self.settings.max_list_results)

    @timed("read")
    async def Read(
        self, request: metastore_pb2.ReadRequest, context: grpc.aio.ServicerContext
    ) -> metastore_pb2.ReadResponse:
        bad = await self.leadership.ready()
        if bad:
            return metastore_pb2.ReadResponse(error=bad)
        s = self.settings
        answer = answer_read(
            self.node.store,
            request,
            self._check_key,
            max_items=s.max_reads_per_call,
            max_bytes=s.max_read_response_bytes,
            max_list_results=s.max_list_results,
        )
        for result in answer.results:
            metrics.READ_ITEMS.labels(result.WhichOneof("what")).inc()
        return answer

    async def Status(
        self, request: metastore_pb2.StatusRequest, context: grpc.aio.ServicerContext
    ) -> metastore_pb2.StatusResponse:
        st = self.node.status()
        leader = self.layout.client_of_raft.get(self.node.leader_address or "", "")
        return metastore_pb2.StatusResponse(
            node_id=self.layout.node_id,
            is_leader=self.node.is_leader,
            leader=leader,
            term=int(st.get("raft_term", 0)),
            commit_index=int(st.get("commit_idx", 0)),
            applied_index=int(st.get("last_applied", 0)),
            revision=self.node.store.revision,
            sessions=len(self.node.store.sessions),
        )

    # ---------------------------------------------------------------- writes

    @timed("put")
    async def Put(
        self, request: metastore_pb2.PutRequest, context: grpc.aio.ServicerContext
    ) -> metastore_pb2.PutResponse:
        bad = self._check_key(request.key) or self._check_value(request.key, request.value)
        if bad:
            return metastore_pb2.PutResponse(error=bad)
        expected = request.expected_version if request.HasField("expected_version") else None
        if expected is not None and expected < -1:
            return metastore_pb2.PutResponse(
                error=error(
                    common_pb2.INVALID_ARGUMENT,
                    f"expected_version {expected}: use -1 (must not exist) or a version >= 0",
                )
            )
        result, err = await self.leadership.write(
            request.request_id,
            "put",
            request.key,
            bytes(request.value),
            expected,
            request.session_id,
        )
        if err is not None:
            return metastore_pb2.PutResponse(error=err)
        code, msg, version, revision = result
        return metastore_pb2.PutResponse(error=error(code, msg), version=version, revision=revision)

    @timed("del")
    async def Delete(
        self, request: metastore_pb2.DeleteRequest, context: grpc.aio.ServicerContext
    ) -> metastore_pb2.DeleteResponse:
        bad = self._check_key(request.key)
        if bad:
            return metastore_pb2.DeleteResponse(error=bad)
        expected = request.expected_version if request.HasField("expected_version") else None
        result, err = await self.leadership.write(
            request.request_id, "delete", request.key, expected
        )
        if err is not None:
            return metastore_pb2.DeleteResponse(error=err)
        code, msg, deleted, revision = result
        return metastore_pb2.DeleteResponse(
            error=error(code, msg), deleted=bool(deleted), revision=revision
        )

    @timed("increment")
    async def Increment(
        self, request: metastore_pb2.IncrementRequest, context: grpc.aio.ServicerContext
    ) -> metastore_pb2.IncrementResponse:
        bad = self._check_key(request.key)
        if bad:
            return metastore_pb2.IncrementResponse(error=bad)
        result, err = await self.leadership.write(
            request.request_id, "increment", request.key, request.delta or 1
        )
        if err is not None:
            return metastore_pb2.IncrementResponse(error=err)
        code, msg, value, _ = result
        return metastore_pb2.IncrementResponse(error=error(code, msg), value=value)

    @timed("txn")
    async def Txn(
        self, request: metastore_pb2.TxnRequest, context: grpc.aio.ServicerContext
    ) -> metastore_pb2.TxnResponse:
        compares: list[tuple[str, int, int, bytes]] = []
        ops: list[tuple[int, str, bytes, int]] = []
        for c in request.compares:
            bad = self._check_key(c.key)
            if bad:
                return metastore_pb2.TxnResponse(error=bad)
            target = CMP_VALUE if c.target == metastore_pb2.Compare.VALUE else CMP_VERSION
            compares.append((c.key, target, c.version, bytes(c.value)))
        for op in request.ops:
            bad = self._check_key(op.key) or self._check_value(op.key, op.value)
            if bad:
                return metastore_pb2.TxnResponse(error=bad)
            ops.append((int(op.kind), op.key, bytes(op.value), op.session_id))
        if len(compares) + len(ops) > 1000 or not ops:
            return metastore_pb2.TxnResponse(
                error=error(
                    common_pb2.INVALID_ARGUMENT,
                    f"a txn needs 1 to 1000 compares + ops; got {len(compares)} + {len(ops)}",
                )
            )
        result, err = await self.leadership.write(request.request_id, "txn", compares, ops)
        if err is not None:
            return metastore_pb2.TxnResponse(error=err)
        code, msg, succeeded, revision = result
        return metastore_pb2.TxnResponse(
            error=error(code, "" if code == common_pb2.OK else msg),
            succeeded=succeeded,
            failed_compare="" if succeeded else msg,
            revision=revision,
        )

    # ---------------------------------------------------------------- watches

    async def Watch(
        self, request: metastore_pb2.WatchRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[metastore_pb2.WatchResponse]:
        if not request.prefix.startswith("/"):
            yield metastore_pb2.WatchResponse(
                error=error(common_pb2.INVALID_KEY, f"prefix {request.prefix!r} must start with /")
            )
            return
        peer = context.peer()
        if self._watches[peer] >= self.settings.max_watches_per_connection:
            yield metastore_pb2.WatchResponse(
                error=error(
                    common_pb2.TOO_MANY_REQUESTS,
                    f"this connection already has {self._watches[peer]} watches "
                    f"(max_watches_per_connection = {self.settings.max_watches_per_connection})",
                )
            )
            return
        self._watches[peer] += 1
        try:
            nxt = request.from_revision if request.from_revision > 0 else 0
            if nxt == 0:
                nxt = self.node.store.revision + 1
                # Tell the watcher where it starts, so it can resume from there.
                yield metastore_pb2.WatchResponse(revision=nxt - 1)
            while True:
                changed = self._changed
                try:
                    events, nxt = self.node.store.events_since(
                        nxt, request.prefix, self.settings.watch_batch_events
                    )
                except CompactedError as exc:
                    yield metastore_pb2.WatchResponse(error=error(common_pb2.COMPACTED, str(exc)))
                    return
                if events:
                    yield metastore_pb2.WatchResponse(
                        events=[_event(e) for e in events], revision=self.node.store.revision
                    )
                    continue
                if nxt <= self.node.store.revision:
                    continue
                await changed.wait()
        finally:
            self._watches[peer] -= 1
            if self._watches[peer] <= 0:
                del self._watches[peer]

    # ---------------------------------------------------------------- sessions

    @timed("create_session")
    async def CreateSession(
        self, request: metastore_pb2.CreateSessionRequest, context: grpc.aio.ServicerContext
    ) -> metastore_pb2.CreateSessionResponse:
        lo, hi = self.settings.min_session_ttl_ms, self.settings.max_session_ttl_ms
        if not lo <= request.ttl_ms <= hi:
            return metastore_pb2.CreateSessionResponse(
                error=error(
                    common_pb2.INVALID_ARGUMENT,
                    f"session TTL {request.ttl_ms} ms is outside [{lo}, {hi}] ms",
                )
            )
        result, err = await self.leadership.write(
            request.request_id, "create_session", request.ttl_ms
        )
        if err is not None:
            return metastore_pb2.CreateSessionResponse(error=err)
        code, msg, session_id, _ = result
        if code == common_pb2.OK:
            self._deadlines.kept_alive(session_id, request.ttl_ms, time.monotonic())
            metrics.LEASES_GRANTED.inc()
        return metastore_pb2.CreateSessionResponse(
            error=error(code, msg), session_id=session_id, ttl_ms=request.ttl_ms
        )

    async def KeepAlive(
        self,
        request_iterator: AsyncIterator[metastore_pb2.KeepAliveRequest],
        context: grpc.aio.ServicerContext,
    ) -> AsyncIterator[metastore_pb2.KeepAliveResponse]:
        peer = context.peer()
        streams = self._kept_alive.setdefault(peer, [])
        mine: set[int] = set()
        streams.append(mine)
        try:
            async for request in request_iterator:
                sid = request.session_id
                bad = await self.leadership.ready()
                if bad is not None:
                    yield metastore_pb2.KeepAliveResponse(session_id=sid, error=bad)
                    continue
                state = self.node.store.sessions.get(sid)
                if state is None:
                    yield metastore_pb2.KeepAliveResponse(
                        session_id=sid,
                        alive=False,
                        error=error(common_pb2.SESSION_EXPIRED, f"session {sid} has expired"),
                    )
                    continue
                held = sum(len(s) for s in streams)
                if sid not in mine and held >= self.settings.max_sessions_per_connection:
                    yield metastore_pb2.KeepAliveResponse(
                        session_id=sid,
                        error=error(
                            common_pb2.TOO_MANY_REQUESTS,
                            f"this connection already keeps {held} sessions alive "
                            f"(max_sessions_per_connection = "
                            f"{self.settings.max_sessions_per_connection})",
                        ),
                    )
                    continue
                mine.add(sid)
                self._deadlines.kept_alive(sid, state.ttl_ms, time.monotonic())
                metrics.LEASES_RENEWED.inc()
                yield metastore_pb2.KeepAliveResponse(session_id=sid, alive=True)
        finally:
            streams.remove(mine)
            if not streams:
                self._kept_alive.pop(peer, None)

    @timed("close_session")
    async def CloseSession(
        self, request: metastore_pb2.CloseSessionRequest, context: grpc.aio.ServicerContext
    ) -> metastore_pb2.CloseSessionResponse:
        _, err = await self.leadership.write(request.request_id, "end_session", request.session_id)
        if err is not None:
            return metastore_pb2.CloseSessionResponse(error=err)
        self._deadlines.closed(request.session_id)
        metrics.LEASES_REVOKED.inc()
        return metastore_pb2.CloseSessionResponse()

    async def expire_sessions_forever(self) -> None:
        interval = self.settings.session_check_interval_ms / 1000
        me = asyncio.current_task()
        while True:
            await asyncio.sleep(interval)
            try:
                await self._expire_once()
            except asyncio.CancelledError:
                if me is not None and me.cancelling():
                    raise  # the server is stopping
                # A cancelled inner await (e.g. a shared barrier) must not end expiry.
                log.warning("session expiry pass was cancelled; continuing")
            except Exception:
                log.exception("session expiry pass failed")

    async def _expire_once(self) -> None:
        """One pass of the leader's session expiry (see the module doc)."""
        leader = self.node.is_leader
        self._log_role(leader)
        if not leader:
            self._deadlines.not_leading()
            return
        term = self.node.term
        not_ready = await self.leadership.ready()
        if not_ready is not None:
            # Not the leader any more, or not caught up yet.
            log.info("session expiry skipped this pass: %s", not_ready.message)
            return
        sessions = self.node.store.sessions
        now = time.monotonic()
        ttls = {sid: s.ttl_ms for sid, s in list(sessions.items())}
        if not self._deadlines.start_pass(term, ttls, now):
            log.info("leader: %d sessions get a fresh TTL", len(self._deadlines))
            return
        log.debug("expiry pass: %s", self._deadlines.time_left(now))
        for sid, state in list(sessions.items()):
            if self._deadlines.expired(sid, state.ttl_ms, now):
                log.info("session %d expired (ttl %d ms)", sid, state.ttl_ms)
                await self.leadership.propose(b"", "end_session", sid)
                self._deadlines.closed(sid)
                metrics.LEASES_EXPIRED.inc()
        self._deadlines.forget_ended(sessions)

    def _log_role(self, leader: bool) -> None:
        """A log line when this node's role changes."""
        role = (leader, self.node.term)
        if role != self._seen_role:
            self._seen_role = role
            state = "the leader" if leader else "a follower"
            log.info("node %s is %s in term %d", self.layout.node_id, state, role[1])

    @property
    def open_watches(self) -> int:
        return sum(self._watches.values())


def _event(e: Any) -> metastore_pb2.Event:
    return metastore_pb2.Event(
        type=e.type,
        key=e.key,
        value=e.value,
        version=max(e.version, 0),
        revision=e.revision,
        session_id=e.session_id,
    )


def _service(
    settings: MetastoreSettings, layout: ClusterLayout, raft_bind: str
) -> MetastoreService:
    """The Raft node (bound to ``raft_bind``) and the service over it."""
    holder: list[MetastoreService] = []
    node = MetastoreNode(
        layout.raft_address,
        layout.partners,
        Path(settings.data_dir),
        bind_address=raft_bind,
        max_sessions=settings.max_sessions,
        max_history=settings.watch_history_events,
        dedup_window=settings.dedup_window_requests,
        tick_period_ms=settings.tick_period_ms,
        election_timeout_min_ms=settings.election_timeout_min_ms,
        election_timeout_max_ms=settings.election_timeout_max_ms,
        log_compaction_min_entries=settings.log_compaction_min_entries,
        reconnect_interval_ms=settings.raft_reconnect_interval_ms,
        on_apply=lambda: holder[0].on_apply() if holder else None,
        password=raft_password(settings.raft_password),
    )
    service = MetastoreService(node, settings, layout)
    holder.append(service)
    return service


async def serve(settings: MetastoreSettings, ready_file: str | None = None) -> None:
    serving.setup_logging("metastore", settings.log_level)
    lock = DataDirLock(Path(settings.data_dir), "metastore")
    try:
        await _serve(settings, ready_file)
    finally:
        lock.release()


async def _serve(settings: MetastoreSettings, ready_file: str | None) -> None:
    layout, bind, port, raft_port = ports_of(settings)
    serving.check_port_free(bind, port, "gRPC")
    if settings.tls_certificate_file_path:
        serving.check_port_free(bind, settings.metastore_port_tls, "gRPC TLS")
    serving.check_port_free(bind, raft_port, "raft")
    serving.check_port_free(bind, settings.metrics_port, "metrics")
    tls = server_tls(settings)
    server = grpc.aio.server(options=serving.grpc_options())
    service = _service(settings, layout, f"{bind}:{raft_port}")
    node = service.node
    add_cluster_servicer(server, service, metastore_pb2.DESCRIPTOR, "Metastore", settings)
    health = serving.add_health(server)
    serving.set_serving(health, False)
    listeners = await bind_grpc(server, settings, bind, port, tls)
    endpoint, metrics_port = await start_http(settings, service, bind, listeners, tls)
    await server.start()
    stop = asyncio.Event()
    serving.install_shutdown(asyncio.get_running_loop(), stop.set)
    while not (node.isReady() and node.status().get("leader") is not None):
        if stop.is_set():
            log.info("metastore stopping before it had a leader")
            await server.stop(grace=0)
            node.stop()
            return
        await asyncio.sleep(0.01)
    serving.set_serving(health, True)
    serving.write_ready_file(
        ready_file,
        {
            "grpc": layout.client_address if listeners.plain else listeners.tls,
            "local": listeners.local,
            "grpc_tls": listeners.tls,
            "local_tls": listeners.local_tls,
            "raft": layout.raft_address,
            "node_id": layout.node_id,
            "metrics": metrics_port,
            "pid": os.getpid(),
        },
    )
    log.info(
        "metastore node %s serving on %s as %s (TLS %s, raft %s, %d partners, metrics %d, data %s)",
        layout.node_id,
        listeners.local,
        layout.client_address,
        listeners.tls or "off",
        layout.raft_address,
        len(layout.partners),
        metrics_port,
        settings.data_dir,
    )
    expiry = asyncio.create_task(service.expire_sessions_forever())
    await stop.wait()
    log.info("metastore stopping")
    serving.exit_deadline(settings.shutdown_timeout_s)
    deadline = serving.stop_deadline(settings.shutdown_timeout_s)

    async def stop_server() -> None:
        serving.set_serving(health, False)
        expiry.cancel()
        await server.stop(grace=min(2.0, settings.shutdown_timeout_s / 5))

    try:
        if endpoint is not None:  # before the node: a scrape never reads a stopped one
            await serving.bounded_shutdown(endpoint.close, deadline, log, "closing HTTP")
        await serving.bounded_shutdown(stop_server, deadline, log, "stopping the gRPC server")
    finally:
        node.stop()  # the Raft journal is flushed and closed
    log.info("metastore stopped")
