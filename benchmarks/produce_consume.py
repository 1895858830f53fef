"""Produce/consume benchmark against a running Magnetar (prints figures; asserts nothing).

    .venv/bin/python benchmarks/produce_consume.py --service-url magnetar://127.0.0.1:6650

Workloads, 1 KiB messages, fsync on (the bookie's default):
  sync       one-at-a-time ``send`` (each waits for its receipt)
  pipelined  ``send_async`` with batching, ``--window`` messages in flight
  e2e-rate   a producer at a fixed rate, a consumer receiving and acking;
             latency = receive time - send time stamped in the payload
Latencies are recorded in an HdrHistogram (microseconds, 3 digits).
Every loop is bounded by a message count and a deadline.
"""

from __future__ import annotations

import argparse
import json
import threading
import time

from hdrh.histogram import HdrHistogram

from client import AuthenticationToken, Client, InitialPosition, Result


def hist() -> HdrHistogram:
    return HdrHistogram(1, 60_000_000, 3)


def pct(h: HdrHistogram) -> dict[str, float]:
    return {f"p{p}": round(h.get_value_at_percentile(p) / 1000, 3) for p in (50, 99, 99.9)}


def run_sync(
    url: str, topic: str, size: int, n: int, max_s: float, client: dict | None = None
) -> dict:
    payload = b"x" * size
    h = hist()
    with Client(url, **(client or {})) as c:
        p = c.create_producer(topic, batching_enabled=False)
        p.send(payload)
        cpu0, t0 = time.process_time(), time.perf_counter()
        done = 0
        while done < n and time.perf_counter() - t0 < max_s:
            s = time.perf_counter_ns()
            p.send(payload)
            h.record_value(max(1, (time.perf_counter_ns() - s) // 1000))
            done += 1
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    return {
        "workload": "sync",
        "msgs": done,
        "msgs_s": round(done / wall),
        "mb_s": round(done * size / wall / 1e6, 2),
        "client_cpu_us_per_msg": round(cpu / done * 1e6, 1),
        "publish_latency_ms": pct(h),
    }


def run_pipelined(
    url: str,
    topic: str,
    size: int,
    n: int,
    max_s: float,
    window: int,
    client: dict | None = None,
) -> dict:
    payload = b"x" * size
    h = hist()
    acked = [0]
    errors = [0]
    sent_target = [n]
    all_done = threading.Event()
    with Client(url, **(client or {})) as c:
        p = c.create_producer(topic, block_if_queue_full=True, max_pending_messages=window)
        cpu0, t0 = time.process_time(), time.perf_counter()
        sent = 0
        while sent < n and time.perf_counter() - t0 < max_s:
            start = time.perf_counter_ns()

            def cb(result, msg_id, start=start):
                h.record_value(max(1, (time.perf_counter_ns() - start) // 1000))
                if result != Result.Ok:
                    errors[0] += 1
                acked[0] += 1
                if acked[0] >= sent_target[0]:
                    all_done.set()

            p.send_async(payload, cb)
            sent += 1
        sent_target[0] = sent
        p.flush()
        if acked[0] < sent:
            all_done.wait(max_s + 30)
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    return {
        "workload": "pipelined",
        "msgs": acked[0],
        "errors": errors[0],
        "msgs_s": round(acked[0] / wall),
        "mb_s": round(acked[0] * size / wall / 1e6, 2),
        "client_cpu_us_per_msg": round(cpu / max(1, acked[0]) * 1e6, 1),
        "publish_latency_ms": pct(h),
    }


def run_e2e_rate(
    url: str, topic: str, size: int, rate: int, seconds: float, client: dict | None = None
) -> dict:
    total = int(rate * seconds)
    h = hist()
    received = [0]
    with Client(url, **(client or {})) as c:
        consumer = c.subscribe(topic, "bench", initial_position=InitialPosition.Latest)
        producer = c.create_producer(topic, batching_max_publish_delay_ms=1)

        def consume() -> None:
            deadline = time.monotonic() + seconds + 30
            while received[0] < total and time.monotonic() < deadline:
                try:
                    m = consumer.receive(timeout_millis=1000)
                except Exception:
                    continue
                now = time.time_ns()
                h.record_value(max(1, (now - int.from_bytes(m.data()[:8], "big")) // 1000))
                consumer.acknowledge(m)
                received[0] += 1

        t = threading.Thread(target=consume)
        t.start()
        filler = b"x" * (size - 8)
        t0 = time.perf_counter()
        for i in range(total):
            due = t0 + i / rate
            delay = due - time.perf_counter()
            if delay > 0:
                time.sleep(delay)  # pacing the open-loop producer, not synchronisation
            producer.send_async(time.time_ns().to_bytes(8, "big") + filler, None)
        producer.flush()
        t.join()
    return {"workload": f"e2e@{rate}/s", "msgs": received[0], "e2e_latency_ms": pct(h)}


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--service-url")
    ap.add_argument("--endpoints", default="data/endpoints.json")
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--sync-n", type=int, default=10000)
    ap.add_argument("--pipelined-n", type=int, default=200000)
    ap.add_argument("--window", type=int, default=10000)
    ap.add_argument("--rate", type=int, default=2000)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--max-seconds", type=float, default=20.0)
    ap.add_argument("--token", help="Authenticate with this token (docs/security.md).")
    ap.add_argument("--workloads", default="sync,pipelined,e2e-rate")
    a = ap.parse_args()
    with open(a.endpoints) as f:
        url = a.service_url or json.load(f)["service_url"]
    run = time.strftime("%H%M%S")
    client = {"authentication": AuthenticationToken(a.token)} if a.token else {}
    runs = {
        "sync": lambda: run_sync(url, f"bench-sync-{run}", a.size, a.sync_n, a.max_seconds, client),
        "pipelined": lambda: run_pipelined(
            url, f"bench-pipe-{run}", a.size, a.pipelined_n, a.max_seconds, a.window, client
        ),
        "e2e-rate": lambda: run_e2e_rate(
            url, f"bench-e2e-{run}", a.size, a.rate, a.seconds, client
        ),
    }
    for name in a.workloads.split(","):
        if name not in runs:
            ap.error(f"unknown workload {name!r} (among {', '.join(runs)})")
        print(json.dumps(runs[name]()), flush=True)


if __name__ == "__main__":
    main()
