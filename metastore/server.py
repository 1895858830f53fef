"""The metastore process: a Raft node plus its gRPC front end.

Writes become Raft commands and are answered when applied; reads come from
the local replica. Session liveness is tracked only by the leader, in
memory: each keep-alive refreshes a deadline, and a session whose deadline
passes is ended through a replicated ``end_session`` command. A node that
becomes leader gives every session a fresh TTL before expiring any.
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import Any

import grpc
from prometheus_client import Counter, Gauge

from metastore.raft_node import MetastoreNode
from metastore.settings import MetastoreSettings
from metastore.store import validate_key
from protos import common_pb2, metastore_pb2, metastore_pb2_grpc, serving
from protos.errors import error

log = logging.getLogger("metastore")

OPS = Counter("magnetar_metastore_ops", "Metastore operations served", ["op"])
IS_LEADER = Gauge("magnetar_metastore_is_leader", "1 when this node is the Raft leader")
SESSIONS = Gauge("magnetar_metastore_sessions", "Open sessions")
COMMIT_INDEX = Gauge("magnetar_metastore_commit_index", "Raft commit index")


class _RaftFailure(Exception):
    pass


class MetastoreService(metastore_pb2_grpc.MetastoreServicer):
    def __init__(self, node: MetastoreNode, settings: MetastoreSettings) -> None:
        self.node = node
        self.settings = settings
        self._deadlines: dict[int, float] = {}
        self._was_leader = False

    # ---------------------------------------------------------------- helpers

    async def _propose(self, method: Any, *args: Any) -> tuple:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future = loop.create_future()

        def done(result: Any, err: Any) -> None:
            loop.call_soon_threadsafe(_settle, fut, result, err)

        method(*args, callback=done)
        try:
            return await asyncio.wait_for(fut, self.settings.write_timeout_ms / 1000)
        except TimeoutError:
            raise _RaftFailure("the write was not committed in time") from None

    def _check_key(self, key: str) -> common_pb2.Error | None:
        problem = validate_key(key)
        return error(common_pb2.INVALID_KEY, problem) if problem else None

    # ---------------------------------------------------------------- reads

    async def Get(self, request, context):  # type: ignore[no-untyped-def]
        OPS.labels("get").inc()
        bad = self._check_key(request.key)
        if bad:
            return metastore_pb2.GetResponse(error=bad)
        record, revision = self.node.store.get(request.key)
        if record is None:
            return metastore_pb2.GetResponse(found=False, revision=revision)
        return metastore_pb2.GetResponse(
            found=True,
            revision=revision,
            record=metastore_pb2.KeyRecord(
                key=request.key,
                value=record.value,
                version=record.version,
                create_revision=record.create_revision,
                mod_revision=record.mod_revision,
                session_id=record.session_id,
            ),
        )

    async def Children(self, request, context):  # type: ignore[no-untyped-def]
        OPS.labels("children").inc()
        if request.path != "/":
            bad = self._check_key(request.path)
            if bad:
                return metastore_pb2.ChildrenResponse(error=bad)
        return metastore_pb2.ChildrenResponse(names=self.node.store.children(request.path))

    # ---------------------------------------------------------------- writes

    async def Put(self, request, context):  # type: ignore[no-untyped-def]
        OPS.labels("put").inc()
        bad = self._check_key(request.key)
        if bad:
            return metastore_pb2.PutResponse(error=bad)
        if len(request.value) > self.settings.max_value_size_bytes:
            return metastore_pb2.PutResponse(
                error=error(
                    common_pb2.VALUE_TOO_LARGE,
                    f"value of {len(request.value)} bytes for {request.key}; "
                    f"max_value_size_bytes is {self.settings.max_value_size_bytes}",
                )
            )
        expected = request.expected_version if request.HasField("expected_version") else None
        if expected is not None and expected < -1:
            return metastore_pb2.PutResponse(
                error=error(
                    common_pb2.INVALID_ARGUMENT,
                    f"expected_version {expected}: use -1 (must not exist) or a version >= 0",
                )
            )
        try:
            code, msg, version, revision = await self._propose(
                self.node.put, request.key, bytes(request.value), expected, request.session_id
            )
        except _RaftFailure as exc:
            return metastore_pb2.PutResponse(error=error(common_pb2.SERVICE_NOT_READY, str(exc)))
        return metastore_pb2.PutResponse(error=error(code, msg), version=version, revision=revision)

    async def Delete(self, request, context):  # type: ignore[no-untyped-def]
        OPS.labels("delete").inc()
        bad = self._check_key(request.key)
        if bad:
            return metastore_pb2.DeleteResponse(error=bad)
        expected = request.expected_version if request.HasField("expected_version") else None
        try:
            code, msg, deleted, revision = await self._propose(
                self.node.delete, request.key, expected
            )
        except _RaftFailure as exc:
            return metastore_pb2.DeleteResponse(error=error(common_pb2.SERVICE_NOT_READY, str(exc)))
        return metastore_pb2.DeleteResponse(
            error=error(code, msg), deleted=bool(deleted), revision=revision
        )

    async def Increment(self, request, context):  # type: ignore[no-untyped-def]
        OPS.labels("increment").inc()
        bad = self._check_key(request.key)
        if bad:
            return metastore_pb2.IncrementResponse(error=bad)
        try:
            code, msg, value, _ = await self._propose(
                self.node.increment, request.key, request.delta or 1
            )
        except _RaftFailure as exc:
            return metastore_pb2.IncrementResponse(
                error=error(common_pb2.SERVICE_NOT_READY, str(exc))
            )
        return metastore_pb2.IncrementResponse(error=error(code, msg), value=value)

    # ---------------------------------------------------------------- sessions

    async def CreateSession(self, request, context):  # type: ignore[no-untyped-def]
        OPS.labels("create_session").inc()
        lo, hi = self.settings.min_session_ttl_ms, self.settings.max_session_ttl_ms
        if not lo <= request.ttl_ms <= hi:
            return metastore_pb2.CreateSessionResponse(
                error=error(
                    common_pb2.INVALID_ARGUMENT,
                    f"session TTL {request.ttl_ms} ms is outside [{lo}, {hi}] ms",
                )
            )
        try:
            code, msg, session_id, _ = await self._propose(self.node.create_session, request.ttl_ms)
        except _RaftFailure as exc:
            return metastore_pb2.CreateSessionResponse(
                error=error(common_pb2.SERVICE_NOT_READY, str(exc))
            )
        if code == common_pb2.OK:
            self._deadlines[session_id] = time.monotonic() + request.ttl_ms / 1000
        return metastore_pb2.CreateSessionResponse(
            error=error(code, msg), session_id=session_id, ttl_ms=request.ttl_ms
        )

    async def KeepAlive(self, request_iterator, context):  # type: ignore[no-untyped-def]
        async for request in request_iterator:
            sid = request.session_id
            state = self.node.store.sessions.get(sid)
            if state is None:
                yield metastore_pb2.KeepAliveResponse(
                    session_id=sid,
                    alive=False,
                    error=error(common_pb2.SESSION_EXPIRED, f"session {sid} has expired"),
                )
                continue
            self._deadlines[sid] = time.monotonic() + state.ttl_ms / 1000
            yield metastore_pb2.KeepAliveResponse(session_id=sid, alive=True)

    async def CloseSession(self, request, context):  # type: ignore[no-untyped-def]
        OPS.labels("close_session").inc()
        try:
            await self._propose(self.node.end_session, request.session_id)
        except _RaftFailure as exc:
            return metastore_pb2.CloseSessionResponse(
                error=error(common_pb2.SERVICE_NOT_READY, str(exc))
            )
        self._deadlines.pop(request.session_id, None)
        return metastore_pb2.CloseSessionResponse()

    async def expire_sessions_forever(self) -> None:
        interval = self.settings.session_check_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                await self._expire_once()
            except Exception:
                log.exception("session expiry pass failed")

    async def _expire_once(self) -> None:
        leader = self.node.is_leader
        IS_LEADER.set(1 if leader else 0)
        status = self.node.status()
        COMMIT_INDEX.set(status.get("commit_idx", 0))
        sessions = self.node.store.sessions
        SESSIONS.set(len(sessions))
        if not leader:
            self._was_leader = False
            return
        now = time.monotonic()
        if not self._was_leader:
            # A new leader cannot know when sessions were last kept alive.
            self._was_leader = True
            self._deadlines = {sid: now + s.ttl_ms / 1000 for sid, s in list(sessions.items())}
            return
        for sid, state in list(sessions.items()):
            deadline = self._deadlines.setdefault(sid, now + state.ttl_ms / 1000)
            if deadline < now:
                log.info("session %d expired (ttl %d ms)", sid, state.ttl_ms)
                await self._propose(self.node.end_session, sid)
                self._deadlines.pop(sid, None)
        for sid in [s for s in self._deadlines if s not in sessions]:
            self._deadlines.pop(sid, None)


def _settle(fut: asyncio.Future, result: Any, err: Any) -> None:
    if fut.done():
        return
    if result is None:
        fut.set_exception(_RaftFailure(f"raft refused the write (reason {err})"))
    else:
        fut.set_result(result)


async def serve(settings: MetastoreSettings, ready_file: str | None = None) -> None:
    serving.setup_logging("metastore", settings.log_level)
    raft_port = settings.raft_port or serving.free_port(settings.host)
    peers = [p.strip() for p in settings.peers.split(",") if p.strip()]
    node = MetastoreNode(
        f"{settings.host}:{raft_port}",
        peers,
        Path(settings.data_dir),
        max_sessions=settings.max_sessions,
        tick_period_ms=settings.tick_period_ms,
        election_timeout_min_ms=settings.election_timeout_min_ms,
        election_timeout_max_ms=settings.election_timeout_max_ms,
        log_compaction_min_entries=settings.log_compaction_min_entries,
    )
    server = grpc.aio.server(options=serving.grpc_options())
    service = MetastoreService(node, settings)
    metastore_pb2_grpc.add_MetastoreServicer_to_server(service, server)
    health = serving.add_health(server)
    serving.set_serving(health, False)
    port = await serving.bind(server, settings.host, settings.port)
    metrics_port = serving.start_metrics(settings.host, settings.metrics_port)
    await server.start()
    stop = asyncio.Event()
    serving.install_shutdown(asyncio.get_running_loop(), stop.set)
    while not (node.isReady() and node.status().get("leader") is not None):
        if stop.is_set():
            break
        await asyncio.sleep(0.01)
    serving.set_serving(health, True)
    serving.write_ready_file(
        ready_file,
        {
            "grpc": f"{settings.host}:{port}",
            "raft": f"{settings.host}:{raft_port}",
            "metrics": metrics_port,
        },
    )
    log.info(
        "metastore serving on %s:%d (raft %d, metrics %d, data %s)",
        settings.host,
        port,
        raft_port,
        metrics_port,
        settings.data_dir,
    )
    expiry = asyncio.create_task(service.expire_sessions_forever())
    await stop.wait()
    log.info("metastore stopping")
    serving.set_serving(health, False)
    expiry.cancel()
    await server.stop(grace=2)
    node.stop()
    log.info("metastore stopped")
