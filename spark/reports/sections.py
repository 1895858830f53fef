"""What of each report goes into the HTML page: small queries over the
tables as written (read back from Parquet, so nothing is recomputed),
collected to the driver and turned into charts and tables.

Every query here is bounded: at most :data:`TABLE_ROWS_MAX` rows of a
table, :data:`SERIES_POINTS_MAX` points of a chart, the top
:data:`TOP_SUBSCRIPTIONS` subscriptions' series. The full tables are the
Parquet files.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spark.reports import plots
from spark.reports.html_report import Chart, Section, Table

TABLE_ROWS_MAX = 50
SERIES_POINTS_MAX = 20_000
TOP_SUBSCRIPTIONS = 5


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

Record = dict[str, Any]


def collect_utc(frame: DataFrame) -> list[Record]:
    """The rows of a small frame, timestamps as UTC datetimes (PySpark's
    own conversion gives naive datetimes in this process's local zone)."""
    times = [f.name for f in frame.schema.fields if isinstance(f.dataType, T.TimestampType)]
    exact = frame.select(*(F.unix_micros(c).alias(c) if c in times else c for c in frame.columns))
    rows = [r.asDict() for r in exact.collect()]
    for row in rows:
        for c in times:
            row[c] = None if row[c] is None else _EPOCH + timedelta(microseconds=row[c])
    return rows


def table(frame: DataFrame, title: str, columns: Sequence[str], note: str = "") -> Table:
    rows = collect_utc(frame.select(*columns).limit(TABLE_ROWS_MAX))
    return Table(title, list(columns), [tuple(r[c] for c in columns) for r in rows], note)


def _by_cluster(rows: Sequence[Record]) -> dict[str, list[Record]]:
    out: dict[str, list[Record]] = {}
    for row in rows:
        out.setdefault(row["cluster"], []).append(row)
    return out


def _rate_chart(rows: Sequence[Record], title: str, unit: str, measure: str) -> Chart:
    lines = []
    for cluster, points in _by_cluster(rows).items():
        hours = [p["hour"] for p in points]
        for direction in ("in", "out"):
            column = f"{measure}_{direction}_per_s"
            lines.append(plots.Line(f"{cluster} {direction}", hours, [p[column] for p in points]))
        p95 = [p[f"{measure}_in_per_s_p95"] for p in points]
        lines.append(plots.Line(f"{cluster} in p95", hours, p95, style=":"))
    return Chart(title, plots.time_lines(title, unit, lines))


def throughput_section(tables: Mapping[str, DataFrame]) -> Section:
    hourly = collect_utc(
        tables["cluster_hourly"].orderBy("cluster", "hour").limit(SERIES_POINTS_MAX)
    )
    topics = (
        tables["topic_hourly"]
        .groupBy("cluster", "namespace", "topic")
        .agg(
            F.sum("msgs_in").alias("msgs_in"),
            F.sum("msgs_out").alias("msgs_out"),
            F.sum("bytes_in").alias("bytes_in"),
            F.max("msgs_in_per_s_max").alias("msgs_in_per_s_max"),
        )
        .orderBy(F.desc("msgs_in"))
    )
    rates = ["msgs_in_per_s", "msgs_out_per_s", "bytes_in_per_s", "bytes_out_per_s"]
    return Section(
        title="Throughput",
        notes=["Rates: counter deltas over covered seconds per UTC hour; p95 and max over slots."],
        charts=[
            _rate_chart(hourly, "Cluster messages per second, hourly", "msgs/s", "msgs"),
            _rate_chart(hourly, "Cluster bytes per second, hourly", "bytes/s", "bytes"),
        ],
        tables=[
            table(
                tables["busiest_hours"].orderBy("cluster", "rank"),
                "Busiest hours (messages in per second)",
                ["cluster", "rank", "hour", *rates, "msgs_in_per_s_p95", "msgs_in_per_s_max"],
            ),
            table(
                tables["namespace_share"].orderBy(F.desc("msgs_in_share")),
                "Namespaces' share of messages in",
                ["cluster", "namespace", "msgs_in", "msgs_in_share", "bytes_in", "bytes_in_share"],
            ),
            table(
                topics,
                "Topics by messages in",
                [
                    "cluster",
                    "namespace",
                    "topic",
                    "msgs_in",
                    "msgs_out",
                    "bytes_in",
                    "msgs_in_per_s_max",
                ],
            ),
        ],
    )


_SUBSCRIPTION_KEYS = ("cluster", "topic", "partition", "subscription")
_LATEST_COLUMNS = [
    "cluster", "namespace", "topic", "partition", "subscription", "msg_backlog", "backlog_bytes",
    "consumers", "growth_msgs_per_s", "consume_msgs_per_s", "publish_msgs_per_s",
    "seconds_to_drain", "stuck",
]  # fmt: skip


def _backlog_chart(series: DataFrame, top: DataFrame) -> Chart:
    picked_keys = top.select(*_SUBSCRIPTION_KEYS).limit(TOP_SUBSCRIPTIONS)
    keys = [tuple(r) for r in picked_keys.collect()]
    wanted = series.sparkSession.createDataFrame(keys, picked_keys.schema) if keys else picked_keys
    picked = series.join(F.broadcast(wanted), list(_SUBSCRIPTION_KEYS))
    rows = collect_utc(picked.orderBy("timestamp").limit(SERIES_POINTS_MAX))
    lines = []
    for key in keys:
        points = [r for r in rows if tuple(r[k] for k in _SUBSCRIPTION_KEYS) == key]
        partition = "" if key[2] in (None, -1) else f"-partition-{key[2]}"
        lines.append(
            plots.Line(
                f"{key[1]}{partition} / {key[3]}",
                [p["timestamp"] for p in points],
                [p["msg_backlog"] for p in points],
            )
        )
    title = f"Backlog of the {len(keys)} largest subscriptions"
    return Chart(title, plots.time_lines(title, "messages", lines))


def backlog_section(tables: Mapping[str, DataFrame]) -> Section:
    latest = tables["subscription_latest"]
    largest = latest.orderBy(F.desc("msg_backlog"))
    return Section(
        title="Backlog",
        notes=[
            "Growth: least-squares slope over the recent window; drain time at the recent "
            "consume rate less the publish rate; stuck: growing with no consumer in the window.",
            "seconds_to_quota is empty: namespaces have no backlog quota yet.",
        ],
        charts=[_backlog_chart(tables["subscription_series"], largest)],
        tables=[
            table(
                tables["stuck_subscriptions"].orderBy(F.desc("growth_msgs_per_s")),
                "Stuck subscriptions (growing, no consumer)",
                _LATEST_COLUMNS,
            ),
            table(largest, "Largest backlogs", [*_LATEST_COLUMNS, "seconds_to_quota"]),
        ],
    )


def _disk_chart(series: Sequence[Record], forecasts: Sequence[Record]) -> Chart:
    lines = []
    fits = {f["cluster"]: f for f in forecasts}
    for cluster, points in _by_cluster(series).items():
        times = [p["timestamp"] for p in points]
        lines.append(plots.Line(f"{cluster} used", times, [p["used_bytes"] for p in points]))
        lines.append(plots.Line(f"{cluster} total", times, [p["total_bytes"] for p in points], ":"))
        fit = fits.get(cluster)
        if fit is not None and fit["growth_bytes_per_s"] is not None and len(times) > 1:
            first_s = (times[0] - fit["last_sample"]).total_seconds()
            trend = [
                fit["fitted_used_bytes"] + fit["growth_bytes_per_s"] * first_s,
                fit["fitted_used_bytes"],
            ]
            lines.append(
                plots.Line(f"{cluster} fitted", [times[0], fit["last_sample"]], trend, "--")
            )
    return Chart("Bookies' disk", plots.time_lines("Bookies' disk", "bytes", lines))


def _load_chart(load: Sequence[Record]) -> Chart:
    labels = [f"{r['broker']}" for r in load]
    groups = {
        "share of messages": [r["msgs_share"] or 0.0 for r in load],
        "share of CPU": [r["cpu_share"] or 0.0 for r in load],
    }
    return Chart("Broker load shares", plots.bars("Broker load shares", "share", labels, groups))


def capacity_section(tables: Mapping[str, DataFrame]) -> Section:
    forecast = collect_utc(tables["storage_forecast"].orderBy("cluster"))
    series = collect_utc(
        tables["disk_series"].orderBy("cluster", "timestamp").limit(SERIES_POINTS_MAX)
    )
    load = tables["broker_load"].orderBy("cluster", F.desc("msgs_share")).limit(TABLE_ROWS_MAX)
    forecast_columns = [
        "samples", "last_sample", "used_bytes", "total_bytes", "growth_bytes_per_s",
        "growth_bytes_per_day", "seconds_to_full", "full_at",
    ]  # fmt: skip
    split_columns = [
        "cluster", "namespace", "bundle", "broker", "topics", "sessions", "msgs_per_s",
        "bytes_per_s", "over_topics", "over_sessions", "over_msg_rate", "over_bandwidth",
        "snapshots_over", "snapshots",
    ]  # fmt: skip
    load_columns = [
        "cluster",
        "broker",
        "msgs",
        "msgs_per_s",
        "msgs_share",
        "cpu_mean",
        "cpu_share",
    ]
    return Section(
        title="Capacity",
        notes=["Disk forecast: a least-squares line through the used disk, to the last total."],
        charts=[_disk_chart(series, forecast), _load_chart(collect_utc(load))],
        tables=[
            table(
                tables["storage_forecast"].orderBy("cluster"),
                "Disk forecast",
                ["cluster", *forecast_columns],
            ),
            table(
                tables["bookie_forecast"].orderBy(F.asc_nulls_last("seconds_to_full")),
                "Bookies, first to fill first",
                ["cluster", "bookie", *forecast_columns],
            ),
            table(
                tables["namespace_storage"].orderBy(F.desc("growth_bytes_per_s")),
                "Storage growth by namespace",
                [
                    "cluster",
                    "namespace",
                    "topics",
                    "storage_bytes",
                    "growth_bytes_per_s",
                    "growth_bytes_per_day",
                ],
            ),
            table(load, "Broker load", load_columns),
            table(
                tables["split_candidates"].orderBy(F.desc("msgs_per_s")),
                "Split candidates",
                split_columns,
            ),
        ],
    )


SECTIONS = {
    "throughput": throughput_section,
    "backlog": backlog_section,
    "capacity": capacity_section,
}
