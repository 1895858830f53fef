"""How long the Spark reports take on a day of a 1,000-topic cluster
(prints figures; asserts nothing).

    .venv/bin/python benchmarks/report_speed.py [--topics 1000] [--hours 24]
        [--dir DIR] [--master local[2]] [--keep] [--via-topic [--skip-parquet]]

Writes synthetic stats history as ``magnetar-admin stats export --format
parquet`` would (one file per UTC hour, the flat table of every field,
``protos.stats_schema.all_fields()``) with pyarrow and numpy: every topic
snapshotted each minute with one subscription, 4 brokers (their load
records with their bundles) and 3 bookies. Then times ``python -m
spark.reports all`` on it, end to end (Spark's start included), and prints
the input size, the wall time and what was written.

The data is deterministic (seeded) and shaped like a cluster's: rates
spread log-normally over topics with a daily swing, one broker restarting
at noon (its topics' counters restart), 1% of subscriptions with no
consumer (stuck, growing backlogs), storage and disks growing.

``--via-topic`` also times the same reports reading the same records from
a Magnetar topic through the Spark data source: it starts a standalone
Magnetar in the work directory (the brokers' own stats history off),
publishes every record as one message (the broker's compact JSON form,
exactly the fields of its kind) to :data:`BENCH_TOPIC` with the SDK,
printing the publish time apart, then times ``python -m spark.reports all
--input magnetar://... --topic ...`` and prints it beside the Parquet
figure of the same run (``--skip-parquet`` leaves that one out) and their
ratio. A durable subscription, created before the first message and never
consumed, holds the messages: ``public/default`` has no retention, and a
topic without one deletes what every durable cursor has read.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from client import Client, Result  # noqa: E402
from protos import stats_schema  # noqa: E402
from tests.harness import StandaloneCluster  # noqa: E402

START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
INTERVAL_S = 60
BROKERS = 4
BOOKIES = 3
NAMESPACES = 50
BUNDLES_PER_NAMESPACE = 4
RESTARTED_BROKER = 2
DISK_TOTAL_BYTES = 1 << 40
PHASE_MS = 7_000  # broker b snapshots b * 7 s after the minute
BENCH_TOPIC = "persistent://public/default/synthetic-stats"
HOLD_SUBSCRIPTION = "report-speed-hold"  # durable, never consumed: keeps the messages
# The standalone's own stats history would mix in with the synthetic records.
STANDALONE_ENV = {"MAGNETAR_BROKER_STATS_EXPORT_INTERVAL_S": "0"}

_ARROW = {"string": pa.string(), "long": pa.int64(), "double": pa.float64(), "boolean": pa.bool_()}


def arrow_type(kind: Any) -> pa.DataType:
    if isinstance(kind, str):
        return _ARROW[kind]
    return pa.list_(pa.struct([pa.field(n, arrow_type(k)) for n, k in kind]))


SCHEMA = pa.schema([pa.field(n, arrow_type(k)) for n, k in stats_schema.all_fields()])


def _table(n: int, columns: dict[str, Any]) -> pa.Table:
    """A table of the flat schema: ``columns`` given, every other one null."""
    arrays = []
    for f in SCHEMA:
        value = columns.get(f.name)
        if value is None:
            arrays.append(pa.nulls(n, f.type))
        elif isinstance(value, pa.Array):
            arrays.append(value)
        elif np.isscalar(value):
            arrays.append(pa.array(np.full(n, value), f.type))
        else:  # a copy: pyarrow may share a numpy buffer the cluster updates in place
            arrays.append(pa.array(np.array(value, copy=True), f.type))
    return pa.Table.from_arrays(arrays, schema=SCHEMA)


def _list_of_structs(
    offsets: np.ndarray, fields: tuple[Any, ...], values: dict[str, Any]
) -> pa.Array:
    struct_type = arrow_type(fields).value_type
    # A field this generator does not know (the schema grew) is null.
    children = [
        pa.array(np.array(values[name], copy=True), struct_type.field(name).type)
        if name in values
        else pa.nulls(int(offsets[-1]), struct_type.field(name).type)
        for name, _ in fields
    ]
    structs = pa.StructArray.from_arrays(children, fields=list(struct_type))
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), structs)


class Cluster:
    """The synthetic cluster's state, advanced one snapshot at a time."""

    def __init__(self, topics: int, seed: int = 7) -> None:
        rng = np.random.default_rng(seed)
        self.rng = rng
        self.topics = topics
        self.idx = np.arange(topics)
        self.namespace = self.idx % NAMESPACES
        self.broker = self.idx % BROKERS
        self.bundle = (self.idx // NAMESPACES) % BUNDLES_PER_NAMESPACE
        self.rate = rng.lognormal(mean=1.0, sigma=1.2, size=topics)  # msgs/s
        self.msg_size = rng.uniform(200, 2000, size=topics)
        self.consumed = np.where(rng.random(topics) < 0.01, 0.0, rng.uniform(0.97, 1.03, topics))
        self.since = np.full(topics, START_MS - 86_400_000, dtype=np.int64)
        self.msgs_in = np.zeros(topics, dtype=np.int64)
        self.msgs_out = np.zeros(topics, dtype=np.int64)
        self.backlog = np.zeros(topics, dtype=np.int64)
        self.storage = rng.integers(1 << 20, 1 << 30, size=topics)
        names = [
            f"persistent://tenant-{n % 10}/ns-{n}/topic-{i}"
            for i, n in zip(self.idx, self.namespace, strict=True)
        ]
        self.names = np.array(names, dtype=object)
        self.ns_names = np.array([f"tenant-{n % 10}/ns-{n}" for n in self.namespace], dtype=object)
        self.tenants = np.array([f"tenant-{n % 10}" for n in self.namespace], dtype=object)
        self.bundle_names = np.array(
            [f"0x{b:08x}_0x{b + 1:08x}" for b in self.bundle], dtype=object
        )

    def advance(self, step: int) -> None:
        hour = step / 60
        swing = 1.0 + 0.5 * np.sin((hour - 6) / 24 * 2 * np.pi)
        published = self.rng.poisson(self.rate * swing * INTERVAL_S)
        delivered = np.minimum(
            self.backlog + published, np.rint(published * self.consumed).astype(np.int64)
        )
        if step == 12 * 60:  # the broker restarts at noon: its topics count from 0
            restarted = self.broker == RESTARTED_BROKER
            # counting restarts 1 s after the broker's previous snapshot
            previous_snapshot_ms = (
                START_MS + (step - 1) * INTERVAL_S * 1000 + RESTARTED_BROKER * PHASE_MS
            )
            self.since[restarted] = previous_snapshot_ms + 1_000
            self.msgs_in[restarted] = 0
            self.msgs_out[restarted] = 0
        self.msgs_in += published
        self.msgs_out += delivered
        self.backlog += published - delivered
        self.storage += np.rint(published * self.msg_size * 0.3).astype(np.int64)

    def topic_rows(self, step: int) -> pa.Table:
        n = self.topics
        ts = START_MS + step * INTERVAL_S * 1000 + self.broker * PHASE_MS
        size = self.msg_size
        subs = _list_of_structs(
            np.arange(n + 1),
            stats_schema.SUBSCRIPTION_FIELDS,
            {
                "name": np.full(n, "sub", dtype=object),
                "type": np.full(n, "Shared", dtype=object),
                "isDurable": np.ones(n, dtype=bool),
                "msgBacklog": self.backlog,
                "backlogSize": np.rint(self.backlog * size).astype(np.int64),
                "msgDelayed": np.zeros(n, dtype=np.int64),
                "unackedMessages": np.zeros(n, dtype=np.int64),
                "msgRateOut": self.rate * self.consumed,
                "msgThroughputOut": self.rate * self.consumed * size,
                "msgRateRedeliver": np.zeros(n),
                "messageAckRate": self.rate * self.consumed,
                "msgOutCounter": self.msgs_out,
                "bytesOutCounter": np.rint(self.msgs_out * size).astype(np.int64),
                "consumers": (self.consumed > 0).astype(np.int64),
                "blockedSubscriptionOnUnackedMsgs": np.zeros(n, dtype=bool),
                "countersSince": self.since,
            },
        )
        return _table(
            n,
            {
                "schema_version": 1, "kind": "topic", "timestamp": ts, "interval_s": float(INTERVAL_S),
                "cluster": "bench", "broker": np.array([f"broker-{b}:6650" for b in self.broker], dtype=object),
                "tenant": self.tenants, "namespace": self.ns_names, "topic": self.names, "partition": -1,
                "bundle": self.bundle_names, "persistent": True, "countersSince": self.since,
                "msgRateIn": self.rate, "msgRateOut": self.rate * self.consumed,
                "msgThroughputIn": self.rate * size, "msgThroughputOut": self.rate * self.consumed * size,
                "msgInCounter": self.msgs_in, "bytesInCounter": np.rint(self.msgs_in * size).astype(np.int64),
                "msgOutCounter": self.msgs_out, "bytesOutCounter": np.rint(self.msgs_out * size).astype(np.int64),
                "averageMsgSize": size, "storageSize": self.storage,
                "backlogSize": np.rint(self.backlog * size).astype(np.int64), "msgBacklog": self.backlog,
                "publishers": 1, "consumers": (self.consumed > 0).astype(np.int64), "subscriptions": subs,
            },
        )  # fmt: skip

    def broker_rows(self, step: int) -> pa.Table:
        bundles = NAMESPACES * BUNDLES_PER_NAMESPACE // BROKERS
        ns = np.concatenate(
            [np.arange(b, NAMESPACES * BUNDLES_PER_NAMESPACE, BROKERS) for b in range(BROKERS)]
        )
        rates = self.rng.gamma(2.0, 300.0, size=ns.size)
        bundle_list = _list_of_structs(
            np.arange(BROKERS + 1) * bundles,
            stats_schema.BUNDLE_FIELDS,
            {
                "namespace": np.array([f"tenant-{(k // BUNDLES_PER_NAMESPACE) % 10}/ns-{k // BUNDLES_PER_NAMESPACE}" for k in ns], dtype=object),
                "bundle": np.array([f"0x{k % BUNDLES_PER_NAMESPACE:08x}_0x{k % BUNDLES_PER_NAMESPACE + 1:08x}" for k in ns], dtype=object),
                "topics": np.full(ns.size, self.topics // (NAMESPACES * BUNDLES_PER_NAMESPACE), dtype=np.int64),
                "sessions": self.rng.integers(1, 40, size=ns.size),
                "msgRateIn": rates, "msgRateOut": rates,
                "msgThroughputIn": rates * 1000, "msgThroughputOut": rates * 1000,
            },
        )  # fmt: skip
        brokers = np.arange(BROKERS)
        return _table(
            BROKERS,
            {
                "schema_version": 1, "kind": "broker", "interval_s": float(INTERVAL_S), "cluster": "bench",
                "timestamp": START_MS + step * INTERVAL_S * 1000 + brokers * PHASE_MS,
                "broker": np.array([f"broker-{b}:6650" for b in brokers], dtype=object),
                "cpu": self.rng.uniform(0.1, 0.6, BROKERS), "memory": self.rng.uniform(0.2, 0.5, BROKERS),
                "bandwidthIn": 0.1, "bandwidthOut": 0.1, "msgRateIn": 1000.0, "msgRateOut": 1000.0,
                "msgThroughputIn": 1e6, "msgThroughputOut": 1e6, "numTopics": self.topics // BROKERS,
                "numBundles": bundles, "bundles": bundle_list, "splitMaxTopics": 1000,
                "splitMaxSessions": 35, "splitMaxMsgRate": 1500.0, "splitMaxBandwidthBytes": 100e6,
            },
        )  # fmt: skip

    def bookie_rows(self, step: int) -> pa.Table:
        used = (1 << 38) + step * 40_000_000 + self.rng.integers(0, 1 << 30, BOOKIES)
        return _table(
            BOOKIES,
            {
                "schema_version": 1, "kind": "bookie", "interval_s": float(INTERVAL_S), "cluster": "bench",
                "timestamp": START_MS + step * INTERVAL_S * 1000, "broker": "broker-0:6650",
                "bookie": np.array([f"bookie-{b}:3181" for b in range(BOOKIES)], dtype=object),
                "diskUsedBytes": used, "diskTotalBytes": DISK_TOTAL_BYTES, "diskFreeBytes": DISK_TOTAL_BYTES - used,
                "ledgers": 100, "entries": 10_000, "storedBytes": used, "readOnly": False,
            },
        )  # fmt: skip


def hourly_parts(topics: int, hours: int) -> Iterator[tuple[int, list[pa.Table]]]:
    """Each hour's records, in snapshot order: (hour, tables), three tables
    of one kind each (topic, broker, bookie rows) per minute. The one
    generator of both modes: the same seed gives the same records."""
    cluster = Cluster(topics)
    for hour in range(hours):
        parts = []
        for minute in range(60):
            step = hour * 60 + minute
            cluster.advance(step)
            parts += [
                cluster.topic_rows(step),
                cluster.broker_rows(step),
                cluster.bookie_rows(step),
            ]
        yield hour, parts


def generate(directory: Path, topics: int, hours: int) -> tuple[int, float]:
    """Write the hourly files; (rows written, seconds taken)."""
    began = time.monotonic()
    directory.mkdir(parents=True, exist_ok=True)
    rows = 0
    for hour, parts in hourly_parts(topics, hours):
        table = pa.concat_tables(parts)
        stamp = time.strftime("%Y-%m-%dT%H", time.gmtime(START_MS / 1000 + hour * 3600))
        pq.write_table(table, directory / f"stats-{stamp}.parquet")
        rows += table.num_rows
    return rows, time.monotonic() - began


_KIND_FIELDS = {kind: list(stats_schema.field_names(kind)) for kind in stats_schema.KINDS}


def json_payloads(table: pa.Table) -> list[bytes]:
    """The records of a one-kind table as the broker publishes them: exactly
    the fields of their kind, in the schema's order, as compact JSON."""
    kind = table.column("kind")[0].as_py()
    rows = table.select(_KIND_FIELDS[kind]).to_pylist()
    return [json.dumps(row, separators=(",", ":")).encode() for row in rows]


class Receipts:
    """``send_async``'s callback: counts the receipts (client thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.ok = 0
        self.failed = 0
        self.first_failure: str | None = None

    def __call__(self, result: Any, _message_id: Any) -> None:
        with self._lock:
            if result == Result.Ok:
                self.ok += 1
                return
            self.failed += 1
            if self.first_failure is None:
                self.first_failure = str(result)


@dataclass
class PublishFigures:
    messages: int = 0
    payload_bytes: int = 0
    generate_s: float = 0.0  # building the Arrow tables
    encode_s: float = 0.0  # the tables to JSON messages
    send_s: float = 0.0  # send_async of every message, then flush()

    @property
    def rate(self) -> float:
        return self.messages / self.send_s if self.send_s else 0.0


def _send_all(producer: Any, topics: int, hours: int, receipts: Receipts) -> PublishFigures:
    """Generate, encode and send hour by hour (the send time alone counted
    as such; the producer goes on sending the queue while the next hour
    is built); prints the progress."""
    figures = PublishFigures()
    mark = time.monotonic()
    for hour, parts in hourly_parts(topics, hours):
        encoding = time.monotonic()
        figures.generate_s += encoding - mark
        payloads = [payload for table in parts for payload in json_payloads(table)]
        sending = time.monotonic()
        figures.encode_s += sending - encoding
        for payload in payloads:
            producer.send_async(payload, receipts)
        if hour == hours - 1:
            producer.flush()  # the last receipts are in the send time
        mark = time.monotonic()
        figures.send_s += mark - sending
        figures.messages += len(payloads)
        figures.payload_bytes += sum(len(p) for p in payloads)
        print(f"  published hour {hour + 1}/{hours}: {figures.messages:,} messages, "
              f"{figures.rate:,.0f} msg/s so far", file=sys.stderr, flush=True)  # fmt: skip
    return figures


def publish(service_url: str, topic: str, topics: int, hours: int) -> PublishFigures:
    """Every synthetic record as one message on ``topic``; fails unless
    every one was acknowledged."""
    client = Client(service_url, operation_timeout_seconds=60)
    try:
        client.subscribe(topic, HOLD_SUBSCRIPTION).close()
        producer = client.create_producer(
            topic,
            batching_enabled=True,
            batching_max_messages=1000,
            block_if_queue_full=True,
            max_pending_messages=10000,
        )
        receipts = Receipts()
        figures = _send_all(producer, topics, hours, receipts)
        producer.close()
    finally:
        client.close()
    if receipts.failed or receipts.ok != figures.messages:
        raise SystemExit(
            f"publish: {receipts.ok:,} of {figures.messages:,} acknowledged, "
            f"{receipts.failed:,} failed (first: {receipts.first_failure})"
        )
    return figures


def run_reports(source: list[str], output: Path, master: str) -> float:
    """Wall seconds of ``python -m spark.reports all`` on ``source`` (its
    ``--input`` and, for a topic, ``--topic`` arguments)."""
    began = time.monotonic()
    cmd = [
        sys.executable,
        "-m",
        "spark.reports",
        "all",
        "--input",
        *source,
        "--output",
        str(output),
        "--master",
        master,
    ]
    subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return time.monotonic() - began


def _size_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _load() -> str:
    return "load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def via_parquet(args: argparse.Namespace, work: Path) -> float:
    """Generate the files, time the reports on them; the wall seconds."""
    rows, gen_s = generate(work / "input", args.topics, args.hours)
    print(f"input: {rows:,} records ({args.topics} topics x {args.hours * 60} snapshots + brokers + bookies), "
          f"{_size_bytes(work / 'input') / 1e6:.1f} MB Parquet, generated in {gen_s:.1f} s")  # fmt: skip
    wall_s = run_reports([str(work / "input")], work / "output", args.master)
    print(f"parquet: python -m spark.reports all --master {args.master}: "
          f"{wall_s:.1f} s wall (Spark start included)")  # fmt: skip
    kept = work / "output" if args.keep or args.dir else "removed; --keep keeps it"
    print(f"output: {_size_bytes(work / 'output') / 1e6:.1f} MB ({kept})")
    return wall_s


def via_topic(args: argparse.Namespace, work: Path) -> float:
    """Start a standalone Magnetar, publish the records, time the reports
    reading the topic; the wall seconds."""
    cluster = StandaloneCluster(work / "magnetar", env=STANDALONE_ENV).start()
    try:
        print(f"standalone Magnetar at {cluster.service_url} ({_load()})")
        f = publish(cluster.service_url, args.topic, args.topics, args.hours)
        print(f"publish: {f.messages:,} messages ({f.payload_bytes / 1e6:.1f} MB JSON) to {args.topic} "
              f"in {f.send_s:.1f} s ({f.rate:,.0f} msg/s; send_async + flush; "
              f"besides {f.generate_s:.1f} s generating and {f.encode_s:.1f} s encoding)")  # fmt: skip
        source = [cluster.service_url, "--topic", args.topic]
        wall_s = run_reports(source, work / "output-topic", args.master)
        print(f"topic: python -m spark.reports all --input {cluster.service_url} --topic {args.topic} "
              f"--master {args.master}: {wall_s:.1f} s wall (Spark start included)")  # fmt: skip
    finally:
        cluster.stop(timeout_s=60)
    return wall_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--hours", type=int, default=24)
    parser.add_argument("--dir", type=Path, help="work directory (default: a temporary one)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument("--via-topic", action="store_true", help="also read from a topic")
    parser.add_argument("--topic", default=BENCH_TOPIC, help="the topic --via-topic publishes to")
    parser.add_argument("--skip-parquet", action="store_true", help="with --via-topic: no files")
    args = parser.parse_args()
    if args.skip_parquet and not args.via_topic:
        parser.error("--skip-parquet goes with --via-topic")
    work = args.dir or Path(tempfile.mkdtemp(prefix="magnetar-report-bench-"))
    try:
        print(_load())
        parquet_s = None if args.skip_parquet else via_parquet(args, work)
        if args.via_topic:
            topic_s = via_topic(args, work)
            if parquet_s is not None:
                print(
                    f"topic / parquet: {topic_s:.1f} s / {parquet_s:.1f} s = {topic_s / parquet_s:.2f}x"
                )
        print(_load())
    finally:
        if not args.keep and args.dir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
