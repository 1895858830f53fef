"""Service URLs and the gRPC channel to the broker."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import grpc

from client.exceptions import ConnectError, InvalidUrl, MagnetarError, from_wire
from client.exceptions import LookupError as MagnetarLookupError
from protos import broker_pb2, broker_pb2_grpc, channel, common_pb2

log = logging.getLogger(__name__)


def parse_service_url(url: str) -> list[str]:
    """``magnetar://h:p[,h2:p2]`` or bare ``h:p`` -> ``["h:p", ...]``."""
    if not isinstance(url, str) or not url.strip():
        raise InvalidUrl(f"service URL {url!r} is empty")
    rest = url.strip()
    if "://" in rest:
        scheme, rest = rest.split("://", 1)
        if scheme == "magnetar+tls":
            raise InvalidUrl(f"service URL {url!r}: TLS is not available yet; use magnetar://")
        if scheme != "magnetar":
            raise InvalidUrl(
                f"service URL {url!r}: the scheme must be magnetar:// or magnetar+tls://"
            )
    rest = rest.rstrip("/")
    hosts = []
    for part in rest.split(","):
        host, sep, port = part.strip().rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise InvalidUrl(f"service URL {url!r}: {part!r} is not host:port")
        hosts.append(f"{host}:{port}")
    return hosts


def call_in_loop(loop: asyncio.AbstractEventLoop, fn: Callable[[], object]) -> None:
    """Run ``fn`` on ``loop``: now when already on it, else at its next turn."""
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        fn()
    else:
        loop.call_soon_threadsafe(fn)


class Connection:
    """One channel to a broker; producers and consumers share it."""

    def __init__(self, address: str, connection_timeout_ms: int) -> None:
        self.address = address
        self.connection_timeout_s = connection_timeout_ms / 1000
        self.channel = grpc.aio.insecure_channel(
            address, options=channel.grpc_options(channel.MAX_GRPC_MESSAGE_BYTES)
        )
        self.stub = broker_pb2_grpc.BrokerStub(self.channel)
        self._ready = False

    async def ensure_ready(self, timeout_s: float | None = None) -> None:
        if self._ready:
            return
        try:
            await asyncio.wait_for(
                self.channel.channel_ready(), timeout_s or self.connection_timeout_s
            )
        except TimeoutError:
            raise ConnectError(
                f"cannot connect to the broker at {self.address} within "
                f"{self.connection_timeout_s:g} s"
            ) from None
        self._ready = True

    async def close(self) -> None:
        await self.channel.close()


# A redirect chain longer than this is a loop between confused brokers.
MAX_LOOKUP_REDIRECTS = 8
LOOKUP_BACKOFF_S = (0.05, 1.0)  # first and largest wait between lookup retries
LOOKUP_PROBE_S = 2.0  # how long a broker named by a lookup gets to answer


@dataclass
class _LookupWalk:
    """Where one lookup stands: the broker to ask and how, the hops so far,
    and how many service brokers in a row did not answer."""

    conn: Connection
    authoritative: bool = False
    hops: int = 0
    unreachable: int = 0


class Connections:
    """One channel per broker, and topic lookups (DESIGN §5, Lookup): ask the
    service URL's broker; follow redirects (carrying 'authoritative'); retry
    with backoff while a bundle is changing hands."""

    def __init__(
        self, service_addresses: list[str], connection_timeout_ms: int, timeout_s: float
    ) -> None:
        self.connection_timeout_ms = connection_timeout_ms
        self.timeout_s = timeout_s
        self._pool: dict[str, Connection] = {}
        # A service URL may list several brokers: lookups go to the first that answers.
        self._services = [self.get(a) for a in service_addresses]
        self.service = self._services[0]

    def get(self, address: str) -> Connection:
        conn = self._pool.get(address)
        if conn is None:
            conn = self._pool[address] = Connection(address, self.connection_timeout_ms)
        return conn

    async def lookup(self, topic: str) -> Connection:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_s
        delay = LOOKUP_BACKOFF_S[0]
        walk = _LookupWalk(self.service)
        while True:
            resp = await self._ask(walk, topic)
            if resp is None:
                continue  # the next broker of the service URL
            if resp.error.code == common_pb2.SERVICE_NOT_READY:
                if loop.time() + delay > deadline:
                    raise from_wire(resp.error)
                await asyncio.sleep(delay)  # a retry timer while the bundle moves
                delay = min(delay * 2, LOOKUP_BACKOFF_S[1])
                walk.conn, walk.authoritative = self.service, False
                continue
            walk.unreachable = 0
            if resp.error.code:
                raise from_wire(resp.error)
            owner = self._follow(walk, topic, resp)
            if owner is not None:
                return owner

    async def _ask(self, walk: _LookupWalk, topic: str) -> broker_pb2.LookupResponse | None:
        """The answer of the broker the walk is at. A broker named by a lookup
        that does not answer may be dead with its registration not yet
        expired: that answers SERVICE_NOT_READY (look up again). A service
        broker that does not answer moves the walk to the next one (None)."""
        conn = walk.conn
        try:
            await conn.ensure_ready(
                None if conn is self.service else min(LOOKUP_PROBE_S, self.timeout_s)
            )
            return await conn.stub.Lookup(  # type: ignore[no-any-return]
                broker_pb2.LookupRequest(topic=topic, authoritative=walk.authoritative),
                timeout=self.timeout_s,
            )
        except ConnectError:
            if conn is not self.service:
                return broker_pb2.LookupResponse(
                    error=common_pb2.Error(
                        code=common_pb2.SERVICE_NOT_READY,
                        message=f"broker {conn.address} for {topic} does not answer",
                    )
                )
            walk.unreachable += 1
            if walk.unreachable >= len(self._services):
                raise
            i = self._services.index(conn)
            self.service = walk.conn = self._services[(i + 1) % len(self._services)]
            return None

    def _follow(
        self, walk: _LookupWalk, topic: str, resp: broker_pb2.LookupResponse
    ) -> Connection | None:
        """The owner, when the broker asked is the one named; else the walk
        moves on to the broker named (at most MAX_LOOKUP_REDIRECTS hops)."""
        target = self.get(resp.broker_url)
        if not resp.redirect:
            if target is walk.conn:
                return target  # the owner itself answered
            walk.conn, walk.authoritative = target, False  # have the owner confirm (and be alive)
            walk.hops += 1
            if walk.hops > MAX_LOOKUP_REDIRECTS:
                raise MagnetarLookupError(f"lookup of {topic} did not settle")
            return None
        walk.hops += 1
        if walk.hops > MAX_LOOKUP_REDIRECTS:
            raise MagnetarLookupError(
                f"lookup of {topic} was redirected more than {MAX_LOOKUP_REDIRECTS} times"
            )
        walk.conn, walk.authoritative = target, resp.authoritative
        return None

    async def close(self) -> None:
        for conn in self._pool.values():
            await conn.close()
        self._pool.clear()


# The connection to the broker serving a topic.
Resolver = Callable[[str], Awaitable[Connection]]


RECONNECT_BACKOFF_S = (0.1, 2.0)  # first and largest wait between reconnection attempts
# Broker answers that mean "this topic is (now) served elsewhere, or will be
# in a moment": reconnect through a lookup instead of failing.
RECONNECT_CODES = (common_pb2.SERVICE_NOT_READY, common_pb2.NOT_OWNER)


async def retry_with_backoff(
    attempt: Callable[[], Awaitable[None]],
    retryable: tuple[type[BaseException], ...],
    stopped: Callable[[], bool],
    on_fatal: Callable[[BaseException], None],
    what: str,
) -> bool:
    """Run ``attempt`` until it succeeds (True), ``stopped()`` (False), or it
    fails with a typed error that is not ``retryable`` (``on_fatal``, False);
    other failures (broken connections) are retried, with backoff."""
    delay = RECONNECT_BACKOFF_S[0]
    while not stopped():
        try:
            await attempt()
            return True
        except retryable as exc:
            log.debug("%s failed: %s; retrying", what, exc)
        except MagnetarError as exc:
            on_fatal(exc)
            return False
        except Exception as exc:
            log.debug("%s failed: %s; retrying", what, exc)
        await asyncio.sleep(delay)  # a backoff timer between attempts
        delay = min(delay * 2, RECONNECT_BACKOFF_S[1])
    return False
