"""The floor under publish→ack latency at a fixed rate: bare gRPC, no Magnetar.

A Magnetar publish crosses client → broker → bookie (fdatasync) and back.
This script builds that shape from the building blocks alone, pipelined as
Magnetar is: a store process that group-commits (appends everything that
arrived during the last fdatasync, syncs once in a thread, answers them
all in one message), a relay process that forwards each message downstream at once and
answers the client as the store answers, and an open-loop client sending
1 KiB messages at ``--rate`` for ``--seconds`` on one gRPC stream. Latency =
answer time - send time (HdrHistogram). Whatever Magnetar does on top, its
publish→ack tail at that rate cannot beat this one on the same machine.

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
from pathlib import Path

import grpc
import grpc.aio
from hdrh.histogram import HdrHistogram

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.grpc_floor import floor_servers

SERVICE = "floor.Floor"
METHOD = f"/{SERVICE}/Stream"


def _ident(b: bytes) -> bytes:
    return b


async def _store(context: grpc.aio.ServicerContext, journal: str) -> None:
    fd = os.open(journal, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    queued: list[bytes] = []
    arrived = asyncio.Event()
    done = False

    async def read() -> None:
        nonlocal done
        while (msg := await context.read()) is not grpc.aio.EOF:
            queued.append(msg)
            arrived.set()
        done = True
        arrived.set()

    def sync(data: bytes) -> None:
        os.write(fd, data)
        os.fdatasync(fd)

    reader = asyncio.create_task(read())
    try:
        while not (done and not queued):
            await arrived.wait()
            arrived.clear()
            group, queued[:] = list(queued), []
            if not group:
                continue
            await asyncio.to_thread(sync, b"".join(group))
            await context.write(b"".join(msg[:8] for msg in group))  # one answer for the group
    finally:
        reader.cancel()
        os.close(fd)


async def _relay(context: grpc.aio.ServicerContext, downstream: str) -> None:
    channel = grpc.aio.insecure_channel(downstream)
    call = channel.stream_stream(METHOD, request_serializer=_ident, response_deserializer=_ident)()

    async def forward() -> None:
        while (msg := await context.read()) is not grpc.aio.EOF:
            await call.write(msg)
        await call.done_writing()

    forwarding = asyncio.create_task(forward())
    try:
        while (answer := await call.read()) is not grpc.aio.EOF:
            await context.write(answer)
    finally:
        forwarding.cancel()
        await channel.close()


async def serve(port: int, downstream: str, journal: str) -> None:
    async def stream(_requests, context):  # type: ignore[no-untyped-def]
        if downstream:
            await _relay(context, downstream)
        else:
            await _store(context, journal)

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


async def open_loop(target: str, rate: int, seconds: float, size: int) -> dict:
    channel = grpc.aio.insecure_channel(target)
    await asyncio.wait_for(channel.channel_ready(), timeout=15)
    call = channel.stream_stream(METHOD, request_serializer=_ident, response_deserializer=_ident)()
    total = int(rate * seconds)
    h = HdrHistogram(1, 60_000_000, 3)
    filler = b"x" * (size - 8)

    warm_up = rate // 10  # the first 0.1 s (connections warming) is not recorded

    async def answers() -> None:
        i = 0
        while i < total:
            stamps = await call.read()
            now = time.perf_counter_ns()
            for at in range(0, len(stamps), 8):
                if i >= warm_up:
                    sent = int.from_bytes(stamps[at : at + 8], "big")
                    h.record_value(max(1, (now - sent) // 1000))
                i += 1

    reading = asyncio.create_task(answers())
    t0 = time.perf_counter()
    for i in range(total):
        delay = t0 + i / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)  # pacing the open-loop sender
        await call.write(time.perf_counter_ns().to_bytes(8, "big") + filler)
    await asyncio.wait_for(reading, seconds + 30)
    await call.done_writing()
    await channel.close()
    return {
        "case": "2 hops + group-commit fdatasync, open loop",
        "rate": rate,
        "msgs": total - warm_up,
        **{f"p{p}_ms": round(h.get_value_at_percentile(p) / 1000, 3) for p in (50, 99, 99.9)},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rate", type=int, default=2000)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--size", type=int, default=1100, help="bytes per message (1 KiB + metadata)")
    ap.add_argument("--serve", nargs=3, metavar=("PORT", "DOWNSTREAM", "JOURNAL"), help="internal")
    a = ap.parse_args()
    if a.serve:
        port, downstream, journal = a.serve
        asyncio.run(serve(int(port), downstream, journal))
        return
    with floor_servers(__file__) as (start, tmp):
        store = start(journal=str(tmp / "journal"))
        relay = start(downstream=store)
        res = asyncio.run(open_loop(relay, a.rate, a.seconds, a.size))
        print(json.dumps(res), flush=True)


if __name__ == "__main__":
    main()
