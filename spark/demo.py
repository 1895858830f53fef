"""``make report-demo``: a standalone, a short load of a known shape, the
three reports from its stats topic, and where the HTML is.

    .venv/bin/python -m spark.demo [--data-dir ./data-report-demo] [--output ./report-demo]

The standalone snapshots every ``--interval`` seconds (5). The load runs for
``--seconds`` (90), one round every ``ROUND_S``:

* ``demo-orders`` (3 partitions) takes 40 messages a round; subscription
  ``billing`` reads them all;
* ``demo-payments`` takes 20 a round; subscription ``ledger`` reads only
  half of them, so its backlog grows by 10 a round (it falls behind);
* ``demo-audit`` takes 10 a round; subscription ``archive`` has no consumer
  (stuck: its backlog grows with nobody to drain it).

Then it waits for two more snapshots, runs ``python -m spark.reports all``
with the stats topic as input (through the Spark data source), stops the
standalone and prints the report's path.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from client import Client, ConsumerType, InitialPosition, Timeout
from client.admin import Admin

ROUND_S = 1.0
TOPICS = {"demo-orders": 40, "demo-payments": 20, "demo-audit": 10}


def start_standalone(data_dir: Path, interval_s: float) -> tuple[subprocess.Popen, str]:
    endpoints = data_dir / "endpoints.json"
    endpoints.unlink(missing_ok=True)
    env = dict(os.environ, MAGNETAR_BROKER_STATS_EXPORT_INTERVAL_S=str(interval_s))
    cmd = [sys.executable, "-m", "broker.cli", "standalone", "--data-dir", str(data_dir)]
    for flag in ("--broker-port", "--bookie-port", "--metastore-port", "--raft-port"):
        cmd += [flag, "0"]
    for flag in ("--broker-metrics-port", "--bookie-metrics-port", "--metastore-metrics-port"):
        cmd += [flag, "0"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the standalone exited ({proc.returncode}); see {data_dir}")
        if endpoints.exists():
            url = json.loads(endpoints.read_text()).get("service_url")
            if url:
                return proc, str(url)
        time.sleep(0.2)
    proc.kill()
    raise SystemExit("the standalone did not start within 120 s")


def run_load(url: str, seconds: float) -> dict[str, int]:
    """The load of the module docstring; what each subscription acknowledged."""
    acked = {"billing": 0, "ledger": 0}
    with Client(url) as client:
        Admin(url).topics.create_partitioned_topic("demo-orders", 3)
        billing = client.subscribe("demo-orders", "billing", consumer_type=ConsumerType.Shared)
        ledger = client.subscribe(
            "demo-payments", "ledger", initial_position=InitialPosition.Earliest
        )
        client.subscribe("demo-audit", "archive").close()  # durable, never read again
        producers = {t: client.create_producer(t) for t in TOPICS}
        rounds = int(seconds / ROUND_S)
        for r in range(rounds):
            started = time.monotonic()
            for topic, count in TOPICS.items():
                for i in range(count):
                    producers[topic].send_async(f"{topic} {r} {i}".encode(), None)
            for p in producers.values():
                p.flush()
            acked["billing"] += _drain(billing, TOPICS["demo-orders"])
            acked["ledger"] += _drain(ledger, TOPICS["demo-payments"] // 2)
            time.sleep(max(0.0, ROUND_S - (time.monotonic() - started)))
    return acked


def _drain(consumer, limit: int) -> int:  # type: ignore[no-untyped-def]
    n = 0
    while n < limit:
        try:
            consumer.acknowledge(consumer.receive(2000))
        except Timeout:
            break
        n += 1
    return n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default="./data-report-demo")
    parser.add_argument("--output", default="./report-demo")
    parser.add_argument("--interval", type=float, default=5.0)
    parser.add_argument("--seconds", type=float, default=90.0)
    args = parser.parse_args()
    data_dir, output = Path(args.data_dir), Path(args.output)
    shutil.rmtree(data_dir, ignore_errors=True)
    data_dir.mkdir(parents=True)
    proc, url = start_standalone(data_dir, args.interval)
    try:
        print(f"standalone at {url}; load for {args.seconds:g} s", flush=True)
        acked = run_load(url, args.seconds)
        print(f"acknowledged: {acked}; waiting for two more snapshots", flush=True)
        time.sleep(2 * args.interval + 1)
        report = [sys.executable, "-m", "spark.reports", "all", "--input", url]
        subprocess.run([*report, "--output", str(output)], check=True)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
    print(f"report: {(output / 'report.html').resolve()}")


if __name__ == "__main__":
    main()
