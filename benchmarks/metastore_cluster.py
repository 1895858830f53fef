"""Three metastore nodes on loopback: write rate, read latency, failover time.

    .venv/bin/python benchmarks/metastore_cluster.py [--seconds 5] [--sequential-writes 20]

Prints JSON lines: the total time and per-write latency of a few sequential
writes (each waits for its commit; with pysyncobj's defaults each would wait
for the next 0.1 s append period, so 20 would take at least 1 s),
committed writes/s with one writer and with 8 concurrent writers (each waits
for its commit: majority on disk), Get latency p50/p99 on the leader, and
the time from kill -9 of the leader to the first write that succeeds
afterwards. Every loop is bounded by --seconds; the nodes run in a temporary
directory and are stopped at the end.
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
from metastore.client import MetastoreClient
from tests.harness import MetastoreCluster


async def sequential_writes(client: MetastoreClient, n: int) -> dict:
    """``n`` writes one after another, each answered once committed."""
    t0 = time.perf_counter()
    for i in range(n):
        await client.put(f"/bench/seq/{i}", b"")
    total = time.perf_counter() - t0
    return {"writes": n, "total_s": round(total, 4), "per_write_ms": round(total / n * 1e3, 3)}


async def writes(client: MetastoreClient, writers: int, seconds: float) -> dict:
    done = 0
    lat: list[float] = []
    deadline = time.monotonic() + seconds

    async def one(w: int) -> None:
        nonlocal done
        i = 0
        while time.monotonic() < deadline:
            t = time.perf_counter()
            await client.put(f"/bench/w{w}/{i % 100}", b"x" * 100)
            lat.append(time.perf_counter() - t)
            done += 1
            i += 1

    t0 = time.monotonic()
    await asyncio.gather(*(one(w) for w in range(writers)))
    wall = time.monotonic() - t0
    lat.sort()
    return {
        "writers": writers,
        "writes_s": round(done / wall),
        "p50_ms": round(lat[len(lat) // 2] * 1e3, 3),
        "p99_ms": round(lat[int(len(lat) * 0.99)] * 1e3, 3),
    }


async def reads(client: MetastoreClient, seconds: float) -> dict:
    lat: list[float] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        t = time.perf_counter()
        await client.get("/bench/w0/1")
        lat.append(time.perf_counter() - t)
    lat.sort()
    return {
        "reads": len(lat),
        "p50_ms": round(lat[len(lat) // 2] * 1e3, 3),
        "p99_ms": round(lat[int(len(lat) * 0.99)] * 1e3, 3),
    }


async def failover(cluster: MetastoreCluster, client: MetastoreClient) -> dict:
    leader = ""
    for node_id in cluster.ids:
        if (await client.status(cluster.address(node_id))).is_leader:
            leader = node_id
    t0 = time.monotonic()
    cluster.kill9(leader)
    await client.put("/bench/after-failover", b"x")
    first_write = time.monotonic() - t0
    elected = None
    for node_id in cluster.procs:
        st = await client.status(cluster.address(node_id))
        if st.is_leader:
            elected = node_id
    return {
        "killed": leader,
        "new_leader": elected,
        "kill_to_first_write_s": round(first_write, 3),
    }


async def main_async(cluster: MetastoreCluster, seconds: float, sequential: int) -> None:
    client = MetastoreClient(cluster.addresses, timeout_s=30)
    await client.put("/bench/warm", b"")
    print(
        json.dumps({"case": "sequential writes", **await sequential_writes(client, sequential)}),
        flush=True,
    )
    print(json.dumps({"case": "writes, 1 writer", **await writes(client, 1, seconds)}), flush=True)
    print(json.dumps({"case": "writes, 8 writers", **await writes(client, 8, seconds)}), flush=True)
    print(json.dumps({"case": "get on the leader", **await reads(client, seconds)}), flush=True)
    print(json.dumps({"case": "leader kill -9", **await failover(cluster, client)}), flush=True)
    await client.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--sequential-writes", type=int, default=20)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cluster = MetastoreCluster(Path(tmp), 3)
        try:
            cluster.start_all()
            asyncio.run(main_async(cluster, a.seconds, a.sequential_writes))
        finally:
            cluster.stop_all()


if __name__ == "__main__":
    main()
