"""Async client of the metastore cluster, used by bookies and brokers.

Theory of operation. The client knows every node's address and sends each
call to the node it believes leads. A ``NOT_LEADER`` answer names the leader
and the call goes there; an unreachable node or a write that could not
commit sends it to the next node after a backoff (``backoff_initial_s``
doubling up to ``backoff_max_s``, 50 ms and 250 ms by default), until ``timeout_s`` has passed for that
call. Every write carries a request id chosen once per call, so the store
answers a retry of a write that already committed with its first result and
never applies it twice: all operations are safe to retry.

A :class:`Session` keeps itself alive over a stream to the leader and moves
with it; when the store says the session has expired, or no keep-alive got
through for a whole TTL, the owner's ``on_lost`` callback runs, because every
ephemeral key it held is gone (the owner re-registers on a new session).

A :class:`Watch` streams the changes under a prefix; when its node fails it
resumes on another node from the revision after the last event it delivered,
so the owner sees every event once, in order. A watch whose next revision is
no longer kept raises :class:`CompactedError`: read the state again, then
watch from the revision of that read + 1.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc

from metastore.read_batcher import ReadBatcher
from protos import common_pb2, metastore_pb2, metastore_pb2_grpc, serving
from protos.channel import reconnect_options
from protos.credentials import TokenSupplier, aio_channel
from protos.errors import MagnetarServerError
from protos.tls import TlsClient

log = logging.getLogger(__name__)


class MetastoreError(MagnetarServerError):
    pass


class BadVersionError(MetastoreError):
    code = common_pb2.BAD_VERSION


class SessionExpiredError(MetastoreError):
    code = common_pb2.SESSION_EXPIRED


class MetastoreUnavailableError(MetastoreError):
    code = common_pb2.SERVICE_NOT_READY


class MetastoreAccessDenied(MetastoreError):
    """The metastore refused this client's token (or its lack of one)."""

    code = common_pb2.UNAUTHORIZED


# gRPC statuses of a refused call (protos/access.py): retrying cannot help.
_REFUSED = (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED)


class InvalidKeyError(MetastoreError):
    code = common_pb2.INVALID_KEY


class ValueTooLargeError(MetastoreError):
    code = common_pb2.VALUE_TOO_LARGE


class CompactedError(MetastoreError):
    code = common_pb2.COMPACTED


_BY_CODE: dict[int, type[MetastoreError]] = {
    common_pb2.BAD_VERSION: BadVersionError,
    common_pb2.SESSION_EXPIRED: SessionExpiredError,
    common_pb2.SERVICE_NOT_READY: MetastoreUnavailableError,
    common_pb2.INVALID_KEY: InvalidKeyError,
    common_pb2.VALUE_TOO_LARGE: ValueTooLargeError,
    common_pb2.COMPACTED: CompactedError,
}

# Most reads one Read call carries (metastore/read_batcher.py).
READ_BATCH_MAX = 64

# Answers after which the same call is tried again (elsewhere, or later).
_RETRY_CODES = (common_pb2.NOT_LEADER, common_pb2.SERVICE_NOT_READY)


def _raise_for(err: common_pb2.Error) -> None:
    if err.code != common_pb2.OK:
        raise _BY_CODE.get(err.code, MetastoreError)(err.message, err.code)


@dataclass(frozen=True)
class Stat:
    value: bytes
    version: int
    mod_revision: int
    session_id: int


@dataclass(frozen=True)
class KeyRecord:
    key: str
    value: bytes
    version: int
    create_revision: int
    mod_revision: int
    session_id: int


@dataclass(frozen=True)
class WatchEvent:
    type: str  # "PUT" or "DELETE"
    key: str
    value: bytes
    version: int
    revision: int
    session_id: int


@dataclass(frozen=True)
class Compare:
    """A txn condition: ``version`` (-1 = must not exist) or ``value`` equality."""

    key: str
    version: int | None = None
    value: bytes | None = None


@dataclass(frozen=True)
class Op:
    key: str
    value: bytes | None = None  # None = delete
    session_id: int = 0


def _channel_options() -> list[tuple[str, int]]:
    return [*serving.grpc_options(), *reconnect_options()]


class MetastoreClient:
    def __init__(
        self,
        addresses: str | list[str],
        *,
        timeout_s: float = 10.0,
        attempt_timeout_s: float = 3.0,
        backoff_initial_s: float = 0.05,
        backoff_max_s: float = 0.25,
        token: TokenSupplier | None = None,
        tls: TlsClient | None = None,
        read_batch_max: int = READ_BATCH_MAX,
    ) -> None:
        if isinstance(addresses, str):
            addresses = [a.strip() for a in addresses.split(",") if a.strip()]
        if not addresses:
            raise ValueError("MetastoreClient needs at least one address")
        self.addresses = list(dict.fromkeys(addresses))
        self.timeout_s = timeout_s
        self.attempt_timeout_s = attempt_timeout_s
        self.backoff_initial_s = backoff_initial_s
        self.backoff_max_s = backoff_max_s
        self.token = token  # what every call carries (broker_client_auth_params)
        # broker_client_tls_enabled: ``addresses`` are TLS ports, and a leader
        # hint (a plaintext address) not among them is not followed.
        self.tls = tls
        self._current = self.addresses[0]
        self._stubs: dict[str, tuple[grpc.aio.Channel, metastore_pb2_grpc.MetastoreStub]] = {}
        # Gets and lists made in one loop turn go as one call (0 or 1: each alone).
        self._reads = ReadBatcher(self._call, read_batch_max, MetastoreUnavailableError)

    async def close(self) -> None:
        await self._reads.close()
        stubs, self._stubs = self._stubs, {}
        for channel, _ in stubs.values():
            await channel.close()

    # ------------------------------------------------------------ routing

    def stub(self, address: str | None = None) -> metastore_pb2_grpc.MetastoreStub:
        address = address or self._current
        got = self._stubs.get(address)
        if got is None:
            channel = aio_channel(address, _channel_options(), self.token, self.tls)
            got = self._stubs[address] = (channel, metastore_pb2_grpc.MetastoreStub(channel))
        return got[1]

    @property
    def current(self) -> str:
        """The node calls go to now (the leader, when the client knows it)."""
        return self._current

    def _follow(self, failed: str, leader: str = "") -> None:
        """After ``failed`` could not serve a call: go to ``leader`` or the next node."""
        if self.tls is not None and leader not in self.addresses:
            leader = ""  # its plaintext address: go round the listed TLS ports instead
        if leader and leader != failed:
            if leader not in self.addresses:
                self.addresses.append(leader)
            self._current = leader
        elif self._current == failed:
            i = self.addresses.index(failed) if failed in self.addresses else -1
            self._current = self.addresses[(i + 1) % len(self.addresses)]

    async def _call(self, name: str, request: Any) -> Any:
        deadline = time.monotonic() + self.timeout_s
        delay = self.backoff_initial_s
        why = ""
        while True:
            address = self._current
            remaining = deadline - time.monotonic()
            try:
                resp = await getattr(self.stub(address), name)(
                    request, timeout=max(0.05, min(remaining, self.attempt_timeout_s))
                )
            except grpc.aio.AioRpcError as exc:
                if exc.code() == grpc.StatusCode.UNIMPLEMENTED and name == "Read":
                    raise  # (an older metastore: ReadBatcher reads one by one instead)
                if exc.code() in _REFUSED:
                    raise MetastoreAccessDenied(
                        f"metastore {address} refused {name}: {exc.details()}"
                    ) from None
                why = f"{address}: {exc.code().name} {exc.details()}"
                self._follow(address)
            else:
                err = resp.error
                if err.code not in _RETRY_CODES:
                    return resp
                why = f"{address}: {err.message}"
                hint = err.leader if self.tls is None or err.leader in self.addresses else ""
                if err.code == common_pb2.NOT_LEADER and hint and hint != address:
                    self._follow(address, hint)
                    if time.monotonic() < deadline:
                        continue  # a fresh hint: no need to wait
                else:
                    self._follow(address)
            if time.monotonic() + delay > deadline:
                raise MetastoreUnavailableError(
                    f"no metastore node of {self.addresses} served {name} within "
                    f"{self.timeout_s:g} s; last: {why}"
                )
            await asyncio.sleep(delay)
            delay = min(delay * 2, self.backoff_max_s)

    # ------------------------------------------------------------ reads

    async def get(self, key: str) -> Stat | None:
        resp = await self._reads.get(key)
        _raise_for(resp.error)
        if not resp.found:
            return None
        r = resp.record
        return Stat(r.value, r.version, r.mod_revision, r.session_id)

    async def children(self, path: str) -> list[str]:
        resp = await self._call("Children", metastore_pb2.ChildrenRequest(path=path))
        _raise_for(resp.error)
        return list(resp.names)

    async def list_prefix(self, prefix: str, limit: int = 0) -> tuple[list[KeyRecord], int]:
        """Records whose key starts with ``prefix``, in key order, and the revision read at."""
        resp = await self._reads.listing(metastore_pb2.ListRequest(prefix=prefix, limit=limit))
        _raise_for(resp.error)
        return [
            KeyRecord(r.key, r.value, r.version, r.create_revision, r.mod_revision, r.session_id)
            for r in resp.records
        ], int(resp.revision)

    async def status(self, address: str | None = None) -> metastore_pb2.StatusResponse:
        """One node's view of the cluster (that node's, not the leader's)."""
        return await self.stub(address).Status(
            metastore_pb2.StatusRequest(), timeout=self.attempt_timeout_s
        )

    # ------------------------------------------------------------ writes

    async def put(
        self,
        key: str,
        value: bytes,
        expected_version: int | None = None,
        session_id: int = 0,
    ) -> int:
        """Store ``value``; returns the key's new version."""
        req = metastore_pb2.PutRequest(
            key=key, value=value, session_id=session_id, request_id=os.urandom(16)
        )
        if expected_version is not None:
            req.expected_version = expected_version
        resp = await self._call("Put", req)
        _raise_for(resp.error)
        return int(resp.version)

    async def delete(self, key: str, expected_version: int | None = None) -> bool:
        req = metastore_pb2.DeleteRequest(key=key, request_id=os.urandom(16))
        if expected_version is not None:
            req.expected_version = expected_version
        resp = await self._call("Delete", req)
        _raise_for(resp.error)
        return bool(resp.deleted)

    async def increment(self, key: str, delta: int = 1) -> int:
        resp = await self._call(
            "Increment",
            metastore_pb2.IncrementRequest(key=key, delta=delta, request_id=os.urandom(16)),
        )
        _raise_for(resp.error)
        return int(resp.value)

    async def txn(self, compares: list[Compare], ops: list[Op]) -> tuple[bool, int]:
        """Apply every op if every compare holds, else nothing: (succeeded, revision)."""
        req = metastore_pb2.TxnRequest(request_id=os.urandom(16))
        for c in compares:
            if c.value is not None:
                req.compares.add(key=c.key, target=metastore_pb2.Compare.VALUE, value=c.value)
            else:
                req.compares.add(
                    key=c.key,
                    target=metastore_pb2.Compare.VERSION,
                    version=-1 if c.version is None else c.version,
                )
        for op in ops:
            if op.value is None:
                req.ops.add(kind=metastore_pb2.TxnOp.DELETE, key=op.key)
            else:
                req.ops.add(
                    kind=metastore_pb2.TxnOp.PUT,
                    key=op.key,
                    value=op.value,
                    session_id=op.session_id,
                )
        resp = await self._call("Txn", req)
        _raise_for(resp.error)
        return bool(resp.succeeded), int(resp.revision)

    # ------------------------------------------------------------ sessions and watches

    async def create_session(
        self, ttl_ms: int, on_lost: Callable[[], None] | None = None
    ) -> Session:
        resp = await self._call(
            "CreateSession",
            metastore_pb2.CreateSessionRequest(ttl_ms=ttl_ms, request_id=os.urandom(16)),
        )
        _raise_for(resp.error)
        session = Session(self, int(resp.session_id), ttl_ms, on_lost)
        session.start()
        return session

    def watch(self, prefix: str, from_revision: int = 0, *, give_up_s: float = 30.0) -> Watch:
        """Changes under ``prefix`` from ``from_revision`` (0 = from now), in order."""
        return Watch(self, prefix, from_revision, give_up_s)


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
        ttl = self.ttl_ms / 1000
        last_ok = time.monotonic()
        delay = self.client.backoff_initial_s
        while True:
            address = self.client.current
            call = None
            try:
                call = self.client.stub(address).KeepAlive()
                while True:
                    await call.write(metastore_pb2.KeepAliveRequest(session_id=self.id))
                    resp = await asyncio.wait_for(call.read(), timeout=max(0.1, period))
                    expired = self._expiry_in(resp, address)
                    if expired is not None:
                        self._mark_lost(f"the metastore says: {expired}")
                        return
                    last_ok = time.monotonic()
                    delay = self.client.backoff_initial_s
                    await asyncio.sleep(period)
            except asyncio.CancelledError:
                if call is not None:
                    call.cancel()
                raise
            except Exception as exc:
                if call is not None:
                    call.cancel()
                if isinstance(exc, grpc.aio.AioRpcError | TimeoutError):
                    self.client._follow(address)
                if time.monotonic() - last_ok > ttl:
                    self._mark_lost(f"no keep-alive got through for {ttl:g} s: {exc}")
                    return
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.client.backoff_max_s, period)

    def _expiry_in(self, resp: metastore_pb2.KeepAliveResponse, address: str) -> str | None:
        """Why the store says the session has expired, None while it lives;
        ConnectionError when the stream must move (``address`` ended it, or
        is not the leader: then the client follows the leader it names)."""
        if resp is grpc.aio.EOF:
            raise ConnectionError(f"{address} closed the keep-alive stream")
        if resp.error.code in _RETRY_CODES:
            self.client._follow(address, resp.error.leader)
            raise ConnectionError(resp.error.message)
        if resp.error.code == common_pb2.SESSION_EXPIRED or not resp.alive:
            return resp.error.message or "expired"
        return None

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
                resp = await self.client._call(
                    "CloseSession",
                    metastore_pb2.CloseSessionRequest(
                        session_id=self.id, request_id=os.urandom(16)
                    ),
                )
                _raise_for(resp.error)
            except MetastoreError as exc:
                log.warning("closing session %d: %s", self.id, exc)


class Watch:
    """An async iterator of :class:`WatchEvent` that survives node failures."""

    def __init__(
        self, client: MetastoreClient, prefix: str, from_revision: int, give_up_s: float
    ) -> None:
        self.client = client
        self.prefix = prefix
        self.next_revision = from_revision  # 0 until the first node says where "now" is
        self.give_up_s = give_up_s
        self._buffer: collections.deque[WatchEvent] = collections.deque()
        self._call: grpc.aio.UnaryStreamCall | None = None
        self._address = ""
        self.closed = False

    def __aiter__(self) -> Watch:
        return self

    async def __anext__(self) -> WatchEvent:
        while not self._buffer:
            if self.closed:
                raise StopAsyncIteration
            await self._fill()
        return self._buffer.popleft()

    async def started(self) -> int:
        """Open the stream now; returns the revision events will follow."""
        if self.next_revision == 0:
            await self._fill(stop_on_start=True)
        return self.next_revision - 1

    async def _fill(self, stop_on_start: bool = False) -> None:
        failing_since: float | None = None
        delay = self.client.backoff_initial_s
        while True:
            try:
                self._take(await self._stream().read())
                if self._buffer or stop_on_start:
                    return
            except (grpc.aio.AioRpcError, ConnectionError) as exc:
                if self._call is not None:
                    self._call.cancel()
                self._call = None
                self.client._follow(self._address)
                now = time.monotonic()
                failing_since = failing_since or now
                if now - failing_since > self.give_up_s:
                    raise MetastoreUnavailableError(
                        f"the watch of {self.prefix} found no node for {self.give_up_s:g} s: {exc}"
                    ) from None
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.client.backoff_max_s)

    def _stream(self) -> grpc.aio.UnaryStreamCall:
        """The open Watch call, opened on the current node from the next
        revision if there is none."""
        if self._call is None:
            self._address = self.client.current
            self._call = self.client.stub(self._address).Watch(
                metastore_pb2.WatchRequest(prefix=self.prefix, from_revision=self.next_revision)
            )
        return self._call

    def _take(self, resp: metastore_pb2.WatchResponse) -> None:
        """Buffer the events of one answer that were not delivered yet; raise
        for an ended stream (ConnectionError) or an error of the store."""
        if resp is grpc.aio.EOF:
            raise ConnectionError(f"{self._address} ended the watch")
        if resp.error.code == common_pb2.COMPACTED:
            self._call = None
            raise CompactedError(resp.error.message, resp.error.code)
        _raise_for(resp.error)
        if self.next_revision == 0:
            self.next_revision = resp.revision + 1
        for e in resp.events:
            if e.revision < self.next_revision:
                continue  # already delivered (never expected; kept safe)
            self._buffer.append(
                WatchEvent(
                    "PUT" if e.type == metastore_pb2.PUT else "DELETE",
                    e.key,
                    e.value,
                    e.version,
                    e.revision,
                    e.session_id,
                )
            )
            self.next_revision = e.revision + 1

    async def close(self) -> None:
        self.closed = True
        if self._call is not None:
            self._call.cancel()
            self._call = None
