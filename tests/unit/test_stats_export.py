"""``magnetar-admin stats export``'s pieces (client/stats_export.py): times,
hour files, the Parquet schema; and which topics are system topics."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from client.stats_export import BadTime, HourFiles, arrow_schema, hour_of, parse_time
from protos import stats_schema
from protos.topic_name import TopicName

NOW = 1_795_622_400_000  # 2026-11-25T13:20:00Z

TIMES = [
    ("now", NOW),
    ("90m", NOW - 90 * 60_000),
    ("6h", NOW - 6 * 3_600_000),
    ("7d", NOW - 7 * 86_400_000),
    ("2w", NOW - 14 * 86_400_000),
    ("30s", NOW - 30_000),
    ("1795000000000", 1_795_000_000_000),
    ("0", 0),
    ("2026-11-25T15:00:00Z", 1_795_618_800_000),
    ("2026-11-25T15:00:00", 1_795_618_800_000),  # no zone: UTC
    ("2026-11-25T16:00:00+01:00", 1_795_618_800_000),
    ("2026-11-25", 1_795_564_800_000),
]


def test_times_are_now_a_duration_ago_epoch_ms_or_iso():
    for text, expected in TIMES:
        assert parse_time(text, NOW) == expected, text


@pytest.mark.parametrize("bad", ["yesterday", "-5m", "5 m", "1y", "", "2026-13-01"])
def test_a_time_that_is_none_of_those_is_refused(bad):
    with pytest.raises(BadTime, match="is not a time"):
        parse_time(bad, NOW)


def test_a_record_counts_in_the_utc_hour_of_its_timestamp():
    assert hour_of(1_795_618_800_000) == "2026-11-25T15"  # 15:00:00.000
    assert hour_of(1_795_622_399_999) == "2026-11-25T15"  # 15:59:59.999
    assert hour_of(1_795_622_400_000) == "2026-11-25T16"


def _record(kind: str, timestamp: int, **fields) -> dict:
    return {
        "schema_version": 1,
        "kind": kind,
        "timestamp": timestamp,
        "interval_s": 60.0,
        "cluster": "c",
        "broker": "b:1",
        **fields,
    }


RECORDS = [
    _record(
        "topic",
        1_795_618_800_000,
        topic="persistent://a/b/t",
        partition=-1,
        msgInCounter=5,
        subscriptions=[{"name": "s", "msgBacklog": 3, "consumers": 0}],
    ),
    _record("bookie", 1_795_618_860_000, bookie="bk", diskUsedBytes=10, readOnly=False),
    _record("broker", 1_795_622_400_000, cpu=0.5, bundles=[{"namespace": "a/b", "topics": 1}]),
]


def test_jsonl_files_hold_the_records_as_published_one_file_per_hour(tmp_path):
    files = HourFiles(tmp_path, "jsonl")
    for record in RECORDS:
        files.write(record, json.dumps(record).encode())
    assert files.close() == ["stats-2026-11-25T15.jsonl", "stats-2026-11-25T16.jsonl"]
    lines = (tmp_path / "stats-2026-11-25T15.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in lines] == RECORDS[:2]


def test_parquet_files_hold_one_flat_table_of_every_field(tmp_path):
    files = HourFiles(tmp_path, "parquet")
    for record in RECORDS:
        files.write(record, b"")
    assert files.close() == ["stats-2026-11-25T15.parquet", "stats-2026-11-25T16.parquet"]
    table = pq.read_table(tmp_path / "stats-2026-11-25T15.parquet")
    assert table.schema.equals(arrow_schema())
    assert table.schema.names == [name for name, _ in stats_schema.all_fields()]
    rows = table.to_pylist()
    assert [r["kind"] for r in rows] == ["topic", "bookie"]
    assert rows[0]["msgInCounter"] == 5 and rows[0]["diskUsedBytes"] is None
    assert rows[0]["subscriptions"][0]["msgBacklog"] == 3
    assert rows[1]["diskUsedBytes"] == 10 and rows[1]["subscriptions"] is None


def test_an_unknown_format_is_refused(tmp_path):
    with pytest.raises(ValueError, match="jsonl, parquet"):
        HourFiles(tmp_path, "csv")


SYSTEM = [
    ("persistent://magnetar/system/stats", True),
    ("persistent://magnetar/system/anything", True),
    ("non-persistent://magnetar/system/x", True),
    ("persistent://public/default/__change_events", True),
    ("persistent://public/default/stats", False),
    ("persistent://magnetar/other/stats", False),
    ("my-topic", False),
]


def test_system_topics_are_the_system_namespaces_and_double_underscore_names():
    for name, expected in SYSTEM:
        assert TopicName.parse(name).is_system is expected, name
    assert TopicName.parse(stats_schema.STATS_TOPIC).is_system
