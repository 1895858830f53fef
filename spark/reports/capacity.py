"""The capacity report: storage growth, when the bookies' disks fill, how
the load spreads over the brokers, and the bundles due for a split
(``docs/reports.md``, "capacity").

Theory of operation.

* Storage growth: each topic partition's ``storageSize`` samples are
  fitted by a line (:mod:`spark.reports.trends`) over the whole input; a
  namespace grows by the sum of its partitions' slopes. Summing slopes
  rather than fitting the namespace's total keeps partitions whose
  snapshots are not simultaneous (different brokers) from adding noise.
* Disk forecast: the ``bookie`` records of one snapshot share a timestamp
  (the load manager leader writes them together), so the cluster's used
  and total disk at a snapshot are sums over its records. The used disk
  is fitted by a line; the disks fill when the line reaches the total of
  the last snapshot: ``seconds_to_full`` after the last sample, null when
  the line does not rise. The same per bookie: the first bookie to fill
  goes read-only first.
* Broker load: a broker's messages (in + out) are the deltas of the topic
  intervals it wrote (the owner writes a topic's records); its share is
  its messages over the cluster's, its CPU share its mean ``cpu`` over the
  sum of every broker's mean ``cpu``.
* Split candidates: a bundle whose last sample (in the broker records'
  ``bundles``) is over any of that record's thresholds, as the load
  manager's bundle split task compares them: topics, sessions,
  ``msgRateIn + msgRateOut``, ``msgThroughputIn + msgThroughputOut``, each
  strictly over, a threshold of 0 or less being off. These are the load
  report's rates (no bundle counters exist), the very figures the split
  task reads. Bundles not seen in the last two export intervals of their
  cluster (split, unloaded) are left out.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window, WindowSpec
from pyspark.sql import functions as F

from spark.reports.intervals import MS_PER_S, S_PER_DAY, as_timestamp, intervals_only
from spark.reports.stats_input import ReportInput
from spark.reports.trends import fitted_at_last, seconds, seconds_to_reach, slope

SPLIT_RULES = (  # (flag, figure, threshold field)
    ("over_topics", "topics", "splitMaxTopics"),
    ("over_sessions", "sessions", "splitMaxSessions"),
    ("over_msg_rate", "msgs_per_s", "splitMaxMsgRate"),
    ("over_bandwidth", "bytes_per_s", "splitMaxBandwidthBytes"),
)
LIVE_BUNDLE_INTERVALS = 2  # a bundle seen within this many export intervals of the end is live


def namespace_storage(topic_intervals: DataFrame) -> DataFrame:
    """Per namespace: stored bytes at the end and their growth (from every
    topic record; the intervals are only where the records are kept)."""
    x = seconds(F.col("timestamp"))
    partitions = topic_intervals.groupBy(
        "cluster", "tenant", "namespace", "topic", "partition"
    ).agg(
        F.max_by("storageSize", "timestamp").alias("storage_bytes"),
        slope(F.col("storageSize").cast("double"), x).alias("growth_bytes_per_s"),
    )
    namespaces = partitions.groupBy("cluster", "tenant", "namespace").agg(
        F.countDistinct("topic").alias("topics"),
        F.sum("storage_bytes").alias("storage_bytes"),
        F.sum("growth_bytes_per_s").alias("growth_bytes_per_s"),
    )
    return namespaces.withColumn("growth_bytes_per_day", F.col("growth_bytes_per_s") * S_PER_DAY)


def disk_series(bookies: DataFrame) -> DataFrame:
    """The cluster's disk at every bookie snapshot."""
    return bookies.groupBy("cluster", "timestamp").agg(
        F.count(F.lit(1)).alias("bookies"),
        F.sum("diskUsedBytes").alias("used_bytes"),
        F.sum("diskTotalBytes").alias("total_bytes"),
    )


def disk_forecast(samples: DataFrame, keys: tuple[str, ...]) -> DataFrame:
    """Per ``keys``: the last ``used_bytes`` and ``total_bytes``, the fitted
    growth and when the fitted line reaches the total."""
    x, used = seconds(F.col("timestamp")), F.col("used_bytes").cast("double")
    fits = samples.groupBy(*keys).agg(
        F.count(F.lit(1)).alias("samples"),
        F.max("timestamp").alias("last_ms"),
        F.max_by("used_bytes", "timestamp").alias("used_bytes"),
        F.max_by("total_bytes", "timestamp").alias("total_bytes"),
        slope(used, x).alias("growth_bytes_per_s"),
        fitted_at_last(used, x).alias("fitted_used_bytes"),
    )
    to_full = seconds_to_reach(
        F.col("total_bytes"), F.col("fitted_used_bytes"), F.col("growth_bytes_per_s")
    )
    fits = fits.withColumn("seconds_to_full", to_full)
    full_at_ms = F.col("last_ms") + F.col("seconds_to_full") * MS_PER_S
    return fits.select(
        *keys,
        "samples",
        as_timestamp(F.col("last_ms")).alias("last_sample"),
        "used_bytes",
        "total_bytes",
        "growth_bytes_per_s",
        (F.col("growth_bytes_per_s") * S_PER_DAY).alias("growth_bytes_per_day"),
        "fitted_used_bytes",
        "seconds_to_full",
        as_timestamp(full_at_ms).alias("full_at"),
    )


def bookie_samples(bookies: DataFrame) -> DataFrame:
    return bookies.select(
        "cluster",
        "bookie",
        "timestamp",
        F.col("diskUsedBytes").alias("used_bytes"),
        F.col("diskTotalBytes").alias("total_bytes"),
    )


def broker_load(topic_intervals: DataFrame, brokers: DataFrame) -> DataFrame:
    """Per broker: its messages and CPU, and its shares of the cluster's."""
    messages = (
        intervals_only(topic_intervals)
        .groupBy("cluster", "broker")
        .agg(
            F.sum("msgs_in").alias("msgs_in"),
            F.sum("msgs_out").alias("msgs_out"),
            F.min("start_ms").alias("first_ms"),
            F.max("timestamp").alias("last_ms"),
        )
    )
    load = brokers.groupBy("cluster", "broker").agg(
        F.count(F.lit(1)).alias("load_samples"),
        F.avg("cpu").alias("cpu_mean"),
        F.avg("memory").alias("memory_mean"),
    )
    cluster = Window.partitionBy("cluster")
    msgs = F.coalesce(F.col("msgs_in"), F.lit(0)) + F.coalesce(F.col("msgs_out"), F.lit(0))
    span_s = (F.max("last_ms").over(cluster) - F.min("first_ms").over(cluster)) / MS_PER_S
    joined = messages.join(load, on=["cluster", "broker"], how="full").withColumn("msgs", msgs)
    return joined.select(
        "cluster", "broker", "msgs_in", "msgs_out", "msgs",
        F.when(span_s > 0, F.col("msgs") / span_s).alias("msgs_per_s"),
        _share(F.col("msgs"), cluster).alias("msgs_share"),
        "load_samples", "cpu_mean", "memory_mean",
        _share(F.col("cpu_mean"), cluster).alias("cpu_share"),
    )  # fmt: skip


def _share(value: Column, group: WindowSpec) -> Column:
    total = F.sum(value).over(group)
    return F.when(total > 0, value / total)


def bundle_samples(brokers: DataFrame) -> DataFrame:
    """One row per bundle per broker record, with the split rules applied."""
    thresholds = [field for _, _, field in SPLIT_RULES]
    exploded = brokers.select(
        "cluster", "broker", "timestamp", "interval_s", *thresholds, F.explode("bundles").alias("b")
    )
    figures = exploded.select(
        "cluster", "broker", "timestamp", "interval_s", *thresholds,
        F.col("b.namespace").alias("namespace"),
        F.col("b.bundle").alias("bundle"),
        F.col("b.topics").alias("topics"),
        F.col("b.sessions").alias("sessions"),
        (F.col("b.msgRateIn") + F.col("b.msgRateOut")).alias("msgs_per_s"),
        (F.col("b.msgThroughputIn") + F.col("b.msgThroughputOut")).alias("bytes_per_s"),
    )  # fmt: skip
    flags = {
        flag: F.coalesce((F.col(limit) > 0) & (F.col(figure) > F.col(limit)), F.lit(False))
        for flag, figure, limit in SPLIT_RULES
    }
    over_any = F.lit(False)
    for flag in flags:
        over_any = over_any | F.col(flag)
    return figures.withColumns(flags).withColumn("over_any", over_any)


def split_candidates(brokers: DataFrame) -> DataFrame:
    """The live bundles over a split threshold at their last sample."""
    samples = bundle_samples(brokers)
    last = F.max_by(F.struct(*samples.columns), "timestamp").alias("last")
    bundles = samples.groupBy("cluster", "namespace", "bundle").agg(
        last,
        F.count(F.lit(1)).alias("snapshots"),
        F.count(F.when(F.col("over_any"), 1)).alias("snapshots_over"),
    )
    cluster_last_ms = F.max("last.timestamp").over(Window.partitionBy("cluster"))
    live = F.col("last.timestamp") >= cluster_last_ms - (
        F.col("last.interval_s") * LIVE_BUNDLE_INTERVALS * MS_PER_S
    )
    candidates = bundles.where(F.col("last.over_any")).withColumn("live", live).where("live")
    figures = ("topics", "sessions", "msgs_per_s", "bytes_per_s")
    return candidates.select(
        "cluster", "namespace", "bundle",
        F.col("last.broker").alias("broker"),
        as_timestamp(F.col("last.timestamp")).alias("last_sample"),
        *(F.col(f"last.{f}").alias(f) for f in figures),
        *(F.col(f"last.{limit}").alias(limit) for _, _, limit in SPLIT_RULES),
        *(F.col(f"last.{flag}").alias(flag) for flag, _, _ in SPLIT_RULES),
        "snapshots", "snapshots_over",
    )  # fmt: skip


def build(inputs: ReportInput) -> dict[str, DataFrame]:
    """Every table of the capacity report, by name."""
    cluster_disk = disk_series(inputs.bookies)
    return {
        "namespace_storage": namespace_storage(inputs.topic_intervals),
        "disk_series": cluster_disk.select(
            "cluster",
            as_timestamp(F.col("timestamp")).alias("timestamp"),
            "bookies",
            "used_bytes",
            "total_bytes",
        ),
        "storage_forecast": disk_forecast(cluster_disk, ("cluster",)),
        "bookie_forecast": disk_forecast(bookie_samples(inputs.bookies), ("cluster", "bookie")),
        "broker_load": broker_load(inputs.topic_intervals, inputs.brokers),
        "split_candidates": split_candidates(inputs.brokers),
    }
