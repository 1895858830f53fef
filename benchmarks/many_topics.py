"""Many topics: creating topics, the broker's memory per idle topic, and the
first send of a new producer on a broker that holds many idle topics.

    .venv/bin/python benchmarks/many_topics.py --endpoints data/endpoints.json \\
        [--create 1000] [--idle 10000] [--probe 200]

1. ``create``: topics made one after another through the sync SDK, each by
   a new producer that sends one 1 KiB message (acknowledged) and closes:
   total seconds, ms per topic, and the CPU per topic of this client and
   of each server process named in the endpoints file.
2. ``idle``: the broker is brought to ``--idle`` idle topics (made the same
   way, 32 at a time through the asyncio SDK, not timed); its RSS growth
   over them, per topic (after the broker's own GC has run: it is measured
   once RSS settles).
3. ``probe``: with those idle topics loaded, ``--probe`` new producers in
   turn, each timed from ``create_producer`` to its first send's receipt:
   p50 / p99 / max in ms.

Prints one JSON line per phase. Every loop is bounded by its count.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

import psutil
from hdrh.histogram import HdrHistogram

from client import Client, ServiceUnitNotReady
from client import aio as magnetar

PAYLOAD = b"x" * 1024


def rss_kib(pid: int) -> int:
    return int(psutil.Process(pid).memory_info().rss // 1024)


def settled_rss_kib(pid: int, max_s: float = 10.0) -> int:
    """The RSS once two readings 0.5 s apart agree within 1 % (or after max_s)."""
    deadline = time.monotonic() + max_s
    last = rss_kib(pid)
    while time.monotonic() < deadline:
        time.sleep(0.5)  # sampling a process's memory, not synchronisation
        now = rss_kib(pid)
        if abs(now - last) <= last // 100:
            return now
        last = now
    return last


def cpu_s(pids: dict[str, int]) -> dict[str, float]:
    return {k: sum(psutil.Process(v).cpu_times()[:2]) for k, v in pids.items()}


def create_one_by_one(url: str, prefix: str, n: int, pids: dict[str, int]) -> dict:
    with Client(url) as c:
        c.create_producer(f"{prefix}-warm").send(PAYLOAD)
        servers0, me0 = cpu_s(pids), time.process_time()
        t0 = time.perf_counter()
        for i in range(n):
            p = c.create_producer(f"{prefix}-{i}")
            p.send(PAYLOAD)
            p.close()
        wall = time.perf_counter() - t0
        me, servers = time.process_time() - me0, cpu_s(pids)
    per_topic = {f"{k}_cpu_ms_per_topic": (servers[k] - servers0[k]) / n * 1000 for k in pids}
    return {
        "phase": "create",
        "topics": n,
        "seconds": round(wall, 2),
        "ms_per_topic": round(wall / n * 1000, 2),
        "client_cpu_ms_per_topic": round(me / n * 1000, 2),
        **{k: round(v, 2) for k, v in per_topic.items()},
    }


async def _fill(url: str, prefix: str, n: int, concurrency: int = 32) -> None:
    client = magnetar.Client(url)
    sem = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with sem:
            for attempt in range(3):  # a bundle split by the load manager may outlast one lookup
                try:
                    p = await client.create_producer(f"{prefix}-{i}")
                    break
                except ServiceUnitNotReady:
                    if attempt == 2:
                        raise
            await p.send(PAYLOAD)
            await p.close()

    try:
        await asyncio.gather(*(one(i) for i in range(n)))
    finally:
        await client.close()


def probe(url: str, prefix: str, n: int) -> dict:
    h = HdrHistogram(1, 60_000_000, 3)
    with Client(url) as c:
        for i in range(n):
            t0 = time.perf_counter_ns()
            p = c.create_producer(f"{prefix}-{i}")
            p.send(PAYLOAD)
            h.record_value(max(1, (time.perf_counter_ns() - t0) // 1000))
            p.close()
    return {
        "phase": "probe",
        "producers": n,
        **{f"p{p}_ms": round(h.get_value_at_percentile(p) / 1000, 2) for p in (50, 99)},
        "max_ms": round(h.get_max_value() / 1000, 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--endpoints", default="data/endpoints.json")
    ap.add_argument("--create", type=int, default=1000)
    ap.add_argument("--idle", type=int, default=10_000)
    ap.add_argument("--probe", type=int, default=200)
    ap.add_argument("--phases", default="create,idle,probe")
    a = ap.parse_args()
    with open(a.endpoints) as f:
        ep = json.load(f)
    url, broker_pid = ep["service_url"], int(ep["pids"]["broker"])
    run = time.strftime("%H%M%S")
    phases = a.phases.split(",")
    made = 0
    if "create" in phases:
        pids = {k: int(v) for k, v in ep.get("pids", {}).items()}
        print(json.dumps(create_one_by_one(url, f"mt-{run}", a.create, pids)), flush=True)
        made = a.create
    if "idle" in phases or "probe" in phases:
        before = settled_rss_kib(broker_pid)
        missing = max(0, a.idle - made)
        asyncio.run(_fill(url, f"mt-idle-{run}", missing))
        after = settled_rss_kib(broker_pid)
        if "idle" in phases and missing:
            print(
                json.dumps(
                    {
                        "phase": "idle",
                        "topics_added": missing,
                        "broker_rss_mib": round(after / 1024, 1),
                        "kib_per_idle_topic": round((after - before) / missing, 2),
                    }
                ),
                flush=True,
            )
    if "probe" in phases:
        print(json.dumps(probe(url, f"mt-probe-{run}", a.probe)), flush=True)


if __name__ == "__main__":
    main()
