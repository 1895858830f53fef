"""New producers while bundles are split: the first send of a new producer,
timed while a broker that holds many idle topics splits bundles.

    .venv/bin/python benchmarks/split_probe.py --endpoints data/endpoints.json \\
        [--idle 5000] [--splits 2] [--after-s 4]

Fills ``public/default`` with ``--idle`` idle topics (as many_topics.py
does), then times new producers one after another (``create_producer`` to
the first send's receipt) while ``--splits`` bundles of the namespace are
split by the admin API (no unload), and for ``--after-s`` seconds after.
Prints one JSON line: probes, p50 / p99 / max in ms, and the metastore
reads made meanwhile when the endpoints file names the metastore's metrics
port. Every loop is bounded (at most 2,000 probes).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import threading
import time

from benchmarks.many_topics import PAYLOAD, _fill
from client import Client
from client.admin import Admin
from tests.metrics_scrape import scrape

NS = "public/default"
MAX_PROBES = 2000


def metastore_reads(ep: dict) -> float | None:
    port = ep.get("metrics", {}).get("metastore", -1)
    if port is None or int(port) < 0:
        return None
    s = scrape(int(port))
    name = "pulsar_metadata_store_ops_latency_ms_count"
    return sum(s.get(name, type=k, status="success") or 0.0 for k in ("get", "list"))


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--endpoints", default="data/endpoints.json")
    ap.add_argument("--idle", type=int, default=5000)
    ap.add_argument("--splits", type=int, default=2)
    ap.add_argument("--after-s", type=float, default=4.0)
    a = ap.parse_args()
    with open(a.endpoints) as f:
        ep = json.load(f)
    url, run = ep["service_url"], time.strftime("%H%M%S")
    asyncio.run(_fill(url, f"sp-{run}", a.idle))
    latencies: list[float] = []
    stop = threading.Event()

    def probe() -> None:
        with Client(url) as c:
            for i in range(MAX_PROBES):
                if stop.is_set():
                    return
                t0 = time.perf_counter()
                p = c.create_producer(f"sp-probe-{run}-{i}")
                p.send(PAYLOAD)
                latencies.append((time.perf_counter() - t0) * 1000)
                p.close()

    reads0 = metastore_reads(ep)
    thread = threading.Thread(target=probe)
    thread.start()
    stop.wait(1.0)  # probes before the splits
    with Admin(url) as admin:
        bundles = [b["bundle"] for b in admin.namespaces.bundles(NS)["bundles"]]
        for bundle in bundles[: a.splits]:
            admin.namespaces.split_bundle(NS, bundle)
    stop.wait(a.after_s)  # probes after them
    stop.set()
    thread.join()
    reads1 = metastore_reads(ep)
    latencies.sort()
    out = {
        "probes": len(latencies),
        "p50_ms": round(latencies[len(latencies) // 2], 1),
        "p99_ms": round(latencies[int(len(latencies) * 0.99)], 1),
        "max_ms": round(latencies[-1], 1),
    }
    if reads0 is not None and reads1 is not None:
        out["metastore_reads"] = reads1 - reads0
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
