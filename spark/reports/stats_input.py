"""The reports' input: the stats history records (``docs/stats-schema.md``)
read from exported files or from the stats topic into one flat DataFrame.

Theory of operation. ``protos.stats_schema.all_fields()`` is the schema; it
becomes a Spark ``StructType`` here, once (:func:`stats_struct`), and every
way in reads against it: JSON lines and Parquet files with it as their
explicit schema, and the stats topic by parsing each message's ``value``
(one JSON record) with ``from_json``. A field a record's kind lacks is
null, as in the exported Parquet files.

A source is a directory of ``stats-*.jsonl`` / ``stats-*.parquet`` files
(or one such file), or ``magnetar://host:port`` with a topic. A missing
path or a source with no records raises :class:`InputNotFound` or
:class:`EmptyInput`: a report of nothing is an error, not an empty report.

Records of a ``schema_version`` this code does not know (and lines that do
not parse, whose version is null) are counted and left out, with a
warning, never an error (the schema's versioning rule). The one pass that
counts them also finds the longest export interval of the topic records,
which the throughput report uses as its slot width.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from protos import stats_schema
from spark.reports import intervals

log = logging.getLogger(__name__)

KNOWN_SCHEMA_VERSIONS = frozenset({1})
TOPIC_SOURCE_SCHEME = "magnetar://"
FILE_SUFFIXES = (".jsonl", ".parquet")
DEFAULT_INTERVAL_S = 60.0  # the brokers' default stats_export_interval_s

_SCALAR_TYPES: dict[str, T.DataType] = {
    "string": T.StringType(),
    "long": T.LongType(),
    "double": T.DoubleType(),
    "boolean": T.BooleanType(),
}


class ReportInputError(Exception):
    """The reports' input cannot be used (the message names the path or topic)."""


class InputNotFound(ReportInputError):
    """No such directory, file or topic."""


class EmptyInput(ReportInputError):
    """The input exists but holds no stats records."""


class InputUnavailable(ReportInputError):
    """The stats topic could not be read (no broker answers, …)."""


def spark_type(type_name: Any) -> T.DataType:
    """A ``stats_schema`` type: a plain name, or a tuple of fields for a
    nested list of records (an array of structs)."""
    if isinstance(type_name, str):
        if type_name not in _SCALAR_TYPES:
            raise ValueError(
                f"unknown stats field type {type_name!r} (known: {sorted(_SCALAR_TYPES)})"
            )
        return _SCALAR_TYPES[type_name]
    return T.ArrayType(struct_of(type_name))


def struct_of(fields: Iterable[stats_schema.Field]) -> T.StructType:
    return T.StructType(
        [T.StructField(name, spark_type(kind), nullable=True) for name, kind in fields]
    )


def stats_struct() -> T.StructType:
    """The flat schema of every record kind (``stats_schema.all_fields()``)."""
    return struct_of(stats_schema.all_fields())


@dataclass(frozen=True)
class FileSource:
    paths: tuple[str, ...]  # stats-*.jsonl and stats-*.parquet files
    where: str  # the directory or file the user named

    @property
    def description(self) -> str:
        return self.where


@dataclass(frozen=True)
class TopicSource:
    service_url: str
    topic: str

    @property
    def description(self) -> str:
        return f"topic {self.topic} at {self.service_url}"


Source = FileSource | TopicSource


def _stats_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path] if path.suffix in FILE_SUFFIXES else []
    return sorted(
        p for suffix in FILE_SUFFIXES for p in path.glob(f"stats-*{suffix}") if p.is_file()
    )


def resolve_source(source: str, topic: str = stats_schema.STATS_TOPIC) -> Source:
    """What ``--input`` names. Files are checked here, before any Spark work."""
    if source.startswith(TOPIC_SOURCE_SCHEME):
        return TopicSource(service_url=source, topic=topic)
    path = Path(source)
    if not path.exists():
        raise InputNotFound(f"input {source}: no such file or directory")
    files = _stats_files(path)
    if not files:
        raise EmptyInput(
            f"input {source}: no stats files (stats-*.jsonl or stats-*.parquet, "
            "as magnetar-admin stats export writes them)"
        )
    return FileSource(paths=tuple(str(p) for p in files), where=source)


# How an SDK error raised in the data source reaches the driver: inside the
# text of Spark's AnalysisException / PythonException.
_CLIENT_ERROR = re.compile(r"client\.exceptions\.(\w+): ([^\n]*)")


def read_failure(error: Exception, source: Source) -> ReportInputError | None:
    """The input error a failed read of a topic source means, from the SDK
    error Spark wraps (``TopicNotFound`` → :class:`InputNotFound`, any
    other → :class:`InputUnavailable`); None for anything else."""
    if not isinstance(source, TopicSource):
        return None
    found = _CLIENT_ERROR.findall(str(error))
    if not found:
        return None
    name, message = found[-1]
    if name == "TopicNotFound":
        return InputNotFound(f"input {source.description}: no such topic")
    return InputUnavailable(f"input {source.description}: {name}: {message}")


def parse_json_values(values: DataFrame, column: str = "value") -> DataFrame:
    """One record per row of ``values``, whose ``column`` (binary or string)
    holds one JSON record; a value that does not parse gives a row of nulls."""
    parsed = F.from_json(F.col(column).cast("string"), stats_struct())
    return values.select(parsed.alias("record")).select("record.*")


def load_records(spark: SparkSession, source: Source) -> DataFrame:
    """Every record of ``source``, of any schema version."""
    if isinstance(source, TopicSource):
        values = (
            spark.read.format("magnetar")
            .option("service_url", source.service_url)
            .option("topic", source.topic)
            .load()
        )
        return parse_json_values(values)
    schema = stats_struct()
    jsonl = [p for p in source.paths if p.endswith(".jsonl")]
    parquet = [p for p in source.paths if p.endswith(".parquet")]
    frames = []
    if jsonl:
        frames.append(spark.read.schema(schema).json(jsonl))
    if parquet:
        frames.append(spark.read.schema(schema).parquet(*parquet))
    records = frames[0]
    for other in frames[1:]:
        records = records.unionByName(other)
    return records


def records_frame(spark: SparkSession, records: Iterable[Mapping[str, Any]]) -> DataFrame:
    """Records given as dicts, through the same JSON parsing as the stats
    topic (tests and tools build their input with it)."""
    values = [(json.dumps(dict(r)),) for r in records]
    return parse_json_values(spark.createDataFrame(values, "value string"))


@dataclass(frozen=True)
class InputSummary:
    """What one pass over the records found."""

    source: str
    records: int
    records_by_version: Mapping[int | None, int] = field(default_factory=dict)
    interval_s_max: float = DEFAULT_INTERVAL_S  # the longest export interval of topic records
    first_ms: int | None = None  # the earliest and latest timestamp of a known-version record
    last_ms: int | None = None

    @property
    def unknown_version_records(self) -> int:
        return sum(n for v, n in self.records_by_version.items() if v not in KNOWN_SCHEMA_VERSIONS)

    def warnings(self) -> list[str]:
        unknown = {
            v: n for v, n in self.records_by_version.items() if v not in KNOWN_SCHEMA_VERSIONS
        }
        if not unknown:
            return []
        listed = ", ".join(
            f"{n} of version {'unreadable' if v is None else v}"
            for v, n in sorted(unknown.items(), key=lambda item: (item[0] is None, item[0] or 0))
        )
        return [
            f"{self.unknown_version_records} of {self.records} records skipped: schema_version "
            f"not one this report knows ({sorted(KNOWN_SCHEMA_VERSIONS)}): {listed}"
        ]


def summarize(records: DataFrame, source_description: str) -> InputSummary:
    """Count the records by schema version (one small aggregate). Raises
    :class:`EmptyInput` when there is none; logs the skipped ones."""
    topic_interval = F.when(F.col("kind") == stats_schema.KIND_TOPIC, F.col("interval_s"))
    rows = (
        records.groupBy("schema_version")
        .agg(
            F.count(F.lit(1)).alias("n"),
            F.max(topic_interval).alias("interval_s_max"),
            F.min("timestamp").alias("first_ms"),
            F.max("timestamp").alias("last_ms"),
        )
        .collect()
    )
    by_version = {row["schema_version"]: int(row["n"]) for row in rows}
    if sum(by_version.values()) == 0:
        raise EmptyInput(f"input {source_description}: no records")
    known = [row for row in rows if row["schema_version"] in KNOWN_SCHEMA_VERSIONS]
    summary = InputSummary(
        source=source_description,
        records=sum(by_version.values()),
        records_by_version=by_version,
        interval_s_max=max(
            (r["interval_s_max"] for r in known if r["interval_s_max"]), default=DEFAULT_INTERVAL_S
        ),
        first_ms=min((r["first_ms"] for r in known if r["first_ms"] is not None), default=None),
        last_ms=max((r["last_ms"] for r in known if r["last_ms"] is not None), default=None),
    )
    for warning in summary.warnings():
        log.warning("%s: %s", source_description, warning)
    return summary


def known_records(records: DataFrame) -> DataFrame:
    """The records of a schema version this code reads."""
    return records.where(F.col("schema_version").isin(sorted(KNOWN_SCHEMA_VERSIONS)))


def of_kind(records: DataFrame, kind: str) -> DataFrame:
    return records.where(F.col("kind") == kind)


def _as_is(frame: DataFrame) -> DataFrame:
    return frame


@dataclass(frozen=True)
class ReportInput:
    """The known-version records split by kind, with the topic intervals
    every report shares. ``keep`` marks a frame several tables read (the CLI
    persists it; tests leave frames as they are)."""

    topics: DataFrame
    brokers: DataFrame
    bookies: DataFrame
    topic_intervals: DataFrame
    slot_width_ms: int
    keep: Callable[[DataFrame], DataFrame] = _as_is


def prepare(
    records: DataFrame,
    interval_s_max: float = DEFAULT_INTERVAL_S,
    keep: Callable[[DataFrame], DataFrame] = _as_is,
    subscriptions: bool = True,
) -> ReportInput:
    """Everything the reports read, from all the records (unknown versions
    are dropped here). Without ``subscriptions`` the topic intervals leave
    them out (the backlog report needs them)."""
    known = known_records(records)
    topics = of_kind(known, stats_schema.KIND_TOPIC)
    return ReportInput(
        topics=topics,
        brokers=of_kind(known, stats_schema.KIND_BROKER),
        bookies=of_kind(known, stats_schema.KIND_BOOKIE),
        topic_intervals=keep(intervals.topic_intervals(topics, subscriptions)),
        slot_width_ms=intervals.slot_width_ms(interval_s_max),
        keep=keep,
    )
