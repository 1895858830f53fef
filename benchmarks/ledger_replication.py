"""Replicated ledger writes against real bookies, beside the raw disk ceiling.

    .venv/bin/python benchmarks/ledger_replication.py [--n 50000] [--window 5000] [--repeat 3]
        [--warmup 100000]

Starts one metastore node and three bookies (journal sync on) in a temporary
directory, fresh for every case, then prints JSON lines:

* the raw ceiling: rocksdict WriteBatch group commits of 1 KiB values with
  sync on, in this process, 100 and 1000 entries per batch (no gRPC), once
  with the options of the measurement DESIGN §9 quotes ("reference
  options": raw mode, compression off, as shared/bench/limits/bench_rocksdb.py;
  RocksDB's defaults otherwise) and once with the bookie's (16 MiB
  memtables, O_DIRECT flushes; bookie/storage.py) plus recycled log files
  (the bookie has its own journal instead of RocksDB's log), each in a fresh
  directory, with the CPU time per entry;
* pipelined 1 KiB adds through the ledger client for E/Qw/Qa = 1/1/1 and
  3/2/2, one ``add()`` per entry and ``add_many()`` of ``--per-call``
  entries: entries/s, MB/s, latency p50/p99 of a call (to confirmation), with
  ``--window`` entries in flight, and the CPU time of this process per entry
  and of the bookies per stored copy;

and, after ``--repeat`` rounds of every case (interleaved), the ratio of
the median 3/2/2 rate to each raw ceiling's median. Every loop is bounded
by --n, --warmup and --repeat.

Every case first writes ``--warmup`` entries the same way (the raw cases
into the same database, the ledger cases into a ledger of their own, closed
before the measured one starts), so the figures are the steady state and
not a fresh process's start: on these VMs the first touch of memory is
expensive (a fresh bookie's heap grows by ~65 MB under this load, and those
page faults cost ~4 µs of CPU per KiB), and gRPC's flow-control windows
grow during the first requests. ``--warmup 0`` measures from cold.

This process tunes malloc and the garbage collector the way a broker does
(broker/server.py).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import psutil

from bookie.ledger_client import LedgerClient
from bookie.ledger_writer import LedgerWriter
from bookie.storage import StoreTuning, entry_options
from broker.settings import BrokerSettings
from metastore.client import MetastoreClient
from protos import serving
from tests.harness import BookieCluster

SIZE = 1024


def raw_ceiling(path: Path, per_batch: int, n: int, bookie_options: bool, warmup: int = 0) -> dict:
    from rocksdict import DBCompressionType, Options, Rdict, WriteBatch, WriteOptions

    # The options of the measurement DESIGN §9 quotes
    # (shared/bench/limits/bench_rocksdb.py): raw mode, no compression.
    opts = Options(raw_mode=True)
    opts.set_compression_type(DBCompressionType.none())
    if bookie_options:
        # The bookie's RocksDB options, and the best we found for RocksDB's
        # own log (which the bookie replaces by its journal): recycled files.
        path.mkdir(parents=True)
        opts, _ = entry_options(path, StoreTuning.from_settings())
        opts.set_recycle_log_file_num(4)
        opts.set_max_total_wal_size(64 << 20)
    db = Rdict(str(path), opts)
    wo = WriteOptions()
    wo.sync = True
    value = b"x" * SIZE

    def write(first: int, count: int) -> int:
        written = 0
        while written < count:
            wb = WriteBatch(raw_mode=True)
            for i in range(per_batch):
                wb.put((first + written + i).to_bytes(16, "big"), value)
            db.write(wb, wo)
            written += per_batch
        return written

    write(0, warmup)
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    written = write(warmup, n)
    wall = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    db.close()
    how = "bookie options" if bookie_options else "reference options"
    return {
        "case": f"raw rocksdict group commit, {per_batch}/batch, sync, {how}",
        "entries_s": round(written / wall),
        "mb_s": round(written * SIZE / wall / 1e6, 1),
        "cpu_us_per_entry": round(cpu / written * 1e6, 2),
    }


def settle() -> None:
    """Every case starts with no earlier case's files or dirty pages: the
    kernel writing back a previous case's gigabyte would slow the next."""
    os.sync()


def cpu_seconds(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        t = psutil.Process(pid).cpu_times()
        total += t.user + t.system
    return total


async def pipelined(
    ms_address: str,
    quorums: tuple[int, int, int],
    n: int,
    window: int,
    per_call: int,
    bookie_pids: list[int],
    warmup: int = 0,
) -> dict:
    ms = MetastoreClient(ms_address)
    client = LedgerClient(ms)
    if warmup:
        writer = await client.create_ledger(*quorums)
        await _add_all(writer, warmup, window, per_call, [])
        await writer.close()
    writer = await client.create_ledger(*quorums)
    lat: list[float] = []
    cpu0, bookies0 = time.process_time(), cpu_seconds(bookie_pids)
    t0 = time.perf_counter()
    await _add_all(writer, n, window, per_call, lat)
    wall = time.perf_counter() - t0
    cpu, bookies_cpu = time.process_time() - cpu0, cpu_seconds(bookie_pids) - bookies0
    await writer.close()
    await client.close()
    await ms.close()
    lat.sort()
    e, qw, qa = quorums
    how = "add() per entry" if per_call == 1 else f"add_many() of {per_call}"
    return {
        "case": f"ledger client, pipelined, E/Qw/Qa = {e}/{qw}/{qa}, {how}",
        "entries_s": round(n / wall),
        "mb_s": round(n * SIZE / wall / 1e6, 1),
        "p50_ms": round(lat[len(lat) // 2] * 1e3, 2),
        "p99_ms": round(lat[int(len(lat) * 0.99)] * 1e3, 2),
        "client_cpu_us_per_entry": round(cpu / n * 1e6, 2),
        "bookie_cpu_us_per_copy": round(bookies_cpu / (n * qw) * 1e6, 2),
    }


async def _add_all(
    writer: LedgerWriter, n: int, window: int, per_call: int, lat: list[float]
) -> None:
    """Add ``n`` entries, ``per_call`` per call, ``window`` in flight;
    append each call's latency to ``lat``."""
    payloads = [b"x" * SIZE] * per_call
    inflight: set[asyncio.Future] = set()
    for _ in range(n // per_call):
        started = time.perf_counter()
        fut = writer.add(payloads[0]) if per_call == 1 else writer.add_many(payloads)

        def done(_: asyncio.Future, s: float = started) -> None:
            lat.append(time.perf_counter() - s)

        fut.add_done_callback(done)
        inflight.add(fut)
        if len(inflight) * per_call >= window:
            _, inflight = await asyncio.wait(inflight, return_when=asyncio.FIRST_COMPLETED)
    if inflight:
        await asyncio.wait(inflight)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--n", type=int, default=50_000)
    ap.add_argument("--window", type=int, default=5000, help="entries in flight")
    ap.add_argument("--per-call", type=int, default=100, help="entries per add_many()")
    ap.add_argument(
        "--warmup",
        type=int,
        default=100_000,
        help="entries written before the clock starts, in every case (0: measure from cold)",
    )
    ap.add_argument("--repeat", type=int, default=3, help="rounds of every case")
    a = ap.parse_args()
    broker = BrokerSettings()
    serving.tune_malloc(broker.malloc_trim_threshold_mb, broker.malloc_arenas)
    serving.tune_gc()
    runs: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory(dir=".") as tmp:
        for round_ in range(a.repeat):
            for res in one_round(Path(tmp) / f"round{round_}", a):
                runs.setdefault(res["case"], []).append(res)
                print(json.dumps({"round": round_ + 1, **res}), flush=True)
    # The machine's noise (about ±20 % between runs of one case here) is
    # why the cases repeat, interleaved, and the ratios compare medians.
    medians = {case: statistics.median(r["entries_s"] for r in rs) for case, rs in runs.items()}
    best = max(v for case, v in medians.items() if "3/2/2" in case)
    summary = {"rounds": a.repeat, "median_best_3_2_2_entries_s": round(best)}
    for case, v in medians.items():
        if case.startswith("raw"):
            summary[f"ratio_to {case.removeprefix('raw rocksdict group commit, ')}"] = round(
                best / v, 3
            )
    print(json.dumps(summary))


def one_round(tmp: Path, a: argparse.Namespace) -> Iterator[dict]:
    tmp.mkdir(parents=True)
    for tuned in (False, True):
        for b in (100, 1000):
            settle()
            raw_dir = tmp / f"raw{b}-{tuned}"
            yield raw_ceiling(raw_dir, b, a.n, tuned, a.warmup)
            shutil.rmtree(raw_dir)
    for per_call in (1, a.per_call):
        for q in ((1, 1, 1), (3, 2, 2)):
            settle()
            # Fresh bookies per case: earlier cases' data would add their
            # flushes and compactions to later ones.
            cluster = BookieCluster(tmp / f"cluster-{per_call}-{q[0]}", 3)
            try:
                cluster.start_all()
                pids = [p.pid for p in cluster.procs.values()]
                res = asyncio.run(
                    pipelined(cluster.metastore_address, q, a.n, a.window, per_call, pids, a.warmup)
                )
            finally:
                cluster.stop_all()
                shutil.rmtree(cluster.data_dir, ignore_errors=True)
            yield res


if __name__ == "__main__":
    main()
