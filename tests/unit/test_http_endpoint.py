"""Every process's HTTP port (protos/http_endpoint.py): /metrics and
/metrics/, /status.html following a real gRPC health service, 404 for any
other path, and bad requests refused without harm to the next ones."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from protos import serving
from protos.http_endpoint import BadRequest, HttpEndpoint, parse_head

# request head -> (method, path, keep-alive) or None (a bad request)
HEADS = [
    (b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", ("GET", "/metrics", True)),
    (b"GET /metrics/ HTTP/1.1\r\n\r\n", ("GET", "/metrics/", True)),
    (b"GET /metrics?x=1 HTTP/1.0\r\n\r\n", ("GET", "/metrics", False)),
    (b"GET /status.html HTTP/1.1\r\nConnection: close\r\n\r\n", ("GET", "/status.html", False)),
    (b"HEAD /x HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", ("HEAD", "/x", True)),
    (b"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n", ("POST", "/metrics", True)),
    (b"garbage\r\n\r\n", None),
    (b"GET /metrics HTTP/2.0\r\n\r\n", None),
    (b"GET metrics HTTP/1.1\r\n\r\n", None),
    (b"GET /metrics HTTP/1.1\r\nno colon here\r\n\r\n", None),
    (b"POST /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\n", None),  # no bodies here
    (b"POST /metrics HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", None),
    (b"\xff\xfe\x00 / HTTP/1.1\r\n\r\n", None),
]


@pytest.mark.parametrize(("head", "expected"), HEADS)
def test_request_heads(head, expected):
    if expected is None:
        with pytest.raises(BadRequest):
            parse_head(head)
        return
    r = parse_head(head)
    assert (r.method, r.path, r.keep_alive) == expected


async def _ask(port: int, raw: bytes) -> tuple[int, bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(raw)
    await writer.drain()
    data = await asyncio.wait_for(reader.read(), 10)  # the server closes after answering
    writer.close()
    status_line, _, rest = data.partition(b"\r\n")
    return int(status_line.split()[1]), rest.partition(b"\r\n\r\n")[2]


async def _get(port: int, path: str, method: str = "GET") -> tuple[int, bytes]:
    return await _ask(port, f"{method} {path} HTTP/1.1\r\nConnection: close\r\n\r\n".encode())


def test_paths_and_methods():
    async def main() -> None:
        ep = HttpEndpoint(_text(b"up 1\n"), max_connections=4)
        port = await ep.start("127.0.0.1", 0)
        try:
            assert await _get(port, "/metrics") == (200, b"up 1\n")
            assert await _get(port, "/metrics/") == (200, b"up 1\n")
            assert (await _get(port, "/metrics", "HEAD")) == (200, b"")  # no render
            assert (await _get(port, "/admin/v2/clusters"))[0] == 404
            assert (await _get(port, "/"))[0] == 404
            assert (await _get(port, "/metrics", "POST"))[0] == 405
            assert (await _get(port, "/status.html"))[0] == 503  # no health service yet
            assert (await _ask(port, b"\x16\x03\x01garbage\r\n\r\n"))[0] == 400
            assert (await _ask(port, b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\n\r\n"))[0] == 400
            assert await _get(port, "/metrics") == (200, b"up 1\n")  # still serving
            assert ep.scrapes == ep.renders == 3
        finally:
            await ep.close()

    asyncio.run(main())


def test_keep_alive_serves_several_requests_on_one_connection():
    async def main() -> None:
        ep = HttpEndpoint(_text(b"up 1\n"), max_connections=4)
        port = await ep.start("127.0.0.1", 0)
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            for _ in range(3):
                writer.write(b"GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n")
                head = await reader.readuntil(b"\r\n\r\n")
                assert head.startswith(b"HTTP/1.1 200 ")
                length = int(head.split(b"Content-Length: ")[1].split(b"\r\n")[0])
                assert await reader.readexactly(length) == b"up 1\n"
            writer.close()
        finally:
            await ep.close()

    asyncio.run(main())


def test_connections_beyond_the_bound_are_refused_and_the_rest_served():
    async def main() -> None:
        ep = HttpEndpoint(_text(b"up 1\n"), max_connections=2)
        port = await ep.start("127.0.0.1", 0)
        try:
            held = [await asyncio.open_connection("127.0.0.1", port) for _ in range(2)]
            await _wait(lambda: len(ep._connections) == 2)
            assert (await _get(port, "/metrics"))[0] == 503
            for _, w in held:
                w.close()
            await _wait(lambda: not ep._connections)
            assert (await _get(port, "/metrics"))[0] == 200
        finally:
            await ep.close()

    asyncio.run(main())


def test_a_failing_render_is_a_500_and_the_next_scrape_works():
    calls = 0

    async def render() -> bytes:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("boom")
        return b"up 1\n"

    async def main() -> None:
        ep = HttpEndpoint(render, max_connections=2)
        port = await ep.start("127.0.0.1", 0)
        try:
            assert (await _get(port, "/metrics"))[0] == 500
            assert (await _get(port, "/metrics"))[0] == 200
        finally:
            await ep.close()

    asyncio.run(main())


def test_status_follows_the_grpc_health_service():
    async def main() -> None:
        server = grpc.aio.server()
        health = serving.add_health(server)
        serving.set_serving(health, False)
        grpc_port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        ep = HttpEndpoint(_text(b""), max_connections=2)
        port = await ep.start("127.0.0.1", 0)
        ep.health.address = f"127.0.0.1:{grpc_port}"
        try:
            assert (await _get(port, "/status.html"))[0] == 503  # NOT_SERVING
            serving.set_serving(health, True)
            assert await _get(port, "/status.html") == (200, b"OK\n")
            serving.set_serving(health, False)
            assert (await _get(port, "/status.html"))[0] == 503
            serving.set_serving(health, True)
            await server.stop(grace=0)  # the gRPC side is gone: not ready
            assert (await _get(port, "/status.html"))[0] == 503
        finally:
            await ep.close()

    asyncio.run(main())


def test_a_taken_port_is_one_clear_error():
    async def main() -> None:
        ep, port = await serving.start_http("127.0.0.1", 0, _text(b""), 2)
        assert ep is not None
        try:
            with pytest.raises(serving.PortInUse, match=f"port {port} \\(metrics\\)"):
                await serving.start_http("127.0.0.1", port, _text(b""), 2)
            assert await serving.start_http("127.0.0.1", -1, _text(b""), 2) == (None, -1)
        finally:
            await ep.close()

    asyncio.run(main())


def _text(body: bytes):  # type: ignore[no-untyped-def]
    async def render() -> bytes:
        return body

    return render


async def _wait(predicate, timeout_s: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("timed out")
        await asyncio.sleep(0.01)


def test_scrapes_together_share_a_render_and_renders_are_rate_bound():
    renders = 0

    async def render() -> bytes:
        nonlocal renders
        renders += 1
        await asyncio.sleep(0.05)  # a render that takes a while (the others arrive meanwhile)
        return f"n {renders}\n".encode()

    async def main() -> None:
        ep = HttpEndpoint(render, max_connections=8, min_render_interval_s=0.3)
        port = await ep.start("127.0.0.1", 0)
        try:
            together = await asyncio.gather(*(_get(port, "/metrics") for _ in range(5)))
            assert {body for _, body in together} == {b"n 1\n"} and renders == 1
            loop = asyncio.get_running_loop()
            started = loop.time()
            assert (await _get(port, "/metrics"))[1] == b"n 2\n"  # fresh, not the old text
            assert loop.time() - started >= 0.2  # it waited for the next render slot
            # 200 pipelined HEADs render nothing; the GET after them renders once.
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"HEAD /metrics HTTP/1.1\r\n\r\n" * 200)  # HEADs render nothing
            writer.write(b"GET /metrics HTTP/1.1\r\nConnection: close\r\n\r\n")
            data = await asyncio.wait_for(reader.read(), 30)
            assert data.count(b"HTTP/1.1 200 ") == 201 and renders == 3
            writer.close()
        finally:
            await ep.close()

    asyncio.run(main())


def test_a_client_that_stops_reading_gives_its_slot_back(monkeypatch):
    from protos import http_endpoint

    monkeypatch.setattr(http_endpoint, "WRITE_TIMEOUT_S", 0.5)
    big = b"x" * (16 << 20)  # more than the socket buffers hold

    async def main() -> None:
        ep = HttpEndpoint(_text(big), max_connections=1)
        port = await ep.start("127.0.0.1", 0)
        try:
            _reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"GET /metrics HTTP/1.1\r\n\r\n")  # and never read
            await _wait(lambda: len(ep._connections) == 1)
            await _wait(lambda: not ep._connections)  # dropped once the write timed out
            assert (await _get(port, "/status.html"))[0] == 503  # served again
            writer.close()
        finally:
            await ep.close()

    asyncio.run(main())


def test_a_slow_or_idle_kept_alive_connection_is_closed(monkeypatch):
    from protos import http_endpoint

    monkeypatch.setattr(http_endpoint, "READ_TIMEOUT_S", 0.3)
    monkeypatch.setattr(http_endpoint, "IDLE_TIMEOUT_S", 0.6)

    async def main() -> None:
        ep = HttpEndpoint(_text(b"up 1\n"), max_connections=2)
        port = await ep.start("127.0.0.1", 0)
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"GET /metrics HTTP/1.1\r\n\r\nGET /met")  # then nothing more
            head = await reader.readuntil(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200 ")
            await reader.readexactly(5)
            assert await asyncio.wait_for(reader.read(), 5) == b""  # closed by the server
            writer.close()
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"GET /metrics HTTP/1.1\r\n\r\n")  # then idle
            await reader.readuntil(b"\r\n\r\n")
            await reader.readexactly(5)
            assert await asyncio.wait_for(reader.read(), 5) == b""
            writer.close()
            await _wait(lambda: not ep._connections)
        finally:
            await ep.close()

    asyncio.run(main())


def test_a_bound_below_one_is_refused_in_one_line():
    with pytest.raises(ValueError, match="http_max_connections must be at least 1"):
        HttpEndpoint(_text(b""), max_connections=0)

    async def main() -> None:
        with pytest.raises(serving.StartRefused, match="at least 1"):
            await serving.start_http("127.0.0.1", 0, _text(b""), 0)

    asyncio.run(main())
