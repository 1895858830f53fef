"""Interval arithmetic over the records' cumulative counters: the one place
that turns counters into per-interval deltas, durations, hours and slots,
used by every report.

Theory of operation. A *series* is the records of one topic partition
(``cluster``, ``topic``, ``partition``), or of one subscription of it,
ordered by ``timestamp``. Each record ends at most one *interval*, which
begins where the series' previous record left off. Rates are always a
counter's delta over an interval's duration, never an average of the
records' instantaneous rates.

The counters of a topic (``msgInCounter`` …, and its subscriptions'
``msgOutCounter`` …) count since ``countersSince``. For a record with a
previous record in its series (``prev``)::

    restarted  = countersSince != prev.countersSince
    start_ms   = max(countersSince, prev.timestamp)
    delta(c)   = c              if restarted or c < prev.c
               = c - prev.c     otherwise
    duration_s = (timestamp - start_ms) / 1000

When the counters did not restart, ``countersSince <= prev.timestamp``, so
``start_ms`` is ``prev.timestamp``: one formula covers every case.

* A restart (broker restart, topic moved to another broker): everything
  the new counters hold was counted after ``countersSince``, and the
  previous record already accounts for the time up to its own timestamp,
  so the new value is counted over what is left of the interval. If the
  counting began before the previous record (two brokers' clocks apart, a
  move overlapping a snapshot), those messages land in this interval:
  totals stay exact, their placement moves by less than one interval.
* A counter that decreased without ``countersSince`` changing is a reset
  too (Prometheus' ``rate()`` rule, per counter): the new value counts,
  over the interval since the previous record; what was counted between
  that record and the reset is lost, so the delta is a lower bound.
* A series' first record has no previous one. It ends an interval only if
  its counting began within its own export interval
  (``countersSince >= timestamp - interval_s * 1000``: the topic was
  created or loaded since the broker's last snapshot), over
  ``[countersSince, timestamp]`` with the whole counter as delta.
  Otherwise the counter holds messages from before the data began, which
  no interval can place, and the record only opens the series.
* An interval of no length (a record repeated, e.g. the same message
  published twice to the stats topic) is no interval.
* A subscription's own counters count since its own ``countersSince`` (a
  subscription deleted and made again starts anew); the topic's counters
  since the topic's. The same rule applies to each with its own column.

An interval counts in the UTC hour of the snapshot that ends it
(``hour_ms``), even when it began in the previous hour: an hour's total is
the sum of the deltas of the intervals ending in it, and its rate that sum
over their summed durations ("covered seconds"), which may pass 3,600.

A *slot* cuts an hour into equal spans (``slot_ms``, the longest export
interval) so that series whose snapshots are not simultaneous can be
added up: a series' rate in a slot is its deltas over its durations of the
intervals ending in that slot, and a group's rate in a slot is the sum of
its series' rates. Slots restart at every hour, so none crosses one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

MS_PER_S = 1000
HOUR_MS = 3_600_000
S_PER_DAY = 86_400

TOPIC_SERIES = ("cluster", "topic", "partition")
# Every window over topics and subscriptions is partitioned by these: the
# one shuffle of the input serves every grouping by a topic's keys.
TOPIC_PARTITIONING = ("cluster", "topic")
# A topic record's counters and the delta columns the reports use.
TOPIC_COUNTERS = {
    "msgInCounter": "msgs_in",
    "bytesInCounter": "bytes_in",
    "msgOutCounter": "msgs_out",
    "bytesOutCounter": "bytes_out",
}
TOPIC_CONTEXT = ("tenant", "namespace", "broker")
# The subscription fields the backlog report reads.
SUBSCRIPTION_FIELDS = (
    "name", "type", "msgBacklog", "backlogSize", "consumers", "msgOutCounter", "countersSince",
)  # fmt: skip


def hour_ms(timestamp_ms: Column) -> Column:
    """The start of the UTC hour holding ``timestamp_ms`` (ms since the epoch)."""
    return timestamp_ms - F.pmod(timestamp_ms, F.lit(HOUR_MS))


def slot_ms(timestamp_ms: Column, slot_width_ms: int) -> Column:
    """The start of the slot holding ``timestamp_ms``: slots of
    ``slot_width_ms`` counted from the start of its hour."""
    hour = hour_ms(timestamp_ms)
    return hour + F.floor((timestamp_ms - hour) / F.lit(slot_width_ms)) * F.lit(slot_width_ms)


def slot_width_ms(interval_s: float) -> int:
    """Slots as long as the longest export interval (at least one second,
    at most an hour)."""
    return int(min(max(interval_s, 1.0), HOUR_MS / MS_PER_S) * MS_PER_S)


def as_timestamp(ms: Column) -> Column:
    """ms since the epoch as a Spark timestamp (an instant, shown in UTC)."""
    return F.timestamp_millis(ms.cast("long"))


def counter_intervals(
    records: DataFrame,
    series: Sequence[str],
    counters: Mapping[str, str],
    since: str = "countersSince",
    partition_by: Sequence[str] = TOPIC_PARTITIONING,
) -> DataFrame:
    """``records`` (with ``timestamp``, ``interval_s``, the ``since`` column
    and the ``counters``' columns) with the interval each record ends:
    ``start_ms``, ``duration_s``, ``hour_ms`` and one delta column per
    counter (``counters`` maps a counter column to its delta column).
    ``duration_s`` and the deltas are null for a record that ends no
    interval; every record is kept (a gauge read at it still counts).

    The window is partitioned by ``partition_by`` (a prefix of ``series``)
    and ordered by the rest of ``series`` and the timestamp, so that every
    later grouping by a topic's keys needs no new shuffle."""
    within = [c for c in series if c not in partition_by]
    order = Window.partitionBy(*partition_by).orderBy(*within, "timestamp")
    prev = {c: f"_prev_{c}" for c in dict.fromkeys((*within, "timestamp", since, *counters))}
    with_prev = records.select("*", *(F.lag(c).over(order).alias(p) for c, p in prev.items()))

    same_series = F.lit(True)
    for column in within:
        same_series = same_series & F.col(column).eqNullSafe(F.col(prev[column]))
    ts, counting_since = F.col("timestamp"), F.col(since)
    prev_ts = F.when(same_series, F.col(prev["timestamp"]))
    counting_began_within_interval = counting_since >= ts - F.col("interval_s") * MS_PER_S
    start = F.when(
        prev_ts.isNull(), F.when(counting_began_within_interval, counting_since)
    ).otherwise(F.greatest(counting_since, prev_ts))
    restarted = prev_ts.isNull() | (counting_since != F.col(prev[since]))
    duration = (ts - F.col("start_ms")) / F.lit(MS_PER_S)
    is_interval = F.col("duration_s") > 0

    out = with_prev.withColumn("start_ms", start).withColumn("duration_s", duration)
    out = out.withColumn("duration_s", F.when(is_interval, F.col("duration_s")))
    deltas = {}
    for counter, delta in counters.items():
        now, before = F.col(counter), F.col(prev[counter])
        reset = restarted | (now < before)
        deltas[delta] = F.when(is_interval, F.when(reset, now).otherwise(now - before))
    out = out.withColumns(deltas).withColumn("hour_ms", hour_ms(ts))
    return out.drop(*prev.values())


def intervals_only(frame: DataFrame) -> DataFrame:
    """The rows of :func:`counter_intervals` that end an interval."""
    return frame.where(F.col("duration_s").isNotNull())


def topic_intervals(topics: DataFrame, subscriptions: bool = True) -> DataFrame:
    """Every topic record (kind ``topic``) with the interval it ends over the
    topic counters (deltas ``msgs_in``, ``bytes_in``, ``msgs_out``,
    ``bytes_out``), keeping only the columns the reports read; with
    ``subscriptions``, its subscriptions too (the fields of
    :data:`SUBSCRIPTION_FIELDS`), so the backlog report's windows reuse
    this one's partitioning."""
    columns = [
        *TOPIC_SERIES, *TOPIC_CONTEXT, "timestamp", "interval_s", "countersSince",
        "storageSize", *TOPIC_COUNTERS,
    ]  # fmt: skip
    if subscriptions:
        trimmed = F.transform(
            "subscriptions", lambda s: F.struct(*(s[f].alias(f) for f in SUBSCRIPTION_FIELDS))
        )
        columns.append(trimmed.alias("subscriptions"))  # type: ignore[arg-type]
    return counter_intervals(topics.select(*columns), TOPIC_SERIES, TOPIC_COUNTERS)


def rate(total: Column, seconds: Column) -> Column:
    """``total / seconds``, null when no time was covered."""
    return F.when(seconds > 0, total / seconds)
