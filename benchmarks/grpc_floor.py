"""The floor under a one-at-a-time send: bare gRPC hops between Python processes.

A synchronous Magnetar ``send`` crosses client -> broker -> bookie and back,
with one fdatasync on the bookie. This script measures that shape with no
Magnetar code at all: raw-bytes gRPC bidi streams (grpc.aio, the same library
and settings), a relay process standing in for the broker and a store process
that appends each message to a file and fdatasyncs it, standing in for the
bookie. Whatever Magnetar does on top, its one-at-a-time rate cannot beat the
"2 hops + fdatasync" line on the same machine.

    .venv/bin/python benchmarks/grpc_floor.py [--n 3000]

Prints one JSON line per case: round trips per second, p50/p99 in ms, and the
client's CPU per round trip. Every loop is bounded by --n; servers listen on
127.0.0.1 on free ports and are stopped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import grpc
import grpc.aio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from protos.serving import free_port

SERVICE = "floor.Floor"
METHOD = f"/{SERVICE}/Echo"


def _ident(b: bytes) -> bytes:
    return b


async def serve(port: int, downstream: str | None, journal: str | None) -> None:
    fd = os.open(journal, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644) if journal else -1

    async def echo(_request_iterator, context):  # type: ignore[no-untyped-def]
        call = None
        if downstream:
            channel = grpc.aio.insecure_channel(downstream)
            call = channel.stream_stream(
                METHOD, request_serializer=_ident, response_deserializer=_ident
            )()
        while (msg := await context.read()) is not grpc.aio.EOF:
            if call is not None:
                await call.write(msg)
                msg = await call.read()
            elif fd >= 0:
                os.write(fd, msg)
                os.fdatasync(fd)
            await context.write(msg)

    server = grpc.aio.server()
    handler = grpc.stream_stream_rpc_method_handler(
        echo, request_deserializer=_ident, response_serializer=_ident
    )
    server.add_generic_rpc_handlers(
        [grpc.method_handlers_generic_handler(SERVICE, {"Echo": handler})]
    )
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    await server.wait_for_termination()


async def ping_pong(target: str, n: int, size: int) -> dict:
    channel = grpc.aio.insecure_channel(target)
    await asyncio.wait_for(channel.channel_ready(), timeout=15)
    call = channel.stream_stream(METHOD, request_serializer=_ident, response_deserializer=_ident)()
    msg = b"x" * size
    for _ in range(200):  # warm-up, outside the measurement
        await call.write(msg)
        await call.read()
    lat = []
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    for _ in range(n):
        t = time.perf_counter()
        await call.write(msg)
        await call.read()
        lat.append(time.perf_counter() - t)
    wall = time.perf_counter() - t0
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    await call.done_writing()
    await channel.close()
    lat.sort()
    cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    return {
        "round_trips_s": round(n / wall),
        "p50_ms": round(lat[n // 2] * 1e3, 3),
        "p99_ms": round(lat[int(n * 0.99)] * 1e3, 3),
        "client_cpu_us": round(cpu / n * 1e6, 1),
    }


Start = Callable[..., str]  # (downstream="", journal="") -> the server's address


@contextmanager
def floor_servers(script: str, *extra: str) -> Iterator[tuple[Start, Path]]:
    """``start(downstream="", journal="")`` runs ``script --serve PORT
    DOWNSTREAM JOURNAL *extra`` on a free port and gives its address, in the
    order started; every server started is stopped at the end. Also a
    scratch directory for journals."""
    procs: list[subprocess.Popen] = []

    def start(downstream: str = "", journal: str = "") -> str:
        port = free_port()
        procs.append(
            subprocess.Popen(
                [sys.executable, script, "--serve", str(port), downstream, journal, *extra],
                stdin=subprocess.DEVNULL,
            )
        )
        return f"127.0.0.1:{port}"

    with tempfile.TemporaryDirectory(dir=".") as tmp:
        try:
            yield start, Path(tmp)
        finally:
            for p in procs:
                p.terminate()
            for p in procs:
                p.wait(timeout=10)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--n", type=int, default=3000)
    ap.add_argument("--size", type=int, default=1100, help="bytes per message (1 KiB + metadata)")
    ap.add_argument("--serve", nargs=3, metavar=("PORT", "DOWNSTREAM", "JOURNAL"), help="internal")
    a = ap.parse_args()
    if a.serve:
        port, downstream, journal = a.serve
        asyncio.run(serve(int(port), downstream or None, journal or None))
        return

    with floor_servers(__file__) as (start, tmp):
        echo = start()
        store = start(journal=str(tmp / "journal"))
        relay = start(downstream=store)
        cases = [
            ("1 hop (client -> server), no disk", echo),
            ("1 hop + fdatasync", store),
            ("2 hops + fdatasync (the shape of a Magnetar send)", relay),
        ]
        for name, target in cases:
            res = asyncio.run(ping_pong(target, a.n, a.size))
            print(json.dumps({"case": name, "n": a.n, **res}), flush=True)


if __name__ == "__main__":
    main()
