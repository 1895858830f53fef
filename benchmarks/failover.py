"""Broker failover timing (prints figures; asserts nothing).

    .venv/bin/python benchmarks/failover.py [--runs 5] [--session-ttl-ms 10000]

Per run: three metastore nodes, three bookies and three brokers (real
processes, a fresh temporary directory; shedding and automatic splits off);
a producer doing synchronous sends to a topic first owned by broker-a,
connected through broker-a's service URL. Measured:

* unload: the longest pause between two acknowledged sends around the
  admin unload of the topic's bundle (the sends in flight wait for the
  move; the bundle lands on broker-b or broker-c);
* kill -9: from kill -9 of that new owner to the first send acknowledged
  after it (dominated by the broker's metastore session TTL,
  ``session_ttl_ms``, 10 s by default, after which its bundles can be
  taken over).

Every loop is bounded by a deadline.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import itertools

from broker.bundles import NamespaceBundles
from client import Client
from client.admin import Admin
from tests.harness import BookieCluster
from tests.traffic import owner_of, place_topic_on

TOPIC = "persistent://public/default/failover-bench"
BUNDLE = NamespaceBundles.equal(4).bundle_for_topic(TOPIC).name


class Sender:
    """Synchronous sends in a thread; remembers when each was acknowledged."""

    def __init__(self, url: str) -> None:
        self.client = Client(url, operation_timeout_seconds=60)
        self.producer = self.client.create_producer(
            TOPIC, batching_enabled=False, send_timeout_millis=60000
        )
        self.acked_at: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set() and len(self.acked_at) < 1_000_000:
            try:
                self.producer.send(b"x" * 100)
            except Exception as exc:  # a benchmark reports, it does not stop
                print(f"send failed: {exc}", file=sys.stderr)
                return
            self.acked_at.append(time.monotonic())

    def first_after(self, t: float, timeout_s: float = 60) -> float:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            later = [a for a in self.acked_at[-1000:] if a > t]
            if later:
                return later[0] - t
            time.sleep(0.005)  # polling the sender's progress, bounded by the deadline
        return float("nan")

    def max_gap(self, start: float, end: float) -> float:
        times = [a for a in self.acked_at if start <= a <= end]
        return max((b - a for a, b in itertools.pairwise(times)), default=float("nan"))

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.client.close()


def one_run(session_ttl_ms: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as d:
        cluster = BookieCluster(
            Path(d),
            3,
            metastore_nodes=3,
            broker_settings=[
                "load_balancer_shedding_enabled=false",
                "load_balancer_auto_bundle_split_enabled=false",
                f"session_ttl_ms={session_ttl_ms}",
            ],
        ).start_all()
        try:
            urls = {name: cluster.start_broker(name) for name in ("a", "b", "c")}
            place_topic_on(urls["a"], TOPIC)
            sender = Sender(urls["a"])
            time.sleep(1)  # steady traffic before the move (measurement, not sync)
            t0 = time.monotonic()
            with Admin(urls["a"]) as admin:
                admin.namespaces.unload("public/default", BUNDLE)
            sender.first_after(time.monotonic())
            time.sleep(1)  # traffic after the move (measurement, not sync)
            unload_s = sender.max_gap(t0 - 0.5, time.monotonic())
            owner = owner_of(urls["a"], TOPIC)
            victim = next(n for n, u in urls.items() if u == owner)
            time.sleep(1)
            n0 = len(sender.acked_at)
            t1 = time.monotonic()
            cluster.kill9_broker(victim)
            # The ack at index n0 may be one confirmed just before the kill and
            # recorded just after it; the one after that is surely later.
            deadline = time.monotonic() + 60
            while len(sender.acked_at) < n0 + 2 and time.monotonic() < deadline:
                time.sleep(0.005)  # polling the sender's progress, bounded by the deadline
            kill_s = (
                sender.acked_at[n0 + 1] - t1 if len(sender.acked_at) >= n0 + 2 else float("nan")
            )
            sender.close()
            return {"moved_off_a": float(victim != "a"), "unload_s": unload_s, "kill9_s": kill_s}
        finally:
            cluster.stop_all()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--session-ttl-ms", type=int, default=10000)
    args = ap.parse_args()
    results = [one_run(args.session_ttl_ms) for _ in range(args.runs)]
    for r in results:
        print(json.dumps(r))
    for key in ("unload_s", "kill9_s"):
        values = sorted(r[key] for r in results)
        print(
            json.dumps(
                {
                    "case": key,
                    "runs": len(values),
                    "p50_s": round(statistics.median(values), 3),
                    "max_s": round(values[-1], 3),
                }
            )
        )


if __name__ == "__main__":
    main()
