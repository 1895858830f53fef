"""Linear trends of gauges (backlogs, storage, disk use) and when a trend
reaches a level: the fits the backlog and capacity reports share.

Theory of operation. A gauge's samples ``(x, y)``, ``x`` the sample time
in seconds, are fitted by least squares, ``y = a + b x``: ``b`` is
``covar_pop(x, y) / var_pop(x)`` (Spark's ``regr_slope``, computed with
stable running moments). The fitted value at the last sample is
``mean(y) + b (x_last - mean(x))``, so the trend is read where the data
ends, not at the epoch. With fewer than two samples, or all at one time,
there is no slope (null).

A trend at ``now`` with slope ``b`` reaches ``level`` after
``(level - now) / b`` seconds when ``b > 0``; never (null) when it is flat
or falling; at once (0) when it is already there.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from spark.reports.intervals import MS_PER_S


def seconds(timestamp_ms: Column) -> Column:
    return timestamp_ms / F.lit(float(MS_PER_S))


def slope(y: Column, x: Column) -> Column:
    """Aggregate: the least-squares slope of ``y`` over ``x`` (y units per x unit)."""
    return F.regr_slope(y, x)


def fitted_at_last(y: Column, x: Column) -> Column:
    """Aggregate: the fitted ``y`` at the group's last ``x`` (of the pairs
    with both values)."""
    x_last = F.max(F.when(y.isNotNull(), x))
    return F.regr_avgy(y, x) + F.regr_slope(y, x) * (x_last - F.regr_avgx(y, x))


def seconds_to_reach(level: Column, now: Column, slope_per_s: Column) -> Column:
    """Seconds until a trend at ``now`` rising ``slope_per_s`` reaches
    ``level``; null when it does not rise."""
    return F.when(slope_per_s > 0, F.greatest(F.lit(0.0), (level - now) / slope_per_s))
