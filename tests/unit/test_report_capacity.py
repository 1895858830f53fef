"""The capacity report's arithmetic on a hand-made cluster (seconds from
the hour H, snapshots every 60 s)."""

from __future__ import annotations

from typing import Any

import pytest

from spark.reports import capacity
from spark.reports.stats_input import prepare, records_frame

H_MS = 1_767_225_600_000
OLD_MS = H_MS - 86_400_000


def _topic(topic: str, broker: str, ts_s: int, storage: int, msgs_in: int) -> dict[str, Any]:
    return {
        "schema_version": 1, "kind": "topic", "timestamp": H_MS + ts_s * 1000, "interval_s": 60.0,
        "cluster": "c", "broker": broker, "tenant": "t", "namespace": topic.rsplit("/", 1)[0],
        "topic": f"persistent://{topic}", "partition": -1, "countersSince": OLD_MS,
        "msgInCounter": msgs_in, "bytesInCounter": 0, "msgOutCounter": 0, "bytesOutCounter": 0,
        "storageSize": storage,
    }  # fmt: skip


def _bookie(bookie: str, ts_s: int, used: int, total: int = 2000) -> dict[str, Any]:
    return {
        "schema_version": 1, "kind": "bookie", "timestamp": H_MS + ts_s * 1000, "interval_s": 60.0,
        "cluster": "c", "broker": "b1", "bookie": bookie, "diskUsedBytes": used,
        "diskTotalBytes": total, "diskFreeBytes": total - used,
    }  # fmt: skip


LIMITS = {
    "splitMaxTopics": 10,
    "splitMaxSessions": 5,
    "splitMaxMsgRate": 100.0,
    "splitMaxBandwidthBytes": 1000.0,
}


def _bundle(
    name: str, topics: int = 1, sessions: int = 1, rate: float = 1.0, bandwidth: float = 1.0
) -> dict[str, Any]:
    return {
        "namespace": "t/a", "bundle": name, "topics": topics, "sessions": sessions,
        "msgRateIn": rate * 0.6, "msgRateOut": rate * 0.4,
        "msgThroughputIn": bandwidth * 0.6, "msgThroughputOut": bandwidth * 0.4,
    }  # fmt: skip


def _broker(
    broker: str, ts_s: int, cpu: float, bundles: list[dict[str, Any]], **limits: Any
) -> dict[str, Any]:
    return {
        "schema_version": 1, "kind": "broker", "timestamp": H_MS + ts_s * 1000, "interval_s": 60.0,
        "cluster": "c", "broker": broker, "cpu": cpu, "memory": 0.5, "bundles": bundles,
        **LIMITS, **limits,
    }  # fmt: skip


def _split_bundles(ts_s: int) -> list[dict[str, Any]]:
    steady = [
        _bundle("topics", topics=11),  # 11 > 10
        _bundle("sessions", sessions=6),  # 6 > 5
        _bundle("rate", rate=110.0),  # in + out 110 > 100
        _bundle("bandwidth", bandwidth=1100.0),  # in + out 1100 > 1000
        _bundle("calm"),
        _bundle("at-limit", topics=10, sessions=5, rate=100.0, bandwidth=1000.0),  # not over
    ]
    if ts_s == 0:
        return [*steady, _bundle("gone", topics=50), _bundle("cooled", topics=50)]
    return [*steady, _bundle("cooled")]  # "gone": not seen since 0 s; "cooled": under now


def _records() -> list[dict[str, Any]]:
    times = (0, 60, 120)
    return [
        # t/a: x grows 600 per 60 s (10 B/s), y stays; t/b: one sample, no slope
        *(_topic("t/a/x", "b1", t, 1000 + 10 * t, 5 * t) for t in times),
        *(_topic("t/a/y", "b2", t, 500, 1000 + t) for t in times),
        _topic("t/b/z", "b2", 0, 42, 0),
        # disks: b1 100, 220, 300 (fit: 5/3 B/s, 306.67 at 120 s); b2 flat at 1000
        *(_bookie("bk1", t, used) for t, used in zip(times, (100, 220, 300), strict=True)),
        *(_bookie("bk2", t, 1000) for t in times),
        # load: b1 cpu 0.6 then 0.2 (mean 0.4), b2 0.1; b2's sessions threshold is off
        *(_broker("b1", t, cpu, _split_bundles(t)) for t, cpu in ((0, 0.6), (60, 0.2), (180, 0.4))),
        _broker(
            "b2",
            60,
            0.1,
            [{**_bundle("off", sessions=100), "namespace": "t/b"}],
            splitMaxSessions=0,
        ),
        _broker(
            "b2",
            180,
            0.1,
            [{**_bundle("off", sessions=100), "namespace": "t/b"}],
            splitMaxSessions=0,
        ),
    ]


@pytest.fixture(scope="module")
def tables(spark_session: Any) -> dict[str, list[dict[str, Any]]]:
    built = capacity.build(prepare(records_frame(spark_session, _records())))
    return {name: [r.asDict() for r in frame.collect()] for name, frame in built.items()}


def test_storage_growth_per_namespace(tables: dict[str, list[dict[str, Any]]]) -> None:
    rows = {r["namespace"]: r for r in tables["namespace_storage"]}
    a, b = rows["t/a"], rows["t/b"]
    assert (a["topics"], a["storage_bytes"]) == (2, 2200 + 500)
    assert a["growth_bytes_per_s"] == pytest.approx(10.0)  # x: 10, y: 0
    assert a["growth_bytes_per_day"] == pytest.approx(864_000.0)
    assert (b["topics"], b["storage_bytes"], b["growth_bytes_per_s"]) == (1, 42, None)


def test_disk_forecast_from_a_fitted_line(tables: dict[str, list[dict[str, Any]]]) -> None:
    (cluster,) = tables["storage_forecast"]
    # used 1100, 1220, 1300 at 0, 60, 120 s: slope 5/3 B/s, fitted 1306.67 at 120 s;
    # full (4000) after (4000 - 1306.67) / (5/3) = 1616 s
    assert (cluster["samples"], cluster["used_bytes"], cluster["total_bytes"]) == (3, 1300, 4000)
    assert cluster["growth_bytes_per_s"] == pytest.approx(5 / 3)
    assert cluster["growth_bytes_per_day"] == pytest.approx(5 / 3 * 86_400)
    assert cluster["fitted_used_bytes"] == pytest.approx(1306.6667, abs=1e-3)
    assert cluster["seconds_to_full"] == pytest.approx(1616.0)
    full_at_s = cluster["full_at"].timestamp() - H_MS / 1000
    assert full_at_s == pytest.approx(120 + 1616.0, abs=0.002)


def test_each_bookie_has_its_forecast_and_a_flat_one_never_fills(
    tables: dict[str, list[dict[str, Any]]],
) -> None:
    bookies = {r["bookie"]: r for r in tables["bookie_forecast"]}
    # bk1: (2000 - 306.67) / (5/3) = 1016 s
    assert bookies["bk1"]["seconds_to_full"] == pytest.approx(1016.0)
    assert bookies["bk2"]["growth_bytes_per_s"] == pytest.approx(0.0)
    assert bookies["bk2"]["seconds_to_full"] is None and bookies["bk2"]["full_at"] is None


def test_disk_series_sums_the_bookies_of_each_snapshot(
    tables: dict[str, list[dict[str, Any]]],
) -> None:
    series = sorted((r["timestamp"], r["bookies"], r["used_bytes"]) for r in tables["disk_series"])
    assert [(n, used) for _, n, used in series] == [(2, 1100), (2, 1220), (2, 1300)]


def test_broker_load_shares(tables: dict[str, list[dict[str, Any]]]) -> None:
    load = {r["broker"]: r for r in tables["broker_load"]}
    # b1 wrote x: 300 + 300 messages in; b2 wrote y: 60 + 60 (z opens only)
    assert (load["b1"]["msgs"], load["b2"]["msgs"]) == (600, 120)
    assert load["b1"]["msgs_share"] == pytest.approx(600 / 720)
    assert load["b1"]["msgs_per_s"] == pytest.approx(600 / 120)  # over the cluster's 120 s
    # cpu means 0.4 and 0.1
    assert load["b1"]["cpu_share"] == pytest.approx(0.8)
    assert load["b2"]["cpu_share"] == pytest.approx(0.2)


SPLITS = {  # bundle: (over_topics, over_sessions, over_msg_rate, over_bandwidth, snapshots, snapshots_over)
    "topics": (True, False, False, False, 3, 3),
    "sessions": (False, True, False, False, 3, 3),
    "rate": (False, False, True, False, 3, 3),
    "bandwidth": (False, False, False, True, 3, 3),
}


def test_split_candidates(tables: dict[str, list[dict[str, Any]]]) -> None:
    # Left out: "calm", "at-limit" (not strictly over), "cooled" (under at its
    # last sample), "gone" (not seen in the last 2 intervals), "off" (threshold 0).
    got = {
        r["bundle"]: (
            r["over_topics"], r["over_sessions"], r["over_msg_rate"], r["over_bandwidth"],
            r["snapshots"], r["snapshots_over"],
        )
        for r in tables["split_candidates"]
    }  # fmt: skip
    assert got == SPLITS
    rate = next(r for r in tables["split_candidates"] if r["bundle"] == "rate")
    assert rate["msgs_per_s"] == pytest.approx(110.0)
    assert rate["splitMaxMsgRate"] == 100.0 and rate["broker"] == "b1"
