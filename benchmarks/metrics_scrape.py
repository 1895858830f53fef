"""What a Prometheus scrape costs the broker, and what metrics cost the
publish path (prints figures; asserts nothing).

    .venv/bin/python benchmarks/metrics_scrape.py [--topics 1,100,1000] [--reps 3]

Part 1, scrapes: for topic-level metrics on and off, a standalone of its
own gets topics (each with one subscription and one stored message) up to
each count; then ``--scrapes`` back-to-back scrapes of the broker's
``/metrics`` give the wall time per scrape (as Prometheus sees it), the
size, the samples, and the broker's CPU per scrape (its process CPU over
the scrapes less the same span idle, measured just before). "% of a core"
is that CPU at a 15 s scrape interval.

Part 2, the publish path: ``benchmarks/produce_consume.py``'s pipelined
workload against a standalone whose broker metrics port is off, and one
scraped every second (harder than Prometheus's 15 s), taking turns
(``--reps`` pairs) so drift hits both alike; medians and min-max of msg/s.
Every loop is bounded by a count and a deadline.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.produce_consume import run_pipelined  # noqa: E402
from client import Client  # noqa: E402
from client.admin import Admin  # noqa: E402


class Standalone:
    def __init__(self, env: dict[str, str], metrics: bool = True) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="magnetar-metrics-bench-"))
        metrics_port = "0" if metrics else "-1"
        cmd = [
            sys.executable, "-m", "broker.cli", "standalone", "--data-dir", str(self.dir / "data"),
            "--metastore-port", "0", "--raft-port", "0", "--bookie-port", "0",
            "--broker-port", "0", "--metastore-metrics-port", "-1",
            "--bookie-metrics-port", "-1", "--broker-metrics-port", metrics_port,
        ]  # fmt: skip
        log = open(self.dir / "standalone.log", "w")  # noqa: SIM115 (closed in stop)
        self._log = log
        self.proc = subprocess.Popen(
            cmd, cwd=ROOT, stdout=log, stderr=log, env={**os.environ, **env}, start_new_session=True
        )
        endpoints = self.dir / "data" / "endpoints.json"
        deadline = time.monotonic() + 120
        while not endpoints.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"standalone did not start: see {self.dir}/standalone.log")
            time.sleep(0.1)  # polling the supervisor's ready file
        info = json.loads(endpoints.read_text())
        self.url = info["service_url"]
        self.metrics_port = int(info["metrics"]["broker"])
        self.broker = psutil.Process(int(info["pids"]["broker"]))

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self._log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def broker_cpu_s(p: psutil.Process) -> float:
    t = p.cpu_times()
    return float(t.user + t.system)


def scrape(port: int) -> bytes:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
        return bytes(r.read())


def add_topics(s: Standalone, start: int, end: int) -> None:
    """Topics start..end-1, each with a subscription and one stored message."""
    with Client(s.url) as c, Admin(s.url) as admin:
        for i in range(start, end):
            topic = f"bench-{i}"
            admin.topics.create_subscription(topic, "sub", earliest=True)
            p = c.create_producer(topic, batching_enabled=False)
            p.send(b"x" * 100)
            p.close()


def measure_scrapes(s: Standalone, n: int) -> dict:
    scrape(s.metrics_port)  # warm
    idle_span = 3.0
    cpu0 = broker_cpu_s(s.broker)
    time.sleep(idle_span)  # the idle baseline: the same process, no scrapes
    idle_cpu_per_s = (broker_cpu_s(s.broker) - cpu0) / idle_span
    walls = []
    size = 0
    cpu0, t0 = broker_cpu_s(s.broker), time.perf_counter()
    for _ in range(n):
        started = time.perf_counter()
        body = scrape(s.metrics_port)
        walls.append(time.perf_counter() - started)
        size = len(body)
    span = time.perf_counter() - t0
    cpu = broker_cpu_s(s.broker) - cpu0 - idle_cpu_per_s * span
    samples = sum(1 for line in body.splitlines() if line and not line.startswith(b"#"))
    per_scrape_cpu = max(cpu, 0.0) / n
    return {
        "scrape_ms_median": round(statistics.median(walls) * 1000, 1),
        "scrape_ms_min": round(min(walls) * 1000, 1),
        "scrape_ms_max": round(max(walls) * 1000, 1),
        "bytes": size,
        "samples": samples,
        "broker_cpu_ms_per_scrape": round(per_scrape_cpu * 1000, 1),
        "pct_core_at_15s": round(per_scrape_cpu / 15 * 100, 3),
    }


def part_scrapes(counts: list[int], scrapes: int) -> None:
    for topic_level in (True, False):
        env = {
            "MAGNETAR_BROKER_EXPOSE_TOPIC_LEVEL_METRICS_IN_PROMETHEUS": str(topic_level),
            # Back to back: no wait for a render slot (that bound is not the cost).
            "MAGNETAR_BROKER_HTTP_MIN_RENDER_INTERVAL_MS": "0",
        }
        s = Standalone(env)
        try:
            have = 0
            for n in counts:
                add_topics(s, have, n)
                have = n
                row = {"part": "scrape", "topic_level": topic_level, "topics": n}
                row.update(measure_scrapes(s, scrapes))
                print(json.dumps(row), flush=True)
        finally:
            s.stop()


def scraper(port: int, stop: threading.Event, count: list[int]) -> None:
    while not stop.wait(1.0) and count[0] < 100_000:
        scrape(port)
        count[0] += 1


def part_publish(reps: int, n: int, max_s: float) -> None:
    results: dict[str, list[float]] = {"metrics_off": [], "scraped_every_1s": []}
    for rep in range(reps):
        for label in results:
            on = label != "metrics_off"
            s = Standalone({}, metrics=on)
            stop, count = threading.Event(), [0]
            t = threading.Thread(target=scraper, args=(s.metrics_port, stop, count), daemon=True)
            if on:
                t.start()
            try:
                row = run_pipelined(s.url, f"pipe-{rep}", 1024, n, max_s, 10000)
            finally:
                stop.set()
                if on:
                    t.join(10)
                s.stop()
            results[label].append(row["msgs_s"])
            print(json.dumps({"part": "publish", "config": label, "rep": rep,
                              "msgs_s": row["msgs_s"], "scrapes": count[0]}), flush=True)  # fmt: skip
    off, scraped = results["metrics_off"], results["scraped_every_1s"]
    print(json.dumps({
        "part": "publish-summary",
        "metrics_off_median": statistics.median(off), "metrics_off_range": [min(off), max(off)],
        "scraped_median": statistics.median(scraped),
        "scraped_range": [min(scraped), max(scraped)],
        "ratio_scraped_over_off": round(statistics.median(scraped) / statistics.median(off), 3),
    }), flush=True)  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--topics", default="1,100,1000")
    ap.add_argument("--scrapes", type=int, default=20)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--pipelined-n", type=int, default=200000)
    ap.add_argument("--max-seconds", type=float, default=20.0)
    ap.add_argument("--part", choices=["all", "scrape", "publish"], default="all")
    args = ap.parse_args()
    if args.part in ("all", "scrape"):
        part_scrapes([int(x) for x in args.topics.split(",")], args.scrapes)
    if args.part in ("all", "publish"):
        part_publish(args.reps, args.pipelined_n, args.max_seconds)


if __name__ == "__main__":
    main()
