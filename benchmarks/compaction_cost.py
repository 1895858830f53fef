"""Compaction rate and the compacted topic's read rate (prints figures;
asserts nothing).

    .venv/bin/python -m benchmarks.compaction_cost --service-url magnetar://127.0.0.1:6650

Writes ``--messages`` messages (``--size`` bytes, batched) over ``--keys``
keys to a fresh topic, compacts it and reports the run's rate (messages of
the topic per second of the run, from ``compact`` to SUCCESS), then reads
the compacted view with a reader and the whole topic with another, and
reports both rates.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
import uuid

from client import Client, MessageId, Timeout
from client.admin import Admin


def produce(c: Client, topic: str, n: int, keys: int, size: int) -> float:
    p = c.create_producer(
        topic, batching_enabled=True, block_if_queue_full=True, max_pending_messages=20000
    )
    done = threading.Semaphore(0)
    body = b"x" * size
    t0 = time.perf_counter()
    for i in range(n):
        p.send_async(body, lambda res, mid: done.release(), partition_key=f"key-{i % keys}")
    p.flush()
    for _ in range(n):
        done.acquire(timeout=120)
    return n / (time.perf_counter() - t0)


def read_all(c: Client, topic: str, compacted: bool, limit: int) -> tuple[int, float]:
    reader = c.create_reader(
        topic, MessageId.earliest, is_read_compacted=compacted, receiver_queue_size=5000
    )
    t0, got = time.perf_counter(), 0
    try:
        while got < limit:
            reader.read_next(timeout_millis=5000)
            got += 1
    except Timeout:
        pass
    elapsed = time.perf_counter() - t0 - (5.0 if got < limit else 0.0)
    reader.close()
    return got, got / max(elapsed, 1e-6)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--service-url", default="magnetar://127.0.0.1:6650")
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--keys", type=int, default=10_000)
    ap.add_argument("--size", type=int, default=100)
    args = ap.parse_args()
    topic = f"persistent://public/default/compaction-cost-{uuid.uuid4().hex[:8]}"
    with Client(args.service_url) as c, Admin(args.service_url) as admin:
        produce_rate = produce(c, topic, args.messages, args.keys, args.size)
        t0 = time.perf_counter()
        admin.topics.compact(topic)
        status = admin.topics.compaction_status(topic, wait=True, timeout_s=3600)
        run_s = time.perf_counter() - t0
        view, view_rate = read_all(c, topic, True, args.keys * 2)
        whole, whole_rate = read_all(c, topic, False, args.messages)
    print(
        json.dumps(
            {
                "messages": args.messages,
                "keys": args.keys,
                "size": args.size,
                "produce_msgs_s": round(produce_rate),
                "compaction": status,
                "compaction_s": round(run_s, 2),
                "compaction_msgs_s": round(args.messages / run_s),
                "compacted_view_messages": view,
                "compacted_read_msgs_s": round(view_rate),
                "whole_topic_messages": whole,
                "whole_read_msgs_s": round(whole_rate),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
