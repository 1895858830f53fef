"""Replicated ledger writes against real bookies, beside the raw disk ceiling.

    .venv/bin/python benchmarks/ledger_replication.py [--n 50000] [--window 1000]

Starts one metastore node and three bookies (journal sync on) in a temporary
directory, fresh for every case, then prints JSON lines:

* the raw ceiling: rocksdict WriteBatch group commits of 1 KiB values with
  sync on, in this process, 100 and 1000 entries per batch (no gRPC);
* pipelined 1 KiB adds through the ledger client for E/Qw/Qa = 1/1/1 and
  3/2/2, one ``add()`` per entry and ``add_many()`` of ``--per-call``
  entries: entries/s, MB/s, latency p50/p99 of a call (to confirmation), with
  ``--window`` entries in flight;

and the ratio of 3/2/2 to the raw ceiling. Every loop is bounded by --n.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bookie.ledger_client import LedgerClient
from metastore.client import MetastoreClient
from tests.harness import BookieCluster

SIZE = 1024


def raw_ceiling(path: Path, per_batch: int, n: int) -> dict:
    from rocksdict import Options, Rdict, WriteBatch, WriteOptions

    db = Rdict(str(path), Options(raw_mode=True))
    wo = WriteOptions()
    wo.sync = True
    value = b"x" * SIZE
    t0 = time.perf_counter()
    written = 0
    while written < n:
        wb = WriteBatch(raw_mode=True)
        for i in range(per_batch):
            wb.put((written + i).to_bytes(16, "big"), value)
        db.write(wb, wo)
        written += per_batch
    wall = time.perf_counter() - t0
    db.close()
    return {
        "case": f"raw rocksdict group commit, {per_batch}/batch, sync",
        "entries_s": round(written / wall),
        "mb_s": round(written * SIZE / wall / 1e6, 1),
    }


async def pipelined(
    ms_address: str, quorums: tuple[int, int, int], n: int, window: int, per_call: int
) -> dict:
    ms = MetastoreClient(ms_address)
    client = LedgerClient(ms)
    writer = await client.create_ledger(*quorums)
    payloads = [b"x" * SIZE] * per_call
    lat: list[float] = []
    inflight: set[asyncio.Future] = set()
    t0 = time.perf_counter()
    for _ in range(n // per_call):
        started = time.perf_counter()
        fut = writer.add(payloads[0]) if per_call == 1 else writer.add_many(payloads)

        def done(_: asyncio.Future, s: float = started) -> None:
            lat.append(time.perf_counter() - s)

        fut.add_done_callback(done)
        inflight.add(fut)
        if len(inflight) * per_call >= window:
            _, inflight = await asyncio.wait(inflight, return_when=asyncio.FIRST_COMPLETED)
    if inflight:
        await asyncio.wait(inflight)
    wall = time.perf_counter() - t0
    await writer.close()
    await client.close()
    await ms.close()
    lat.sort()
    e, qw, qa = quorums
    how = "add() per entry" if per_call == 1 else f"add_many() of {per_call}"
    return {
        "case": f"ledger client, pipelined, E/Qw/Qa = {e}/{qw}/{qa}, {how}",
        "entries_s": round(n / wall),
        "mb_s": round(n * SIZE / wall / 1e6, 1),
        "p50_ms": round(lat[len(lat) // 2] * 1e3, 2),
        "p99_ms": round(lat[int(len(lat) * 0.99)] * 1e3, 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--n", type=int, default=50_000)
    ap.add_argument("--window", type=int, default=5000, help="entries in flight")
    ap.add_argument("--per-call", type=int, default=100, help="entries per add_many()")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=".") as tmp:
        raws = [raw_ceiling(Path(tmp) / f"raw{b}", b, a.n) for b in (100, 1000)]
        for r in raws:
            print(json.dumps(r), flush=True)
        results = []
        for per_call in (1, a.per_call):
            for q in ((1, 1, 1), (3, 2, 2)):
                # Fresh bookies per case: earlier cases' data would add their
                # flushes and compactions to later ones.
                cluster = BookieCluster(Path(tmp) / f"cluster-{per_call}-{q[0]}", 3)
                try:
                    cluster.start_all()
                    res = asyncio.run(
                        pipelined(cluster.metastore_address, q, a.n, a.window, per_call)
                    )
                finally:
                    cluster.stop_all()
                results.append(res)
                print(json.dumps(res), flush=True)
        best = max(r["entries_s"] for r in results if "3/2/2" in r["case"])
        print(
            json.dumps(
                {
                    "best_3_2_2_entries_s": best,
                    "ratio_to_raw_100_per_batch": round(best / raws[0]["entries_s"], 3),
                    "ratio_to_raw_1000_per_batch": round(best / raws[1]["entries_s"], 3),
                }
            )
        )


if __name__ == "__main__":
    main()
