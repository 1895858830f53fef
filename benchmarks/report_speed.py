"""How long the Spark reports take on a day of a 1,000-topic cluster
(prints figures; asserts nothing).

    .venv/bin/python benchmarks/report_speed.py [--topics 1000] [--hours 24]
        [--dir DIR] [--master local[2]] [--keep]

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
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from protos import stats_schema  # noqa: E402

START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
INTERVAL_S = 60
BROKERS = 4
BOOKIES = 3
NAMESPACES = 50
BUNDLES_PER_NAMESPACE = 4
RESTARTED_BROKER = 2
DISK_TOTAL_BYTES = 1 << 40
PHASE_MS = 7_000  # broker b snapshots b * 7 s after the minute

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


def generate(directory: Path, topics: int, hours: int) -> tuple[int, float]:
    """Write the hourly files; (rows written, seconds taken)."""
    began = time.monotonic()
    directory.mkdir(parents=True, exist_ok=True)
    cluster, rows = Cluster(topics), 0
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
        table = pa.concat_tables(parts)
        stamp = time.strftime("%Y-%m-%dT%H", time.gmtime(START_MS / 1000 + hour * 3600))
        pq.write_table(table, directory / f"stats-{stamp}.parquet")
        rows += table.num_rows
    return rows, time.monotonic() - began


def run_reports(source: Path, output: Path, master: str) -> float:
    began = time.monotonic()
    cmd = [
        sys.executable,
        "-m",
        "spark.reports",
        "all",
        "--input",
        str(source),
        "--output",
        str(output),
        "--master",
        master,
    ]
    subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return time.monotonic() - began


def _size_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--hours", type=int, default=24)
    parser.add_argument("--dir", type=Path, help="work directory (default: a temporary one)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args()
    work = args.dir or Path(tempfile.mkdtemp(prefix="magnetar-report-bench-"))
    try:
        rows, gen_s = generate(work / "input", args.topics, args.hours)
        print(f"input: {rows:,} records ({args.topics} topics x {args.hours * 60} snapshots + brokers + bookies), "
              f"{_size_bytes(work / 'input') / 1e6:.1f} MB Parquet, generated in {gen_s:.1f} s")  # fmt: skip
        wall_s = run_reports(work / "input", work / "output", args.master)
        print(
            f"python -m spark.reports all --master {args.master}: {wall_s:.1f} s wall (Spark start included)"
        )
        kept = work / "output" if args.keep or args.dir else "removed; --keep keeps it"
        print(f"output: {_size_bytes(work / 'output') / 1e6:.1f} MB ({kept})")
    finally:
        if not args.keep and args.dir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
