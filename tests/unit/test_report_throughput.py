"""The throughput report's arithmetic on a hand-made cluster.

Cluster ``c``, tenant ``t``, snapshots every 60 s, seconds from the hour H:

* ``t/a/one``: opens at -30 s, then intervals ending at 30, 90, 150, 210,
  270 s of 60, 120, 180, 240, 600 messages (1, 2, 3, 4, 10 msg/s), then one
  ending at 3630 s (hour 1) of 3360 messages over 3360 s (1 msg/s);
* ``t/a/two``, two partitions: 0 opens at -30 s and takes 120 messages by
  30 s (2 msg/s); 1 opens at -20 s and takes 60 by 40 s (1 msg/s);
* ``t/b/three``: opens at -30 s, 240 messages by 30 s (4 msg/s).

Bytes are 10 per message; messages out half the messages in.
"""

from __future__ import annotations

from typing import Any

import pytest

from spark.reports import throughput
from spark.reports.stats_input import prepare, records_frame

H_MS = 1_767_225_600_000
OLD_MS = H_MS - 86_400_000


def _record(topic: str, partition: int, ts_s: int, msgs_in: int) -> dict[str, Any]:
    namespace = topic.rsplit("/", 1)[0]
    return {
        "schema_version": 1, "kind": "topic", "timestamp": H_MS + ts_s * 1000, "interval_s": 60.0,
        "cluster": "c", "broker": "b", "tenant": "t", "namespace": namespace,
        "topic": f"persistent://{topic}", "partition": partition, "bundle": "0x0_0x1",
        "countersSince": OLD_MS, "msgInCounter": msgs_in, "bytesInCounter": msgs_in * 10,
        "msgOutCounter": msgs_in // 2, "bytesOutCounter": msgs_in // 2 * 10,
    }  # fmt: skip


def _records() -> list[dict[str, Any]]:
    one = [(-30, 0), (30, 60), (90, 180), (150, 360), (210, 600), (270, 1200), (3630, 4560)]
    return [
        *(_record("t/a/one", -1, ts, n) for ts, n in one),
        _record("t/a/two", 0, -30, 1000),
        _record("t/a/two", 0, 30, 1120),
        _record("t/a/two", 1, -20, 0),
        _record("t/a/two", 1, 40, 60),
        _record("t/b/three", -1, -30, 0),
        _record("t/b/three", -1, 30, 240),
    ]


@pytest.fixture(scope="module")
def tables(spark_session: Any) -> dict[str, list[dict[str, Any]]]:
    inputs = prepare(records_frame(spark_session, _records()))
    built = throughput.build(inputs, busiest=1)
    return {name: [r.asDict() for r in frame.collect()] for name, frame in built.items()}


def _row(rows: list[dict[str, Any]], hour_s: int, **keys: Any) -> dict[str, Any]:
    found = [
        r
        for r in rows
        if int(r["hour"].timestamp()) * 1000 == H_MS + hour_s * 1000
        and all(r[k] == v for k, v in keys.items())
    ]
    assert len(found) == 1, (keys, hour_s, rows)
    return found[0]


TOPIC_HOURS = [
    # (topic, hour_s, partitions, covered_s, msgs_in, msgs_in_per_s, p50, p95, max)
    # 1+2+3+4+10 msg/s over five 60 s intervals: 1200 / 300 s = 4; p95 = 4 + 0.8 (10 - 4)
    ("t/a/one", 0, 1, 300.0, 1200, 4.0, 3.0, 8.8, 10.0),
    # 3360 messages over 270 s -> 3630 s: counted in hour 1, where the interval ends
    ("t/a/one", 3600, 1, 3360.0, 3360, 1.0, 1.0, 1.0, 1.0),
    # two partitions: their rates add up (2 + 1), both end in slot 0
    ("t/a/two", 0, 2, 60.0, 180, 3.0, 3.0, 3.0, 3.0),
    ("t/b/three", 0, 1, 60.0, 240, 4.0, 4.0, 4.0, 4.0),
]


@pytest.mark.parametrize(
    ("topic", "hour_s", "partitions", "covered_s", "msgs", "rate", "p50", "p95", "top"), TOPIC_HOURS
)
def test_topic_hours(
    tables: dict[str, list[dict[str, Any]]],
    topic: str,
    hour_s: int,
    partitions: int,
    covered_s: float,
    msgs: int,
    rate: float,
    p50: float,
    p95: float,
    top: float,
) -> None:
    row = _row(tables["topic_hourly"], hour_s, topic=f"persistent://{topic}")
    assert (row["partitions"], row["covered_s"], row["msgs_in"]) == (partitions, covered_s, msgs)
    assert row["msgs_in_per_s"] == pytest.approx(rate)
    assert row["msgs_in_per_s_p50"] == pytest.approx(p50)
    assert row["msgs_in_per_s_p95"] == pytest.approx(p95)
    assert row["msgs_in_per_s_max"] == pytest.approx(top)
    assert row["bytes_in"] == msgs * 10
    assert row["bytes_in_per_s"] == pytest.approx(rate * 10)
    assert row["msgs_out"] * 2 == msgs


NAMESPACE_HOURS = [
    # (namespace, hour_s, topics, msgs_in, rate, slots, p50, p95, max, share)
    # slots: 0 -> one 1 + two 3 = 4; 1..4 -> 2, 3, 4, 10; sorted 2 3 4 4 10
    ("t/a", 0, 2, 1380, 7.0, 5, 4.0, 8.8, 10.0, 1380 / 1620),
    ("t/b", 0, 1, 240, 4.0, 1, 4.0, 4.0, 4.0, 240 / 1620),
    ("t/a", 3600, 1, 3360, 1.0, 1, 1.0, 1.0, 1.0, 1.0),
]


@pytest.mark.parametrize(
    ("namespace", "hour_s", "topics", "msgs", "rate", "slots", "p50", "p95", "top", "share"),
    NAMESPACE_HOURS,
)
def test_namespace_hours_add_up_their_topics(
    tables: dict[str, list[dict[str, Any]]],
    namespace: str,
    hour_s: int,
    topics: int,
    msgs: int,
    rate: float,
    slots: int,
    p50: float,
    p95: float,
    top: float,
    share: float,
) -> None:
    row = _row(tables["namespace_hourly"], hour_s, namespace=namespace)
    assert (row["topics"], row["msgs_in"], row["slots"]) == (topics, msgs, slots)
    assert row["msgs_in_per_s"] == pytest.approx(rate)
    assert (row["msgs_in_per_s_p50"], row["msgs_in_per_s_p95"], row["msgs_in_per_s_max"]) == (
        pytest.approx(p50),
        pytest.approx(p95),
        pytest.approx(top),
    )
    assert row["msgs_in_share"] == pytest.approx(share)


def test_tenant_and_cluster_hours(tables: dict[str, list[dict[str, Any]]]) -> None:
    for level in ("tenant_hourly", "cluster_hourly"):
        first, second = _row(tables[level], 0), _row(tables[level], 3600)
        assert (first["topics"], first["msgs_in"], first["msgs_in_per_s"]) == (3, 1620, 11.0)
        assert (second["topics"], second["msgs_in"], second["msgs_in_per_s"]) == (1, 3360, 1.0)
        # slot 0: 1 + 3 + 4 = 8, then 2, 3, 4, 10
        assert first["msgs_in_per_s_p50"] == pytest.approx(4.0)
        assert first["msgs_in_per_s_max"] == pytest.approx(10.0)


def test_busiest_hours_rank_the_cluster_hours(tables: dict[str, list[dict[str, Any]]]) -> None:
    (busiest,) = tables["busiest_hours"]  # busiest=1: only the top one
    assert busiest["rank"] == 1
    assert int(busiest["hour"].timestamp()) * 1000 == H_MS
    assert busiest["msgs_in_per_s"] == pytest.approx(11.0)


def test_namespace_share_over_the_whole_input(tables: dict[str, list[dict[str, Any]]]) -> None:
    shares = {r["namespace"]: (r["msgs_in"], r["msgs_in_share"]) for r in tables["namespace_share"]}
    assert shares == {
        "t/a": (1380 + 3360, pytest.approx(4740 / 4980)),
        "t/b": (240, pytest.approx(240 / 4980)),
    }
