"""What every Magnetar server process shares: logging, the gRPC health
service, the HTTP port (``/metrics``, ``/status.html``), free-port picking, channel
options, servicer registration (with a method's own request decoding where
one needs it) and the SIGTERM/SIGINT shutdown.
"""

from __future__ import annotations

import asyncio
import errno
import functools
import logging
import os
import signal
import socket
import ssl
import sys
import threading
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import grpc
from google.protobuf import message_factory
from google.protobuf.descriptor import ServiceDescriptor
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from protos.access import AccessGuard
from protos.channel import MAX_GRPC_MESSAGE_BYTES as MAX_GRPC_MESSAGE_BYTES
from protos.channel import grpc_options as grpc_options
from protos.http_endpoint import HttpEndpoint, Render
from protos.malloc import tune_malloc as tune_malloc
from protos.tls import TlsClient


def tune_gc() -> None:
    """Fewer young-generation collections for a long-running server.

    The hot paths allocate a few tracked objects per entry (struct tuples),
    which with CPython's default threshold of 700 starts a collection every
    few hundred entries. Objects alive after start-up are frozen out of
    every collection; the young generation is collected every 20,000
    allocations (a few MB of young objects at most).
    """
    import gc

    gc.freeze()
    gc.set_threshold(20_000, 10, 10)


def setup_logging(role: str, level: str = "INFO") -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format=f"%(asctime)s %(levelname)s {role}[%(process)d] %(name)s: %(message)s",
        stream=sys.stderr,
    )


# Ports free_port handed out in this process (bounded: cleared when full).
_HANDED_OUT: set[int] = set()
_MAX_HANDED_OUT = 10000
_LOWEST_PICK = 10000


@functools.cache
def _ephemeral_low() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on, for a server that is told its port before
    it binds (Raft peers must know each other's).

    Picked below the kernel's ephemeral range: a port the kernel would hand
    out itself could become an outgoing connection's source port between
    this pick and the server's bind ("Address already in use").
    """
    import random

    low = _ephemeral_low()
    if low - _LOWEST_PICK >= 1000:
        span = low - _LOWEST_PICK
        start = random.randrange(span)
        if len(_HANDED_OUT) >= _MAX_HANDED_OUT:
            _HANDED_OUT.clear()
        for i in range(span):
            port = _LOWEST_PICK + (start + i) % span
            if port in _HANDED_OUT:
                continue
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                try:
                    s.bind((host, port))
                except OSError:
                    continue
            _HANDED_OUT.add(port)
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


_HANDLER_KINDS = {  # (client streaming, server streaming)
    (False, False): grpc.unary_unary_rpc_method_handler,
    (False, True): grpc.unary_stream_rpc_method_handler,
    (True, False): grpc.stream_unary_rpc_method_handler,
    (True, True): grpc.stream_stream_rpc_method_handler,
}


def serialized(response: Any) -> bytes:
    """A response serializer for methods that answer some of their messages
    already serialised (written by hand: protos/deliveries.py,
    protos/frames.py): bytes pass through, a message is serialised."""
    if type(response) is bytes:
        return response
    return bytes(response.SerializeToString())


def add_servicer(
    server: grpc.aio.Server,
    servicer: object,
    service: ServiceDescriptor,
    request_deserializers: Mapping[str, Callable[[bytes], Any]] | None = None,
    guard: AccessGuard | None = None,
    response_serializers: Mapping[str, Callable[[Any], bytes]] | None = None,
) -> None:
    """Register ``servicer``'s methods of ``service`` on ``server``, as the
    generated ``add_*Servicer_to_server`` does, except that the methods named
    in ``request_deserializers`` get their requests through the function
    given there instead of the generated message class (and likewise their
    answers out through ``response_serializers``), and that with a
    ``guard`` every method is behind authentication and its authorization
    rule (``protos/access.py``; a method without a rule is refused here)."""
    request_deserializers = request_deserializers or {}
    response_serializers = response_serializers or {}
    unknown = {*request_deserializers, *response_serializers} - {m.name for m in service.methods}
    if unknown:
        raise ValueError(f"{service.full_name} has no methods {sorted(unknown)}")
    if guard is not None:
        guard.check_covers(service.full_name, [m.name for m in service.methods])
    handlers = {}
    for m in service.methods:
        decode = request_deserializers.get(m.name)
        if decode is None:
            decode = message_factory.GetMessageClass(m.input_type).FromString
        behaviour = getattr(servicer, m.name)
        if guard is not None:
            behaviour = guard.wrap(
                service.full_name, m.name, m.client_streaming, m.server_streaming, behaviour
            )
        handlers[m.name] = _HANDLER_KINDS[m.client_streaming, m.server_streaming](
            behaviour,
            request_deserializer=decode,
            response_serializer=response_serializers.get(m.name)
            or message_factory.GetMessageClass(m.output_type).SerializeToString,
        )
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(service.full_name, handlers),)
    )
    server.add_registered_method_handlers(service.full_name, handlers)


def health_serving(address: str, timeout_s: float = 1.0, tls: TlsClient | None = None) -> bool:
    """Whether the process at ``address`` says SERVING on its gRPC health
    service (``magnetar health``, supervisors, probes); over TLS with ``tls``."""
    try:
        opened = grpc.insecure_channel(address) if tls is None else tls.sync_channel(address, [])
    except ConnectionError:
        return False
    with opened as channel:
        try:
            resp = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=""), timeout=timeout_s
            )
        except grpc.RpcError:
            return False
    return bool(resp.status == health_pb2.HealthCheckResponse.SERVING)


# prctl(2) option: the signal this process gets when its parent dies.
_PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int) -> bool:
    """Have the kernel SIGKILL this process when its parent (the supervisor
    ``parent_pid``) dies, however it dies. Set by the child itself, first
    thing (not through ``preexec_fn``, unsafe in a parent with threads); a
    parent that died before this ran is caught by comparing pids. Returns
    False where prctl is not available (not Linux): nothing is set then."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    try:
        prctl = ctypes.CDLL(name, use_errno=True).prctl if name else None
    except (OSError, AttributeError):
        prctl = None
    if prctl is None or prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        return False
    if os.getppid() != parent_pid:
        os._exit(1)  # the supervisor is already gone
    return True


def add_health(server: grpc.aio.Server) -> health.HealthServicer:
    servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    return servicer


def set_serving(servicer: health.HealthServicer, serving: bool) -> None:
    status = (
        health_pb2.HealthCheckResponse.SERVING
        if serving
        else health_pb2.HealthCheckResponse.NOT_SERVING
    )
    servicer.set("", status)


class StartRefused(RuntimeError):
    """A server cannot start with these settings (an address it cannot
    listen on, a bad peer list): one line for the operator, exit code 1."""


class PortInUse(OSError):
    """A port this process must listen on is taken."""

    def __init__(self, port: int, what: str, host: str) -> None:
        self.port = port
        self.what = what
        super().__init__(f"port {port} ({what}) is in use on {host}")


def check_port_free(host: str, port: int, what: str) -> None:
    """Raise PortInUse at once when ``host:port`` cannot be bound (0 and
    negative ports, picked later or off, pass). Called before a server
    touches anything, so a taken port is one clear line, not a hang
    (pysyncobj retries a failed bind forever, silently) or a gRPC trace."""
    if port <= 0:
        return
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        # As the servers bind: a port left in TIME_WAIT by a stopped one is free.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise PortInUse(port, what, host) from None
            raise StartRefused(f"cannot listen on {host}:{port} ({what}): {exc.strerror}") from None


WILDCARDS = ("0.0.0.0", "::", "")


def local_address(bind_address: str, port: int) -> str:
    """Where a process on this machine reaches a server bound to
    ``bind_address`` (its advertised name may not resolve here)."""
    if bind_address in ("::", "[::]"):
        return f"[::1]:{port}"
    return f"{'127.0.0.1' if bind_address in WILDCARDS else bind_address}:{port}"


def advertised(bind_address: str, advertised_address: str) -> str:
    """The host other processes and clients are told: ``advertised_address``
    when set; else the bind address, unless that is a wildcard, which no one
    can connect to: then this machine's host name (a pod's or container's
    name, which its peers resolve)."""
    if advertised_address:
        return advertised_address
    if bind_address in WILDCARDS:
        return socket.gethostname()
    return bind_address


async def start_http(
    host: str,
    port: int,
    render: Render,
    max_connections: int,
    min_render_interval_ms: int = 0,
    tls: ssl.SSLContext | None = None,
) -> tuple[HttpEndpoint | None, int]:
    """Serve ``/metrics`` and ``/status.html`` (protos/http_endpoint.py);
    port 0 picks a free one, -1 is off. Returns the endpoint and its port
    (None, -1 when off). The caller points ``endpoint.health.address`` at
    its gRPC port once that is bound."""
    if port < 0:
        return None, -1
    try:
        endpoint = HttpEndpoint(render, max_connections, min_render_interval_ms / 1000)
    except ValueError as exc:
        raise StartRefused(str(exc)) from None
    try:
        return endpoint, await endpoint.start(host, port, tls)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise PortInUse(port, "metrics", host) from None
        raise


class HttpSettings(Protocol):
    @property
    def metrics_port(self) -> int: ...
    @property
    def http_max_connections(self) -> int: ...
    @property
    def http_min_render_interval_ms(self) -> int: ...


async def start_http_endpoint(
    bind_address: str,
    settings: HttpSettings,
    render: Render,
    listeners: Listeners,
    metrics_tls: ssl.SSLContext | None,
    health_tls: TlsClient | None,
) -> tuple[HttpEndpoint | None, int]:
    """A server's HTTP port (HTTPS with ``metrics_tls``) with its readiness
    check pointed at the server's own gRPC port: the plaintext one, else
    the TLS one (asked with ``health_tls``)."""
    endpoint, port = await start_http(
        bind_address,
        settings.metrics_port,
        render,
        settings.http_max_connections,
        settings.http_min_render_interval_ms,
        metrics_tls,
    )
    if endpoint is not None:
        endpoint.health.address = listeners.local
        endpoint.health.tls = None if listeners.local_plain else health_tls
    return endpoint, port


def thread_render(make: Callable[[], bytes]) -> Render:
    """A ``render`` for the HTTP endpoint that makes the text in a thread
    (off the event loop): the bookie's and the metastore's metrics."""

    async def render() -> bytes:
        return await asyncio.get_running_loop().run_in_executor(None, make)

    return render


def install_shutdown(loop: asyncio.AbstractEventLoop, stop: Callable[[], None]) -> None:
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop)


async def bind(
    server: grpc.aio.Server,
    host: str,
    port: int,
    credentials: grpc.ServerCredentials | None = None,
) -> int:
    """Listen on ``host:port`` (0: a free port), with TLS when given ``credentials``."""
    what = "gRPC TLS" if credentials is not None else "gRPC"
    try:
        if credentials is None:
            bound = server.add_insecure_port(f"{host}:{port}")
        else:
            bound = server.add_secure_port(f"{host}:{port}", credentials)
    except RuntimeError:
        bound = 0
    if bound == 0:
        if port > 0:
            check_port_free(host, port, what)
        raise StartRefused(f"cannot listen on {host}:{port} ({what})")
    return bound


@dataclass(frozen=True)
class Listeners:
    """Where a server's gRPC ports are: advertised ``host:port`` for others
    and the local address for this machine, per protocol ("" = closed)."""

    plain: str = ""
    tls: str = ""
    local_plain: str = ""
    local_tls: str = ""

    @property
    def identity(self) -> str:
        """How the cluster names this process: its plaintext address, or
        its TLS address when it has no plaintext port."""
        return self.plain or self.tls

    @property
    def local(self) -> str:
        return self.local_plain or self.local_tls


async def bind_listeners(
    server: grpc.aio.Server,
    bind_address: str,
    advertised_address: str,
    port: int,
    port_tls: int,
    credentials: grpc.ServerCredentials | None,
) -> Listeners:
    """The plaintext port (unless ``port`` is -1) and the TLS port (when
    there are ``credentials`` and ``port_tls`` is not -1); at least one."""
    host = advertised(bind_address, advertised_address)
    plain = tls = local_plain = local_tls = ""
    if port >= 0:
        bound = await bind(server, bind_address, port)
        plain, local_plain = f"{host}:{bound}", local_address(bind_address, bound)
    if credentials is not None and port_tls >= 0:
        bound = await bind(server, bind_address, port_tls, credentials)
        tls, local_tls = f"{host}:{bound}", local_address(bind_address, bound)
    if not plain and not tls:
        raise StartRefused(
            "no gRPC port is open: the plaintext port is off (-1) and there is no TLS port "
            "(set tls_certificate_file_path and tls_key_file_path)"
        )
    return Listeners(plain, tls, local_plain, local_tls)


async def bounded_shutdown(
    steps: Callable[[], Awaitable[None]], deadline: float, log: logging.Logger, what: str
) -> None:
    """Run one of a server's stop steps until ``deadline`` (the event loop's
    clock) at the latest; the steps of one stop share that deadline, so time
    one does not use is left to the next. A step that times out (calls to an
    unreachable metastore or bookie) or fails is given up and logged: the
    process exits anyway, and what it held in the metastore (sessions,
    ownership) expires with its session."""
    timeout_s = max(0.05, deadline - asyncio.get_running_loop().time())
    try:
        await asyncio.wait_for(steps(), timeout_s)
    except TimeoutError:
        log.warning("%s did not finish in time (shutdown_timeout_s); given up", what)
    except Exception:
        log.exception("%s failed while stopping; going on", what)


def stop_deadline(timeout_s: float, share: float = 0.8) -> float:
    """The shared deadline of the stop steps that wait on other processes:
    ``share`` of ``shutdown_timeout_s`` from now; the rest is kept for the
    local ones (closing RocksDB, the Raft journal) before ``exit_deadline``."""
    return asyncio.get_running_loop().time() + timeout_s * share


def exit_deadline(timeout_s: float) -> None:
    """Last resort after a stop signal: end the process ``timeout_s`` from
    now even if a thread (RocksDB, Raft, gRPC's own) still blocks exit."""

    def _exit() -> None:
        logging.getLogger("magnetar").error("still running %g s after the stop signal", timeout_s)
        logging.shutdown()
        os._exit(1)

    timer = threading.Timer(timeout_s, _exit)
    timer.daemon = True
    timer.start()


def write_ready_file(path: str | None, info: dict) -> None:
    """Atomically write what a started process listens on (for supervisors)."""
    if not path:
        return
    import json
    import os

    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(info, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
