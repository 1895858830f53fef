"""AutoRecovery after a bookie is lost for good: how long re-replication of
its replicas takes, and what producers keep of their rate meanwhile.

    .venv/bin/python benchmarks/rereplication.py [--mb 1024] [--rates 1048576,0]
        [--baseline-s 15] [--entry-kb 64]

For each rate (``rereplication_rate_bytes_per_s``; 0 = unpaced), in a fresh
temporary cluster (one metastore node, four bookies with journal sync on,
one broker):

1. writes ``--mb`` MiB in ``--entry-kb`` KiB entries into E/Qw/Qa = 2/2/2
   ledgers whose ensemble holds bookie 0 (the victim), through the ledger
   client: that is what re-replication has to copy;
2. runs a producer (sync SDK, ``send_async`` of 1 KiB messages, batching on,
   a topic on the broker) for ``--baseline-s`` seconds: its rate before;
3. kills the victim with SIGKILL, keeps producing, and waits until no task
   is left and no ledger names the victim (the auditor files the ledgers
   once the registration expires: ``session_ttl_ms`` 2 s plus
   ``lost_bookie_recovery_delay_s`` 1 s);

and prints one JSON line: seconds from the kill to the end, seconds from
the first copy to the end, MiB/s copied, and the producer's rate before and
during (msg/s) with their ratio (the target is >= 0.8). Every loop is
bounded by a deadline.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bookie.ledger_client import LedgerClient
from bookie.replication_tasks import all_ledgers, tasks
from client import Client
from metastore.client import MetastoreClient
from tests.harness import BookieCluster

SETTINGS = [
    "session_ttl_ms=2000",
    "lost_bookie_recovery_delay_s=1",
    "auditor_poll_interval_ms=200",
]
DEADLINE_S = 900


async def fill(cluster: BookieCluster, victim: str, mb: int, entry_kb: int) -> int:
    """Write ``mb`` MiB into ledgers holding ``victim``; the bytes written."""
    ms = MetastoreClient(cluster.metastore_address)
    client = LedgerClient(ms)
    entry = b"r" * (entry_kb * 1024)
    per_ledger = max(1, (64 << 20) // len(entry))
    left = (mb << 20) // len(entry)
    written = 0
    for _ in range(10_000):
        if left <= 0:
            break
        writer = await client.create_ledger(2, 2, 2)
        if victim in writer.ensemble:
            n = min(per_ledger, left)
            for start in range(0, n, 256):
                await asyncio.gather(*(writer.add(entry) for _ in range(min(256, n - start))))
            left -= n
            written += n * len(entry)
        await writer.close()
    await client.close()
    await ms.close()
    return written


class Producer:
    """A sync-SDK producer sending 1 KiB messages until stopped; acks per second."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.acks: list[float] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with Client(self.url) as client:
            producer = client.create_producer(
                "persistent://public/default/rerepl-load", block_if_queue_full=True
            )
            payload = b"p" * 1024

            def done(res, _msg_id) -> None:  # type: ignore[no-untyped-def]
                self.acks.append(time.monotonic())

            deadline = time.monotonic() + DEADLINE_S
            while not self.stop.is_set() and time.monotonic() < deadline:
                producer.send_async(payload, done)
            producer.flush()

    def rate(self, start: float, end: float) -> float:
        return sum(1 for t in self.acks if start <= t < end) / (end - start)


async def wait_drained(cluster: BookieCluster, victim: str) -> tuple[float, float | None]:
    """(when nothing names the victim, when the first task was seen)."""
    ms = MetastoreClient(cluster.metastore_address)
    first_task = None
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        pending = await tasks(ms)
        if pending and first_task is None:
            first_task = time.monotonic()
        if first_task is not None and not pending:
            named = [
                md async for md in all_ledgers(ms) if any(victim in e for _, e in md.ensembles)
            ]
            if not named:
                await ms.close()
                return time.monotonic(), first_task
        await asyncio.sleep(0.2)
    raise SystemExit("re-replication did not finish before the deadline")


def one(rate: int, mb: int, entry_kb: int, baseline_s: float, keep: bool) -> dict:
    tmp = tempfile.mkdtemp(prefix="rerepl-")
    try:
        print(f"cluster in {tmp}", file=sys.stderr, flush=True)
        settings = [*SETTINGS, f"rereplication_rate_bytes_per_s={rate}"]
        cluster = BookieCluster(Path(tmp), 4, bookie_settings=settings).start_all()
        try:
            url = cluster.start_broker()
            victim = cluster.info[0]["bookie_id"]
            written = asyncio.run(fill(cluster, victim, mb, entry_kb))
            producer = Producer(url)
            producer.thread.start()
            time.sleep(3)  # the producer's warm-up, not measured
            base_start = time.monotonic()
            time.sleep(baseline_s)
            killed = time.monotonic()
            cluster.kill9(0)
            done, first = asyncio.run(wait_drained(cluster, victim))
            producer.stop.set()
            producer.thread.join(timeout=60)
            before = producer.rate(base_start, killed)
            during = producer.rate(first or killed, done)
            copy_s = done - (first or killed)
            return {
                "rate_limit_bytes_per_s": rate,
                "copied_mib": round(written / 2**20),
                "kill_to_done_s": round(done - killed, 1),
                "copy_s": round(copy_s, 1),
                "copy_mib_per_s": round(written / 2**20 / copy_s, 1),
                "producer_before_msg_s": round(before),
                "producer_during_msg_s": round(during),
                "producer_ratio": round(during / before, 3) if before else None,
            }
        finally:
            cluster.stop_all()
    finally:
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=int, default=1024)
    ap.add_argument("--rates", default="1048576,0")
    ap.add_argument("--baseline-s", type=float, default=15.0)
    ap.add_argument("--entry-kb", type=int, default=64)
    ap.add_argument("--keep", action="store_true", help="Keep the cluster's directory (logs).")
    args = ap.parse_args()
    for rate in (int(r) for r in args.rates.split(",")):
        print(json.dumps(one(rate, args.mb, args.entry_kb, args.baseline_s, args.keep)), flush=True)


if __name__ == "__main__":
    main()
