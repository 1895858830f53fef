"""The ``magnetar`` Spark data source against the SDK's own reader, in one run
(prints figures; asserts nothing).

    .venv/bin/python benchmarks/datasource_read.py                 # starts a standalone
    .venv/bin/python benchmarks/datasource_read.py --messages 100000 --partitions 2
    .venv/bin/python benchmarks/datasource_read.py --service-url magnetar://127.0.0.1:6650

Steps, each bounded by the message count and ``--max-seconds``:
  produce     ``--messages`` small messages (``--size`` bytes, a key and one
              property each) with a batching producer, ``send_async``
  sdk-reader  one ``create_reader`` from earliest reads them all
  read-range  the data source's executor code (``read_range``) on each
              planned partition, in this process, without Spark
  spark       ``spark.read.format("magnetar")...load()`` fully materialised:
              ``select(count(*), sum(length(value)), sum(size(properties)))``
              (after a warm-up read of a small topic, so JVM and Python worker
              start-up are not counted)
Rates are messages (rows) per second of wall time; the last line has the
ratio spark / sdk-reader.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.harness, spark

from client import Client, MessageId, Result, Timeout
from client.admin import Admin
from spark.read_plan import DEFAULT_RECEIVER_QUEUE_SIZE


@contextmanager
def service(url: str | None) -> Iterator[str]:
    """The given service URL, or a standalone of this run's own."""
    if url:
        yield url
        return
    from tests.harness import StandaloneCluster

    with tempfile.TemporaryDirectory(prefix="magnetar-ds-bench-") as tmp:
        cluster = StandaloneCluster(Path(tmp) / "data").start()
        try:
            yield cluster.service_url
        finally:
            cluster.stop()


def produce(url: str, topic: str, n: int, size: int, max_s: float) -> dict[str, Any]:
    """Payloads are numbered (the first 8 bytes), so a read can count distinct ones."""
    filler = b"x" * max(0, size - 8)
    acked = [0]
    errors = [0]
    done = threading.Event()
    with Client(url) as c:
        p = c.create_producer(topic, block_if_queue_full=True, max_pending_messages=10_000)

        def cb(result: Result, _mid: Any) -> None:
            if result != Result.Ok:
                errors[0] += 1
            acked[0] += 1
            if acked[0] >= n:
                done.set()

        t0 = time.perf_counter()
        sent = 0
        while sent < n and time.perf_counter() - t0 < max_s:
            p.send_async(
                sent.to_bytes(8, "big") + filler,
                cb,
                partition_key=f"k{sent % 100}",
                properties={"n": "1"},
            )
            sent += 1
        p.flush()
        done.wait(max(1.0, max_s - (time.perf_counter() - t0)))
        wall = time.perf_counter() - t0
    return {
        "step": "produce",
        "msgs": acked[0],
        "errors": errors[0],
        "msgs_s": round(acked[0] / wall),
    }


def sdk_reader(url: str, topic: str, n: int, max_s: float) -> dict[str, Any]:
    got = 0
    with Client(url) as c:
        # The data source's default queue, so both read alike.
        reader = c.create_reader(
            topic, MessageId.earliest, receiver_queue_size=DEFAULT_RECEIVER_QUEUE_SIZE
        )
        t0 = time.perf_counter()
        while got < n and time.perf_counter() - t0 < max_s:
            try:
                reader.read_next(5_000)
            except Timeout:
                break
            got += 1
        wall = time.perf_counter() - t0
        reader.close()
    return {"step": "sdk-reader", "msgs": got, "msgs_s": round(got / wall)}


def read_range_only(url: str, topic: str) -> dict[str, Any]:
    from spark.datasource import partition_topics, read_range, snapshot
    from spark.read_plan import batch_ranges, parse_options

    opts = parse_options({"service_url": url, "topic": topic})
    t0 = time.perf_counter()
    topics = partition_topics(url, opts.topic, opts.operation_timeout_s)
    values: list[Any] = []  # pyarrow arrays
    for rng in batch_ranges(opts, topics, snapshot(opts, topics)):
        values.extend(batch.column("value") for batch in read_range(opts, rng))
    wall = time.perf_counter() - t0
    rows = sum(len(v) for v in values)
    distinct = len({payload[:8] for v in values for payload in v.to_pylist()})
    return {"step": "read-range", "rows": rows, "distinct": distinct, "rows_s": round(rows / wall)}


def spark_read(spark: Any, url: str, topic: str) -> dict[str, Any]:
    from pyspark.sql import functions as F

    df = spark.read.format("magnetar").option("service_url", url).option("topic", topic).load()
    t0 = time.perf_counter()
    row = df.select(
        F.count("*").alias("rows"),
        F.sum(F.length("value")).alias("value_bytes"),
        F.sum(F.size("properties")).alias("properties"),
    ).collect()[0]
    wall = time.perf_counter() - t0
    return {
        "step": "spark",
        "rows": row["rows"],
        "value_bytes": row["value_bytes"],
        "rows_s": round(row["rows"] / wall),
        "partitions": df.rdd.getNumPartitions(),
    }


def create_topic(url: str, topic: str, partitions: int) -> None:
    if partitions > 0:
        with Admin(url) as admin:
            admin.topics.create_partitioned_topic(topic, partitions)
    else:
        with Client(url) as c:
            c.create_producer(topic).close()  # auto-created


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--service-url", help="a running cluster (default: start a standalone)")
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=16, help="payload bytes (at least 8)")
    ap.add_argument("--partitions", type=int, default=0, help="0: a non-partitioned topic")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--max-seconds", type=float, default=600.0, help="bound of each step")
    a = ap.parse_args()
    from spark import session

    run = time.strftime("%H%M%S")
    topic, warm = f"ds-bench-{run}", f"ds-bench-warm-{run}"
    # Spark first: its JVM is forked before this process has gRPC threads.
    spark = session.start(a.master, "magnetar-ds-bench", {"spark.ui.enabled": "false"})
    with service(a.service_url) as url:
        create_topic(url, topic, a.partitions)
        create_topic(url, warm, a.partitions)
        print(json.dumps(produce(url, topic, a.messages, a.size, a.max_seconds)), flush=True)
        produce(url, warm, 1000, a.size, a.max_seconds)
        sdk = sdk_reader(url, topic, a.messages, a.max_seconds)
        print(json.dumps(sdk), flush=True)
        print(json.dumps(read_range_only(url, topic)), flush=True)
        try:
            spark_read(spark, url, warm)
            result = spark_read(spark, url, topic)
        finally:
            spark.stop()
        print(json.dumps(result), flush=True)
        ratio = result["rows_s"] / max(1, sdk["msgs_s"])
        print(json.dumps({"step": "ratio", "spark_over_sdk_reader": round(ratio, 2)}), flush=True)


if __name__ == "__main__":
    main()
