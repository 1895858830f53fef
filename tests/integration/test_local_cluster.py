"""``magnetar local-cluster`` (``make cluster``): 3 metastore nodes, 3
bookies and 3 brokers from one command; clients produce and consume through
the printed multi-broker service URL; Ctrl-C stops every process."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from broker.local_cluster import BROKER_PORT, free_port_offset
from client import Client, InitialPosition
from client.admin import Admin
from metastore.client import MetastoreClient
from tests.harness import ROOT, wait_for
from tests.traffic import place_topic_on


def _free_offset() -> int:
    """A port offset under which every port of a 3x3x3 cluster is free."""
    offset = free_port_offset()
    assert offset is not None, "no free port range for the cluster"
    return offset


def _ledgers(metastores: str) -> list[dict]:
    async def read() -> list[dict]:
        ms = MetastoreClient(metastores)
        try:
            records, _ = await ms.list_prefix("/ledgers/")
            return [json.loads(r.value) for r in records if r.key != "/ledgers/id-counter"]
        finally:
            await ms.close()

    return asyncio.run(read())


def test_local_cluster_runs_three_of_each_and_stops_on_ctrl_c(tmp_path: Path):
    data = tmp_path / "data-cluster"
    offset = _free_offset()
    log = open(tmp_path / "supervisor.log", "w")  # noqa: SIM115 (kept by the process)
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "broker.cli", "local-cluster"),
            *("--data-dir", str(data), "--port-offset", str(offset)),
        ],
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    endpoints_file = data / "endpoints.json"
    try:
        wait_for(
            lambda: endpoints_file.exists() or proc.poll() is not None, 120, "the cluster to start"
        )
        assert proc.poll() is None, (tmp_path / "supervisor.log").read_text()
        endpoints = json.loads(endpoints_file.read_text())
        assert len(endpoints["metastores"]) == len(endpoints["bookies"]) == 3
        assert endpoints["brokers"] == [f"127.0.0.1:{BROKER_PORT + offset + i}" for i in range(3)]
        url = endpoints["service_url"]
        assert url == "magnetar://" + ",".join(endpoints["brokers"])
        with Client(url) as client:
            consumer = client.subscribe(
                "local-cluster", "s", initial_position=InitialPosition.Earliest
            )
            producer = client.create_producer("local-cluster")
            for i in range(20):
                producer.send(f"m{i}".encode())
            got = [consumer.receive(timeout_millis=10000).data() for _ in range(20)]
        assert got == [f"m{i}".encode() for i in range(20)]
        with Admin(url) as admin:
            assert sorted(admin.brokers.list()) == sorted(endpoints["brokers"])
            wait_for(
                lambda: admin.brokers.get_leader_broker()["serviceUrl"] in endpoints["brokers"],
                30,
                "a load manager leader",
            )
        # Ledgers are 2/2/2 (the cluster default), not standalone's 1/1/1.
        ledgers = _ledgers(",".join(endpoints["metastores"]))
        assert ledgers and {(md["ensemble_size"], md["write_quorum"]) for md in ledgers} == {(2, 2)}
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0
        for pid in endpoints["pids"].values():
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                continue
            raise AssertionError(f"child {pid} still runs after Ctrl-C")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
            for pid in (
                json.loads(endpoints_file.read_text())["pids"].values()
                if endpoints_file.exists()
                else []
            ):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


def _start(tmp_path: Path, *args: str) -> tuple[subprocess.Popen, dict]:
    data = tmp_path / "data-cluster"
    log = open(tmp_path / "supervisor.log", "w")  # noqa: SIM115 (kept by the process)
    proc = subprocess.Popen(
        [*(sys.executable, "-m", "broker.cli", "local-cluster"), "--data-dir", str(data), *args],
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    endpoints_file = data / "endpoints.json"
    wait_for(lambda: endpoints_file.exists() or proc.poll() is not None, 120, "the cluster")
    assert proc.poll() is None, (tmp_path / "supervisor.log").read_text()
    return proc, json.loads(endpoints_file.read_text())


def _writing_bookie(tmp_path: Path, metastores: list[str]) -> str:
    """The name of a bookie in the last ensemble of the newest open ledger."""
    run = tmp_path / "data-cluster" / "run"
    names = {
        json.loads(f.read_text())["bookie_id"]: f.name.split(".")[0]
        for f in run.glob("bookie-*.ready.json")
    }
    open_ledgers = [md for md in _ledgers(",".join(metastores)) if md["state"] == "OPEN"]
    newest = max(open_ledgers, key=lambda md: md["ctime_ms"])
    return names[newest["ensembles"][-1][1][0]]


def _states(tmp_path: Path) -> dict:
    return json.loads((tmp_path / "data-cluster" / "endpoints.json").read_text())  # type: ignore[no-any-return]


def test_local_cluster_keeps_serving_through_the_death_of_a_bookie_and_of_the_owning_broker(
    tmp_path: Path,
):
    """kill -9 of one bookie, then of the broker that owns the topic (the
    first one the service URL lists): the supervisor restarts them, the
    others serve throughout, and the producer and consumer made from the
    printed URL carry on by themselves; nothing acknowledged is lost."""
    config = tmp_path / "magnetar.toml"
    config.write_text("[broker]\nsession_ttl_ms = 4000\n")
    proc, endpoints = _start(
        tmp_path, "--port-offset", str(_free_offset()), "--config", str(config)
    )
    url, topic = endpoints["service_url"], "persistent://public/default/lc-failover"
    try:
        place_topic_on(f"magnetar://{endpoints['brokers'][0]}", topic)
        acked: list[bytes] = []
        with Client(url, operation_timeout_seconds=60) as client:
            consumer = client.subscribe(topic, "s", initial_position=InitialPosition.Earliest)
            producer = client.create_producer(topic, send_timeout_millis=60000)

            def send(tag: str) -> None:
                for i in range(20):
                    producer.send(f"{tag}{i}".encode())
                    acked.append(f"{tag}{i}".encode())

            send("a")
            # A bookie the topic's ledger is being written to, then the owner.
            for victim in (_writing_bookie(tmp_path, endpoints["metastores"]), "broker-0"):
                before = _states(tmp_path)["pids"]
                pid = before[victim]
                os.kill(pid, signal.SIGKILL)
                send(victim)  # resumes by itself once the others took over
                now = _states(tmp_path)
                others = {n: p for n, p in before.items() if n != victim}
                assert {n: now["pids"][n] for n in others} == others  # the rest kept running
                assert all(now["states"][n] == "running" for n in others)
                wait_for(
                    lambda v=victim, p=pid: (
                        _states(tmp_path)["states"][v] == "running"  # type: ignore[misc]
                        and _states(tmp_path)["pids"][v] != p
                    ),
                    60,
                    f"the {victim} to be restarted",
                )
            got: set[bytes] = set()
            while len(got) < len(acked):
                msg = consumer.receive(timeout_millis=60000)
                consumer.acknowledge(msg)
                got.add(msg.data())
        assert got == set(acked)
        assert proc.poll() is None
    finally:
        _stop(proc, tmp_path)


def _stop(proc: subprocess.Popen, tmp_path: Path) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the children die with it
            proc.wait(10)
