"""A real Prometheus scraping a real standalone, with the shipped rules
loaded unchanged, and the shipped Grafana dashboards held to what both
serve.

One standalone (stats interval 2 s, so rates and per-interval buckets move
within the deadlines) and one ``prometheus`` on free loopback ports for the
module; Prometheus scrapes the three processes every second with the jobs
of deploy/prometheus/prometheus.yml. The traffic: N messages sent one by
one to a topic with subscriptions A and B made first at Earliest; A
receives and acknowledges M < N of them, B nothing. Then, through
Prometheus' query API: the published count, the topic backlog summed over
both subscriptions, A's backlog, the namespace recording rule, every
target up, every shipped rule group loaded, evaluated and healthy. And for
every dashboard: each name its queries and the rules use is one a live
scrape exports (or a recording rule makes), every variable query has
values, and Prometheus answers every panel query, with data.

Skipped, in one line, when ``prometheus`` is not installed."""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from client import Client, InitialPosition
from protos.serving import free_port
from tests.harness import StandaloneCluster, stop_process, wait_for
from tests.metrics_scrape import scrape
from tests.monitoring import (
    dashboards,
    label_values,
    panel_queries,
    panels,
    query_variables,
    recorded_names,
    rule_file_patterns,
    rule_groups,
    rules,
    scrape_config,
    substitute,
    variable_query,
)
from tests.promql import selected_metrics

STATS_INTERVAL_S = 2
DEADLINE_S = 60
N_SENT = 30
BATCH = 5  # messages per entry: backlogs must count messages, not the 6 entries
M_ACKED_ON_A = 10  # two whole entries (a part of a batch acknowledges no entry)
# Series Prometheus makes for every target itself.
SCRAPE_SERIES = {
    "up",
    "scrape_duration_seconds",
    "scrape_samples_scraped",
    "scrape_samples_post_metric_relabeling",
    "scrape_series_added",
}


class PrometheusServer:
    """``prometheus`` on a free loopback port, its data and log in ``workdir``."""

    def __init__(self, workdir: Path, metrics_ports: dict[str, int]) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.metrics_ports = metrics_ports
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def log(self) -> Path:
        return self.workdir / "prometheus.log"

    def write_config(self) -> Path:
        """The shipped jobs and rule files; our ports; a 1 s interval."""
        shipped = scrape_config()
        jobs = [
            {
                "job_name": job["job_name"],
                "metrics_path": job.get("metrics_path", "/metrics"),
                "static_configs": [
                    {"targets": [f"127.0.0.1:{self.metrics_ports[job['job_name']]}"]}
                ],
            }
            for job in shipped["scrape_configs"]
        ]
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": rule_file_patterns(),
            "scrape_configs": jobs,
        }
        path = self.workdir / "prometheus.yml"
        path.write_text(yaml.safe_dump(config))
        return path

    def start(self) -> PrometheusServer:
        config = self.write_config()
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [
                    "prometheus",
                    f"--config.file={config}",
                    f"--storage.tsdb.path={self.workdir / 'tsdb'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                ],
                cwd=self.workdir,
                stdout=log,
                stderr=log,
                start_new_session=True,
            )

        def ready() -> bool:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"prometheus exited: {self.log.read_text()[-3000:]}")
            return self.get("/-/ready")[0] == 200

        wait_for(ready, DEADLINE_S, "Prometheus to be ready", 0.2)
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            stop_process(self.proc)

    def get(self, path: str, **params: str) -> tuple[int, Any]:
        """Status and body (JSON when it is) of a GET; a refused connection is 0."""
        url = f"{self.url}{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(url, timeout=10) as resp:
                status, body = resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            status, body = exc.code, exc.read()
        except OSError:
            return 0, None
        try:
            return status, json.loads(body)
        except ValueError:
            return status, body.decode(errors="replace")

    def api(self, path: str, **params: str) -> Any:
        status, body = self.get(path, **params)
        assert status == 200 and body["status"] == "success", (path, params, status, body)
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        return list(self.api("/api/v1/query", query=expr)["result"])

    def value(self, expr: str) -> float | None:
        """The value of a query that selects one series, else None."""
        result = self.query(expr)
        return float(result[0]["value"][1]) if len(result) == 1 else None


@dataclass
class Monitored:
    cluster: StandaloneCluster
    prometheus: PrometheusServer
    topic: str  # full name


def _traffic(url: str, topic: str) -> None:
    """N sent in batches of BATCH; A acknowledges M, B receives nothing."""
    client = Client(url)
    try:
        on_a = client.subscribe(topic, "A", initial_position=InitialPosition.Earliest)
        client.subscribe(topic, "B", initial_position=InitialPosition.Earliest).close()
        producer = client.create_producer(
            topic, batching_max_messages=BATCH, batching_max_publish_delay_ms=60_000
        )
        for i in range(N_SENT):
            producer.send_async(f"m{i}".encode(), None)  # a batch goes out when full
        producer.flush()
        for _ in range(M_ACKED_ON_A):
            on_a.acknowledge(on_a.receive(timeout_millis=DEADLINE_S * 1000))
        on_a.close()  # sends the grouped acknowledgements
    finally:
        client.close()


@pytest.fixture(scope="module")
def monitored(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Monitored]:
    if shutil.which("prometheus") is None:
        pytest.skip("prometheus is not installed (Debian's `prometheus` package): skipped")
    workdir = tmp_path_factory.mktemp("prometheus")
    cluster = StandaloneCluster(
        workdir / "data",
        env={"MAGNETAR_BROKER_STATS_UPDATE_FREQUENCY_IN_SECS": str(STATS_INTERVAL_S)},
    )
    prometheus: PrometheusServer | None = None
    try:
        cluster.start()
        ports = {role: int(port) for role, port in cluster.endpoints["metrics"].items()}
        prometheus = PrometheusServer(workdir, ports).start()
        topic = "persistent://public/default/prometheus-check"
        _traffic(cluster.service_url, topic)
        yield Monitored(cluster, prometheus, topic)
    finally:
        if prometheus is not None:
            prometheus.stop()
        try:
            cluster.stop()
        except subprocess.TimeoutExpired:
            cluster.kill9()


def _until_none(problems: Callable[[], list[str]], what: str) -> None:
    """Poll ``problems`` until it finds none; fail with the last ones found."""
    last: list[str] = []

    def none() -> bool:
        last[:] = problems()
        return not last

    try:
        wait_for(none, DEADLINE_S, what, 0.5)
    except AssertionError:
        pytest.fail(f"after {DEADLINE_S} s, {what}:\n" + "\n".join(last))


def _eventually_equal(prometheus: PrometheusServer, expr: str, expected: float) -> None:
    def differs() -> list[str]:
        seen = prometheus.value(expr)
        return [] if seen == expected else [f"{seen} through Prometheus, expected {expected}"]

    _until_none(differs, expr)


def test_prometheus_sees_the_counts_the_traffic_made(monitored: Monitored) -> None:
    prom, topic = monitored.prometheus, monitored.topic
    _eventually_equal(prom, f'pulsar_in_messages_total{{topic="{topic}"}}', N_SENT)
    # Backlogs count messages: A's unacknowledged ones plus all of B's.
    backlog = (N_SENT - M_ACKED_ON_A) + N_SENT
    _eventually_equal(prom, f'pulsar_msg_backlog{{topic="{topic}"}}', backlog)
    _eventually_equal(
        prom,
        f'pulsar_subscription_back_log{{topic="{topic}", subscription="A"}}',
        N_SENT - M_ACKED_ON_A,
    )
    _eventually_equal(
        prom, f'pulsar_subscription_back_log{{topic="{topic}", subscription="B"}}', N_SENT
    )
    # The shipped recording rule, evaluated by Prometheus (the only topic).
    _eventually_equal(prom, 'namespace:pulsar_msg_backlog:sum{namespace="public/default"}', backlog)


def test_every_process_is_up(monitored: Monitored) -> None:
    prom = monitored.prometheus
    for job in ("metastore", "bookie", "broker"):
        _eventually_equal(prom, f'up{{job="{job}"}}', 1)

    def all_up() -> bool:
        targets = prom.api("/api/v1/targets")["activeTargets"]
        return len(targets) == 3 and all(t["health"] == "up" for t in targets)

    wait_for(all_up, DEADLINE_S, "every target up in /api/v1/targets", 0.5)


def test_every_shipped_rule_group_is_loaded_and_healthy(monitored: Monitored) -> None:
    prom = monitored.prometheus
    shipped = {g["name"]: len(g["rules"]) for g in rule_groups()}
    never = "0001-01-01T00:00:00Z"  # lastEvaluation before the first one

    def evaluated() -> list[dict[str, Any]] | None:
        groups = prom.api("/api/v1/rules")["groups"]
        done = all(r["lastEvaluation"] != never for g in groups for r in g["rules"]) and {
            g["name"] for g in groups
        } == set(shipped)
        return groups if done else None

    groups = wait_for(evaluated, DEADLINE_S, "every rule evaluated once", 0.5)
    assert {g["name"]: len(g["rules"]) for g in groups} == shipped
    unhealthy = [
        (r["name"], r["health"], r.get("lastError"))
        for g in groups
        for r in g["rules"]
        if r["health"] != "ok"
    ]
    assert unhealthy == []


def _exported(monitored: Monitored) -> set[str]:
    """Every series name the three processes' /metrics hold now."""
    names = set(SCRAPE_SERIES | recorded_names())
    for port in monitored.cluster.endpoints["metrics"].values():
        names |= scrape(int(port)).names()
    return names


def _unknown_names(monitored: Monitored) -> list[str]:
    """Names the dashboards and rules use that no live scrape exports."""
    exported = _exported(monitored)
    unknown = []
    for rule in rules():
        for name in selected_metrics(rule["expr"]).missing_from(exported):
            unknown.append(f"rule {rule.get('alert') or rule.get('record')}: {name}")
    for file, dashboard in dashboards().items():
        exprs = [(q.where, q.expr) for q in panel_queries(file, dashboard)]
        for variable in query_variables(dashboard):
            exprs.append((f"variable {variable['name']}", variable_query(variable)))
        for where, expr in exprs:
            for name in selected_metrics(expr).missing_from(exported):
                unknown.append(f"{file} {where}: {name}")
    return unknown


def test_dashboards_and_rules_use_only_exported_names(monitored: Monitored) -> None:
    # Per-topic and subscription series exist once a stats interval has
    # seen the traffic: names still unknown after the deadline are reported.
    _until_none(lambda: _unknown_names(monitored), "names no process exports")


def _variable_values(
    prom: PrometheusServer, file: str, dashboard: dict[str, Any], topic: str
) -> tuple[dict[str, str], list[str]]:
    """Each variable resolved as Grafana resolves it (in order, through the
    series API), taking the test's topic and subscription A where offered;
    and what went wrong."""
    preferred = {"namespace": "public/default", "topic": topic, "subscription": "A"}
    values: dict[str, str] = {}
    for variable in query_variables(dashboard):
        name = variable["name"]
        query = label_values(variable_query(variable))
        selector = substitute(query.selector or "up", values)
        series = prom.api("/api/v1/series", **{"match[]": selector})
        offered = sorted({s[query.label] for s in series if query.label in s})
        choice = preferred.get(name, offered[0] if offered else None)
        if choice not in offered:
            return values, [f"{file} variable {name}: {choice!r} not among {offered}"]
        values[name] = str(choice)
    return values, []


def _dashboard_problems(prom: PrometheusServer, topic: str) -> list[str]:
    """Panels with a query Prometheus refuses, or with no data at all."""
    problems = []
    for file, dashboard in dashboards().items():
        values, unresolved = _variable_values(prom, file, dashboard, topic)
        problems += unresolved
        if unresolved:
            continue
        for panel in panels(dashboard):
            answered = False
            for target in panel["targets"]:
                expr = substitute(target["expr"], values)
                status, body = prom.get("/api/v1/query", query=expr)
                if status != 200 or body["status"] != "success":
                    problems.append(f"{file} {panel['title']!r}: {status} {body} for {expr}")
                else:
                    answered = answered or bool(body["data"]["result"])
            if not answered:
                problems.append(f"{file} {panel['title']!r}: no data from any of its queries")
    return problems


def test_prometheus_answers_every_dashboard_query_with_data(monitored: Monitored) -> None:
    # Rates need two scrapes in their window and the namespace panels an
    # evaluation of the recording rules: the first rounds may lack data.
    _until_none(
        lambda: _dashboard_problems(monitored.prometheus, monitored.topic),
        "dashboard panels failing or without data",
    )
