"""The counter interval rule (spark/reports/intervals.py), case by case.

Every case is one topic's records, ``(timestamp_s, countersSince_s,
msgInCounter)`` in seconds from an hour ``H``, with the interval each
record ends: ``(timestamp_s, start_s, duration_s, delta)`` (None: it ends
none). All cases run as one Spark job (module fixture).
"""

from __future__ import annotations

from typing import Any

import pytest

from spark.reports import intervals
from spark.reports.stats_input import prepare, records_frame

H_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z, an hour boundary
OLD = -86_400  # counting began a day before: a first record only opens its series

CASES: dict[str, tuple[list[tuple[int, int, int]], list[tuple[int, Any, Any, Any]]]] = {
    "steady counter: deltas over the time since the previous record": (
        [(0, OLD, 100), (60, OLD, 160), (120, OLD, 400)],
        [(0, None, None, None), (60, 0, 60.0, 60), (120, 60, 60.0, 240)],
    ),
    "first record whose counting began within its interval counts whole": (
        [(30, 10, 50), (90, 10, 110)],
        [(30, 10, 20.0, 50), (90, 30, 60.0, 60)],
    ),
    "first record whose counting began before its interval only opens": (
        [(30, -31, 50)],  # -31 < 30 - 60
        [(30, None, None, None)],
    ),
    "countersSince changed: the new value over max(countersSince, previous)": (
        [(0, OLD, 500), (60, OLD, 560), (120, 100, 30)],
        [(0, None, None, None), (60, 0, 60.0, 60), (120, 100, 20.0, 30)],
    ),
    "restart begun before the previous record: over the time since it": (
        [(0, OLD, 500), (60, -10, 80)],  # max(-10, 0) = 0
        [(0, None, None, None), (60, 0, 60.0, 80)],
    ),
    "counter decreased with the same countersSince: the new value counts": (
        [(0, OLD, 500), (60, OLD, 40), (120, OLD, 100)],
        [(0, None, None, None), (60, 0, 60.0, 40), (120, 60, 60.0, 60)],
    ),
    "a repeated record ends no interval": (
        [(0, OLD, 500), (60, OLD, 560), (60, OLD, 560), (120, OLD, 620)],
        [(0, None, None, None), (60, 0, 60.0, 60), (60, None, None, None), (120, 60, 60.0, 60)],
    ),
}


def _record(case: int, ts_s: int, since_s: int, counter: int) -> dict[str, Any]:
    return {
        "schema_version": 1, "kind": "topic", "timestamp": H_MS + ts_s * 1000, "interval_s": 60.0,
        "cluster": "c", "broker": "b", "tenant": "t", "namespace": "t/ns",
        "topic": f"persistent://t/ns/case-{case}", "partition": -1, "bundle": "0x0_0x1",
        "countersSince": H_MS + since_s * 1000, "msgInCounter": counter,
        "bytesInCounter": counter * 10, "msgOutCounter": 0, "bytesOutCounter": 0,
    }  # fmt: skip


def _seconds(ms: int | None) -> int | None:
    return None if ms is None else (ms - H_MS) // 1000


@pytest.fixture(scope="module")
def computed(spark_session: Any) -> dict[str, list[tuple[Any, ...]]]:
    names = list(CASES)
    records = [_record(i, *row) for i, name in enumerate(names) for row in CASES[name][0]] + [
        _record(len(names), 3570, OLD, 0),
        _record(len(names), 3630, OLD, 120),
    ]
    rows = prepare(records_frame(spark_session, records)).topic_intervals.collect()
    out: dict[str, list[tuple[Any, ...]]] = {}
    for r in rows:
        case = int(r["topic"].rsplit("-", 1)[1])
        name = names[case] if case < len(names) else "hours"
        start = None if r["duration_s"] is None else _seconds(r["start_ms"])
        out.setdefault(name, []).append(
            (
                _seconds(r["timestamp"]),
                start,
                r["duration_s"],
                r["msgs_in"],
                r["bytes_in"],
                _seconds(r["hour_ms"]),
            )
        )
    return {name: sorted(rows, key=lambda t: (t[0], t[2] is None)) for name, rows in out.items()}


@pytest.mark.parametrize("name", list(CASES))
def test_interval_rule(computed: dict[str, list[tuple[Any, ...]]], name: str) -> None:
    assert [row[:4] for row in computed[name]] == CASES[name][1]


def test_every_counter_follows_the_same_rule(computed: dict[str, list[tuple[Any, ...]]]) -> None:
    for rows in computed.values():
        for row in rows:
            msgs_in, bytes_in = row[3], row[4]
            assert bytes_in == (None if msgs_in is None else msgs_in * 10)


def test_an_interval_counts_in_the_hour_of_its_ending_snapshot(
    computed: dict[str, list[tuple[Any, ...]]],
) -> None:
    # 00:59:30 -> 01:00:30: begun in hour 0, ended in hour 1, counted there.
    opening, ending = computed["hours"]
    assert opening[5] == 0 and opening[2] is None
    assert ending == (3630, 3570, 60.0, 120, 1200, 3600)


SLOTS = [  # (timestamp_s, slot width_s, slot start_s), from H
    (0, 60, 0),
    (59, 60, 0),
    (61, 60, 60),
    (3599, 60, 3540),
    (3601, 60, 3600),
    (3599, 420, 3360),  # 420 does not divide an hour: the hour's last slot is short
    (3601, 420, 3600),  # and slots start again at every hour
]


def test_slots_cut_each_hour(spark_session: Any) -> None:
    from pyspark.sql import functions as F

    columns = [
        intervals.slot_ms(F.lit(H_MS + ts_s * 1000), intervals.slot_width_ms(width_s)).alias(
            f"c{i}"
        )
        for i, (ts_s, width_s, _) in enumerate(SLOTS)
    ]
    row = spark_session.range(1).select(*columns).first()
    assert [(ms - H_MS) // 1000 for ms in row] == [slot_s for _, _, slot_s in SLOTS]


@pytest.mark.parametrize(
    ("interval_s", "width_ms"), [(60.0, 60_000), (0.2, 1000), (7200.0, 3_600_000)]
)
def test_slot_width_is_the_export_interval_within_bounds(interval_s: float, width_ms: int) -> None:
    assert intervals.slot_width_ms(interval_s) == width_ms
