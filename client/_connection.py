"""Service URLs, the gRPC channels to brokers, calls any listed broker can
answer, and topic lookups."""

from __future__ import annotations

import asyncio
import functools
import logging
import random
import threading
import time
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc

from client._produce_mux import ProduceMux, ProducerCall
from client._service_brokers import ServiceBrokers, try_next
from client.exceptions import (
    AuthenticationError,
    AuthorizationError,
    ConnectError,
    InvalidUrl,
    MagnetarError,
    TlsHandshakeError,
    from_wire,
)
from client.exceptions import LookupError as MagnetarLookupError
from protos import broker_pb2, broker_pb2_grpc, channel, common_pb2
from protos.credentials import TokenSupplier, aio_channel, with_token
from protos.tls import TlsClient, TlsRefused, diagnose

log = logging.getLogger(__name__)


# Pulsar's schemes are aliases, so a pulsar-client user's URL works as is.
SCHEMES = ("magnetar", "magnetar+tls", "pulsar", "pulsar+ssl")
TLS_SCHEMES = ("magnetar+tls", "pulsar+ssl")


def is_tls_url(url: str) -> bool:
    """Whether a service URL asks for TLS (``magnetar+tls://`` or its alias
    ``pulsar+ssl://``)."""
    return isinstance(url, str) and url.strip().partition("://")[0] in TLS_SCHEMES


def parse_service_url(url: str) -> list[str]:
    """``magnetar://h:p[,h2:p2]`` (or ``pulsar://``, ``magnetar+tls://``,
    ``pulsar+ssl://``) or bare ``h:p`` -> ``["h:p", ...]``."""
    if not isinstance(url, str) or not url.strip():
        raise InvalidUrl(f"service URL {url!r} is empty")
    rest = url.strip()
    if "://" in rest:
        scheme, rest = rest.split("://", 1)
        if scheme not in SCHEMES:
            raise InvalidUrl(
                f"service URL {url!r}: the scheme must be magnetar://, magnetar+tls:// "
                "or their aliases pulsar://, pulsar+ssl://"
            )
    rest = rest.rstrip("/")
    hosts = []
    for part in rest.split(","):
        host, sep, port = part.strip().rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise InvalidUrl(f"service URL {url!r}: {part!r} is not host:port")
        hosts.append(f"{host}:{port}")
    return hosts


class _LoopInbox:
    """Calls other threads hand to one loop, run in order at its next turn.
    One ``call_soon_threadsafe`` (a wake-up of the loop through its
    self-pipe) serves every call posted before the loop gets to them: a
    sender thread that opens and seals batches on many partitions wakes the
    loop once per turn, not once per batch."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        # Weakly: the inbox is the value of its loop's entry in _inboxes.
        self._loop = weakref.ref(loop)
        self._lock = threading.Lock()
        self._calls: list[Callable[[], object]] = []

    def post(self, fn: Callable[[], object]) -> None:
        with self._lock:
            self._calls.append(fn)
            first = len(self._calls) == 1
        if first:
            loop = self._loop()
            try:
                if loop is None:
                    raise RuntimeError("the event loop is gone")
                loop.call_soon_threadsafe(self._run)
            except RuntimeError:  # the loop is closed: nothing will run them
                with self._lock:
                    self._calls.clear()
                raise

    def _run(self) -> None:
        with self._lock:
            calls, self._calls = self._calls, []
        for fn in calls:
            try:
                fn()
            except Exception:
                log.exception("a call handed to the event loop failed")


_inboxes: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopInbox] = (
    weakref.WeakKeyDictionary()
)
_inboxes_lock = threading.Lock()


def call_in_loop(loop: asyncio.AbstractEventLoop, fn: Callable[[], object]) -> None:
    """Run ``fn`` on ``loop``: now when already on it, else at its next turn
    (in the order of the calls, with one wake-up for all: _LoopInbox)."""
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        fn()
        return
    inbox = _inboxes.get(loop)
    if inbox is None:
        with _inboxes_lock:
            inbox = _inboxes.setdefault(loop, _LoopInbox(loop))
    inbox.post(fn)


def call_soon_in_loop(loop: asyncio.AbstractEventLoop, fn: Callable[[], object]) -> None:
    """Run ``fn`` on ``loop`` a turn later, from any thread: on the loop, at
    its next turn; from another thread, at the turn after the one that
    takes the call. So what that turn (or the other thread meanwhile) adds
    is done by the same call, as by a task woken then."""
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        loop.call_soon(fn)
    else:
        call_in_loop(loop, functools.partial(loop.call_soon, fn))


# gRPC's own reconnection backoff on the SDK's channels (first and largest,
# ms; gRPC's defaults are 1 s and 120 s): a channel to a broker that was down
# notices it is back within this, so ``ensure_ready`` can fail fast while the
# channel is in TRANSIENT_FAILURE.
CHANNEL_RECONNECT_BACKOFF_MS = (100, 2000)


# Client(keep_alive_interval_seconds=...): the Java client's default.
KEEP_ALIVE_DEFAULT_S = 30


def channel_options(keep_alive_s: int = KEEP_ALIVE_DEFAULT_S) -> list[tuple[str, int]]:
    """The options of every channel the SDK opens to a broker."""
    return [
        *channel.grpc_options(channel.MAX_GRPC_MESSAGE_BYTES),
        ("grpc.initial_reconnect_backoff_ms", CHANNEL_RECONNECT_BACKOFF_MS[0]),
        ("grpc.max_reconnect_backoff_ms", CHANNEL_RECONNECT_BACKOFF_MS[1]),
        *channel.keep_alive_client_options(keep_alive_s),
    ]


_READY = grpc.ChannelConnectivity.READY
# A channel in one of these states cannot carry a call now: connecting failed
# (refused, reset: gRPC retries after its backoff) or the channel is closed.
_CANNOT_CONNECT = (grpc.ChannelConnectivity.TRANSIENT_FAILURE, grpc.ChannelConnectivity.SHUTDOWN)


class Connection:
    """One channel to a broker; producers and consumers share it. A TLS
    channel is opened by the first ``ensure_ready`` (it may read the
    broker's certificate first: protos/tls.py)."""

    def __init__(
        self,
        address: str,
        connection_timeout_ms: int,
        token: TokenSupplier | None = None,
        tls: TlsClient | None = None,
        keep_alive_s: int = KEEP_ALIVE_DEFAULT_S,
    ) -> None:
        self.address = address
        self.connection_timeout_s = connection_timeout_ms / 1000
        self.token = token
        self.tls = tls
        self.options = channel_options(keep_alive_s)
        self._channel: grpc.aio.Channel | None = None
        self._stub: broker_pb2_grpc.BrokerStub | None = None
        self._producers: ProduceMux | None = None
        if tls is None:
            self._set_channel(aio_channel(address, self.options, token))

    def _set_channel(self, channel: grpc.aio.Channel) -> None:
        self._channel = channel
        self._stub = broker_pb2_grpc.BrokerStub(channel)

    @property
    def channel(self) -> grpc.aio.Channel:
        assert self._channel is not None, "ensure_ready opens a TLS channel first"
        return self._channel

    @property
    def stub(self) -> broker_pb2_grpc.BrokerStub:
        assert self._stub is not None, "ensure_ready opens a TLS channel first"
        return self._stub

    async def _open_tls(self, timeout_s: float) -> None:
        assert self.tls is not None
        try:
            channel = await self.tls.channel(self.address, self.options, timeout_s)
        except TlsRefused as exc:  # its certificate or protocol: no use trying again
            raise TlsHandshakeError(
                f"cannot connect to the broker at {self.address}: {exc}"
            ) from None
        except ConnectionError as exc:  # down or unreachable: another may answer
            raise ConnectError(f"cannot connect to the broker at {self.address}: {exc}") from None
        self._set_channel(with_token(channel, self.token))

    async def _failed(self) -> ConnectError:
        """Why connecting failed: TlsHandshakeError when a handshake says
        (no use trying again), else ConnectError."""
        why = await asyncio.to_thread(diagnose, self.address, self.tls)
        if why is not None:
            return TlsHandshakeError(f"cannot connect to the broker at {self.address}: {why}")
        return ConnectError(f"cannot connect to the broker at {self.address} (connecting failed)")

    async def ensure_ready(self, timeout_s: float | None = None) -> None:
        """Return once the channel is connected; else ConnectError: at once
        when connecting fails (refused or reset), after ``timeout_s``
        (default ``connection_timeout_ms``) when the broker does not answer.
        The channel's own state is the truth: a channel whose broker died
        leaves READY, so it is never taken as connected afterwards."""
        timeout_s = timeout_s or self.connection_timeout_s
        if self._channel is None:
            await self._open_tls(timeout_s)
        state = self.channel.get_state(try_to_connect=True)
        if state == _READY:
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while state != _READY:
            if state in _CANNOT_CONNECT:
                raise await self._failed()
            try:
                await asyncio.wait_for(
                    self.channel.wait_for_state_change(state), deadline - loop.time()
                )
            except TimeoutError:
                raise ConnectError(
                    f"cannot connect to the broker at {self.address} within {timeout_s:g} s"
                ) from None
            state = self.channel.get_state(try_to_connect=True)

    def producer_call(self) -> ProducerCall:
        """A new producer stream, on this connection's one ``ProduceMany``
        call (client/_produce_mux.py); after ``ensure_ready``."""
        if self._producers is None:
            self._producers = ProduceMux(self.channel)
        return self._producers.open()

    async def close(self) -> None:
        if self._producers is not None:
            await self._producers.close()
        if self._channel is not None:
            await self._channel.close()


# The gRPC statuses of a refused call (the broker's access guard,
# protos/access.py): the SDK's typed errors, never retried.
REFUSALS: dict[grpc.StatusCode, type[MagnetarError]] = {
    grpc.StatusCode.UNAUTHENTICATED: AuthenticationError,
    grpc.StatusCode.PERMISSION_DENIED: AuthorizationError,
}


def rpc_failure(address: str, exc: grpc.RpcError) -> MagnetarError:
    """A gRPC failure as the SDK's typed error: AuthenticationError or
    AuthorizationError for a refused call, else ConnectError (the broker's
    own errors arrive as answers, never as gRPC statuses)."""
    # A blocking call's error is a grpc.Call; an asyncio one (AioRpcError) is not.
    code = exc.code() if isinstance(exc, grpc.Call | grpc.aio.AioRpcError) else None
    details = exc.details() if isinstance(exc, grpc.Call | grpc.aio.AioRpcError) else str(exc)
    refused = REFUSALS.get(code) if code is not None else None
    if refused is not None:
        return refused(f"broker {address}: {details}")
    return ConnectError(
        f"broker {address}: {code.name if code else 'failed'} {details or ''}".strip()
    )


async def open_stream(connection: Connection, call: Any, first: Any) -> Any:
    """Send a stream's first request and read the broker's first answer
    (grpc.aio.EOF when it ended the stream); a gRPC failure becomes the
    SDK's typed error (rpc_failure)."""
    try:
        await call.write(first)
        return await call.read()
    except grpc.aio.AioRpcError as exc:
        # A broker that refuses the call at once may end it before the
        # first write lands: the write then fails without the call's own
        # status, which the call still has.
        code = await call.code()
        if code in REFUSALS:
            raise REFUSALS[code](f"broker {connection.address}: {await call.details()}") from None
        raise rpc_failure(connection.address, exc) from None


def pick_start(n: int) -> int:
    """Which of the ``n`` listed brokers a client asks first: a random one,
    so a dead first entry costs only the clients that drew it."""
    return random.randrange(n)


# A redirect chain longer than this is a loop between confused brokers.
MAX_LOOKUP_REDIRECTS = 8
LOOKUP_BACKOFF_S = (0.05, 1.0)  # first and largest wait between lookup retries
LOOKUP_PROBE_S = 2.0  # how long a broker named by a lookup gets to connect
# How long a listed broker gets to connect before the next one is tried (a
# call that any broker can answer gives up after connection_timeout_ms).
SERVICE_PROBE_S = 2.0

T = TypeVar("T")


@dataclass
class _LookupWalk:
    """Where one lookup stands: the broker to ask and how, and the hops so far."""

    conn: Connection
    authoritative: bool = False
    hops: int = 0


class Connections:
    """One channel per broker; calls any broker can answer, over the
    service URL's brokers in turn (``client/_service_brokers.py``); topic
    lookups (DESIGN §5, Lookup): ask a service broker, follow redirects
    (carrying 'authoritative'), retry with backoff while a bundle is
    changing hands."""

    def __init__(
        self,
        service_addresses: list[str],
        connection_timeout_ms: int,
        timeout_s: float,
        token: TokenSupplier | None = None,
        tls: TlsClient | None = None,
        keep_alive_s: int = KEEP_ALIVE_DEFAULT_S,
    ) -> None:
        self.token = token  # what every call carries (the client's authentication)
        self.tls = tls  # magnetar+tls://: brokers are reached at their TLS URLs
        self.keep_alive_s = keep_alive_s
        self.connection_timeout_ms = connection_timeout_ms
        self.timeout_s = timeout_s
        self._pool: dict[str, Connection] = {}
        addresses = list(dict.fromkeys(service_addresses))
        self.brokers = ServiceBrokers(addresses, pick_start(len(addresses)))

    def get(self, address: str) -> Connection:
        conn = self._pool.get(address)
        if conn is None:
            conn = self._pool[address] = Connection(
                address, self.connection_timeout_ms, self.token, self.tls, self.keep_alive_s
            )
        return conn

    @staticmethod
    def _now_ms() -> float:
        return time.monotonic() * 1000

    async def call_service(self, call: Callable[[Connection], Awaitable[T]], what: str) -> T:
        """``call`` on a broker of the service URL, in rounds of
        ``ServiceBrokers.pick``: one that cannot be connected to or answers
        UNAVAILABLE is marked down and the next is asked; after a round
        without an answer, the next starts when the soonest broker is back.
        After ``connection_timeout_ms`` without an answer: ConnectError
        naming each broker tried and why."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.connection_timeout_ms / 1000
        tried: list[str] = []
        failures: dict[str, str] = {}  # the last reason of each broker tried
        while True:
            address = self.brokers.pick(self._now_ms(), tried)
            if address is None:  # a round without an answer
                wait_s = self.brokers.wait_ms(self._now_ms()) / 1000
                if loop.time() + wait_s >= deadline:
                    raise ConnectError(
                        f"{what}: no broker of the service URL answers: "
                        + "; ".join(failures.values())
                    )
                await asyncio.sleep(wait_s)  # the soonest broker's backoff
                tried.clear()
                continue
            tried.append(address)
            conn = self.get(address)
            try:
                await conn.ensure_ready(max(0.001, min(SERVICE_PROBE_S, deadline - loop.time())))
                result = await call(conn)
            except TlsHandshakeError:
                raise  # the other brokers of the URL are set up alike
            except ConnectError as exc:
                failures[address] = str(exc)
            except grpc.aio.AioRpcError as exc:
                if not try_next(exc.code()):
                    raise rpc_failure(address, exc) from None
                failures[address] = f"broker {address}: {exc.code().name}"
            else:
                self.brokers.mark_up(address)
                return result
            self.brokers.mark_down(address, self._now_ms())

    async def lookup(self, topic: str) -> Connection:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_s
        delay = LOOKUP_BACKOFF_S[0]
        while True:
            answer = await self._lookup_once(topic)
            if isinstance(answer, Connection):
                return answer
            if answer.error.code != common_pb2.SERVICE_NOT_READY or loop.time() + delay > deadline:
                raise from_wire(answer.error)
            await asyncio.sleep(delay)  # a retry timer while the bundle moves
            delay = min(delay * 2, LOOKUP_BACKOFF_S[1])

    async def _lookup_once(self, topic: str) -> Connection | broker_pb2.LookupResponse:
        """One walk: a service broker's answer, then the brokers it names
        (at most MAX_LOOKUP_REDIRECTS hops). The owner, or the answer that
        ended the walk."""

        async def ask(conn: Connection) -> tuple[Connection, broker_pb2.LookupResponse]:
            return conn, await self._lookup_rpc(conn, topic, False)

        conn, resp = await self.call_service(ask, f"lookup of {topic}")
        walk = _LookupWalk(conn)
        while not resp.error.code:
            owner = self._follow(walk, topic, resp)
            if owner is not None:
                return owner
            resp = await self._ask_named(walk, topic)
        return resp

    async def _lookup_rpc(
        self, conn: Connection, topic: str, authoritative: bool
    ) -> broker_pb2.LookupResponse:
        return await conn.stub.Lookup(  # type: ignore[no-any-return]
            broker_pb2.LookupRequest(topic=topic, authoritative=authoritative),
            timeout=self.timeout_s,
        )

    async def _ask_named(self, walk: _LookupWalk, topic: str) -> broker_pb2.LookupResponse:
        """The answer of a broker a lookup named. One that does not answer may
        be dead with its registration not yet expired: that answers
        SERVICE_NOT_READY (look up again after a backoff), and a listed one
        is marked down, so the next walk starts elsewhere."""
        conn = walk.conn
        try:
            await conn.ensure_ready(min(LOOKUP_PROBE_S, self.timeout_s))
            return await self._lookup_rpc(conn, topic, walk.authoritative)
        except TlsHandshakeError:
            raise
        except ConnectError as exc:
            why = str(exc)
        except grpc.aio.AioRpcError as exc:
            if not try_next(exc.code()):
                raise rpc_failure(conn.address, exc) from None
            why = exc.code().name
        if conn.address in self.brokers.addresses:
            self.brokers.mark_down(conn.address, self._now_ms())
        return broker_pb2.LookupResponse(
            error=common_pb2.Error(
                code=common_pb2.SERVICE_NOT_READY,
                message=f"broker {conn.address} for {topic} does not answer: {why}",
            )
        )

    def _follow(
        self, walk: _LookupWalk, topic: str, resp: broker_pb2.LookupResponse
    ) -> Connection | None:
        """The owner, when the broker asked is the one named; else the walk
        moves on to the broker named (at most MAX_LOOKUP_REDIRECTS hops)."""
        target = self.get(self._url_of(topic, resp))
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

    def _url_of(self, topic: str, resp: broker_pb2.LookupResponse) -> str:
        """The named broker's URL of this client's protocol."""
        url = resp.broker_url_tls if self.tls is not None else resp.broker_url
        if not url:  # the service URL's scheme does not fit this cluster
            raise InvalidUrl(
                f"the broker serving {topic} has no TLS port: connect with magnetar://"
                if self.tls is not None
                else f"the broker serving {topic} has TLS only: connect with magnetar+tls://"
            )
        return url

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
# A producer stream the broker ended with these is reconnected too, and what
# has no receipt resent: PERSISTENCE_ERROR is the topic's ledger failing under
# a send (Pulsar's clients reconnect on any send error but a few).
PRODUCER_RECONNECT_CODES = (*RECONNECT_CODES, common_pb2.PERSISTENCE_ERROR)


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
