"""Soak: ``magnetar verify`` for a long time against a ``local-cluster``,
with a fault every 20-60 s (kill -9, SIGSTOP/SIGCONT, restart of any
process; the cluster's supervisor starts processes again).

    .venv/bin/python benchmarks/soak.py [--minutes 30] [--seed 1]
        [--fault-interval 20-60] [--fault-hold 3-15] [--out ./soak-out]

Starts ``magnetar local-cluster`` (3 metastore nodes, 3 bookies, 3 brokers)
in a temporary data dir on free ports, runs the verifier against it, stops
the cluster, and prints the verifier's verdict line and one JSON line of
figures: acknowledged sends, faults, anomalies, the longest gap between
acknowledgements, and the longest gap per fault kind. The report
(report.md, timeline.svg) and history are in ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from broker.local_cluster import free_port_offset  # noqa: E402


def start_cluster(data: Path, log: Path) -> subprocess.Popen:
    out = open(log, "w")  # noqa: SIM115 (kept by the process)
    proc = subprocess.Popen(
        [sys.executable, "-m", "broker.cli", "local-cluster", "--data-dir", str(data),
         "--port-offset", str(free_port_offset(21000, 40000, 89))],
        cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 180
    while not (data / "endpoints.json").exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"the cluster did not start:\n{log.read_text()[-3000:]}")
        time.sleep(0.2)  # polling for the file, bounded by the deadline
    return proc


def stop_cluster(proc: subprocess.Popen, data: Path) -> None:
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--fault-interval", default="20-60")
    ap.add_argument("--fault-hold", default="3-15")
    ap.add_argument("--out", default="./soak-out")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="magnetar-soak-"))
    data = tmp / "data-cluster"
    proc = start_cluster(data, tmp / "cluster.log")
    try:
        verify = subprocess.run(
            [sys.executable, "-m", "client.verify_cli", "--cluster", str(data),
             "--duration", str(args.minutes * 60), "--seed", str(args.seed),
             "--fault-interval", args.fault_interval, "--fault-hold", args.fault_hold,
             "--out", args.out],
            cwd=ROOT, check=False,
        )  # fmt: skip
    finally:
        stop_cluster(proc, data)
    path = Path(args.out) / "report.json"
    if not path.exists():  # the verifier could not run (it said why)
        sys.exit(verify.returncode)
    report = json.loads(path.read_text())
    print(
        json.dumps(
            {
                "verdict": report["verdict"],
                "exit": verify.returncode,
                "minutes": args.minutes,
                "acknowledged": report["counts"]["acknowledged"],
                "failed_sends": report["counts"]["failed"],
                "dedup_receipts": report["counts"]["dedup_receipts"],
                "faults": len(report["faults"]),
                "anomalies": report["anomalies"],
                "longest_ack_gap_s": report["longest_ack_gap_s"],
                "outage_by_fault_kind": report["outage_by_fault_kind"],
            }
        )
    )
    shutil.rmtree(tmp, ignore_errors=True)
    sys.exit(verify.returncode)


if __name__ == "__main__":
    main()
