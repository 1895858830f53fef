"""``magnetar-admin stats export``: the stats history (``docs/stats-schema.md``)
from the stats topic to files, one per UTC hour of the records' timestamps.

Theory of operation. A reader (no durable subscription: the export never
holds data back) starts at the first message published at or after
``since`` (a record is published after its timestamp, so none of the range
is missed) and reads up to the end of the topic as it was when the export
began: it stops at the first message published after that moment, or when
nothing more is available. Records whose ``timestamp`` falls in
``[since, until)`` are written; records of a schema version this code does
not know are counted and skipped. JSONL files hold the records as
published, one per line; Parquet files hold one flat table of every field
of every kind (:func:`protos.stats_schema.all_fields`), which needs
``pyarrow`` (the ``spark`` extra).
"""

from __future__ import annotations

import datetime as dt
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from client.exceptions import Timeout, TopicNotFound
from client.message import MessageId
from protos import stats_schema

FORMATS = ("jsonl", "parquet")
# How long one read waits for the next message before the export ends.
READ_TIMEOUT_MS = 5000
_RELATIVE = re.compile(r"^(\d+)([smhdw])$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


class BadTime(ValueError):
    """A --since or --until that is not a time this command reads."""


def parse_time(text: str, now_ms: int) -> int:
    """ms since the epoch of ``text``: ``now``, a duration ago (``90m``,
    ``6h``, ``7d``), epoch milliseconds, or ISO-8601 (UTC unless it says)."""
    text = text.strip()
    if text == "now":
        return now_ms
    relative = _RELATIVE.match(text)
    if relative:
        return now_ms - int(relative[1]) * _UNIT_S[relative[2]] * 1000
    if text.isdigit():
        return int(text)
    try:
        when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise BadTime(
            f"{text!r} is not a time: give now, a duration ago (90m, 6h, 7d), epoch ms "
            "or ISO-8601 (2026-11-25T15:00:00Z)"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return int(when.timestamp() * 1000)


def hour_of(timestamp_ms: int) -> str:
    """The UTC hour a record belongs to, as its file names it: ``2026-11-25T15``."""
    return dt.datetime.fromtimestamp(timestamp_ms / 1000, dt.UTC).strftime("%Y-%m-%dT%H")


class _HourFile(Protocol):
    def write(self, record: dict[str, Any], raw: bytes) -> None: ...
    def close(self) -> None: ...


class _JsonlFile:
    def __init__(self, path: Path) -> None:
        self._file = path.open("wb")

    def write(self, record: dict[str, Any], raw: bytes) -> None:
        self._file.write(raw.rstrip(b"\n") + b"\n")

    def close(self) -> None:
        self._file.close()


def arrow_schema() -> Any:
    """The Parquet schema: every field of every kind, nullable."""
    import pyarrow as pa

    def arrow_type(kind: Any) -> Any:
        if isinstance(kind, tuple):
            return pa.list_(pa.struct([pa.field(n, arrow_type(k)) for n, k in kind]))
        return {"string": pa.string(), "long": pa.int64(), "double": pa.float64()}.get(
            kind, pa.bool_()
        )

    return pa.schema([pa.field(n, arrow_type(k)) for n, k in stats_schema.all_fields()])


class _ParquetFile:
    """Rows buffered and written as row groups of ``ROW_GROUP`` records."""

    ROW_GROUP = 10000

    def __init__(self, path: Path, schema: Any) -> None:
        import pyarrow.parquet as pq

        self._schema = schema
        self._writer = pq.ParquetWriter(str(path), schema)
        self._rows: list[dict[str, Any]] = []

    def write(self, record: dict[str, Any], raw: bytes) -> None:
        self._rows.append(record)
        if len(self._rows) >= self.ROW_GROUP:
            self._flush()

    def _flush(self) -> None:
        import pyarrow as pa

        if self._rows:
            self._writer.write_table(pa.Table.from_pylist(self._rows, schema=self._schema))
            self._rows = []

    def close(self) -> None:
        self._flush()
        self._writer.close()


@dataclass
class ExportSummary:
    records: int = 0
    unknown_version: int = 0  # records skipped: a schema version this code does not know
    unreadable: int = 0  # messages that are not a JSON record
    files: list[str] = field(default_factory=list)


class HourFiles:
    """One open file per hour met (a range of N hours opens at most N)."""

    def __init__(self, output: Path, fmt: str) -> None:
        if fmt not in FORMATS:
            raise ValueError(f"format {fmt!r}: use one of {', '.join(FORMATS)}")
        self.output = output
        self.fmt = fmt
        self._schema = arrow_schema() if fmt == "parquet" else None
        self._open: dict[str, _HourFile] = {}
        output.mkdir(parents=True, exist_ok=True)

    def write(self, record: dict[str, Any], raw: bytes) -> None:
        hour = hour_of(int(record["timestamp"]))
        out = self._open.get(hour)
        if out is None:
            path = self.output / f"stats-{hour}.{self.fmt}"
            out = _ParquetFile(path, self._schema) if self._schema else _JsonlFile(path)
            self._open[hour] = out
        out.write(record, raw)

    def close(self) -> list[str]:
        for out in self._open.values():
            out.close()
        names = sorted(f"stats-{hour}.{self.fmt}" for hour in self._open)
        self._open.clear()
        return names


def _check_topic(service_url: str, topic: str, authentication: Any, tls: dict) -> None:
    """TopicNotFound unless the stats topic exists (a reader would create it)."""
    from client.admin import Admin
    from protos.topic_name import TopicName

    name = TopicName.parse(topic)
    with Admin(service_url, authentication=authentication, **tls) as admin:
        listed = admin.topics.get_list(name.namespace_name, include_system_topic=True)
    if name.full_name not in listed:
        raise TopicNotFound(
            f"{name.full_name} does not exist: no broker has published stats yet "
            "(is stats_export_interval_s 0?)"
        )


def export(
    service_url: str,
    since_ms: int,
    until_ms: int,
    output: Path,
    fmt: str = "jsonl",
    topic: str = stats_schema.STATS_TOPIC,
    progress: Callable[[int], None] | None = None,
    authentication: Any = None,
    tls: dict | None = None,
) -> ExportSummary:
    """Write the records of ``[since_ms, until_ms)`` to hourly files under
    ``output``; ``progress`` is told each record's timestamp. ``authentication``
    and ``tls`` (its TLS options) are the Client's."""
    from client import Client

    if until_ms <= since_ms:
        raise ValueError(f"--until ({until_ms}) must be after --since ({since_ms})")
    _check_topic(service_url, topic, authentication, tls or {})
    files = HourFiles(output, fmt)
    summary = ExportSummary()
    started_ms = int(time.time() * 1000)
    try:
        with Client(service_url, authentication=authentication, **(tls or {})) as client:
            reader = client.create_reader(topic, MessageId.earliest, receiver_queue_size=5000)
            reader.seek(since_ms)
            _copy(reader, since_ms, until_ms, started_ms, files, summary, progress)
            reader.close()
    finally:
        summary.files = files.close()
    return summary


def _copy(
    reader: Any,
    since_ms: int,
    until_ms: int,
    started_ms: int,
    files: HourFiles,
    summary: ExportSummary,
    progress: Callable[[int], None] | None,
) -> None:
    while reader.has_message_available():
        try:
            msg = reader.read_next(READ_TIMEOUT_MS)
        except Timeout:
            return
        if msg.publish_timestamp() > started_ms:
            return  # published after the export began
        raw = msg.data()
        try:
            record = json.loads(raw)
            version, timestamp = record["schema_version"], int(record["timestamp"])
        except (ValueError, KeyError, TypeError):
            summary.unreadable += 1
            continue
        if version != stats_schema.SCHEMA_VERSION:
            summary.unknown_version += 1
            continue
        if since_ms <= timestamp < until_ms:
            files.write(record, raw)
            summary.records += 1
            if progress is not None:
                progress(timestamp)
