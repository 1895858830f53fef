"""Partition scaling: pipelined throughput into 1, 10 and 100 partitions.

    .venv/bin/python benchmarks/partitions.py --endpoints data/endpoints.json \\
        [--partitions 1,10,100] [--routing keyed,round-robin] [--n 100000]

Each case creates a fresh partitioned topic (outside the timed section), then
sends ``--n`` 1 KiB messages with ``send_async`` through the sync SDK, up to
``--window`` unacknowledged (``block_if_queue_full``), keyed (a partition key
from 1,000 keys) or round-robin. Prints one JSON line per case: msg/s, the
client's CPU per message, and the ratio to the 1-partition case of the same
routing. Every loop is bounded by ``--n`` and ``--max-seconds``.
"""

from __future__ import annotations

import argparse
import json
import threading
import time

import psutil

from client import Client, PartitionsRoutingMode, Result
from client.admin import Admin


def cpu_s(pid: int) -> float:
    t = psutil.Process(pid).cpu_times()
    return float(t.user + t.system)


def run_case(
    url: str,
    admin_url: str,
    partitions: int,
    routing: str,
    n: int,
    window: int,
    max_s: float,
    pids: dict[str, int],
) -> dict:
    topic = f"bench-parts-{partitions}-{routing}-{time.time_ns()}"
    with Admin(admin_url) as admin:
        admin.topics.create_partitioned_topic(topic, partitions)
    payload = b"x" * 1024
    keys = [f"key-{i}" for i in range(1000)]
    acked = [0]
    errors = [0]
    target = [n]
    done = threading.Event()

    def cb(result: Result, msg_id: object) -> None:
        if result != Result.Ok:
            errors[0] += 1
        acked[0] += 1
        if acked[0] >= target[0]:
            done.set()

    mode = (
        PartitionsRoutingMode.RoundRobinDistribution
        if routing == "round-robin"
        else PartitionsRoutingMode.UseSinglePartition
    )
    with Client(url) as c:
        p = c.create_producer(
            topic,
            block_if_queue_full=True,
            max_pending_messages=window,
            max_pending_messages_across_partitions=window,
            message_routing_mode=mode,
        )
        p.send(payload)  # connects every partition's producer before the clock starts
        servers0 = {k: cpu_s(v) for k, v in pids.items()}
        cpu0, t0 = time.process_time(), time.perf_counter()
        sent = 0
        while sent < n and time.perf_counter() - t0 < max_s:
            if routing == "keyed":
                p.send_async(payload, cb, partition_key=keys[sent % 1000])
            else:
                p.send_async(payload, cb)
            sent += 1
        target[0] = sent
        p.flush()
        if acked[0] < sent:
            done.wait(max_s + 30)
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        servers = {k: cpu_s(v) - servers0[k] for k, v in pids.items()}
    per_msg = {
        f"{k}_cpu_us_per_msg": round(v / max(1, acked[0]) * 1e6, 1) for k, v in servers.items()
    }
    return {
        "workload": "partitions",
        "partitions": partitions,
        "routing": routing,
        "msgs": acked[0],
        "errors": errors[0],
        "msgs_s": round(acked[0] / wall),
        "client_cpu_us_per_msg": round(cpu / max(1, acked[0]) * 1e6, 1),
        **per_msg,
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--endpoints", default="data/endpoints.json")
    ap.add_argument("--partitions", default="1,10,100")
    ap.add_argument("--routing", default="keyed,round-robin")
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--window", type=int, default=10_000)
    ap.add_argument("--max-seconds", type=float, default=20.0)
    a = ap.parse_args()
    with open(a.endpoints) as f:
        ep = json.load(f)
    url, admin_url = ep["service_url"], ep.get("admin_url", ep["service_url"])
    pids = {k: v for k, v in ep.get("pids", {}).items() if k in ("broker", "bookie")}
    for routing in a.routing.split(","):
        base = None
        for parts in (int(x) for x in a.partitions.split(",")):
            res = run_case(url, admin_url, parts, routing, a.n, a.window, a.max_seconds, pids)
            base = base or res["msgs_s"]
            res["vs_1_partition"] = round(res["msgs_s"] / base, 2)
            print(json.dumps(res), flush=True)


if __name__ == "__main__":
    main()
