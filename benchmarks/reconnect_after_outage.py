"""How soon a gRPC channel reaches its server again after an outage: the
reconnect schedule Magnetar's bookie and metastore clients use
(``protos.channel.reconnect_options``) against gRPC's own (1 s, growing
1.6x to 120 s). Prints figures; asserts nothing.

    .venv/bin/python -m benchmarks.reconnect_after_outage [--down 5,30] [--runs 1]

For each outage length, a grpc.aio channel calls a port where nothing
listens every ``--probe-ms`` (as a broker's writes and recoveries keep
calling a lost bookie), a health server starts on that port after the
outage, and the time from its start to the first call it serves is
printed, for both schedules, alternating. A call made while the channel
waits out its backoff fails at once without trying the server.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

import grpc
import grpc.aio
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from protos.channel import reconnect_options
from protos.serving import free_port


async def served_after(down_s: float, options: list[tuple[str, int]], probe_s: float) -> float:
    """Seconds from the server's start to the first call it serves."""
    port = free_port()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=options)
    stub = health_pb2_grpc.HealthStub(channel)
    server: grpc.aio.Server | None = None
    started = 0.0
    t0 = time.monotonic()
    try:
        while time.monotonic() - t0 < down_s + 300:  # bounded: gRPC's schedule tops at 120 s
            if server is None and time.monotonic() - t0 >= down_s:
                server = grpc.aio.server()
                health_pb2_grpc.add_HealthServicer_to_server(health.aio.HealthServicer(), server)
                server.add_insecure_port(f"127.0.0.1:{port}")
                await server.start()
                started = time.monotonic()
            try:
                await stub.Check(health_pb2.HealthCheckRequest(), timeout=probe_s)
                if server is not None:
                    return time.monotonic() - started
            except grpc.aio.AioRpcError:
                pass
            await asyncio.sleep(probe_s)  # the probe's pace
        raise RuntimeError("the server was never reached")
    finally:
        await channel.close()
        if server is not None:
            await server.stop(None)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--down", default="5,30", help="outage lengths, seconds")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--probe-ms", type=int, default=200)
    args = ap.parse_args()
    schedules = {"magnetar": reconnect_options(), "grpc default": []}
    print("| outage | schedule | served after the server's start (s), per run |")
    print("|---|---|---|")
    for down in (float(d) for d in args.down.split(",")):
        figures: dict[str, list[float]] = {name: [] for name in schedules}
        for _ in range(args.runs):
            for name, options in schedules.items():
                figures[name].append(asyncio.run(served_after(down, options, args.probe_ms / 1000)))
        for name, got in figures.items():
            print(f"| {down:g} s | {name} | {', '.join(f'{g:.2f}' for g in got)} |", flush=True)


if __name__ == "__main__":
    main()
