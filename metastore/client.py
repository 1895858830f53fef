"""Async client of the metastore, used by bookies and brokers.

Operations raise :class:`MetastoreError` subclasses with the server's code.
A :class:`Session` keeps itself alive over a stream; when the store says it
has expired (or it cannot be kept alive within its TTL) the owner's
``on_lost`` callback runs, because every ephemeral key it held is gone.

One node is used today; following the leader across a node list is the
metastore cluster issue's work (the address list is already accepted).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import grpc

from protos import common_pb2, metastore_pb2, metastore_pb2_grpc, serving
from protos.errors import MagnetarServerError

log = logging.getLogger(__name__)


class MetastoreError(MagnetarServerError):
    pass


class BadVersionError(MetastoreError):
    code = common_pb2.BAD_VERSION


class SessionExpiredError(MetastoreError):
    code = common_pb2.SESSION_EXPIRED


class MetastoreUnavailableError(MetastoreError):
    code = common_pb2.SERVICE_NOT_READY


_BY_CODE: dict[int, type[MetastoreError]] = {
    common_pb2.BAD_VERSION: BadVersionError,
    common_pb2.SESSION_EXPIRED: SessionExpiredError,
    common_pb2.SERVICE_NOT_READY: MetastoreUnavailableError,
}


def _raise_for(err: common_pb2.Error) -> None:
    if err.code != common_pb2.OK:
        raise _BY_CODE.get(err.code, MetastoreError)(err.message, err.code)


@dataclass(frozen=True)
class Stat:
    value: bytes
    version: int
    mod_revision: int
    session_id: int


class MetastoreClient:
    def __init__(self, addresses: str | list[str], *, timeout_s: float = 10.0) -> None:
        if isinstance(addresses, str):
            addresses = [a.strip() for a in addresses.split(",") if a.strip()]
        if not addresses:
            raise ValueError("MetastoreClient needs at least one address")
        self.addresses = addresses
        self.timeout_s = timeout_s
        self._channel = grpc.aio.insecure_channel(addresses[0], options=serving.grpc_options())
        self._stub = metastore_pb2_grpc.MetastoreStub(self._channel)

    async def close(self) -> None:
        await self._channel.close()

    async def _call(self, method, request):  # type: ignore[no-untyped-def]
        try:
            return await method(request, timeout=self.timeout_s)
        except grpc.aio.AioRpcError as exc:
            raise MetastoreUnavailableError(
                f"metastore {self.addresses[0]} did not answer: {exc.code().name} {exc.details()}"
            ) from None

    async def get(self, key: str) -> Stat | None:
        resp = await self._call(self._stub.Get, metastore_pb2.GetRequest(key=key))
        _raise_for(resp.error)
        if not resp.found:
            return None
        r = resp.record
        return Stat(r.value, r.version, r.mod_revision, r.session_id)

    async def put(
        self,
        key: str,
        value: bytes,
        expected_version: int | None = None,
        session_id: int = 0,
    ) -> int:
        """Store ``value``; returns the key's new version."""
        req = metastore_pb2.PutRequest(key=key, value=value, session_id=session_id)
        if expected_version is not None:
            req.expected_version = expected_version
        resp = await self._call(self._stub.Put, req)
        _raise_for(resp.error)
        return int(resp.version)

    async def delete(self, key: str, expected_version: int | None = None) -> bool:
        req = metastore_pb2.DeleteRequest(key=key)
        if expected_version is not None:
            req.expected_version = expected_version
        resp = await self._call(self._stub.Delete, req)
        _raise_for(resp.error)
        return bool(resp.deleted)

    async def children(self, path: str) -> list[str]:
        resp = await self._call(self._stub.Children, metastore_pb2.ChildrenRequest(path=path))
        _raise_for(resp.error)
        return list(resp.names)

    async def increment(self, key: str, delta: int = 1) -> int:
        resp = await self._call(
            self._stub.Increment, metastore_pb2.IncrementRequest(key=key, delta=delta)
        )
        _raise_for(resp.error)
        return int(resp.value)

    async def create_session(
        self, ttl_ms: int, on_lost: Callable[[], None] | None = None
    ) -> Session:
        resp = await self._call(
            self._stub.CreateSession, metastore_pb2.CreateSessionRequest(ttl_ms=ttl_ms)
        )
        _raise_for(resp.error)
        session = Session(self, int(resp.session_id), ttl_ms, on_lost)
        session.start()
        return session


class Session:
    """A live session; ephemeral keys put with its id die with it."""

    def __init__(
        self,
        client: MetastoreClient,
        session_id: int,
        ttl_ms: int,
        on_lost: Callable[[], None] | None,
    ) -> None:
        self.client = client
        self.id = session_id
        self.ttl_ms = ttl_ms
        self.on_lost = on_lost
        self.lost = False
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._keep_alive())

    async def _keep_alive(self) -> None:
        period = self.ttl_ms / 3000
        last_ok = time.monotonic()
        while True:
            try:
                call = self.client._stub.KeepAlive()
                while True:
                    await call.write(metastore_pb2.KeepAliveRequest(session_id=self.id))
                    resp = await asyncio.wait_for(call.read(), timeout=self.ttl_ms / 1000)
                    if resp is grpc.aio.EOF or not resp.alive:
                        self._mark_lost("the metastore says the session has expired")
                        return
                    last_ok = time.monotonic()
                    await asyncio.sleep(period)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if time.monotonic() - last_ok > self.ttl_ms / 1000:
                    self._mark_lost(f"could not keep the session alive: {exc}")
                    return
                await asyncio.sleep(min(period, 0.2))

    def _mark_lost(self, why: str) -> None:
        self.lost = True
        log.warning("metastore session %d lost: %s", self.id, why)
        if self.on_lost is not None:
            try:
                self.on_lost()
            except Exception:
                log.exception("session-lost handler failed")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass
        if not self.lost:
            try:
                await self.client._call(
                    self.client._stub.CloseSession,
                    metastore_pb2.CloseSessionRequest(session_id=self.id),
                )
            except MetastoreError as exc:
                log.warning("closing session %d: %s", self.id, exc)
