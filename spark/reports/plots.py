"""The report's charts as PNG bytes (matplotlib's Agg canvas, no pyplot:
no global figure state and no display needed), to embed in the HTML.

Inputs are small lists already collected from the report tables; nothing
here touches Spark.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

FIGURE_SIZE_IN = (9.0, 3.6)
DPI = 96
FEW_POINTS = 12


@dataclass(frozen=True)
class Line:
    label: str
    x: Sequence[datetime]
    y: Sequence[float | None]
    style: str = "-"


def _png(figure: Figure) -> bytes:
    FigureCanvasAgg(figure)
    figure.tight_layout()
    out = io.BytesIO()
    figure.savefig(out, format="png", dpi=DPI)
    return out.getvalue()


def _new_axes(title: str, y_label: str) -> tuple[Figure, Any]:
    figure = Figure(figsize=FIGURE_SIZE_IN)
    axes = figure.add_subplot(1, 1, 1)
    axes.set_title(title, fontsize=11)
    axes.set_ylabel(y_label)
    axes.grid(True, alpha=0.3)
    return figure, axes


def time_lines(title: str, y_label: str, lines: Sequence[Line]) -> bytes:
    """Lines over time (UTC), one per ``Line``; a legend when several."""
    figure, axes = _new_axes(title, y_label)
    times: set[datetime] = set()
    for line in lines:
        xs = [x for x, y in zip(line.x, line.y, strict=True) if y is not None]
        ys = [y for y in line.y if y is not None]
        times.update(xs)
        # A few points (an hour or two of history) show as dots: a line of one
        # point is invisible.
        marker = "o" if len(xs) <= FEW_POINTS else None
        axes.plot(xs, ys, line.style, label=line.label, linewidth=1.2, marker=marker)
    if len(times) == 1:  # one instant: an hour either side, not matplotlib's years
        (only,) = times
        axes.set_xlim(only - timedelta(hours=1), only + timedelta(hours=1))
    if len(lines) > 1:
        axes.legend(fontsize=8, loc="best")
    figure.autofmt_xdate()
    axes.set_xlabel("time (UTC)")
    return _png(figure)


def bars(
    title: str, y_label: str, labels: Sequence[str], groups: Mapping[str, Sequence[float]]
) -> bytes:
    """Grouped bars: one group of bars per label, one bar per ``groups`` entry."""
    figure, axes = _new_axes(title, y_label)
    width = 0.8 / max(len(groups), 1)
    for i, (name, values) in enumerate(groups.items()):
        positions = [p + i * width for p in range(len(labels))]
        axes.bar(positions, values, width=width, label=name)
    axes.set_xticks([p + 0.4 - width / 2 for p in range(len(labels))])
    axes.set_xticklabels(labels, rotation=30, ha="right", fontsize=8)
    axes.legend(fontsize=8)
    return _png(figure)
