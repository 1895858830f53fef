"""``make report-demo`` (spark/demo.py), shortened: a standalone, a load of
the demo's shape, all three reports from the stats topic, the HTML's path."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.harness import ROOT


def test_the_report_demo_runs_end_to_end(tmp_path: Path, spark_session) -> None:
    # spark_session: skips with one line where there is no Java, like the
    # other Spark tests (the demo starts a Spark of its own).
    out = tmp_path / "report"
    done = subprocess.run(
        [
            sys.executable, "-m", "spark.demo", "--data-dir", str(tmp_path / "data"),
            "--output", str(out), "--interval", "1", "--seconds", "6",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    html = out / "report.html"
    assert f"report: {html.resolve()}" in done.stdout
    page = html.read_text()
    for topic in ("demo-orders", "demo-payments", "demo-audit"):
        assert topic in page
    stuck = out / "backlog" / "stuck_subscriptions"
    rows = spark_session.read.parquet(str(stuck)).collect()
    assert {(r["topic"], r["subscription"]) for r in rows} == {
        ("persistent://public/default/demo-audit", "archive")
    }
