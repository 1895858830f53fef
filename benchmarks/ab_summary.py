"""The table of an ab_session.sh run: each figure's median and min-max per
checkout over the repetitions (the spread is the run-to-run noise), and the
ratio of the medians (after / before; for latencies lower is better).

    .venv/bin/python benchmarks/ab_summary.py /tmp/magnetar-ab/results.jsonl
"""

from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Callable
from typing import Any

Row = dict[str, Any]

FIGURES: list[tuple[str, Callable[[Row], bool], Callable[[Row], float]]] = [
    (
        "produce_consume one-at-a-time msg/s",
        lambda r: r.get("workload") == "sync",
        lambda r: r["msgs_s"],
    ),
    (
        "produce_consume one-at-a-time p99 ms",
        lambda r: r.get("workload") == "sync",
        lambda r: r["publish_latency_ms"]["p99"],
    ),
    (
        "produce_consume pipelined msg/s",
        lambda r: r.get("workload") == "pipelined" and "peer" not in r,
        lambda r: r["msgs_s"],
    ),
    (
        "produce_consume e2e p50 ms at 2,000 msg/s",
        lambda r: str(r.get("workload", "")).startswith("e2e@"),
        lambda r: r["e2e_latency_ms"]["p50"],
    ),
    (
        "produce_consume e2e p99 ms at 2,000 msg/s",
        lambda r: str(r.get("workload", "")).startswith("e2e@"),
        lambda r: r["e2e_latency_ms"]["p99"],
    ),
    (
        "peers one-at-a-time msg/s",
        lambda r: r.get("peer") == "magnetar" and r.get("mode") == "sync",
        lambda r: r["msgs_s"],
    ),
    (
        "peers pipelined msg/s",
        lambda r: r.get("peer") == "magnetar" and r.get("mode") == "pipelined",
        lambda r: r["msgs_s"],
    ),
]


def summarize(rows: list[Row]) -> list[str]:
    out = [
        "| figure | before: median (min-max) | after: median (min-max) | after/before |",
        "|---|---|---|---|",
    ]
    for label, wanted, value in FIGURES:
        cells = []
        medians = []
        for tree in ("before", "after"):
            got = [value(r) for r in rows if r.get("tree") == tree and wanted(r)]
            if not got:
                cells.append("-")
                continue
            med = statistics.median(got)
            medians.append(med)
            cells.append(f"{med:,.4g} ({min(got):,.4g}-{max(got):,.4g})")
        ratio = f"{medians[1] / medians[0]:.3f}" if len(medians) == 2 and medians[0] else "-"
        out.append(f"| {label} | {cells[0]} | {cells[1]} | {ratio} |")
    return out


def main() -> None:
    with open(sys.argv[1]) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    print("\n".join(summarize(rows)))


if __name__ == "__main__":
    main()
