"""The reports' input: the schema converter, bad input, unknown schema
versions, and one whole run through the CLI's library entry."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from pyspark.sql import types as T

from protos import stats_schema
from spark.reports import cli, stats_input
from spark.reports.runner import REPORTS, RunOptions, run
from spark.reports.stats_input import (
    EmptyInput,
    InputNotFound,
    InputUnavailable,
    prepare,
    read_failure,
    resolve_source,
    summarize,
)

H_MS = 1_767_225_600_000


def _topic(ts_s: int, msgs_in: int, version: int = 1) -> dict[str, Any]:
    return {
        "schema_version": version, "kind": "topic", "timestamp": H_MS + ts_s * 1000,
        "interval_s": 60.0, "cluster": "c", "broker": "b", "tenant": "t", "namespace": "t/ns",
        "topic": "persistent://t/ns/x", "partition": -1, "countersSince": H_MS - 86_400_000,
        "msgInCounter": msgs_in, "bytesInCounter": msgs_in, "msgOutCounter": 0, "bytesOutCounter": 0,
        "storageSize": 1, "subscriptions": [{"name": "s", "msgBacklog": 0, "backlogSize": 0, "consumers": 1, "msgOutCounter": 0}],
    }  # fmt: skip


@pytest.mark.parametrize(
    ("type_name", "spark_type"),
    [
        ("string", T.StringType()),
        ("long", T.LongType()),
        ("double", T.DoubleType()),
        ("boolean", T.BooleanType()),
        (
            (("a", "long"), ("b", "string")),
            T.ArrayType(
                T.StructType([T.StructField("a", T.LongType()), T.StructField("b", T.StringType())])
            ),
        ),
    ],
)
def test_schema_types_convert(type_name: Any, spark_type: T.DataType) -> None:
    assert stats_input.spark_type(type_name) == spark_type


def test_the_spark_schema_is_every_field_of_every_kind() -> None:
    schema = stats_input.stats_struct()
    assert schema.fieldNames() == [name for name, _ in stats_schema.all_fields()]
    subscriptions = schema["subscriptions"].dataType
    assert isinstance(subscriptions, T.ArrayType)
    assert isinstance(subscriptions.elementType, T.StructType)
    assert [f.name for f in subscriptions.elementType.fields] == [
        n for n, _ in stats_schema.SUBSCRIPTION_FIELDS
    ]


def test_an_unknown_type_name_is_refused() -> None:
    with pytest.raises(ValueError, match="int32"):
        stats_input.spark_type("int32")


def test_missing_input_names_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    with pytest.raises(InputNotFound, match=str(missing)):
        resolve_source(str(missing))


def test_a_directory_without_stats_files_is_empty_input(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("not stats")
    with pytest.raises(EmptyInput, match=str(tmp_path)):
        resolve_source(str(tmp_path))


def test_a_topic_source_is_not_checked_before_reading() -> None:
    source = resolve_source("magnetar://localhost:6650", "persistent://t/ns/stats")
    assert source.description == "topic persistent://t/ns/stats at magnetar://localhost:6650"


_WRAPPED = (  # how Spark hands back an SDK error raised in the data source
    "[PYTHON_DATA_SOURCE_ERROR] Failed to generate Python data source read partitions: "
    "Traceback (most recent call last):\n  ...\n{}\n"
)


@pytest.mark.parametrize(
    ("text", "error", "message"),
    [
        (
            _WRAPPED.format("client.exceptions.TopicNotFound: persistent://magnetar/system/stats"),
            InputNotFound,
            "input topic T at magnetar://h:1: no such topic",
        ),
        (
            _WRAPPED.format("client.exceptions.ConnectError: no broker of the service URL answers"),
            InputUnavailable,
            "input topic T at magnetar://h:1: ConnectError: no broker of the service URL answers",
        ),
        ("[DIVIDE_BY_ZERO] Division by zero.", None, None),
    ],
)
def test_topic_read_failures_become_input_errors(
    text: str, error: type | None, message: str | None
) -> None:
    failure = read_failure(RuntimeError(text), resolve_source("magnetar://h:1", "T"))
    assert (type(failure) if failure else None, str(failure) if failure else None) == (
        error,
        message,
    )


def test_a_file_read_failure_is_left_alone(tmp_path: Path) -> None:
    (tmp_path / "stats-2026-01-01T00.jsonl").write_text("{}\n")
    text = _WRAPPED.format("client.exceptions.ConnectError: x")
    assert read_failure(RuntimeError(text), resolve_source(str(tmp_path))) is None


def test_stats_files_with_no_records_are_empty_input(spark_session: Any, tmp_path: Path) -> None:
    (tmp_path / "stats-2026-01-01T00.jsonl").write_text("")
    source = resolve_source(str(tmp_path))
    with pytest.raises(EmptyInput, match="no records"):
        summarize(stats_input.load_records(spark_session, source), source.description)


def test_the_cli_exits_2_on_missing_input(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    result = CliRunner().invoke(
        cli.main, ["all", "--input", str(missing), "--output", str(tmp_path / "out")]
    )
    assert result.exit_code == 2
    assert f"error: input {missing}: no such file or directory" in result.output


def test_unknown_versions_are_counted_and_skipped(spark_session: Any) -> None:
    values = [
        (json.dumps(_topic(0, 0)),),
        (json.dumps(_topic(60, 60)),),
        (json.dumps(_topic(120, 9, 2)),),
        ("{not json",),
    ]
    records = stats_input.parse_json_values(spark_session.createDataFrame(values, "value string"))
    summary = summarize(records, "test input")
    assert summary.records == 4
    assert summary.records_by_version == {1: 2, 2: 1, None: 1}
    assert summary.unknown_version_records == 2
    (warning,) = summary.warnings()
    assert (
        "2 of 4 records skipped" in warning
        and "1 of version 2" in warning
        and "1 of version unreadable" in warning
    )
    assert prepare(records).topics.count() == 2


def test_a_run_writes_every_table_and_the_page_with_the_warning(
    spark_session: Any, tmp_path: Path
) -> None:
    source = tmp_path / "in"
    source.mkdir()
    lines = [_topic(0, 0), _topic(60, 60), _topic(120, 180), _topic(180, 0, version=7)]
    (source / "stats-2026-01-01T00.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    result = run(spark_session, RunOptions(source=str(source), output_dir=tmp_path / "out"))
    assert result.summary.records_by_version == {1: 3, 7: 1}
    assert set(result.tables) == set(REPORTS)
    for tables in result.tables.values():
        for path in tables.values():
            assert any(path.glob("*.parquet")), path
    topic_hourly = spark_session.read.parquet(
        str(result.tables["throughput"]["topic_hourly"])
    ).first()
    assert (
        topic_hourly is not None and topic_hourly["msgs_in"] == 180
    )  # the version 7 record left out
    assert result.html_path is not None
    page = result.html_path.read_text()
    assert "1 of 4 records skipped" in page and "1 of version 7" in page
    assert "data:image/png;base64," in page and 'class="sortable"' in page
