"""The floor under "client CPU per pipelined message": what the two
benchmarks that measure it spend per message on their own, with no SDK.

    .venv/bin/python -m benchmarks.client_floor [--n 200000] [--reps 3]

1. ``harness``: the peer harness's pipelined loop (``../shared/bench/peers``,
   window 1,000) against a peer whose sends are futures acknowledged 1 ms
   later, all at once (as receipts come back in batches): the harness's
   semaphore, timestamps, callbacks and the asyncio futures themselves.
   The aio row of ``make bench`` measures this plus the SDK.
2. ``produce_consume``: ``benchmarks/produce_consume.py``'s per-message
   callback (a closure, two clock reads, an HdrHistogram record, counters)
   made and called once per message, as its pipelined workload does. The
   sync row of ``make bench`` measures this plus the SDK.

Prints one JSON line per case: CPU µs per message (median of ``--reps``).
Every loop is bounded by ``--n``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

HARNESS = Path(
    os.environ.get("PEERS_HARNESS", Path(__file__).resolve().parents[2] / "shared/bench/peers")
)
sys.path.insert(0, str(HARNESS))
import peers  # noqa: E402

from benchmarks.produce_consume import hist  # noqa: E402
from client import Result  # noqa: E402


class InstantPeer(peers.Peer):
    """Acknowledges every send 1 ms after the first of its batch."""

    name = "instant"

    async def connect(self) -> None:
        self.batch: list[asyncio.Future] = []
        self.armed = False

    async def close(self) -> None:
        pass

    async def reset(self) -> None:
        pass

    def _ack(self) -> None:
        self.armed = False
        batch, self.batch = self.batch, []
        for fut in batch:
            fut.set_result(None)

    async def publish_start(self, payload: bytes) -> asyncio.Future:
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self.batch.append(fut)
        if not self.armed:
            self.armed = True
            loop.call_later(0.001, self._ack)
        return fut


def harness(n: int) -> float:
    async def run() -> float:
        peer = InstantPeer()
        await peer.connect()
        payload = b"x" * 1024
        cpu0 = time.process_time()
        done, _ = await peers._pipelined(peer, n, time.perf_counter() + 60, 1000, lambda: payload)
        return (time.process_time() - cpu0) / done * 1e6

    return asyncio.run(run())


def produce_consume(n: int) -> float:
    h = hist()
    acked, errors, target = [0], [0], [n + 1]
    all_done = threading.Event()
    cpu0 = time.process_time()
    for _ in range(n):
        start = time.perf_counter_ns()

        def cb(result: Any, msg_id: Any, start: int = start) -> None:
            h.record_value(max(1, (time.perf_counter_ns() - start) // 1000))
            if result != Result.Ok:
                errors[0] += 1
            acked[0] += 1
            if acked[0] >= target[0]:
                all_done.set()

        cb(Result.Ok, None)
    return (time.process_time() - cpu0) / n * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    for name, case in (("harness", harness), ("produce_consume", produce_consume)):
        runs = [case(a.n) for _ in range(a.reps)]
        print(
            json.dumps(
                {
                    "case": name,
                    "cpu_us_per_msg": round(statistics.median(runs), 2),
                    "runs": [round(r, 2) for r in runs],
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
