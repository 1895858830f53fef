"""``magnetar verify`` (client/verify_cli.py) end to end: against a running
``local-cluster`` with process faults, and with its own cluster in network
namespaces with partitions (root only); and its refusals of bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from client.netlab import NetLab
from client.verify_checker import check
from client.verify_workload import read_history
from tests.harness import ROOT
from tests.integration.test_local_cluster import _free_offset, _start, _stop

VERIFY = [sys.executable, "-m", "broker.cli", "verify"]


def _verify(*args: str, timeout_s: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*VERIFY, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout_s
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "give one of --cluster DIR, --netns or --service-url URL"),
        (("--service-url", "magnetar://127.0.0.1:1"), "--service-url runs no faults"),
        (("--cluster", "/nonexistent", "--faults", "flap"), "it needs --netns"),
        (("--cluster", "/nonexistent", "--faults", "kill9,melt"), "unknown fault 'melt'"),
        (
            ("--cluster", "/nonexistent"),
            "is `magnetar local-cluster --data-dir /nonexistent` running?",
        ),
        (("--cluster", "/nonexistent", "--fault-interval", "60-20"), "needs 0 < LOW <= HIGH"),
        (("--cluster", "/x", "--netns"), "give one of"),
        (("--cluster", "/x", "--keep-alive", "0"), "--keep-alive must be positive"),
    ],
)
def test_bad_input_is_refused_with_one_line_and_exit_2(args, message, tmp_path):
    got = _verify(*args, "--out", str(tmp_path / "out"), timeout_s=60)
    assert got.returncode == 2, got
    assert message in got.stderr
    assert "Traceback" not in got.stderr


def _check_run(out: Path, got: subprocess.CompletedProcess, kinds: set[str]) -> dict:
    assert got.returncode == 0, got.stdout + got.stderr[-3000:]
    assert got.stdout.strip().splitlines()[-1].startswith("PASS: ")
    report = json.loads((out / "report.json").read_text())
    assert report["verdict"] == "PASS" and report["anomalies"] == {} and report["doubts"] == []
    assert report["counts"]["acknowledged"] > 200
    assert {f["fault"].split()[0] for f in report["faults"]} == kinds
    assert all(f["recovered_s"] is not None for f in report["faults"])
    subs = report["counts"]["subscriptions"]
    assert {s["type"] for s in subs.values()} == {"Exclusive", "Failover", "Shared", "Key_Shared"}
    # What the verifier wrote is what it judged: the history checks again to PASS.
    assert check(read_history(out / "history.jsonl.gz")).ok
    svg = (out / "timeline.svg").read_text()
    assert svg.startswith("<svg") and svg.count("fill-opacity") == len(report["faults"])
    assert "| fault kind |" in (out / "report.md").read_text()
    print(json.dumps(report["outage_by_fault_kind"]))
    return report


def test_verify_against_a_local_cluster_passes_through_process_faults(tmp_path: Path):
    proc, _ = _start(tmp_path, "--port-offset", str(_free_offset()))
    out = tmp_path / "verify"
    try:
        got = _verify(
            *("--cluster", str(tmp_path / "data-cluster"), "--duration", "50"),
            *("--faults", "kill9,pause,restart", "--fault-interval", "11-13"),
            *("--fault-hold", "2-4", "--seed", "4", "--out", str(out)),
        )
    finally:
        _stop(proc, tmp_path)
    report = _check_run(out, got, {"kill9", "pause", "restart"})
    assert report["run"]["netns"] is False


def test_verify_with_network_namespaces_passes_through_partitions(tmp_path: Path):
    why = NetLab.unavailable()
    if why is not None:
        pytest.skip(f"magnetar verify --netns: {why}")
    out = tmp_path / "verify"
    kinds = "broker-metastore,isolate-metastore,bookie-broker,client-broker,flap"
    got = _verify(
        *("--netns", "--duration", "70", "--faults", kinds, "--fault-interval", "12-13"),
        *("--fault-hold", "4-5", "--seed", "2", "--out", str(out)),
    )
    report = _check_run(
        out,
        got,
        {"broker-metastore", "isolate-metastore", "bookie-broker", "client-broker", "flap"},
    )
    assert report["run"]["netns"] is True
