"""The backlog report: each subscription's backlog over time, how fast it
grows, when it drains, and the subscriptions stuck with no consumer
(``docs/reports.md``, "backlog").

Theory of operation. A subscription is one series: ``cluster``, ``topic``,
``partition`` and subscription name (a partitioned topic's subscription is
one series per partition, each with its own cursor). Its samples are the
``subscriptions`` entries of the topic records; its intervals
(:mod:`spark.reports.intervals`) give the consume rate (deltas of the
subscription's ``msgOutCounter``) and the publish rate into it (deltas of
the topic's ``msgInCounter``: every subscription receives every message).

Everything "recent" is over the subscription's last ``recent_window_s``
(default one hour) up to and including its last sample:

* growth: the least-squares slope of the backlog samples in the window
  (:mod:`spark.reports.trends`). A fit, not first/last, so one odd sample
  at either end does not decide the sign;
* consume and publish rates: the deltas of the intervals ending in the
  window over their summed durations;
* ``seconds_to_drain = msg_backlog / (consume - publish)`` when consumers
  outrun producers; 0 when the backlog is empty; null otherwise (not
  draining);
* stuck: the backlog grows (growth > 0) and no sample in the window had a
  consumer.

Namespaces have no backlog quota yet: ``seconds_to_quota`` is null, kept
so the column exists when they do.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from spark.reports.intervals import MS_PER_S, as_timestamp, counter_intervals, rate
from spark.reports.stats_input import ReportInput
from spark.reports.trends import seconds, slope

SUBSCRIPTION_SERIES = ("cluster", "topic", "partition", "subscription")
KEYS = ("cluster", "tenant", "namespace", "topic", "partition", "subscription")
RECENT_WINDOW_S_DEFAULT = 3600.0


def subscription_records(topic_intervals: DataFrame) -> DataFrame:
    """One row per subscription per topic record, with the topic's interval
    as the publish side (``published``, ``published_s``)."""
    exploded = topic_intervals.select(
        "cluster", "tenant", "namespace", "topic", "partition", "timestamp", "interval_s",
        F.col("msgs_in").alias("published"), F.col("duration_s").alias("published_s"),
        F.col("countersSince").alias("topicCountersSince"),
        F.explode("subscriptions").alias("s"),
    )  # fmt: skip
    return exploded.select(
        *exploded.columns[:-1],
        F.col("s.name").alias("subscription"),
        F.col("s.type").alias("subscription_type"),
        F.col("s.msgBacklog").alias("msg_backlog"),
        F.col("s.backlogSize").alias("backlog_bytes"),
        F.col("s.consumers").alias("consumers"),
        F.col("s.msgOutCounter").alias("msgOutCounter"),
        # Records from before subscriptions had their own fall back to the topic's.
        F.coalesce(F.col("s.countersSince"), F.col("topicCountersSince")).alias("countersSince"),
    )


def subscription_samples(topic_intervals: DataFrame, recent_window_s: float) -> DataFrame:
    """Every subscription sample with the interval it ends (deltas
    ``msgs_out``), its series' last sample (``last_ms``) and whether it is
    ``recent``."""
    records = subscription_records(topic_intervals)
    samples = counter_intervals(records, SUBSCRIPTION_SERIES, {"msgOutCounter": "msgs_out"})
    last = F.max("timestamp").over(Window.partitionBy(*SUBSCRIPTION_SERIES))
    window_ms = F.lit(recent_window_s * MS_PER_S)
    return samples.withColumn("last_ms", last).withColumn(
        "recent", F.col("timestamp") >= F.col("last_ms") - window_ms
    )


def subscription_series(samples: DataFrame) -> DataFrame:
    """The backlog of every subscription at every sample."""
    return samples.select(
        *KEYS,
        as_timestamp(F.col("timestamp")).alias("timestamp"),
        "msg_backlog",
        "backlog_bytes",
        "consumers",
        rate(F.col("msgs_out"), F.col("duration_s")).alias("consume_msgs_per_s"),
        rate(F.col("published"), F.col("published_s")).alias("publish_msgs_per_s"),
    )


def _recent(column: str | Column) -> Column:
    return F.when(F.col("recent"), column if isinstance(column, Column) else F.col(column))


def _recent_figures(samples: DataFrame) -> DataFrame:
    x = seconds(F.col("timestamp") - F.col("last_ms"))
    latest = [
        F.max_by(c, "timestamp").alias(c)
        for c in ("subscription_type", "msg_backlog", "backlog_bytes", "consumers")
    ]
    return samples.groupBy(*KEYS).agg(
        F.max("timestamp").alias("last_ms"),
        *latest,
        F.count(_recent(F.lit(1))).alias("recent_samples"),
        slope(_recent("msg_backlog"), x).alias("growth_msgs_per_s"),
        slope(_recent("backlog_bytes"), x).alias("growth_bytes_per_s"),
        F.sum(_recent("msgs_out")).alias("recent_msgs_out"),
        F.sum(_recent("published")).alias("recent_msgs_in"),
        F.sum(_recent("duration_s")).alias("recent_consume_covered_s"),
        F.sum(_recent("published_s")).alias("recent_publish_covered_s"),
        F.max(_recent("consumers")).alias("recent_consumers_max"),
    )


def subscription_latest(samples: DataFrame) -> DataFrame:
    """One row per subscription: its last sample and its recent trend."""
    figures = _recent_figures(samples)
    consume, publish = (
        rate(F.col("recent_msgs_out"), F.col("recent_consume_covered_s")),
        rate(F.col("recent_msgs_in"), F.col("recent_publish_covered_s")),
    )
    net_drain = F.col("consume_msgs_per_s") - F.col("publish_msgs_per_s")
    drain = F.when(F.col("msg_backlog") == 0, F.lit(0.0)).when(
        net_drain > 0, F.col("msg_backlog") / net_drain
    )
    no_consumer = F.coalesce(F.col("recent_consumers_max"), F.lit(0)) == 0
    out = figures.withColumns({"consume_msgs_per_s": consume, "publish_msgs_per_s": publish})
    out = out.withColumns(
        {
            "seconds_to_drain": drain,
            "stuck": F.coalesce(F.col("growth_msgs_per_s") > 0, F.lit(False)) & no_consumer,
            "seconds_to_quota": F.lit(None).cast("double"),
            "last_sample": as_timestamp(F.col("last_ms")),
        }
    )
    return out.select(
        *KEYS, "subscription_type", "last_sample", "msg_backlog", "backlog_bytes", "consumers",
        "recent_samples", "growth_msgs_per_s", "growth_bytes_per_s", "consume_msgs_per_s",
        "publish_msgs_per_s", "seconds_to_drain", "stuck", "seconds_to_quota",
    )  # fmt: skip


def build(
    inputs: ReportInput, recent_window_s: float = RECENT_WINDOW_S_DEFAULT
) -> dict[str, DataFrame]:
    """Every table of the backlog report, by name."""
    samples = inputs.keep(subscription_samples(inputs.topic_intervals, recent_window_s))
    latest = subscription_latest(samples)
    return {
        "subscription_series": subscription_series(samples),
        "subscription_latest": latest,
        "stuck_subscriptions": latest.where(F.col("stuck")),
    }
