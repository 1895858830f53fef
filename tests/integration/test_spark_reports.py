"""The whole pipeline on real processes and a real Spark: a standalone
snapshots every second into its stats topic, the Spark data source reads
the topic, and the reports say what happened on a known topic."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from client import Client, InitialPosition
from client.admin import Admin
from spark.reports.runner import RunOptions, run
from tests.harness import StandaloneCluster, wait_for
from tests.stats_topic import stats_records

N, M = 50, 18  # produced, then consumed and acknowledged


@pytest.fixture(scope="module")
def reported(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[StandaloneCluster, str]]:
    """A standalone whose known topic took N messages, of which its
    subscription acknowledged M, and whose stats topic has recorded that."""
    c = StandaloneCluster(
        tmp_path_factory.mktemp("reports") / "data",
        env={"MAGNETAR_BROKER_STATS_EXPORT_INTERVAL_S": "1"},
    )
    c.start()
    topic = "persistent://public/default/reported"
    with Client(c.service_url) as client, Admin(c.service_url) as admin:
        consumer = client.subscribe(topic, "sub", initial_position=InitialPosition.Earliest)
        producer = client.create_producer(topic, batching_enabled=False)
        for i in range(N):
            producer.send(f"m{i}".encode())
        for _ in range(M):
            consumer.acknowledge(consumer.receive(5000))
        consumer.close()
        wait_for(
            lambda: admin.topics.stats(topic)["subscriptions"]["sub"]["msgBacklog"] == N - M,
            30,
            "the acknowledgements to count",
        )
    # Two snapshots after the acknowledgements: the stats topic's end is now
    # past them.
    wait_for(lambda: _snapshots_after_settled(c, topic) >= 2, 30, "two settled snapshots")
    yield c, topic
    c.stop()


def _snapshots_after_settled(cluster: StandaloneCluster, topic: str) -> int:
    settled = 0
    for _, record in stats_records(cluster.service_url):
        subs = {s["name"]: s for s in record.get("subscriptions") or []}
        if record.get("topic") == topic and subs.get("sub", {}).get("msgBacklog") == N - M:
            settled += 1
    return settled


def test_the_reports_from_the_stats_topic_say_what_happened(reported, spark_session, tmp_path):
    cluster, topic = reported
    result = run(spark_session, RunOptions(source=cluster.service_url, output_dir=tmp_path))
    read = lambda report, table: spark_session.read.parquet(  # noqa: E731
        str(result.tables[report][table])
    )
    latest = read("backlog", "subscription_latest").where(f"topic = '{topic}'").collect()
    assert [(r["subscription"], r["msg_backlog"]) for r in latest] == [("sub", N - M)]
    hourly = read("throughput", "topic_hourly").where(f"topic = '{topic}'")
    assert hourly.groupBy().sum("msgs_in").collect()[0][0] == N
    assert result.html_path is not None and result.html_path.exists()
    html = result.html_path.read_text()
    assert topic in html and "<img" in html
    assert result.summary.records > 0


def test_the_cli_reports_from_exported_files_and_refuses_missing_input(reported, tmp_path):
    cluster, _ = reported
    exported = tmp_path / "exported"
    admin = [sys.executable, "-m", "client.admin_cli", "--service-url", cluster.service_url]
    subprocess.run(
        [
            *admin,
            "stats",
            "export",
            "--since",
            "1d",
            "--output",
            str(exported),
            "--format",
            "parquet",
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    out = tmp_path / "out"
    reports = [sys.executable, "-m", "spark.reports"]
    done = subprocess.run(
        [
            *reports,
            "backlog",
            "--input",
            str(exported),
            "--output",
            str(out),
            "--master",
            "local[1]",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert (out / "report.html").exists()
    assert (out / "backlog" / "subscription_latest").is_dir()
    missing = tmp_path / "nothing-here"
    refused = subprocess.run(
        [*reports, "all", "--input", str(missing), "--output", str(tmp_path / "x")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert refused.returncode != 0
    assert str(missing) in refused.stderr
    assert not Path(tmp_path / "x" / "report.html").exists()
