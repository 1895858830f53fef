"""Three metastore nodes on loopback: write rate, read latency, failover time.

    .venv/bin/python benchmarks/metastore_cluster.py [--seconds 5]

Prints JSON lines: committed writes/s with one writer and with 8 concurrent
writers (each waits for its commit: majority on disk), Get latency p50/p99 on
the leader, and the time from kill -9 of the leader to the first write that
succeeds afterwards. Every loop is bounded by --seconds; the nodes run in a
temporary directory and are stopped at the end.
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


async def main_async(cluster: MetastoreCluster, seconds: float) -> None:
    client = MetastoreClient(cluster.addresses, timeout_s=30)
    await client.put("/bench/warm", b"")
    print(json.dumps({"case": "writes, 1 writer", **await writes(client, 1, seconds)}), flush=True)
    print(json.dumps({"case": "writes, 8 writers", **await writes(client, 8, seconds)}), flush=True)
    print(json.dumps({"case": "get on the leader", **await reads(client, seconds)}), flush=True)
    print(json.dumps({"case": "leader kill -9", **await failover(cluster, client)}), flush=True)
    await client.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--seconds", type=float, default=5.0)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cluster = MetastoreCluster(Path(tmp), 3)
        try:
            cluster.start_all()
            asyncio.run(main_async(cluster, a.seconds))
        finally:
            cluster.stop_all()


if __name__ == "__main__":
    main()
