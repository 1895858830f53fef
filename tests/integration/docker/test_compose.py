"""The compose cluster (deploy/compose/docker-compose.yml) on a real engine:
it comes up healthy with Prometheus scraping all eight processes; a
producer and a consumer on the host run through the published broker
ports while one bookie and then the broker owning the topic are killed
(`docker kill`), and nothing acknowledged is lost; `docker-compose down`
(volumes kept) then `up` serves what was stored before.

Clients on the host reach the brokers by the names they advertise (broker1,
broker2) through a private /etc/hosts (tests/integration/docker/host_client.py)."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.harness import wait_for
from tests.integration.docker.compose import ComposeCluster
from tests.integration.docker.engine import can_map_hosts, events, host_client

BROKERS = ["broker1", "broker2"]


@pytest.fixture(scope="module")
def cluster(
    docker_images: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ComposeCluster]:
    if subprocess.run(["docker-compose", "version"], capture_output=True).returncode != 0:
        pytest.skip("docker-compose is not installed: compose tests skipped")
    if not can_map_hosts():
        pytest.skip("host clients need root and unshare to map the brokers' names")
    c = ComposeCluster(tmp_path_factory.mktemp("compose-logs"))
    try:
        up_s = c.up()
        print(f"compose cluster start-to-healthy: {up_s:.1f} s")
        yield c
    finally:
        c.save_logs()
        c.down(volumes=True)


def _prometheus_targets(url: str) -> list[dict[str, Any]]:
    try:
        with urllib.request.urlopen(f"{url}/api/v1/targets", timeout=5) as resp:
            return list(json.load(resp)["data"]["activeTargets"])
    except OSError:
        return []


def test_cluster_is_healthy_and_prometheus_scrapes_every_process(cluster: ComposeCluster) -> None:
    def all_up() -> list[dict[str, Any]] | None:
        targets = _prometheus_targets(cluster.prometheus_url)
        ok = len(targets) == 8 and all(t["health"] == "up" for t in targets)
        return targets if ok else None

    targets = wait_for(all_up, 60, "Prometheus to scrape all 8 processes", 0.5)
    jobs = sorted(t["labels"]["job"] for t in targets)
    assert jobs == ["bookie"] * 3 + ["broker"] * 2 + ["metastore"] * 3


def _client(cluster: ComposeCluster, tmp: Path, mode: str, topic: str, *args: str) -> Path:
    out = tmp / f"{mode}-{time.monotonic_ns()}.jsonl"
    if "--url" not in args:
        args = ("--url", cluster.service_url, *args)
    proc = host_client(BROKERS, mode, "--topic", topic, "--out", str(out), *args)
    _running[out] = proc
    return out


_running: dict[Path, subprocess.Popen[str]] = {}


def _finish(out: Path, timeout_s: float = 120) -> list[dict[str, Any]]:
    proc = _running.pop(out)
    try:
        _, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    evs = events(out)
    errors = [e["error"] for e in evs if "error" in e]
    assert proc.returncode == 0 and not errors, f"client failed: {errors} {stderr[-2000:]}"
    return evs


def _acked(out: Path) -> list[dict[str, Any]]:
    return [e for e in events(out) if "ack" in e]


def _assert_client_alive(out: Path) -> None:
    proc = _running[out]
    if proc.poll() is not None:
        raise AssertionError(f"host client exited early: {proc.communicate()[1][-2000:]}")


def _wait_acks(out: Path, count: int, what: str, timeout_s: float = 120) -> list[dict[str, Any]]:
    def enough() -> list[dict[str, Any]] | None:
        _assert_client_alive(out)
        acked = _acked(out)
        return acked if len(acked) >= count else None

    return list(wait_for(enough, timeout_s, what, 0.05))


def test_killing_a_bookie_then_the_owning_broker_loses_no_acknowledged_message(
    cluster: ComposeCluster, tmp_path: Path
) -> None:
    topic = "persistent://public/default/compose-failover"
    found = _finish(_client(cluster, tmp_path, "lookup", topic))
    owner_url = next(e["owner"] for e in found if "owner" in e)
    owner = owner_url.removeprefix("magnetar://").rsplit(":", 1)[0]
    assert owner in BROKERS, owner_url
    (other,) = set(BROKERS) - {owner}
    # The service URL lists both brokers, the owner (to be killed) first: the
    # clients move on to the other one by themselves (service URL failover).
    url = ",".join((cluster.broker_url(owner), cluster.broker_url(other).partition("//")[2]))
    stop = tmp_path / "stop"
    out = _client(cluster, tmp_path, "traffic", topic, "--stop", str(stop), "--drain-s", "60",
                  "--url", url)  # fmt: skip
    try:
        acked = _wait_acks(out, 100, "100 acknowledged sends")

        # A bookie of the ledger being written: the writer replaces it.
        bookie = cluster.ledger_bookies(acked[-1]["ledger"])[0]
        cluster.kill(bookie)
        n = len(_acked(out))
        _wait_acks(out, n + 100, f"100 more sends after killing {bookie}")

        killed_at = cluster.kill(owner)
        n = len(_acked(out))
        after = _wait_acks(out, n + 100, f"100 more sends after killing {owner}", 180)
        next_ack_s = next(e["t"] for e in after[n - 1 :] if e["t"] > killed_at) - killed_at
        print(f"docker kill {owner} (owner) -> next acknowledged send: {next_ack_s:.2f} s")
    finally:
        stop.touch()
    evs = _finish(out)
    acked_ids = [e["ack"] for e in evs if "ack" in e]
    received = {e["recv"] for e in evs if "recv" in e}
    missing = sorted(set(acked_ids) - received)
    assert not missing, f"{len(missing)} acknowledged messages never received: {missing[:20]}"
    assert acked_ids == list(range(len(acked_ids)))

    # Bring the killed containers back for the next test.
    cluster.compose("up", "-d")
    cluster.wait_healthy()


def test_down_then_up_keeps_the_data(cluster: ComposeCluster, tmp_path: Path) -> None:
    topic = "persistent://public/default/compose-restart"
    produced = _finish(
        _client(cluster, tmp_path, "produce", topic, "--sub", "keep", "--count", "300")
    )
    assert [e["ack"] for e in produced if "ack" in e] == list(range(300))

    cluster.down(volumes=False)
    up_s = cluster.up()
    print(f"compose cluster restart-to-healthy (volumes kept): {up_s:.1f} s")

    consumed = _finish(_client(cluster, tmp_path, "consume", topic, "--sub", "keep",
                               "--drain-s", "30"))  # fmt: skip
    assert sorted({e["recv"] for e in consumed if "recv" in e}) == list(range(300))
