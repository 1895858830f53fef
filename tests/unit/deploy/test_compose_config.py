"""The compose files (deploy/compose), checked offline: `docker-compose
config -q` accepts them (no engine needed), and the cluster file keeps its
invariants: only the brokers' client ports and Prometheus are published,
on 127.0.0.1; every Magnetar service has an init, a health check by
`magnetar health` and a named volume where it keeps data; bookies wait for
healthy metastore nodes and brokers for healthy bookies; the peer list
names every metastore service; Prometheus scrapes every process with the
scrape config and rules of deploy/prometheus, mounted where the config
finds its rules."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
COMPOSE = ROOT / "deploy" / "compose"
PROMETHEUS = ROOT / "deploy" / "prometheus"
FILES = ["docker-compose.yml", "standalone.yml"]
METRICS_PORT = {"metastore": 7000, "bookie": 8000, "broker": 8080}


@pytest.mark.parametrize("name", FILES)
def test_docker_compose_accepts_the_file(name: str) -> None:
    if shutil.which("docker-compose") is None:
        pytest.skip("docker-compose is not installed: compose files not validated")
    done = subprocess.run(
        ["docker-compose", "-f", str(COMPOSE / name), "config", "-q"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr


def _config(name: str) -> dict[str, Any]:
    """The file with ${VAR:-default} replaced by its default."""
    text = re.sub(r"\$\{[A-Z0-9_]+:-([^}]*)\}", r"\1", (COMPOSE / name).read_text())
    return dict(yaml.safe_load(text))


def _role(service: str) -> str:
    return service.rstrip("0123456789")


def test_cluster_file_invariants() -> None:
    cfg = _config("docker-compose.yml")
    services: dict[str, Any] = cfg["services"]
    roles = {s: _role(s) for s in services}
    assert sorted(roles.values()) == sorted(
        ["metastore"] * 3 + ["bookie"] * 3 + ["broker"] * 2 + ["prometheus"]
    )
    for name, svc in services.items():
        published = svc.get("ports", [])
        if roles[name] in ("broker", "prometheus"):
            assert published and all(p.startswith("127.0.0.1:") for p in published), name
        else:
            assert not published, f"{name} publishes {published}"
        assert svc["init"] is True, name
        assert svc["healthcheck"]["test"][0] == "CMD", name
        if roles[name] == "prometheus":
            continue
        assert svc["healthcheck"]["test"][1:3] == ["magnetar", "health"], name
        command = svc["command"]
        if roles[name] != "broker":
            assert "--data-dir /data" in command, name
            assert svc["volumes"] == [f"{name}:/data"], name
            assert name in cfg["volumes"]
        if roles[name] == "broker":
            # The broker listens on the port it is published on.
            port = re.search(r"--port (\d+)", command)
            assert port is not None and svc["ports"] == [f"127.0.0.1:{port[1]}:{port[1]}"]
            assert svc["healthcheck"]["test"][3] == f"127.0.0.1:{port[1]}"

    metastores = [s for s, r in roles.items() if r == "metastore"]
    for name in metastores:
        cmd = services[name]["command"]
        peers = re.search(r"--peers (\S+)", cmd)
        node = re.search(r"--id (\S+)", cmd)
        assert peers is not None and node is not None
        entries = peers[1].split(",")
        assert entries == [f"{i + 1}=metastore{i + 1}:2379:2380" for i in range(len(metastores))]
        assert f"{node[1]}={name}:2379:2380" in entries
    clients = ",".join(f"{m}:2379" for m in metastores)
    waits = {"bookie": "metastore", "broker": "bookie"}
    for name, role in roles.items():
        if role in waits:
            assert f"--metastore {clients}" in services[name]["command"], name
            deps = services[name]["depends_on"]
            assert sorted(deps) == sorted(s for s, r in roles.items() if r == waits[role])
            assert all(d["condition"] == "service_healthy" for d in deps.values())


def test_prometheus_scrapes_every_process() -> None:
    cfg = _config("docker-compose.yml")
    scrape = yaml.safe_load((PROMETHEUS / "prometheus.yml").read_text())
    targets = {
        (job["job_name"], t)
        for job in scrape["scrape_configs"]
        for sc in job["static_configs"]
        for t in sc["targets"]
    }
    expected = {
        (_role(name), f"{name}:{METRICS_PORT[_role(name)]}")
        for name in cfg["services"]
        if _role(name) in METRICS_PORT
    }
    assert targets == expected
    assert all(
        job.get("metrics_path", "/metrics") == "/metrics" for job in scrape["scrape_configs"]
    )


def test_prometheus_mounts_the_shipped_config_and_rules() -> None:
    """One scrape config (deploy/prometheus) and its rules, mounted where the
    config's relative rule_files find them in the container."""
    mounts = _config("docker-compose.yml")["services"]["prometheus"]["volumes"]
    binds = {}
    for mount in mounts:
        source, target, *_ = mount.split(":")
        if source.startswith("."):
            binds[target] = (COMPOSE / source).resolve()
    config_target = "/etc/prometheus/prometheus.yml"
    assert binds[config_target] == PROMETHEUS / "prometheus.yml"
    scrape = yaml.safe_load((PROMETHEUS / "prometheus.yml").read_text())
    for pattern in scrape["rule_files"]:
        directory, _, glob = pattern.rpartition("/")
        in_container = str(PurePosixPath(config_target).parent / directory)
        assert in_container in binds, f"rule_files {pattern!r}: {in_container} is not mounted"
        assert list(binds[in_container].glob(glob)), f"rule_files {pattern!r} matches no file"
    assert not (COMPOSE / "prometheus.yml").exists(), "a second scrape config in deploy/compose"


def test_standalone_file() -> None:
    (svc,) = _config("standalone.yml")["services"].values()
    assert svc["init"] is True
    assert svc["ports"] == ["127.0.0.1:6650:6650"]
    assert svc["volumes"] == ["data:/data"]
    assert svc["environment"]["MAGNETAR_BROKER_ADVERTISED_ADDRESS"] == "127.0.0.1"
