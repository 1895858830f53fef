"""The shipped monitoring files as the tests read them: Prometheus' scrape
config and rules (deploy/prometheus) and the Grafana dashboards
(deploy/grafana), with every PromQL query a dashboard sends and Grafana's
variable substitution, so a query can be checked by promtool or sent to a
real Prometheus as Grafana would send it."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
PROMETHEUS_DIR = ROOT / "deploy" / "prometheus"
SCRAPE_CONFIG = PROMETHEUS_DIR / "prometheus.yml"
RULE_TESTS = sorted((PROMETHEUS_DIR / "tests").glob("*.yml"))
GRAFANA_DIR = ROOT / "deploy" / "grafana"

# Grafana's interval variables; the tests give them one duration.
INTERVAL_VARIABLES = frozenset({"__rate_interval", "__interval", "__range"})
# $var, ${var}, ${var:format} and [[var]]; "$1" in label_replace is no variable.
_VARIABLE = re.compile(r"\$\{(\w+)(?::[^}]*)?\}|\$([A-Za-z_]\w*)|\[\[(\w+)(?::\w+)?\]\]")
_LABEL_VALUES = re.compile(
    r"^\s*label_values\((?:(?P<selector>.*),)?\s*(?P<label>\w+)\s*\)\s*$", re.S
)


def scrape_config() -> dict[str, Any]:
    return dict(yaml.safe_load(SCRAPE_CONFIG.read_text()))


def rule_file_patterns() -> list[str]:
    """The config's rule_files as absolute globs (they are relative to it)."""
    return [str(PROMETHEUS_DIR / pattern) for pattern in scrape_config()["rule_files"]]


def rule_files() -> list[Path]:
    return sorted(
        path for pattern in scrape_config()["rule_files"] for path in PROMETHEUS_DIR.glob(pattern)
    )


def rule_groups() -> list[dict[str, Any]]:
    return [group for path in rule_files() for group in yaml.safe_load(path.read_text())["groups"]]


def rules() -> list[dict[str, Any]]:
    return [rule for group in rule_groups() for rule in group["rules"]]


def recorded_names() -> set[str]:
    """The series names the recording rules make."""
    return {rule["record"] for rule in rules() if "record" in rule}


def dashboards() -> dict[str, dict[str, Any]]:
    """File name -> dashboard."""
    return {path.name: json.loads(path.read_text()) for path in sorted(GRAFANA_DIR.glob("*.json"))}


def panels(dashboard: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel, those inside collapsed rows too; rows themselves are left out."""
    for panel in dashboard.get("panels", []):
        if panel.get("type") == "row":
            yield from panels(panel)
        else:
            yield panel


def query_variables(dashboard: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [v for v in dashboard["templating"]["list"] if v.get("type") == "query"]


def variable_query(variable: Mapping[str, Any]) -> str:
    """A query variable's query: a string, or an object with "query" (Grafana ≥ 10)."""
    query = variable["query"]
    return str(query["query"] if isinstance(query, dict) else query)


@dataclass(frozen=True)
class LabelValues:
    """Grafana's ``label_values([selector,] label)`` variable query."""

    selector: str | None
    label: str


def label_values(query: str) -> LabelValues:
    m = _LABEL_VALUES.match(query)
    if m is None:
        raise ValueError(f"not a label_values(...) query: {query!r}")
    selector = m["selector"].strip() if m["selector"] else None
    return LabelValues(selector, m["label"])


@dataclass(frozen=True)
class DashboardQuery:
    dashboard: str  # file name
    where: str  # panel title, or "variable NAME"
    expr: str


def panel_queries(name: str, dashboard: Mapping[str, Any]) -> list[DashboardQuery]:
    return [
        DashboardQuery(name, f"panel {panel.get('title')!r}", str(target.get("expr", "")))
        for panel in panels(dashboard)
        for target in panel.get("targets", [])
    ]


def variables_used(expr: str) -> set[str]:
    return {next(g for g in m.groups() if g) for m in _VARIABLE.finditer(expr)}


def substitute(expr: str, values: Mapping[str, str], interval: str = "1m") -> str:
    """``expr`` as Grafana sends it: variables replaced by ``values``, the
    interval variables by ``interval``. An unknown variable raises KeyError."""

    def value(m: re.Match[str]) -> str:
        name = next(g for g in m.groups() if g)
        return interval if name in INTERVAL_VARIABLES else values[name]

    return _VARIABLE.sub(value, expr)
