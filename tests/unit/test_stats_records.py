"""The stats history's records and their packing (broker/stats_records.py),
the snapshot queue (broker/stats_history.py) and the schema document
(protos/stats_schema.py, docs/stats-schema.md)."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from broker.load_decisions import SplitThresholds
from broker.settings import BrokerSettings
from broker.stats_history import StatsHistory, next_snapshot_at
from broker.stats_records import (
    RecordsRefused,
    Snapshot,
    bookie_record,
    broker_record,
    encode_record,
    pack,
    record_key,
)
from protos import stats_schema
from protos.entry import iter_batch, num_messages, split_entry

SNAP = Snapshot(1_795_000_000_000, 60.0, "c1", "10.0.0.1:6650")
REPORT = {
    "cpu": 0.25,
    "memory": 0.5,
    "bandwidthIn": 0.01,
    "bandwidthOut": 0.02,
    "msgRateIn": 100.0,
    "msgRateOut": 200.0,
    "msgThroughputIn": 1000.0,
    "msgThroughputOut": 2000.0,
    "numTopics": 3,
    "numBundles": 2,
    "bundles": {
        "public/default/0x00000000_0x40000000": {"topics": 2, "sessions": 4, "msgRateIn": 60.0},
        "t/ns/0x40000000_0x80000000": {"topics": 1, "msgThroughputOut": 5.0},
    },
}
THRESHOLDS = SplitThresholds(1000, 1000, 30000, 100 * 1024 * 1024, 128)
BOOKIE = SimpleNamespace(
    disk_used_bytes=30, disk_free_bytes=70, ledgers=2, entries=9, bytes=4096, read_only=False
)


def test_broker_and_bookie_records_have_exactly_the_schemas_fields():
    broker = broker_record(SNAP, REPORT, THRESHOLDS)
    assert tuple(broker) == stats_schema.field_names(stats_schema.KIND_BROKER)
    assert broker["kind"] == "broker" and broker["timestamp"] == SNAP.timestamp_ms
    assert broker["bundles"] == [
        {
            "namespace": "public/default",
            "bundle": "0x00000000_0x40000000",
            "topics": 2,
            "sessions": 4,
            "msgRateIn": 60.0,
            "msgRateOut": 0.0,
            "msgThroughputIn": 0.0,
            "msgThroughputOut": 0.0,
        },
        {
            "namespace": "t/ns",
            "bundle": "0x40000000_0x80000000",
            "topics": 1,
            "sessions": 0,
            "msgRateIn": 0.0,
            "msgRateOut": 0.0,
            "msgThroughputIn": 0.0,
            "msgThroughputOut": 5.0,
        },
    ]
    assert [f for f, _ in stats_schema.BUNDLE_FIELDS] == list(broker["bundles"][0])
    assert broker["splitMaxMsgRate"] == 30000.0
    bookie = bookie_record(SNAP, "bk-1", BOOKIE)
    assert tuple(bookie) == stats_schema.field_names(stats_schema.KIND_BOOKIE)
    assert (bookie["diskTotalBytes"], bookie["storedBytes"]) == (100, 4096)


KEYS: list[tuple[dict[str, Any], str]] = [
    ({"kind": "topic", "topic": "persistent://a/b/t", "partition": -1}, "persistent://a/b/t"),
    (
        {"kind": "topic", "topic": "persistent://a/b/t", "partition": 3},
        "persistent://a/b/t-partition-3",
    ),
    ({"kind": "broker", "broker": "h:1"}, "h:1"),
    ({"kind": "bookie", "bookie": "bk-1", "broker": "h:1"}, "bk-1"),
]


def test_the_message_key_says_what_a_record_describes():
    for record, key in KEYS:
        assert record_key(record) == key


def test_records_pack_into_batches_a_consumer_unpacks():
    records = [bookie_record(SNAP, f"bk-{i}", BOOKIE) for i in range(5)]
    batches = list(pack([encode_record(r) for r in records], "stats-x", 10, 2, 1_795_000_000_500))
    assert [(b.sequence_id, b.messages) for b in batches] == [(10, 2), (12, 2), (14, 1)]
    unpacked = []
    for b in batches:
        meta, payload = split_entry(b.entry)
        assert (meta.producer_name, meta.sequence_id) == ("stats-x", b.sequence_id)
        assert meta.publish_time == 1_795_000_000_500
        for smm, value in iter_batch(payload, num_messages(meta)):
            assert smm.event_time == SNAP.timestamp_ms
            assert {kv.key: kv.value for kv in smm.properties} == {
                "kind": "bookie",
                "schema_version": "1",
            }
            unpacked.append((smm.partition_key, json.loads(value)))
    assert unpacked == [(r["bookie"], r) for r in records]
    assert list(pack([], "p", 0, 10, 0)) == []


def test_the_schema_document_lists_every_field_of_the_schema():
    doc = (Path(__file__).resolve().parents[2] / "docs" / "stats-schema.md").read_text()
    named = set(re.findall(r"`([A-Za-z_]+)`", doc))
    for fields in (
        stats_schema.COMMON_FIELDS,
        stats_schema.TOPIC_FIELDS,
        stats_schema.SUBSCRIPTION_FIELDS,
        stats_schema.BROKER_FIELDS,
        stats_schema.BUNDLE_FIELDS,
        stats_schema.BOOKIE_FIELDS,
    ):
        missing = [name for name, _ in fields if name not in named]
        assert not missing, missing
    assert f"version {stats_schema.SCHEMA_VERSION})" in doc


def test_the_flat_schema_has_one_type_per_name():
    flat = dict(stats_schema.all_fields())
    assert list(flat)[:6] == [n for n, _ in stats_schema.COMMON_FIELDS]
    assert (
        flat["msgRateIn"] == "double" and flat["subscriptions"] is stats_schema.SUBSCRIPTION_FIELDS
    )
    assert flat["bundles"] is stats_schema.BUNDLE_FIELDS and flat["diskTotalBytes"] == "long"


# (now, interval) -> the next snapshot time: wall-clock multiples of the interval
SNAPSHOT_TIMES = [(1000.0, 60.0, 1020.0), (1020.0, 60.0, 1080.0), (1000.5, 1.0, 1001.0)]


def test_snapshots_are_taken_at_multiples_of_the_interval():
    for now, interval, expected in SNAPSHOT_TIMES:
        assert next_snapshot_at(now, interval) == expected


def _history(max_pending: int, publish) -> StatsHistory:
    settings = BrokerSettings(stats_export_max_pending_snapshots=max_pending)
    return StatsHistory(settings, None, None, None, None, publish)  # type: ignore[arg-type]


def test_the_snapshot_queue_is_bounded_and_drops_the_oldest():
    history = _history(2, None)
    for i in range(4):
        history.enqueue([bytes([i])])
    assert [s[0] for s in history.pending] == [b"\x02", b"\x03"]
    assert history.dropped_snapshots == 2


@pytest.mark.parametrize(
    "failures, refused, published, dropped",
    [
        ([], False, 2, 0),  # both go out
        ([ConnectionError("owner moving")], False, 2, 0),  # retried until stored
        ([RecordsRefused("too big", 3)], True, 1, 1),  # refused: dropped, the next goes
    ],
)
def test_a_snapshot_leaves_the_queue_once_stored_or_refused(failures, refused, published, dropped):
    stored: list[int] = []
    outcomes = list(failures)

    async def publish(records):
        if outcomes:
            raise outcomes.pop(0)
        stored.append(records[0][0])

    async def run() -> StatsHistory:
        history = _history(4, publish)
        history.enqueue([b"\x01"])
        history.enqueue([b"\x02"])
        task = asyncio.create_task(history._publish_forever())
        async with asyncio.timeout(10):
            while history.pending:
                await asyncio.sleep(0.01)
        task.cancel()
        return history

    history = asyncio.run(run())
    assert (history.published_snapshots, history.dropped_snapshots) == (published, dropped)
    assert stored == ([2] if refused else [1, 2])
