"""The report of a ``magnetar verify`` run: the verdict, figures per fault
(the longest gap between two acknowledgements a producer saw while it was
on and until the next fault: the outage), and a timeline plot of
throughput with the faults drawn over it (``timeline.svg``, no plotting
library needed). Pure over the history, apart from writing the files."""

from __future__ import annotations

import itertools
import json
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from client.verify_checker import Verdict

PLOT_W, PLOT_H, MARGIN = 1000, 320, 50
# How long after a fault ends its outage window lasts, at most (until the
# next fault otherwise).
AFTER_FAULT_S = 60.0


def timeline(events: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Per-second counts and acknowledgement times from the history."""
    acks: Counter[int] = Counter()
    recvs: Counter[int] = Counter()
    ack_times: list[float] = []
    faults: list[dict[str, Any]] = []
    end = 0.0
    for e in events:
        end = max(end, e["t"])
        if e["k"] == "sent" and not e.get("err"):
            acks[int(e["t"])] += 1
            ack_times.append(e["t"])
        elif e["k"] == "recv":
            recvs[int(e["t"])] += 1
        elif e["k"] == "fault":
            faults.append(e)
    return {"acks": acks, "recvs": recvs, "ack_times": ack_times, "faults": faults, "end": end}


def longest_gap(times: list[float], start: float, end: float) -> float:
    """The longest time without an acknowledgement whose middle falls in
    [start, end] (so a gap is counted for the fault it mostly overlaps,
    not also for the one before it). ``times`` sorted."""
    best = 0.0
    for a, b in itertools.pairwise(times):
        if start <= (a + b) / 2 <= end:
            best = max(best, b - a)
    return round(best, 3)


def fault_outages(tl: dict[str, Any]) -> list[dict[str, Any]]:
    times = sorted(tl["ack_times"])
    faults = tl["faults"]
    out = []
    for i, f in enumerate(faults):
        until = faults[i + 1]["t"] if i + 1 < len(faults) else tl["end"]
        window_end = min(until, f["end"] + AFTER_FAULT_S)
        out.append(
            {
                "at_s": round(f["t"], 1),
                "fault": f["label"],
                "held_s": round(f["end"] - f["t"], 2),
                "recovered_s": f.get("recovered_s"),
                "longest_ack_gap_s": longest_gap(times, f["t"], window_end),
                **({"error": f["error"]} if f.get("error") else {}),
            }
        )
    return out


def outage_by_kind(outages: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    by: dict[str, list[float]] = {}
    for o in outages:
        by.setdefault(o["fault"].split()[0], []).append(o["longest_ack_gap_s"])
    return {
        kind: {"faults": len(gaps), "max_s": max(gaps), "median_s": sorted(gaps)[len(gaps) // 2]}
        for kind, gaps in sorted(by.items())
    }


def svg(tl: dict[str, Any], title: str) -> str:
    """Acknowledgements and deliveries per second, faults as shaded bands."""
    end = max(1.0, tl["end"])
    peak = max([1, *tl["acks"].values(), *tl["recvs"].values()])
    w, h = PLOT_W - 2 * MARGIN, PLOT_H - 2 * MARGIN

    def x(t: float) -> float:
        return MARGIN + w * t / end

    def y(v: float) -> float:
        return MARGIN + h * (1 - v / peak)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{PLOT_W}" height="{PLOT_H}" '
        'font-family="sans-serif" font-size="11">',
        f'<rect width="{PLOT_W}" height="{PLOT_H}" fill="white"/>',
        f'<text x="{MARGIN}" y="20" font-size="14">{_esc(title)}</text>',
    ]
    for f in tl["faults"]:
        x0, x1 = x(f["t"]), max(x(f["end"]), x(f["t"]) + 1)
        parts.append(
            f'<rect x="{x0:.1f}" y="{MARGIN}" width="{x1 - x0:.1f}" height="{h}" '
            f'fill="#d62728" fill-opacity="0.18"><title>{_esc(f["label"])}</title></rect>'
        )
        parts.append(
            f'<text x="{x0:.1f}" y="{MARGIN - 4}" font-size="9" fill="#d62728">'
            f"{_esc(f['label'].split()[0])}</text>"
        )
    for series, colour in ((tl["acks"], "#1f77b4"), (tl["recvs"], "#2ca02c")):
        points = " ".join(f"{x(s):.1f},{y(series.get(s, 0)):.1f}" for s in range(int(end) + 1))
        parts.append(
            f'<polyline points="{points}" fill="none" stroke="{colour}" stroke-width="1"/>'
        )
    parts += [
        f'<line x1="{MARGIN}" y1="{MARGIN + h}" x2="{MARGIN + w}" y2="{MARGIN + h}" stroke="black"/>',
        f'<line x1="{MARGIN}" y1="{MARGIN}" x2="{MARGIN}" y2="{MARGIN + h}" stroke="black"/>',
        f'<text x="{MARGIN - 5}" y="{MARGIN + 4}" text-anchor="end">{peak}/s</text>',
        f'<text x="{MARGIN - 5}" y="{MARGIN + h}" text-anchor="end">0</text>',
        f'<text x="{MARGIN + w}" y="{MARGIN + h + 15}" text-anchor="end">{end:.0f} s</text>',
        f'<text x="{MARGIN}" y="{PLOT_H - 10}" fill="#1f77b4">acknowledged sends/s</text>',
        f'<text x="{MARGIN + 160}" y="{PLOT_H - 10}" fill="#2ca02c">deliveries/s (all subscriptions)</text>',
        f'<text x="{MARGIN + 380}" y="{PLOT_H - 10}" fill="#d62728">faults</text>',
        "</svg>",
    ]
    return "\n".join(parts)


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def write(out: Path, verdict: Verdict, tl: dict[str, Any], run: dict[str, Any]) -> dict[str, Any]:
    """report.json, report.md and timeline.svg in ``out``; returns the report."""
    outages = fault_outages(tl)
    times = sorted(tl["ack_times"])
    problems = doubts(verdict, outages)
    judged = verdict.to_json()
    if judged["verdict"] == "PASS" and problems:
        judged["verdict"] = "INCONCLUSIVE"
    report = {
        **judged,
        "doubts": problems,
        "run": run,
        "duration_s": round(tl["end"], 1),
        "longest_ack_gap_s": longest_gap(times, 0.0, tl["end"]),
        "outage_by_fault_kind": outage_by_kind(outages),
        "faults": outages,
    }
    (out / "report.json").write_text(json.dumps(report, indent=2))
    (out / "timeline.svg").write_text(svg(tl, f"magnetar verify: {report['verdict']}"))
    (out / "report.md").write_text(markdown(report))
    return report


def doubts(verdict: Verdict, outages: list[dict[str, Any]]) -> list[str]:
    """Why a run without anomalies still proves little: a fault that could
    not be injected or undone, a cluster that did not recover, no traffic."""
    out = [f"{o['fault']} at {o['at_s']} s: {o['error']}" for o in outages if o.get("error")]
    out += [
        f"{o['fault']} at {o['at_s']} s: the cluster was not healthy again within the wait"
        for o in outages
        if o["recovered_s"] is None and not o.get("error")
    ]
    if verdict.counts.get("acknowledged", 0) == 0:
        out.append("no send was acknowledged")
    return out


def markdown(report: dict[str, Any]) -> str:
    c = report["counts"]
    lines = [
        f"# magnetar verify: {report['verdict']}",
        "",
        f"{report['duration_s']} s, {len(report['faults'])} faults; sends {c['sends']}, "
        f"acknowledged {c['acknowledged']}, failed {c['failed']}, no receipt "
        f"{c['no_receipt']}, answered by deduplication {c['dedup_receipts']}.",
        f"Longest gap between acknowledgements: {report['longest_ack_gap_s']} s.",
        "",
        *[f"- doubt: {d}" for d in report["doubts"]],
        "",
        "![timeline](timeline.svg)",
        "",
        "| anomaly | count |",
        "|---|---|",
        *[f"| {k} | {n} |" for k, n in report["anomalies"].items()],
        "",
        "| subscription | type | delivered | redelivered |",
        "|---|---|---|---|",
        *[
            f"| {name} | {s['type']} | {s['delivered']} | {s['redelivered']} |"
            for name, s in c["subscriptions"].items()
        ],
        "",
        "| fault kind | faults | longest ack gap, max (s) | median (s) |",
        "|---|---|---|---|",
        *[
            f"| {k} | {v['faults']} | {v['max_s']} | {v['median_s']} |"
            for k, v in report["outage_by_fault_kind"].items()
        ],
        "",
        "| at (s) | fault | held (s) | healthy again after (s) | longest ack gap (s) |",
        "|---|---|---|---|---|",
        *[
            f"| {f['at_s']} | {f['fault']} | {f['held_s']} | {f['recovered_s']} | "
            f"{f['longest_ack_gap_s']} |"
            for f in report["faults"]
        ],
        "",
        *[f"- {e['kind']} ({e['subscription']}): {e['detail']}" for e in report["examples"]],
    ]
    return "\n".join(lines) + "\n"
