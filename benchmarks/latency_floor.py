"""The floor under publish→ack latency at a fixed rate: bare gRPC, no Magnetar.

A Magnetar publish crosses client → broker → bookie (fdatasync) and back.
This script builds that shape from the building blocks alone, as lean as
they allow:

- a store process that group-commits: everything that arrived while the
  last fdatasync ran is written and synced once, in a thread (as the
  bookie's journal does), and answered in one message;
- a relay process that forwards whatever has arrived since its last write
  in one message downstream, and the store's answers upstream the same way
  (as the broker coalesces adds per bookie and answers per connection);
- an open-loop client sending 1 KiB messages at ``--rate`` for
  ``--seconds`` on one gRPC stream (messages due together go in one write).

Latency = answer time - send time (HdrHistogram); the first 0.1 s is not
recorded. The servers' CPU is printed too: at 2,000/s the three processes
share this machine's two cores. It is a reference for the tail of the
building blocks alone, not a strict lower bound: its p99 varies widely
from run to run here and can come out above Magnetar's own in a sitting.

    .venv/bin/python benchmarks/latency_floor.py [--rate 2000] [--seconds 10]

Prints one JSON line. Servers listen on 127.0.0.1 on free ports and stop at
the end; the client's loop is bounded by rate x seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import grpc
import grpc.aio
import psutil
from hdrh.histogram import HdrHistogram

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.grpc_floor import floor_servers

SERVICE = "floor.Floor"
METHOD = f"/{SERVICE}/Stream"
STAMP = 8  # bytes of send time at the head of each message


def _ident(b: bytes) -> bytes:
    return b


class Coalescer:
    """Messages put while a write is in flight go out together in the next
    one. ``run`` ends once ``close`` was called and everything is written."""

    def __init__(self, write: Callable[[bytes], Awaitable[object]]) -> None:
        self._write = write
        self._queued: list[bytes] = []
        self._ready = asyncio.Event()
        self._closed = False

    def put(self, msg: bytes) -> None:
        self._queued.append(msg)
        self._ready.set()

    def close(self) -> None:
        self._closed = True
        self._ready.set()

    async def run(self) -> None:
        while not (self._closed and not self._queued):
            await self._ready.wait()
            self._ready.clear()
            if self._queued:
                group, self._queued = self._queued, []
                await self._write(b"".join(group))


async def _store(context: grpc.aio.ServicerContext, journal: str, size: int) -> None:
    fd = os.open(journal, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def sync(data: bytes) -> None:
        os.write(fd, data)
        os.fdatasync(fd)

    async def commit(data: bytes) -> None:
        await asyncio.to_thread(sync, data)
        await context.write(b"".join(data[at : at + STAMP] for at in range(0, len(data), size)))

    group = Coalescer(commit)
    committing = asyncio.create_task(group.run())
    try:
        while (msg := await context.read()) is not grpc.aio.EOF:
            group.put(msg)
        group.close()
        await committing
    finally:
        committing.cancel()
        os.close(fd)


async def _relay(context: grpc.aio.ServicerContext, downstream: str) -> None:
    channel = grpc.aio.insecure_channel(downstream)
    call = channel.stream_stream(METHOD, request_serializer=_ident, response_deserializer=_ident)()
    down, up = Coalescer(call.write), Coalescer(context.write)

    async def answers() -> None:
        while (answer := await call.read()) is not grpc.aio.EOF:
            up.put(answer)
        up.close()

    tasks = [asyncio.create_task(t) for t in (down.run(), up.run(), answers())]
    try:
        while (msg := await context.read()) is not grpc.aio.EOF:
            down.put(msg)
    finally:
        for t in tasks:
            t.cancel()
        await channel.close()


async def serve(port: int, downstream: str, journal: str, size: int) -> None:
    async def stream(_requests, context):  # type: ignore[no-untyped-def]
        if downstream:
            await _relay(context, downstream)
        else:
            await _store(context, journal, size)

    server = grpc.aio.server()
    handler = grpc.stream_stream_rpc_method_handler(
        stream, request_deserializer=_ident, response_serializer=_ident
    )
    server.add_generic_rpc_handlers(
        [grpc.method_handlers_generic_handler(SERVICE, {"Stream": handler})]
    )
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    await server.wait_for_termination()


async def open_loop(target: str, rate: int, seconds: float, size: int, batch_s: float) -> dict:
    channel = grpc.aio.insecure_channel(target)
    await asyncio.wait_for(channel.channel_ready(), timeout=15)
    call = channel.stream_stream(METHOD, request_serializer=_ident, response_deserializer=_ident)()
    total = int(rate * seconds)
    h = HdrHistogram(1, 60_000_000, 3)
    filler = b"x" * (size - STAMP)
    warm_up = rate // 10  # the first 0.1 s (connections warming) is not recorded

    async def answers() -> None:
        i = 0
        while i < total:
            stamps = await call.read()
            now = time.perf_counter_ns()
            for at in range(0, len(stamps), STAMP):
                if i >= warm_up:
                    sent = int.from_bytes(stamps[at : at + STAMP], "big")
                    h.record_value(max(1, (now - sent) // 1000))
                i += 1

    reading = asyncio.create_task(answers())
    t0 = time.perf_counter()
    i = 0
    batch: list[bytes] = []
    closes = 0.0  # when the open batch goes out
    while i < total or batch:
        now = time.perf_counter()
        if batch and (now >= closes or i == total):
            await call.write(b"".join(batch))
            batch = []
            continue
        until = min(t0 + i / rate if i < total else closes, closes if batch else float("inf"))
        if until > now:
            await asyncio.sleep(until - now)  # pacing the open-loop sender
            continue
        while i < total and t0 + i / rate <= time.perf_counter():
            if not batch:
                closes = time.perf_counter() + batch_s
            batch.append(time.perf_counter_ns().to_bytes(STAMP, "big") + filler)
            i += 1
    await asyncio.wait_for(reading, seconds + 30)
    await call.done_writing()
    await channel.close()
    return {
        "case": "2 hops + group-commit fdatasync, open loop",
        "rate": rate,
        "batch_ms": batch_s * 1000,
        "msgs": total - warm_up,
        **{f"p{p}_ms": round(h.get_value_at_percentile(p) / 1000, 3) for p in (50, 99, 99.9)},
    }


def _cpu_s(procs: list[psutil.Process]) -> list[float]:
    return [sum(p.cpu_times()[:2]) for p in procs]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rate", type=int, default=2000)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--size", type=int, default=1100, help="bytes per message (1 KiB + metadata)")
    ap.add_argument(
        "--batch-ms",
        type=float,
        default=1.0,
        help="the client holds a batch this long after its first message (the harness's "
        "Magnetar producer batches with a 1 ms delay); 0 writes what is due at once",
    )
    ap.add_argument("--serve", nargs=3, metavar=("PORT", "DOWNSTREAM", "JOURNAL"), help="internal")
    a = ap.parse_args()
    if a.serve:
        port, downstream, journal = a.serve
        asyncio.run(serve(int(port), downstream, journal, a.size))
        return
    with floor_servers(__file__, "--size", str(a.size)) as (start, tmp):
        store = start(journal=str(tmp / "journal"))
        relay = start(downstream=store)
        # the relay is the server with a downstream: --serve PORT DOWNSTREAM JOURNAL
        servers = sorted(psutil.Process().children(), key=lambda p: p.cmdline()[-4] == "")
        before, t0 = _cpu_s(servers), time.perf_counter()
        res = asyncio.run(open_loop(relay, a.rate, a.seconds, a.size, a.batch_ms / 1000))
        wall = time.perf_counter() - t0
        relay_cpu, store_cpu = (b - a for a, b in zip(before, _cpu_s(servers), strict=True))
        res["relay_cpu_pct"] = round(relay_cpu / wall * 100)
        res["store_cpu_pct"] = round(store_cpu / wall * 100)
        print(json.dumps(res), flush=True)


if __name__ == "__main__":
    main()
