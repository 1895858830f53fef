"""The capacity reports: throughput, backlog and capacity, computed with
Spark from the brokers' stats history (``docs/stats-schema.md``) and
written as Parquet tables plus one HTML page (``docs/reports.md``).

Modules: ``stats_input`` (reading, the schema, bad input), ``intervals``
(counter deltas, hours, slots: the arithmetic every report shares),
``trends`` (linear fits), one module per report (``throughput``,
``backlog``, ``capacity``: functions over DataFrames), ``runner`` (one
run), ``sections``, ``plots`` and ``html_report`` (the page), ``cli``.
"""

from spark.reports.runner import REPORTS, RunOptions, RunResult, run
from spark.reports.stats_input import (
    EmptyInput,
    InputNotFound,
    InputUnavailable,
    ReportInputError,
)

__all__ = [
    "REPORTS",
    "EmptyInput",
    "InputNotFound",
    "InputUnavailable",
    "ReportInputError",
    "RunOptions",
    "RunResult",
    "run",
]
