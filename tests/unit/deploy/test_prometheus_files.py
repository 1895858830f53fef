"""The shipped monitoring files, checked offline: promtool accepts the
scrape config and the rules, and the rules' unit tests
(deploy/prometheus/tests) pass; every alert has a `for:`, a severity and
people-facing annotations, and is exercised by a unit test; every Grafana
dashboard (deploy/grafana) is well formed, reads its data source from a
variable, and holds queries that tests/promql.py can read and promtool
can parse once Grafana's variables are substituted.

The live check, that every name they use is one the processes export and
that a real Prometheus answers every query, is
tests/integration/test_prometheus.py."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.monitoring import (
    RULE_TESTS,
    SCRAPE_CONFIG,
    dashboards,
    label_values,
    panel_queries,
    panels,
    query_variables,
    rule_files,
    rules,
    substitute,
    variable_query,
    variables_used,
)
from tests.promql import selected_metrics

SEVERITIES = {"warning", "critical"}
# Values for Grafana's variables when a query is only parsed.
PLACEHOLDERS = {
    "cluster": "standalone",
    "namespace": "public/default",
    "topic": "persistent://public/default/t",
    "subscription": "s",
    "instance": "127.0.0.1:8000",
}


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (Debian's `prometheus` package): not checked")
    return subprocess.run(
        [promtool, *args], capture_output=True, text=True, timeout=120, cwd=SCRAPE_CONFIG.parent
    )


def test_promtool_accepts_the_scrape_config() -> None:
    done = _promtool("check", "config", str(SCRAPE_CONFIG))
    assert done.returncode == 0, done.stdout + done.stderr


def test_promtool_accepts_the_rules() -> None:
    assert rule_files(), "the scrape config's rule_files match no file"
    done = _promtool("check", "rules", *map(str, rule_files()))
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_rules_unit_tests_pass() -> None:
    assert RULE_TESTS
    done = _promtool("test", "rules", *map(str, RULE_TESTS))
    assert done.returncode == 0, done.stdout + done.stderr


def _alerts() -> list[dict[str, Any]]:
    return [rule for rule in rules() if "alert" in rule]


def test_every_alert_waits_has_a_severity_and_says_what_is_wrong() -> None:
    alerts = _alerts()
    assert len({a["alert"] for a in alerts}) == len(alerts), "two alerts share a name"
    for alert in alerts:
        name = alert["alert"]
        assert alert.get("for"), f"{name} has no for:"
        assert alert.get("labels", {}).get("severity") in SEVERITIES, name
        annotations = alert.get("annotations", {})
        assert annotations.get("summary") and annotations.get("description"), name


def test_every_alert_is_shown_firing_by_a_unit_test() -> None:
    fired = set()
    for path in RULE_TESTS:
        for case in yaml.safe_load(path.read_text())["tests"]:
            for check in case.get("alert_rule_test", []):
                if check.get("exp_alerts"):
                    fired.add(check["alertname"])
    assert {a["alert"] for a in _alerts()} - fired == set()


def test_every_rule_expression_is_readable() -> None:
    for rule in rules():
        found = selected_metrics(rule["expr"])
        assert found.names or found.patterns, rule


DASHBOARDS = dashboards()


def test_there_are_the_dashboards_operators_expect() -> None:
    uids = [d["uid"] for d in DASHBOARDS.values()]
    assert len(set(uids)) == len(uids), "two dashboards share a uid"
    assert set(uids) >= {
        "magnetar-overview",
        "magnetar-topic",
        "magnetar-subscription",
        "magnetar-bookie",
        "magnetar-metastore",
    }


@pytest.mark.parametrize("name", sorted(DASHBOARDS))
def test_dashboard_is_well_formed(name: str) -> None:
    dashboard = DASHBOARDS[name]
    assert dashboard["uid"] and dashboard["title"]
    assert dashboard["schemaVersion"] >= 36
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(set(ids)) == len(ids), "two panels share an id"
    for panel in panels(dashboard):
        title = panel.get("title")
        assert title, panel
        assert panel["datasource"]["uid"] == "${datasource}", title
        pos = panel["gridPos"]
        assert pos["x"] >= 0 and pos["x"] + pos["w"] <= 24, title
        targets = panel.get("targets", [])
        assert targets, f"panel {title!r} has no query"
        assert len({t["refId"] for t in targets}) == len(targets), title
        for target in targets:
            assert target["expr"].strip(), f"panel {title!r} has an empty query"
            assert target["datasource"]["uid"] == "${datasource}", title


@pytest.mark.parametrize("name", sorted(DASHBOARDS))
def test_dashboard_queries_select_metrics_and_use_defined_variables(name: str) -> None:
    dashboard = DASHBOARDS[name]
    defined = {v["name"] for v in dashboard["templating"]["list"]}
    builtin = {"__rate_interval", "__interval", "__range"}
    for query in panel_queries(name, dashboard):
        found = selected_metrics(query.expr)
        assert found.names or found.patterns, f"{query.where} selects no metric"
        assert variables_used(query.expr) <= defined | builtin, query.where
    earlier: set[str] = set()
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            selector = label_values(variable_query(variable)).selector
            assert selector is not None, f"variable {variable['name']}: no metric to ask"
            assert selected_metrics(selector).names, variable["name"]
            # Grafana resolves variables in order: a query uses only earlier ones.
            assert variables_used(selector) <= earlier, variable["name"]
        earlier.add(variable["name"])


def test_promtool_parses_every_dashboard_query(tmp_path: Path) -> None:
    """Each query, variables substituted, as a recording rule: promtool
    check rules parses it as Prometheus would."""
    exprs = []
    for name, dashboard in DASHBOARDS.items():
        exprs += [(f"{name} {q.where}", q.expr) for q in panel_queries(name, dashboard)]
        for variable in query_variables(dashboard):
            selector = label_values(variable_query(variable)).selector
            exprs.append((f"{name} variable {variable['name']}", str(selector)))
    # Each record named after its panel, so promtool's error says which.
    records = [
        {"record": re.sub(r"\W+", "_", f"{where} {i}"), "expr": substitute(expr, PLACEHOLDERS)}
        for i, (where, expr) in enumerate(exprs)
    ]
    path = tmp_path / "dashboard-queries.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboards", "rules": records}]}))
    done = _promtool("check", "rules", str(path))
    assert done.returncode == 0, done.stdout + done.stderr
