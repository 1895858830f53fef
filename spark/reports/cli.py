"""``python -m spark.reports``: the capacity reports from the command line.

    python -m spark.reports {throughput|backlog|capacity|all} --input SRC --output DIR
        [--master URL] [--topic T] [--recent-window-s S] [--busiest-hours N]

``SRC`` is a directory of ``magnetar-admin stats export`` files or
``magnetar://host:port`` (then ``--topic``, default the stats topic). Bad
input (a missing path, no records, no such topic) prints ``error: …`` on
stderr and exits 2, like a usage error; files are checked before Spark
starts, so that answer is immediate. The tables and the HTML page it wrote
are listed on stdout.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import click

from protos import stats_schema
from spark import session
from spark.reports.runner import REPORTS, RunOptions, run
from spark.reports.stats_input import ReportInputError, resolve_source

EXIT_BAD_INPUT = 2
# Fewer shuffle partitions than Spark's 200: the reports' shuffles are small
# after the first aggregation (AQE coalesces further); room for the persisted
# intervals (the driver's memory applies when this process starts the JVM,
# not under spark-submit); no console progress bars.
SESSION_CONF = {
    "spark.sql.shuffle.partitions": "16",
    "spark.driver.memory": "2g",
    # The persisted frames are read a few times and dropped: building them
    # uncompressed is cheaper than what compression saves.
    "spark.sql.inMemoryColumnarStorage.compressed": "false",
    # Timestamps as Parquet's standard UTC instants, not the legacy INT96.
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    "spark.ui.showConsoleProgress": "false",
}


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("report", type=click.Choice([*REPORTS, "all"]))
@click.option(
    "--input", "source", required=True, help="Stats files directory, or magnetar://host:port."
)
@click.option(
    "--output",
    "output_dir",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Directory for the Parquet tables and report.html.",
)
@click.option(
    "--master",
    default=None,
    help=f"Spark master URL [default: {session.DEFAULT_MASTER}, or spark-submit's own under it].",
)
@click.option(
    "--topic",
    default=stats_schema.STATS_TOPIC,
    show_default=True,
    help="Stats topic (magnetar:// input).",
)
@click.option(
    "--recent-window-s",
    type=click.FloatRange(min=1.0),
    default=RunOptions.recent_window_s,
    show_default=True,
    help="Backlog: the window of growth and drain rates, seconds.",
)
@click.option(
    "--busiest-hours",
    type=click.IntRange(min=1),
    default=RunOptions.busiest_hours,
    show_default=True,
    help="Throughput: how many busiest hours to list.",
)
def main(
    report: str,
    source: str,
    output_dir: Path,
    master: str | None,
    topic: str,
    recent_window_s: float,
    busiest_hours: int,
) -> None:
    """Throughput, backlog and capacity reports over the brokers' stats history."""
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    options = RunOptions(
        source=source,
        output_dir=output_dir,
        reports=REPORTS if report == "all" else (report,),
        topic=topic,
        recent_window_s=recent_window_s,
        busiest_hours=busiest_hours,
    )
    try:
        resolve_source(source, topic)
        spark = session.start(master, f"magnetar-reports-{report}", SESSION_CONF)
        try:
            result = run(spark, options)
        finally:
            spark.stop()
    except ReportInputError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_BAD_INPUT)
    for warning in result.summary.warnings():
        click.echo(f"warning: {warning}", err=True)
    for name, tables in result.tables.items():
        for table, path in tables.items():
            click.echo(f"{name}/{table}: {path}")
    click.echo(f"html: {result.html_path}")
