"""What the stats history costs a broker: its CPU with 1,000 topics (one
subscription each) while it snapshots them, against the same broker with
the history off, in the same run.

    .venv/bin/python -m benchmarks.stats_export_cost [--topics 1000] [--interval 5] [--window 60]

Two standalones are started one after the other on the same machine: one
with ``stats_export_interval_s = 0`` and one with ``--interval``. Each gets
``--topics`` topics with one stored message and one durable subscription,
then sits idle for ``--window`` seconds while the broker process's CPU time
is measured. The difference, divided by the snapshots taken in the window,
is one snapshot's cost (building the records, JSON, publishing them to the
stats topic and storing them); at the default 60 s interval that is the
share of a core printed last.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import psutil

from client import Client
from tests.harness import StandaloneCluster
from tests.stats_topic import stats_records


def _load(service_url: str, topics: int) -> None:
    with Client(service_url) as client:
        for i in range(topics):
            name = f"persistent://public/default/cost-{i}"
            consumer = client.subscribe(name, "s")
            producer = client.create_producer(name, batching_enabled=False)
            producer.send(b"x" * 100)
            producer.close()
            consumer.close()


def _snapshots(service_url: str, since_ms: int, until_ms: int) -> int:
    """Snapshots this broker published with timestamps in the window."""
    stamps = {r["timestamp"] for _, r in stats_records(service_url, limit=10_000_000)}
    return sum(1 for t in stamps if since_ms <= t < until_ms)


def measure(topics: int, interval_s: float, window_s: float) -> tuple[float, int]:
    """(broker CPU seconds over the window, snapshots in it)."""
    with tempfile.TemporaryDirectory() as tmp:
        cluster = StandaloneCluster(
            Path(tmp) / "data",
            env={"MAGNETAR_BROKER_STATS_EXPORT_INTERVAL_S": str(interval_s)},
        )
        cluster.start()
        try:
            _load(cluster.service_url, topics)
            broker = psutil.Process(int(cluster.endpoints["pids"]["broker"]))
            time.sleep(min(5.0, window_s / 4))  # the loading's tail settles
            cpu_before = sum(broker.cpu_times()[:2])
            since_ms = int(time.time() * 1000)
            time.sleep(window_s)
            until_ms = int(time.time() * 1000)
            cpu = sum(broker.cpu_times()[:2]) - cpu_before
            snapshots = _snapshots(cluster.service_url, since_ms, until_ms) if interval_s else 0
        finally:
            cluster.stop()
    return cpu, snapshots


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--interval", type=float, default=5.0)
    parser.add_argument("--window", type=float, default=60.0)
    args = parser.parse_args()
    off, _ = measure(args.topics, 0, args.window)
    on, snapshots = measure(args.topics, args.interval, args.window)
    per_snapshot = (on - off) / max(1, snapshots)
    print(f"topics                      {args.topics}")
    print(f"broker CPU, history off     {off:.2f} s over {args.window:g} s")
    print(
        f"broker CPU, history on      {on:.2f} s ({snapshots} snapshots, every {args.interval:g} s)"
    )
    print(f"one snapshot                {per_snapshot * 1000:.0f} ms of CPU")
    print(f"at 60 s                     {per_snapshot / 60 * 100:.2f} % of a core (target <= 1 %)")


if __name__ == "__main__":
    main()
