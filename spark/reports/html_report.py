"""One self-contained HTML page per run: sections of notes, PNG charts
embedded as data URLs and tables sortable by a click on a column header
(a few lines of inline JavaScript). No external resource is loaded, so the
file can be mailed or archived as it is.

Pure: it renders the dataclasses below (small, already collected) to a
string. Cells carry their raw value in ``data-v`` so sorting is numeric
for numbers whatever the display format; empty cells sort last.
(Named ``html_report`` so the module never shadows the standard ``html``
when the package directory is on ``sys.path``.)
"""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class Table:
    title: str
    columns: Sequence[str]
    rows: Sequence[Sequence[Any]]
    note: str = ""


@dataclass(frozen=True)
class Chart:
    title: str
    png: bytes


@dataclass(frozen=True)
class Section:
    title: str
    notes: Sequence[str] = ()
    charts: Sequence[Chart] = ()
    tables: Sequence[Table] = ()


@dataclass(frozen=True)
class RunInfo:
    source: str
    generated_at: datetime
    reports: Sequence[str]
    facts: Sequence[tuple[str, str]] = ()  # (label, value) shown in the header
    warnings: Sequence[str] = field(default_factory=list)


_STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.5em}h2{font-size:1.25em;border-bottom:1px solid #ccc;margin-top:2em}
h3{font-size:1.05em}.note{color:#555;font-size:.9em}
.warning{background:#fff3cd;border:1px solid #e0c060;padding:.5em;margin:.5em 0}
table{border-collapse:collapse;font-size:.85em;margin:.5em 0}
th,td{border:1px solid #ddd;padding:2px 6px;text-align:right;white-space:nowrap}
th{background:#f3f3f3;cursor:pointer;user-select:none}
th[data-dir=asc]::after{content:" \\25B2"}th[data-dir=desc]::after{content:" \\25BC"}
td.t{text-align:left}dl{display:grid;grid-template-columns:max-content auto;gap:2px 1em}
dt{font-weight:600}dd{margin:0}img{max-width:100%}
"""

_SORT_SCRIPT = """
document.querySelectorAll("table.sortable th").forEach(function (th) {
  th.addEventListener("click", function () {
    var table = th.closest("table"), body = table.tBodies[0], i = th.cellIndex;
    var asc = th.dataset.dir !== "asc";
    table.querySelectorAll("th").forEach(function (h) { h.dataset.dir = ""; });
    th.dataset.dir = asc ? "asc" : "desc";
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = a.cells[i].dataset.v, y = b.cells[i].dataset.v;
      if (x === y) return 0;
      if (x === "") return 1;
      if (y === "") return -1;
      var nx = Number(x), ny = Number(y);
      var c = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : x.localeCompare(y);
      return asc ? c : -c;
    });
    rows.forEach(function (r) { body.appendChild(r); });
  });
});
"""


def format_value(value: Any) -> tuple[str, str]:
    """(shown text, sort key) of one cell."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "", ""
    if isinstance(value, bool):
        return ("yes" if value else "no"), str(int(value))
    if isinstance(value, int):
        return f"{value:,}", str(value)
    if isinstance(value, float):
        shown = f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"
        return shown, repr(value)
    if isinstance(value, datetime):
        text = value.strftime("%Y-%m-%d %H:%M:%S")
        return text, text
    return str(value), str(value)


def _cell(value: Any) -> str:
    shown, key = format_value(value)
    kind = ' class="t"' if isinstance(value, str) else ""
    return f'<td{kind} data-v="{html.escape(key)}">{html.escape(shown)}</td>'


def render_table(table: Table) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in table.columns)
    body = "\n".join("<tr>" + "".join(_cell(v) for v in row) + "</tr>" for row in table.rows)
    note = f'<p class="note">{html.escape(table.note)}</p>' if table.note else ""
    empty = '<p class="note">(no rows)</p>' if not table.rows else ""
    return (
        f"<h3>{html.escape(table.title)}</h3>{note}{empty}"
        f'<table class="sortable"><thead><tr>{head}</tr></thead><tbody>\n{body}\n</tbody></table>'
    )


def render_chart(chart: Chart) -> str:
    data = base64.b64encode(chart.png).decode("ascii")
    alt = html.escape(chart.title)
    return f'<h3>{alt}</h3><img alt="{alt}" src="data:image/png;base64,{data}">'


def render_section(section: Section) -> str:
    parts = [f"<h2>{html.escape(section.title)}</h2>"]
    parts += [f'<p class="note">{html.escape(n)}</p>' for n in section.notes]
    parts += [render_chart(c) for c in section.charts]
    parts += [render_table(t) for t in section.tables]
    return "\n".join(parts)


def render(info: RunInfo, sections: Sequence[Section]) -> str:
    """The whole page."""
    facts = [
        ("input", info.source),
        ("generated", info.generated_at.strftime("%Y-%m-%d %H:%M:%S UTC")),
        ("reports", ", ".join(info.reports)),
        *info.facts,
    ]
    header = "".join(f"<dt>{html.escape(k)}</dt><dd>{html.escape(v)}</dd>" for k, v in facts)
    warnings = "".join(f'<div class="warning">{html.escape(w)}</div>' for w in info.warnings)
    body = "\n".join(render_section(s) for s in sections)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>Magnetar capacity reports</title><style>{_STYLE}</style></head><body>"
        f"<h1>Magnetar capacity reports</h1><dl>{header}</dl>{warnings}\n{body}\n"
        f'<p class="note">Units: seconds, per second, bytes; times in UTC. Every column is '
        f"described in docs/reports.md.</p><script>{_SORT_SCRIPT}</script></body></html>\n"
    )
