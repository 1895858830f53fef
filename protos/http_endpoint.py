"""Every server process's plain-HTTP port (``metrics_port``): what a
Prometheus server and a load balancer's probe ask for, and nothing else.

====================  =========================================================
``GET /metrics``      the Prometheus text format (0.0.4); ``/metrics/`` too,
                      as Pulsar serves it
``GET /status.html``  ``200 OK`` when the process's gRPC health service says
                      SERVING, ``503`` otherwise (Pulsar's readiness path)
any other path        ``404``; a method other than GET or HEAD ``405``; a
                      request that is not HTTP/1.x ``400`` (the connection is
                      closed)
====================  =========================================================

Theory of operation. The server runs on the process's own event loop
(asyncio streams, HTTP/1.1 with keep-alive, as Prometheus scrapes). How the
metrics text is made is the process's business (``render``: the broker
reads and formats its topics on the loop a slice at a time; the bookie and
the metastore format theirs in a thread). Requests arriving together share
one render, and renders start at most every ``min_render_interval_s``
(``http_min_render_interval_ms``), so no number of scrapers, pipelined
requests or HEADs (answered without rendering) makes a process spend more
than that. Readiness is asked of the gRPC health service itself, over the
process's own local gRPC address, so ``/status.html`` and a gRPC probe can
never disagree. Everything is bounded: ``max_connections`` open connections
(the next one gets ``503`` and is closed), a request head of
``MAX_HEAD_BYTES`` arriving within ``READ_TIMEOUT_S`` once begun,
``IDLE_TIMEOUT_S`` between requests on one connection, ``WRITE_TIMEOUT_S``
for a client to take an answer. A bad request changes nothing but its own
connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Awaitable, Callable

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from protos.tls import TlsClient

log = logging.getLogger(__name__)

MAX_HEAD_BYTES = 8192
READ_TIMEOUT_S = 10.0
IDLE_TIMEOUT_S = 60.0
WRITE_TIMEOUT_S = 10.0
REFUSE_READ_TIMEOUT_S = 1.0
CLOSE_TIMEOUT_S = 1.0
HEALTH_TIMEOUT_S = 2.0
METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
METRICS_PATHS = ("/metrics", "/metrics/")
STATUS_PATH = "/status.html"

Render = Callable[[], Awaitable[bytes]]

_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


class Request:
    """The parts of an HTTP/1.x request head the endpoint looks at."""

    __slots__ = ("keep_alive", "method", "path")

    def __init__(self, method: str, path: str, keep_alive: bool) -> None:
        self.method = method
        self.path = path
        self.keep_alive = keep_alive


class BadRequest(ValueError):
    """Not an HTTP/1.x request head this endpoint can answer."""


def parse_head(head: bytes) -> Request:
    """The request line and the Connection header of ``head`` (up to and
    including the blank line). A body is not accepted: a request announcing
    one is a bad request (nothing here takes one)."""
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1.") or not parts[1].startswith("/"):
        raise BadRequest(f"not an HTTP/1.x request line: {lines[0][:80]!r}")
    method, target, version = parts
    if not (method.isascii() and method.isalpha() and method.isupper()):
        raise BadRequest(f"not an HTTP method: {method[:20]!r}")
    keep_alive = version != "HTTP/1.0"
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip():
            raise BadRequest(f"malformed header line {line[:80]!r}")
        key, value = name.lower(), value.strip().lower()
        if key == "connection":
            keep_alive = value == "keep-alive" or (keep_alive and value != "close")
        elif key == "transfer-encoding" or (key == "content-length" and value != "0"):
            raise BadRequest("a request body is not accepted here")
    return Request(method, target.split("?", 1)[0], keep_alive)


def response(
    status: int, body: bytes, content_type: str, keep_alive: bool, head: bool, length: bool = True
) -> bytes:
    lines = [f"HTTP/1.1 {status} {_REASONS[status]}", f"Content-Type: {content_type}"]
    if length:
        lines.append(f"Content-Length: {len(body)}")
    lines.append(f"Connection: {'keep-alive' if keep_alive else 'close'}")
    if status == 405:
        lines.append("Allow: GET, HEAD")
    out = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return out if head else out + body


class HealthProbe:
    """Asks a gRPC health service (this process's own) whether it says
    SERVING; no address yet means not ready."""

    def __init__(self) -> None:
        self.address: str | None = None
        # How to reach a process whose only gRPC port is its TLS one.
        self.tls: TlsClient | None = None
        self._channel: grpc.aio.Channel | None = None

    async def serving(self) -> bool:
        if self.address is None:
            return False
        try:
            if self._channel is None:
                self._channel = (
                    grpc.aio.insecure_channel(self.address)
                    if self.tls is None
                    else await self.tls.channel(self.address, [])
                )
        except ConnectionError:
            return False
        try:
            resp = await health_pb2_grpc.HealthStub(self._channel).Check(
                health_pb2.HealthCheckRequest(service=""), timeout=HEALTH_TIMEOUT_S
            )
        except grpc.RpcError:
            return False
        return bool(resp.status == health_pb2.HealthCheckResponse.SERVING)

    async def close(self) -> None:
        if self._channel is not None:
            await self._channel.close()
            self._channel = None


class HttpEndpoint:
    """``/metrics``, ``/metrics/`` and ``/status.html`` on one port (module docstring)."""

    def __init__(
        self, render: Render, max_connections: int, min_render_interval_s: float = 0.0
    ) -> None:
        if max_connections < 1:
            raise ValueError(f"http_max_connections must be at least 1, not {max_connections}")
        self.render = render
        self.health = HealthProbe()
        self.max_connections = max_connections
        self.min_render_interval_s = min_render_interval_s
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task] = set()
        self._refusing: set[asyncio.Task] = set()
        self._rendering: asyncio.Task | None = None
        self._next_render_at = 0.0
        self.scrapes = 0
        self.renders = 0

    async def start(self, host: str, port: int, tls: ssl.SSLContext | None = None) -> int:
        """Listen on ``host:port`` (0 picks a free port; HTTPS with ``tls``);
        returns the port."""
        self._server = await asyncio.start_server(
            self._connection,
            host,
            port,
            limit=MAX_HEAD_BYTES,
            reuse_address=True,
            ssl=tls,
            # Handshakes are not counted by max_connections: bound their time.
            ssl_handshake_timeout=READ_TIMEOUT_S if tls is not None else None,
        )
        return int(self._server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            tasks = self._connections | self._refusing
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), CLOSE_TIMEOUT_S)
            self._server = None
        await self.health.close()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        over = len(self._connections) >= self.max_connections
        tracked = self._refusing if over else self._connections
        tracked.add(task)
        try:
            if over:
                await self._refuse(reader, writer)
            else:
                await self._serve(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, TimeoutError):
            pass
        except asyncio.CancelledError:
            pass  # close(): the connection ends here
        finally:
            tracked.discard(task)
            await _close(writer)

    async def _refuse(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """503 for a connection over the bound. Its request is read first
        (briefly; at once when the refused ones pile up too), so closing
        does not reset the connection under the answer."""
        if len(self._refusing) <= self.max_connections:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), REFUSE_READ_TIMEOUT_S)
        writer.write(response(503, b"too many connections\n", "text/plain", False, False))

    async def _read_head(self, reader: asyncio.StreamReader, first: bool) -> bytes:
        """A request head: the first within READ_TIMEOUT_S; a later one on a
        kept-alive connection may wait IDLE_TIMEOUT_S to begin, then has
        READ_TIMEOUT_S to arrive whole."""
        if first:
            return await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT_S)
        start = await asyncio.wait_for(reader.readexactly(1), IDLE_TIMEOUT_S)
        return start + await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT_S)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        first = True
        while True:
            try:
                head = await self._read_head(reader, first)
            except (asyncio.LimitOverrunError, ValueError):
                writer.write(response(400, b"request head too large\n", "text/plain", False, False))
                return
            try:
                request = parse_head(head)
            except BadRequest as exc:
                writer.write(response(400, f"{exc}\n".encode(), "text/plain", False, False))
                return
            writer.write(await self._answer(request))
            # A client that stops reading gives its slot back within the bound.
            await asyncio.wait_for(writer.drain(), WRITE_TIMEOUT_S)
            if not request.keep_alive:
                return
            first = False

    async def _answer(self, request: Request) -> bytes:
        keep, head = request.keep_alive, request.method == "HEAD"
        if request.method not in ("GET", "HEAD"):
            return response(405, b"only GET and HEAD\n", "text/plain", keep, False)
        if request.path in METRICS_PATHS:
            if head:  # nothing to render: the headers only, without a length
                return response(200, b"", METRICS_CONTENT_TYPE, keep, True, length=False)
            try:
                body = await self._body()
            except Exception:
                log.exception("rendering the metrics failed")
                return response(500, b"rendering the metrics failed\n", "text/plain", keep, head)
            self.scrapes += 1
            return response(200, body, METRICS_CONTENT_TYPE, keep, head)
        if request.path == STATUS_PATH:
            if await self.health.serving():
                return response(200, b"OK\n", "text/plain", keep, head)
            return response(503, b"not serving\n", "text/plain", keep, head)
        return response(404, f"no such path: {request.path}\n".encode(), "text/plain", keep, head)

    async def _body(self) -> bytes:
        """The metrics text, rendered after this request arrived. Requests
        arriving together share one render, and renders start at most every
        ``min_render_interval_s`` (a later request waits for the next one),
        so no number of clients or pipelined requests makes the process
        render more often than that."""
        loop = asyncio.get_running_loop()
        if self._rendering is None:
            wait_s = self._next_render_at - loop.time()
            if wait_s > 0:
                await asyncio.sleep(wait_s)  # the rate bound, not a synchronisation
        if self._rendering is None:
            self._next_render_at = loop.time() + self.min_render_interval_s
            self._rendering = asyncio.ensure_future(self.render())
            self._rendering.add_done_callback(self._rendered)
            self.renders += 1
        return await asyncio.shield(self._rendering)

    def _rendered(self, task: asyncio.Task) -> None:
        if self._rendering is task:
            self._rendering = None
        if not task.cancelled():
            task.exception()  # retrieved: each waiter gets it


async def _close(writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(Exception):
        writer.close()
        await asyncio.wait_for(writer.wait_closed(), 1.0)
