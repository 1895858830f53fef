"""What a schema costs: send and receive rates with JsonSchema and AvroSchema
records against raw bytes of about the same size, in one run (prints
figures; asserts nothing).

    .venv/bin/python -m benchmarks.schema_cost --service-url magnetar://127.0.0.1:6650

Each round runs bytes, JSON and AVRO in turn on fresh topics (so drift hits
all three alike): N pipelined ``send_async`` calls (batching on, the value
encoded by the schema), then a consumer from the earliest message taking N
messages with ``receive`` and ``value()`` (decoded). The figures are the
medians over the rounds, and each schema's ratio to bytes.
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
import uuid
from typing import Any

from client import Client, InitialPosition
from client.schema import AvroSchema, JsonSchema, Long, Record, String


class Event(Record):
    id = Long(required=True)
    kind = String(required=True)
    body = String(required=True)


BODY = "x" * 960  # a record of ~1 KiB, as the other benchmarks' messages


def _values(kind: str, n: int) -> list[Any]:
    if kind == "bytes":
        return [BODY.encode() + i.to_bytes(8, "big") for i in range(n)]
    return [Event(id=i, kind="click", body=BODY) for i in range(n)]


def _schema(kind: str) -> Any:
    return {"bytes": None, "json": JsonSchema(Event), "avro": AvroSchema(Event)}[kind]


def one(url: str, kind: str, n: int, max_s: float) -> dict[str, float]:
    topic = f"schema-cost-{kind}-{uuid.uuid4().hex[:8]}"
    values = _values(kind, n)
    schema = _schema(kind)
    with Client(url) as c:
        p = c.create_producer(
            topic,
            schema=schema,
            batching_enabled=True,
            block_if_queue_full=True,
            max_pending_messages=10000,
        )
        done = threading.Semaphore(0)
        t0 = time.perf_counter()
        for v in values:
            p.send_async(v, lambda res, mid: done.release())
        p.flush()
        for _ in range(n):
            if not done.acquire(timeout=max_s):
                break
        send_s = time.perf_counter() - t0
        consumer = c.subscribe(topic, "s", schema=schema, initial_position=InitialPosition.Earliest)
        t1, got = time.perf_counter(), 0
        while got < n and time.perf_counter() - t1 < max_s:
            msg = consumer.receive(timeout_millis=10000)
            msg.value()
            consumer.acknowledge(msg)
            got += 1
        receive_s = time.perf_counter() - t1
    return {"send_msgs_s": n / send_s, "receive_msgs_s": got / receive_s}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--service-url", default="magnetar://127.0.0.1:6650")
    ap.add_argument("--messages", type=int, default=50000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--max-seconds", type=float, default=60.0)
    args = ap.parse_args()
    runs: dict[str, list[dict[str, float]]] = {"bytes": [], "json": [], "avro": []}
    for _ in range(args.rounds):
        for kind in runs:
            runs[kind].append(one(args.service_url, kind, args.messages, args.max_seconds))
    out: dict[str, Any] = {}
    for kind, rs in runs.items():
        out[kind] = {
            key: round(statistics.median(r[key] for r in rs))
            for key in ("send_msgs_s", "receive_msgs_s")
        }
    for kind in ("json", "avro"):
        for key in ("send_msgs_s", "receive_msgs_s"):
            out[kind][key.replace("msgs_s", "vs_bytes")] = round(
                out[kind][key] / out["bytes"][key], 2
            )
    print(json.dumps({"messages": args.messages, "rounds": args.rounds, **out}, indent=2))


if __name__ == "__main__":
    main()
