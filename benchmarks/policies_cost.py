"""What policies cost on the hot path, and how accurately rates throttle
(issue 22's measures). Prints figures; asserts nothing.

    .venv/bin/python -m benchmarks.policies_cost [--pairs 3] [--n 100000]

One standalone, two namespaces of one bundle each: ``bench/plain`` with no
policy, and ``bench/policed`` with retention (1 h, 1 GB), a message TTL
(1 h), a producer_request_hold backlog quota (10 GB) and a dispatch rate
well above the load (10,000,000 msg/s), all of which the hot path consults.
Runs alternate plain / policed ``--pairs`` times (so drift hits both alike):
each publishes ``--n`` 1 KiB messages pipelined (``send_async`` with
batching, 10,000 in flight), then a consumer drains them; the medians of
publish and dispatch msg/s, and of the broker process's CPU per message
over both (steadier than throughput on a shared 2-core machine), are
printed with the policed/plain ratios.

Then throttling accuracy: a dispatch rate of 10, 100 and 10,000 msg/s on a
backlog larger than 6 s of it, the messages received in the 5 s after the
first; and a publish rate of the same values, the messages acknowledged in
5 s of pipelined sending. Error = measured / (rate x 5 s) - 1.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import psutil

from benchmarks.produce_consume import run_pipelined
from client import Client, ConsumerType, Result
from client.admin import Admin
from client.exceptions import Timeout
from tests.harness import StandaloneCluster

WINDOW_S = 5.0


def _drain(url: str, topic: str, n: int, max_s: float) -> float:
    """Dispatch msg/s of a Shared consumer taking ``n`` messages (acks batched)."""
    with Client(url) as c:
        consumer = c.subscribe(
            topic, "drain", consumer_type=ConsumerType.Shared, receiver_queue_size=5000
        )
        got = 0
        t0 = time.perf_counter()
        while got < n and time.perf_counter() - t0 < max_s:
            try:
                msg = consumer.receive(timeout_millis=5000)
            except Timeout:
                break
            consumer.acknowledge(msg)
            got += 1
        wall = time.perf_counter() - t0
        consumer.close()
    return got / wall


def _cost(url: str, broker: psutil.Process, pairs: int, n: int) -> dict:
    results: dict[str, dict[str, list[float]]] = {
        ns: {"publish": [], "dispatch": [], "broker_cpu_us_per_msg": []}
        for ns in ("plain", "policed")
    }
    with Client(url) as c:
        for ns in results:  # the subscription exists before the load
            for i in range(pairs):
                c.subscribe(
                    f"persistent://bench/{ns}/t{i}", "drain", consumer_type=ConsumerType.Shared
                ).close()
    for i in range(pairs):
        for ns in ("plain", "policed"):
            topic = f"persistent://bench/{ns}/t{i}"
            cpu0 = sum(broker.cpu_times()[:2])
            pub = run_pipelined(url, topic, 1024, n, 60.0, 10000)
            results[ns]["publish"].append(pub["msgs_s"])
            results[ns]["dispatch"].append(_drain(url, topic, pub["msgs"], 60.0))
            cpu = sum(broker.cpu_times()[:2]) - cpu0
            results[ns]["broker_cpu_us_per_msg"].append(cpu / max(1, pub["msgs"]) * 1e6)
    out: dict = {"workload": "policies on the hot path", "pairs": pairs, "n": n}
    for kind in ("publish", "dispatch", "broker_cpu_us_per_msg"):
        plain = statistics.median(results["plain"][kind])
        policed = statistics.median(results["policed"][kind])
        out[kind] = {
            "plain": round(plain, 2),
            "policed": round(policed, 2),
            "ratio": round(policed / plain, 3),
            "runs": {ns: [round(v, 2) for v in results[ns][kind]] for ns in results},
        }
    return out


def _dispatch_accuracy(url: str, admin: Admin, rate: int) -> dict:
    ns = f"bench/dispatch-{rate}"
    topic = f"persistent://{ns}/t"
    backlog = int(rate * (WINDOW_S + 1.5)) + 10
    admin.namespaces.set_dispatch_rate(ns, msg_dispatch_rate=rate)  # the topic loads with it
    with Client(url) as c:
        c.subscribe(topic, "s").close()
        producer = c.create_producer(topic, batching_enabled=False, block_if_queue_full=True)
        for _ in range(backlog):
            producer.send_async(b"x" * 100, None)
        producer.flush()
        consumer = c.subscribe(topic, "s", receiver_queue_size=min(rate * 2, 50000))
        first = None
        got = 0
        while True:
            try:
                consumer.receive(timeout_millis=3000)
            except Timeout:
                break
            now = time.monotonic()
            first = first or now
            if now - first > WINDOW_S:
                break
            got += 1
    expected = rate * WINDOW_S
    return {
        "rate": rate,
        "expected": expected,
        "measured": got,
        "error_pct": round((got / expected - 1) * 100, 2),
    }


def _publish_accuracy(url: str, admin: Admin, rate: int) -> dict:
    ns = f"bench/publish-{rate}"
    admin.namespaces.set_publish_rate(ns, msg_publish_rate=rate)  # the topic loads with it
    acked = [0]
    with Client(url) as c:
        producer = c.create_producer(
            f"persistent://{ns}/t", batching_enabled=False, block_if_queue_full=True,
            max_pending_messages=max(10, rate // 10),
        )  # fmt: skip
        t0 = time.monotonic()
        stop = t0 + WINDOW_S

        def cb(result: Result, _msg_id: object) -> None:
            if result == Result.Ok and time.monotonic() <= stop:
                acked[0] += 1

        while time.monotonic() < stop:
            producer.send_async(b"x" * 100, cb)
        producer.flush()
    expected = rate * WINDOW_S
    return {
        "rate": rate,
        "expected": expected,
        "measured": acked[0],
        "error_pct": round((acked[0] / expected - 1) * 100, 2),
    }


def _setup(admin: Admin, rates: list[int]) -> None:
    admin.tenants.create_tenant("bench")
    for ns in (
        ["plain", "policed"] + [f"dispatch-{r}" for r in rates] + [f"publish-{r}" for r in rates]
    ):
        admin.namespaces.create_namespace(f"bench/{ns}", bundles=1)
    policed = "bench/policed"
    admin.namespaces.set_retention(policed, 60, 1024)
    admin.namespaces.set_message_ttl(policed, 3600)
    admin.namespaces.set_backlog_quota(policed, limit_size=10 << 30, policy="producer_request_hold")
    admin.namespaces.set_dispatch_rate(policed, msg_dispatch_rate=10_000_000)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--rates", default="10,100,10000")
    a = ap.parse_args()
    rates = [int(r) for r in a.rates.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        cluster = StandaloneCluster(Path(tmp) / "data")
        cluster.start()
        try:
            url = cluster.service_url
            with Admin(url) as admin:
                _setup(admin, rates)
                broker = psutil.Process(int(cluster.endpoints["pids"]["broker"]))
                print(json.dumps(_cost(url, broker, a.pairs, a.n)), flush=True)
                for rate in rates:
                    print(
                        json.dumps(
                            {"throttle": "dispatch", **_dispatch_accuracy(url, admin, rate)}
                        ),
                        flush=True,
                    )
                for rate in rates:
                    print(
                        json.dumps({"throttle": "publish", **_publish_accuracy(url, admin, rate)}),
                        flush=True,
                    )
        finally:
            cluster.stop()


if __name__ == "__main__":
    main()
