"""The HTML page (spark/reports/html_report.py): self-contained, sortable,
escaped; and what the page collects (spark/reports/sections.py)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import pytest
from pyspark.sql import functions as F

from spark.reports import plots
from spark.reports.html_report import Chart, RunInfo, Section, Table, format_value, render
from spark.reports.sections import collect_utc

WHEN = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("value", "shown", "key"),
    [
        (None, "", ""),
        (float("nan"), "", ""),
        (True, "yes", "1"),
        (1234567, "1,234,567", "1234567"),
        (0.000123456, "0.0001235", "0.000123456"),
        (98765.4321, "98,765", "98765.4321"),
        (datetime(2026, 1, 1, 1, 2, 3), "2026-01-01 01:02:03", "2026-01-01 01:02:03"),
        ("persistent://t/ns/x", "persistent://t/ns/x", "persistent://t/ns/x"),
    ],
)
def test_cells_show_a_readable_value_and_sort_on_the_raw_one(
    value: object, shown: str, key: str
) -> None:
    assert format_value(value) == (shown, key)


def _page() -> str:
    png = plots.time_lines("t", "msgs/s", [plots.Line("a", [WHEN, WHEN], [1.0, None])])
    table = Table("Topics <top>", ["topic", "msgs_in"], [("<script>x</script>", 5), ("b", None)])
    section = Section("Throughput", notes=["a & b"], charts=[Chart("chart", png)], tables=[table])
    info = RunInfo(
        source="/in", generated_at=WHEN, reports=["throughput"], warnings=["1 of 2 records skipped"]
    )
    return render(info, [section])


def test_the_page_embeds_its_charts_and_loads_nothing() -> None:
    page = _page()
    assert re.search(r'src="data:image/png;base64,[A-Za-z0-9+/=]{100,}"', page)
    assert not re.search(r'(src|href)="(https?:)?//', page)


def test_tables_are_sortable_and_escaped() -> None:
    page = _page()
    assert 'class="sortable"' in page and "<script>" in page  # the one inline script
    assert page.count("<script>") == 1
    assert "&lt;script&gt;x&lt;/script&gt;" in page and "Topics &lt;top&gt;" in page
    assert '<td data-v="5">5</td>' in page and '<td data-v=""></td>' in page


def test_warnings_are_shown() -> None:
    assert '<div class="warning">1 of 2 records skipped</div>' in _page()


def test_bars_render_a_png() -> None:
    png = plots.bars("shares", "share", ["b1", "b2"], {"msgs": [0.7, 0.3], "cpu": [0.5, 0.5]})
    assert png.startswith(b"\x89PNG")


def test_collected_timestamps_are_utc_whatever_the_local_zone(spark_session: Any) -> None:
    # 2026-01-01T12:00:00Z as ms; PySpark's own conversion would give local time.
    frame = spark_session.range(1).select(
        F.timestamp_millis(F.lit(1_767_268_800_000)).alias("t"),
        F.lit(None).cast("timestamp").alias("n"),
    )
    assert collect_utc(frame) == [{"t": WHEN, "n": None}]
