"""The backlog report's arithmetic on hand-made subscriptions.

Each case is one topic with one subscription, sampled at the given
seconds; the topic's ``msgInCounter`` grows by 60 per 60 s (1 msg/s
published) unless the case says otherwise. The recent window is 120 s, so
for samples at 0, 60, 120, 180 it holds 60, 120 and 180.
"""

from __future__ import annotations

from typing import Any

import pytest

from spark.reports import backlog
from spark.reports.stats_input import prepare, records_frame

H_MS = 1_767_225_600_000
OLD_MS = H_MS - 86_400_000
WINDOW_S = 120.0

# name: [(ts_s, msg_backlog, consumers, sub msgOutCounter, sub countersSince ms)]
CASES: dict[str, list[tuple[int, int, int, int, int]]] = {
    # backlog -100 per 60 s; 160 consumed and 60 published per 60 s
    "draining": [(t, 1000 - 100 * i, 1, 160 * i, OLD_MS) for i, t in enumerate((0, 60, 120, 180))],
    # no consumer: nothing consumed, the backlog takes every message
    "stuck": [(t, 60 * i, 0, 0, OLD_MS) for i, t in enumerate((0, 60, 120, 180))],
    # a consumer too slow: 30 of 60 per 60 s
    "slow": [(t, 30 * i, 1, 30 * i, OLD_MS) for i, t in enumerate((0, 60, 120, 180))],
    # the sample at 0 is outside the window (last 720 - 120): it must not pull the fit down
    "window": [(0, 10_000, 1, 0, OLD_MS), (600, 100, 1, 0, OLD_MS), (660, 200, 1, 0, OLD_MS), (720, 300, 1, 0, OLD_MS)],
    # deleted and made again at 100 s: its counter restarts (the topic's does not)
    "again": [(0, 0, 1, 600, OLD_MS), (60, 0, 1, 660, OLD_MS), (120, 0, 1, 30, H_MS + 100_000)],
    "empty": [(t, 0, 1, 60 * i, OLD_MS) for i, t in enumerate((0, 60, 120, 180))],
}  # fmt: skip


def _record(
    name: str, ts_s: int, msg_backlog: int, consumers: int, out: int, since_ms: int
) -> dict[str, Any]:
    sub = {
        "name": name, "type": "Shared", "msgBacklog": msg_backlog, "backlogSize": msg_backlog * 100,
        "consumers": consumers, "msgOutCounter": out, "countersSince": since_ms,
    }  # fmt: skip
    return {
        "schema_version": 1, "kind": "topic", "timestamp": H_MS + ts_s * 1000, "interval_s": 60.0,
        "cluster": "c", "broker": "b", "tenant": "t", "namespace": "t/ns",
        "topic": f"persistent://t/ns/{name}", "partition": -1, "countersSince": OLD_MS,
        "msgInCounter": 1000 + ts_s, "subscriptions": [sub],  # 1 msg/s published
    }  # fmt: skip


def _records() -> list[dict[str, Any]]:
    return [_record(name, *sample) for name, samples in CASES.items() for sample in samples]


@pytest.fixture(scope="module")
def tables(spark_session: Any) -> dict[str, Any]:
    inputs = prepare(records_frame(spark_session, _records()))
    built = backlog.build(inputs, recent_window_s=WINDOW_S)
    latest = {r["subscription"]: r.asDict() for r in built["subscription_latest"].collect()}
    series: dict[str, list[dict[str, Any]]] = {}
    for r in built["subscription_series"].orderBy("timestamp").collect():
        series.setdefault(r["subscription"], []).append(r.asDict())
    stuck = [r["subscription"] for r in built["stuck_subscriptions"].collect()]
    return {"latest": latest, "series": series, "stuck": stuck}


LATEST = [
    # (case, msg_backlog, growth msgs/s, consume msgs/s, publish msgs/s, seconds_to_drain, stuck)
    # drain: 700 / (160/60 - 1) = 700 / (5/3) = 420 s
    ("draining", 700, -100 / 60, 160 / 60, 1.0, 420.0, False),
    ("stuck", 180, 1.0, 0.0, 1.0, None, True),
    ("slow", 90, 0.5, 0.5, 1.0, None, False),
    ("window", 300, 100 / 60, 0.0, 1.0, None, False),
    ("empty", 0, 0.0, 1.0, 1.0, 0.0, False),
]


@pytest.mark.parametrize(
    ("name", "msg_backlog", "growth", "consume", "publish", "drain_s", "stuck"), LATEST
)
def test_latest(
    tables: dict[str, Any],
    name: str,
    msg_backlog: int,
    growth: float,
    consume: float,
    publish: float,
    drain_s: float | None,
    stuck: bool,
) -> None:
    row = tables["latest"][name]
    assert row["msg_backlog"] == msg_backlog
    assert row["backlog_bytes"] == msg_backlog * 100
    assert row["growth_msgs_per_s"] == pytest.approx(growth)
    assert row["growth_bytes_per_s"] == pytest.approx(growth * 100)
    assert row["consume_msgs_per_s"] == pytest.approx(consume)
    assert row["publish_msgs_per_s"] == pytest.approx(publish)
    assert row["seconds_to_drain"] == (None if drain_s is None else pytest.approx(drain_s))
    assert row["stuck"] is stuck
    assert row["seconds_to_quota"] is None  # no namespace backlog quotas yet


def test_recent_window_holds_the_last_samples(tables: dict[str, Any]) -> None:
    assert tables["latest"]["draining"]["recent_samples"] == 3  # 60, 120, 180
    assert tables["latest"]["window"]["recent_samples"] == 3  # 600, 660, 720


def test_only_subscriptions_growing_without_consumer_are_stuck(tables: dict[str, Any]) -> None:
    assert tables["stuck"] == ["stuck"]


def test_series_has_every_sample_and_the_interval_rates(tables: dict[str, Any]) -> None:
    draining = tables["series"]["draining"]
    assert [r["msg_backlog"] for r in draining] == [1000, 900, 800, 700]
    assert draining[0]["consume_msgs_per_s"] is None  # the first sample opens the series
    assert [r["consume_msgs_per_s"] for r in draining[1:]] == [pytest.approx(160 / 60)] * 3


def test_a_subscription_made_again_restarts_its_own_counters(tables: dict[str, Any]) -> None:
    # 60 -> 120 s: counting since 100 s, 30 consumed over 20 s; the topic's
    # counters did not restart: 60 published over 60 s.
    again = tables["series"]["again"]
    assert [r["consume_msgs_per_s"] for r in again] == [None, 1.0, 1.5]
    assert [r["publish_msgs_per_s"] for r in again] == [None, 1.0, 1.0]
