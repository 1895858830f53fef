"""The throughput report: messages and bytes in and out per hour, per
topic, namespace, tenant and cluster (``docs/reports.md``, "throughput").

Theory of operation. Everything starts from the topic intervals
(:mod:`spark.reports.intervals`): counter deltas over interval durations,
each interval in the UTC hour of the snapshot that ends it.

* A *series* (one topic partition) has, per hour, totals (the sums of its
  deltas) and rates: the totals over its covered seconds (the summed
  durations of those intervals). A level above (topic, namespace, tenant,
  cluster) adds up its members' totals and their rates, so a partition
  seen for half an hour still counts at its own rate rather than at half
  of it.
* The spread within an hour is read from slots (the longest export
  interval): each series' rate in each slot, added up per level and slot,
  gives the level's per-interval rates; an hour's ``_p50``, ``_p95`` and
  ``_max`` are over its slots (percentiles interpolated linearly between
  the closest ranks, like numpy's default).
* The busiest hours are the cluster's hours of most messages in per second;
  a namespace's share is its messages in over the cluster's, per hour and
  over the whole input.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from spark.reports.intervals import as_timestamp, intervals_only, rate, slot_ms
from spark.reports.stats_input import ReportInput

MEASURES = ("msgs_in", "bytes_in", "msgs_out", "bytes_out")
RATES = tuple(f"{m}_per_s" for m in MEASURES)
PERCENTILES = (("p50", 0.5), ("p95", 0.95))
SERIES_KEYS = ("cluster", "tenant", "namespace", "topic", "partition")
LEVELS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("topic", ("cluster", "tenant", "namespace", "topic")),
    ("namespace", ("cluster", "tenant", "namespace")),
    ("tenant", ("cluster", "tenant")),
    ("cluster", ("cluster",)),
)
BUSIEST_HOURS_DEFAULT = 10


def _sums(columns: Sequence[str]) -> list[Column]:
    return [F.sum(c).alias(c) for c in columns]


def series_hours(topic_intervals: DataFrame) -> DataFrame:
    """Per series and hour: the totals, ``covered_s`` and the rates."""
    hours = (
        intervals_only(topic_intervals)
        .groupBy(*SERIES_KEYS, "hour_ms")
        .agg(*_sums(MEASURES), F.sum("duration_s").alias("covered_s"))
    )
    return hours.withColumns(
        {r: rate(F.col(m), F.col("covered_s")) for m, r in zip(MEASURES, RATES, strict=True)}
    )


def series_slots(topic_intervals: DataFrame, slot_width_ms: int) -> DataFrame:
    """Per series and slot: the rates over the intervals ending in the slot."""
    slots = (
        intervals_only(topic_intervals)
        .withColumn("slot_ms", slot_ms(F.col("timestamp"), slot_width_ms))
        .groupBy(*SERIES_KEYS, "hour_ms", "slot_ms")
        .agg(*_sums(MEASURES), F.sum("duration_s").alias("covered_s"))
    )
    rates = [
        rate(F.col(m), F.col("covered_s")).alias(r) for m, r in zip(MEASURES, RATES, strict=True)
    ]
    return slots.select(*SERIES_KEYS, "hour_ms", "slot_ms", *rates)


def _members(level: str) -> list[Column]:
    """The count columns of a level: its partitions, or its topics."""
    if level == "topic":
        return [F.count(F.lit(1)).alias("partitions"), F.avg("covered_s").alias("covered_s")]
    if level == "namespace":
        return [F.count(F.lit(1)).alias("topics")]
    return [F.sum("topics").alias("topics")]


def percentile_of_sorted(values: Column, fraction: float) -> Column:
    """The ``fraction`` percentile of a sorted array, interpolated linearly
    between the closest ranks (numpy's default; Spark's ``percentile``)."""
    position = (F.size(values) - 1) * F.lit(fraction)
    below = F.floor(position).cast("int")
    low, high = F.get(values, below), F.get(values, F.ceil(position).cast("int"))
    return low + (position - below) * (high - low)


def _spread(slots: DataFrame, keys: Sequence[str]) -> DataFrame:
    """Per level and hour: percentiles and maximum of the slot rates (from
    each hour's sorted slot rates: several times cheaper than Spark's
    ``percentile`` aggregate, which falls back to sorting with many groups)."""
    lists = [F.array_sort(F.collect_list(r)).alias(r) for r in RATES]
    hours = slots.groupBy(*keys, "hour_ms").agg(F.count(F.lit(1)).alias("slots"), *lists)
    stats = []
    for r in RATES:
        stats += [percentile_of_sorted(F.col(r), q).alias(f"{r}_{name}") for name, q in PERCENTILES]
        stats.append(F.array_max(r).alias(f"{r}_max"))
    return hours.select(*keys, "hour_ms", "slots", *stats)


def _hourly_table(hours: DataFrame, slots: DataFrame, keys: Sequence[str]) -> DataFrame:
    table = hours.join(_spread(slots, keys), on=[*keys, "hour_ms"], how="left")
    return table.withColumn("hour", as_timestamp(F.col("hour_ms")))


def _with_hourly_share(namespace_hourly: DataFrame) -> DataFrame:
    cluster_hour = Window.partitionBy("cluster", "hour_ms")
    total = F.sum("msgs_in").over(cluster_hour)
    return namespace_hourly.withColumn("msgs_in_share", F.when(total > 0, F.col("msgs_in") / total))


def _columns(keys: Sequence[str], level: str) -> list[str]:
    members = ["partitions", "covered_s"] if level == "topic" else ["topics"]
    spread = [f"{r}_{name}" for r in RATES for name in (*(p for p, _ in PERCENTILES), "max")]
    share = ["msgs_in_share"] if level == "namespace" else []
    return [*keys, "hour", *members, *MEASURES, *RATES, *spread, "slots", *share]


def hourly_tables(
    topic_intervals: DataFrame, slot_width_ms: int, keep: Callable[[DataFrame], DataFrame]
) -> dict[str, DataFrame]:
    """``topic_hourly``, ``namespace_hourly``, ``tenant_hourly`` and
    ``cluster_hourly``: each level's hours from the one below (the topic
    level's hours and slots are kept; the levels above are small)."""
    hours, slots = series_hours(topic_intervals), series_slots(topic_intervals, slot_width_ms)
    tables: dict[str, DataFrame] = {}
    for level, keys in LEVELS:
        hours = hours.groupBy(*keys, "hour_ms").agg(*_sums((*MEASURES, *RATES)), *_members(level))
        slots = slots.groupBy(*keys, "hour_ms", "slot_ms").agg(*_sums(RATES))
        if level == "topic":  # as many slots as intervals: the levels above read them
            hours, slots = keep(hours), keep(slots)
        table = _hourly_table(hours, slots, keys)
        if level == "namespace":
            table = _with_hourly_share(table)
        tables[f"{level}_hourly"] = table.select(*_columns(keys, level))
    return tables


def busiest_hours(cluster_hourly: DataFrame, top: int = BUSIEST_HOURS_DEFAULT) -> DataFrame:
    """Each cluster's ``top`` hours of most messages in per second."""
    order = Window.partitionBy("cluster").orderBy(
        F.desc("msgs_in_per_s"), F.desc("bytes_in_per_s"), F.asc("hour")
    )
    ranked = cluster_hourly.withColumn("rank", F.row_number().over(order))
    return ranked.where(F.col("rank") <= top).select(
        "cluster", "rank", "hour", *MEASURES, *RATES, "msgs_in_per_s_p95", "msgs_in_per_s_max"
    )


def namespace_share(namespace_hourly: DataFrame) -> DataFrame:
    """Each namespace's share of its cluster's messages and bytes in, over
    the whole input."""
    totals = namespace_hourly.groupBy("cluster", "tenant", "namespace").agg(
        *_sums(("msgs_in", "bytes_in"))
    )
    cluster = Window.partitionBy("cluster")
    shares = {
        f"{m}_share": F.when(F.sum(m).over(cluster) > 0, F.col(m) / F.sum(m).over(cluster))
        for m in ("msgs_in", "bytes_in")
    }
    return totals.withColumns(shares)


def build(inputs: ReportInput, busiest: int = BUSIEST_HOURS_DEFAULT) -> dict[str, DataFrame]:
    """Every table of the throughput report, by name."""
    tables = hourly_tables(inputs.topic_intervals, inputs.slot_width_ms, inputs.keep)
    tables["busiest_hours"] = busiest_hours(tables["cluster_hourly"], busiest)
    tables["namespace_share"] = namespace_share(tables["namespace_hourly"])
    return tables
