"""One run of the reports: read the input once, build the chosen reports,
write their tables as Parquet and the HTML page.

Theory of operation. The input is read and its versions counted
(:mod:`spark.reports.stats_input`); the topic intervals every report shares
are persisted for the run, and each report may persist frames several of
its tables read, released when the report is written. A stats topic read
is persisted too, so the topic is read once. Each table goes to
``OUTPUT/<report>/<table>/`` (replacing an earlier run's); the HTML page
(``OUTPUT/report.html``) is made from the tables read back from those
files, so nothing is computed twice.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession

from protos import stats_schema
from spark.reports import backlog, capacity, throughput
from spark.reports.html_report import RunInfo, render
from spark.reports.sections import SECTIONS
from spark.reports.stats_input import (
    InputSummary,
    ReportInput,
    TopicSource,
    load_records,
    prepare,
    read_failure,
    resolve_source,
    summarize,
)

log = logging.getLogger(__name__)

REPORTS = ("throughput", "backlog", "capacity")
HTML_NAME = "report.html"


@dataclass(frozen=True)
class RunOptions:
    source: str  # a directory of stats files, or magnetar://host:port
    output_dir: Path
    reports: Sequence[str] = REPORTS
    topic: str = stats_schema.STATS_TOPIC
    recent_window_s: float = backlog.RECENT_WINDOW_S_DEFAULT
    busiest_hours: int = throughput.BUSIEST_HOURS_DEFAULT


@dataclass
class RunResult:
    summary: InputSummary
    tables: dict[str, dict[str, Path]] = field(default_factory=dict)  # report -> table -> dir
    html_path: Path | None = None


class _Persisted:
    """Frames persisted for a while, released together. A frame is
    materialized when kept: only then do the plans that read it see how it
    is partitioned (with adaptive execution a cached plan's partitioning is
    known once it has run), so groupings by a topic's keys add no shuffle."""

    def __init__(self) -> None:
        self.frames: list[DataFrame] = []

    def __call__(self, frame: DataFrame) -> DataFrame:
        frame = frame.persist(StorageLevel.MEMORY_AND_DISK)
        frame.count()
        self.frames.append(frame)
        return frame

    def release(self) -> None:
        for frame in self.frames:
            frame.unpersist()
        self.frames.clear()


def build_report(name: str, inputs: ReportInput, options: RunOptions) -> dict[str, DataFrame]:
    builders: Mapping[str, Callable[[], dict[str, DataFrame]]] = {
        "throughput": lambda: throughput.build(inputs, options.busiest_hours),
        "backlog": lambda: backlog.build(inputs, options.recent_window_s),
        "capacity": lambda: capacity.build(inputs),
    }
    if name not in builders:
        raise ValueError(f"unknown report {name!r} (known: {', '.join(REPORTS)})")
    return builders[name]()


def write_tables(tables: Mapping[str, DataFrame], directory: Path) -> dict[str, Path]:
    written = {}
    for name, frame in tables.items():
        path = directory / name
        frame.write.mode("overwrite").parquet(str(path))
        written[name] = path
        log.info("wrote %s", path)
    return written


def _read_back(spark: SparkSession, written: Mapping[str, Path]) -> dict[str, DataFrame]:
    return {name: spark.read.parquet(str(path)) for name, path in written.items()}


def _summary_facts(summary: InputSummary) -> list[tuple[str, str]]:
    facts = [("records", f"{summary.records:,}")]
    if summary.first_ms is not None and summary.last_ms is not None:
        span = [
            datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")
            for ms in (summary.first_ms, summary.last_ms)
        ]
        facts.append(("records from", f"{span[0]} to {span[1]} UTC"))
    facts.append(("slot width", f"{summary.interval_s_max:g} s"))
    return facts


def _read_input(
    spark: SparkSession, options: RunOptions, keep: _Persisted
) -> tuple[InputSummary, DataFrame]:
    source = resolve_source(options.source, options.topic)
    records = load_records(spark, source)
    try:
        if isinstance(source, TopicSource):
            records = keep(records)  # read the topic once
        return summarize(records, source.description), records
    except Exception as exc:
        failure = read_failure(exc, source)
        if failure is None:
            raise
        raise failure from exc


def run(spark: SparkSession, options: RunOptions) -> RunResult:
    """Build, write and render ``options.reports``. Raises
    :class:`~spark.reports.stats_input.ReportInputError` on bad input."""
    for_run, for_report = _Persisted(), _Persisted()
    try:
        summary, records = _read_input(spark, options, for_run)
        with_subscriptions = "backlog" in options.reports
        inputs = prepare(records, summary.interval_s_max, for_run, with_subscriptions)
        result = RunResult(summary=summary)
        for name in options.reports:
            tables = build_report(name, dataclasses.replace(inputs, keep=for_report), options)
            result.tables[name] = write_tables(tables, options.output_dir / name)
            for_report.release()
        sections = [
            SECTIONS[name](_read_back(spark, result.tables[name])) for name in options.reports
        ]
    finally:
        for_report.release()
        for_run.release()
    info = RunInfo(
        source=summary.source,
        generated_at=datetime.now(UTC),
        reports=list(options.reports),
        facts=_summary_facts(summary),
        warnings=summary.warnings(),
    )
    options.output_dir.mkdir(parents=True, exist_ok=True)
    result.html_path = options.output_dir / HTML_NAME
    result.html_path.write_text(render(info, sections), encoding="utf-8")
    log.info("wrote %s", result.html_path)
    return result
