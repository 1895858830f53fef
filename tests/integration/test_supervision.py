"""Process supervision as a container runtime exercises it (issue 19):
``kill -9`` of the whole standalone, a second start on the same data dir,
taken ports, a child that dies, a broker stopped while the metastore is
gone. Real processes on loopback ports; nothing is mocked."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from client import Client, InitialPosition
from tests.harness import ROOT, StandaloneCluster, _alive, wait_for

MAGNETAR = [sys.executable, "-m", "broker.cli"]
FREE_PORTS = [
    *("--metastore-port", "0", "--raft-port", "0", "--bookie-port", "0", "--broker-port", "0"),
    *("--metastore-metrics-port", "-1", "--bookie-metrics-port", "-1"),
    *("--broker-metrics-port", "-1"),
]


def _magnetar(*args: str, timeout_s: float = 5) -> subprocess.CompletedProcess[str]:
    """``magnetar ARGS``, which must end within ``timeout_s`` (a refusal is at once)."""
    return subprocess.run(
        [*MAGNETAR, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout_s
    )


def _produce(url: str, topic: str, n: int, tag: str) -> list[bytes]:
    """Send ``n`` messages; returns the ones acknowledged (all of them)."""
    sent = [f"{tag}{i}".encode() for i in range(n)]
    with Client(url) as c:
        producer = c.create_producer(topic)
        for body in sent:
            producer.send(body)
    return sent


def _consume_all(url: str, topic: str, sub: str, n: int) -> list[bytes]:
    with Client(url) as c:
        consumer = c.subscribe(topic, sub, initial_position=InitialPosition.Earliest)
        got = []
        for _ in range(n):
            msg = consumer.receive(timeout_millis=15000)
            consumer.acknowledge(msg)
            got.append(msg.data())
    return got


def _endpoints(cluster: StandaloneCluster) -> dict:
    return json.loads((cluster.data_dir / "endpoints.json").read_text())  # type: ignore[no-any-return]


LOOPBACK = {"0100007F": "127.0.0.1", "0000000000000000FFFF00000100007F": "127.0.0.1"}


def _listening_on(port: int) -> set[str]:
    """The local addresses sockets listen on at ``port`` (IPv4-mapped IPv6
    ones, as gRPC binds, read as IPv4); anything but loopback by its hex."""
    hosts = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            local, state = row.split()[1], row.split()[3]
            host, _, hex_port = local.partition(":")
            if state == "0A" and int(hex_port, 16) == port:  # LISTEN
                hosts.add(LOOPBACK.get(host, host))
    return hosts


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A port something else listens on for the test's length."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


def test_kill9_of_the_process_group_leaves_no_process_and_a_new_start_serves_every_ack(
    fresh_cluster, topic
):
    cluster = fresh_cluster.start()
    acked = _produce(cluster.service_url, topic, 50, "k")
    children = list(cluster.endpoints["pids"].values())
    assert cluster.proc is not None
    os.killpg(cluster.proc.pid, signal.SIGKILL)  # what a container runtime does
    cluster.proc.wait(timeout=5)
    wait_for(lambda: not any(_alive(p) for p in children), 5, f"children {children} to die")
    cluster.start()  # same data dir: nothing stale holds a port or a lock
    assert _consume_all(cluster.service_url, topic, "after-kill", 50) == acked


def test_a_second_standalone_on_the_same_data_dir_is_refused_and_the_first_keeps_serving(
    fresh_cluster, topic
):
    cluster = fresh_cluster.start()
    assert cluster.proc is not None
    second = _magnetar("standalone", "--data-dir", str(cluster.data_dir), *FREE_PORTS)
    assert second.returncode == 1
    assert f"is in use by pid {cluster.proc.pid} (magnetar standalone)" in second.stderr, (
        second.stderr
    )
    assert cluster.proc.poll() is None and len(cluster.child_pids_alive()) == 3
    acked = _produce(cluster.service_url, topic, 5, "s")
    assert _consume_all(cluster.service_url, topic, "second", 5) == acked
    # A bare metastore on the standalone's metastore directory is refused too.
    ms = _magnetar(
        *("metastore", "--data-dir", str(cluster.data_dir / "metastore")),
        *("--port", "0", "--raft-port", "0", "--metrics-port", "-1"),
    )
    assert ms.returncode == 1
    assert f"pid {cluster.endpoints['pids']['metastore']} (metastore)" in ms.stderr, ms.stderr


@pytest.mark.parametrize(
    ("flag", "what"),
    [
        ("--raft-port", "raft"),
        ("--broker-port", "broker gRPC"),
        ("--bookie-metrics-port", "bookie metrics"),
    ],
)
def test_a_taken_port_stops_standalone_at_once_with_one_line(tmp_path, taken_port, flag, what):
    args = list(FREE_PORTS)
    args[args.index(flag) + 1] = str(taken_port)
    out = _magnetar("standalone", "--data-dir", str(tmp_path / "data"), *args)
    assert out.returncode == 1
    assert out.stderr.strip().splitlines() == [
        f"magnetar: port {taken_port} ({what}) is in use on 127.0.0.1"
    ]
    assert not (tmp_path / "data" / "logs").exists()  # nothing was started


@pytest.mark.parametrize("flag", ["--raft-port", "--port", "--metrics-port"])
def test_a_taken_port_stops_a_metastore_at_once_with_one_line(tmp_path, taken_port, flag):
    args = {"--port": "0", "--raft-port": "0", "--metrics-port": "-1", flag: str(taken_port)}
    what = {"--raft-port": "raft", "--port": "gRPC", "--metrics-port": "metrics"}[flag]
    out = _magnetar(
        "metastore", "--data-dir", str(tmp_path), *(a for kv in args.items() for a in kv)
    )
    assert out.returncode == 1
    assert out.stderr.strip().splitlines() == [
        f"Error: port {taken_port} ({what}) is in use on 127.0.0.1"
    ]


@pytest.mark.parametrize("role", ["metastore", "bookie", "broker"])
def test_a_dead_child_is_restarted_and_serves_what_was_acknowledged(fresh_cluster, topic, role):
    cluster = fresh_cluster.start()
    acked = _produce(cluster.service_url, topic, 20, "r")
    pid = cluster.endpoints["pids"][role]
    os.kill(pid, signal.SIGKILL)

    def restarted() -> bool:
        e = _endpoints(cluster)
        return bool(e["pids"][role] != pid and e["states"][role] == "running")

    wait_for(restarted, 30, f"the {role} to be restarted")
    assert cluster.proc is not None and cluster.proc.poll() is None
    assert len(cluster.child_pids_alive()) == 2  # the two others never stopped
    acked += _produce(cluster.service_url, topic, 5, "after")
    assert _consume_all(cluster.service_url, topic, "restart", 25) == acked
    assert f"the {role} exited (code -9); restarting it in 1 s" in cluster.stderr_so_far()


def test_a_child_left_running_by_a_dead_supervisor_is_reported_not_taken_over(tmp_path):
    data = tmp_path / "data"
    orphan = subprocess.Popen(
        [
            *(*MAGNETAR, "metastore", "--data-dir", str(data / "metastore")),
            *("--port", "0", "--raft-port", "0", "--metrics-port", "-1"),
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: (data / "metastore" / "magnetar.lock").exists(), 10, "the orphan")
        # The supervisor first gives the holder 5 s to go (one just killed).
        out = _magnetar("standalone", "--data-dir", str(data), *FREE_PORTS, timeout_s=15)
        assert out.returncode == 1
        assert f"in use by pid {orphan.pid} (metastore), left running by an earlier" in out.stderr
        assert orphan.poll() is None
    finally:
        orphan.kill()
        orphan.wait()


def test_with_no_restart_a_dead_child_stays_down_and_the_rest_keeps_running(tmp_path):
    cluster = StandaloneCluster(tmp_path / "data", ["--no-restart"]).start()
    try:
        broker = cluster.endpoints["pids"]["broker"]
        os.kill(broker, signal.SIGKILL)
        wait_for(lambda: _endpoints(cluster)["states"]["broker"] == "down", 10, "broker down")
        assert cluster.proc is not None and cluster.proc.poll() is None
        assert _endpoints(cluster)["pids"]["broker"] == broker
        assert sorted(cluster.child_pids_alive()) == sorted(
            [cluster.endpoints["pids"]["metastore"], cluster.endpoints["pids"]["bookie"]]
        )
    finally:
        cluster.stop()


@pytest.mark.parametrize("role", ["broker", "bookie"])
def test_sigterm_of_a_process_whose_metastore_is_gone_exits_within_shutdown_timeout(
    tmp_path, topic, role
):
    config = tmp_path / "magnetar.toml"
    config.write_text(f"[{role}]\nshutdown_timeout_s = 3\n")
    cluster = StandaloneCluster(tmp_path / "data", ["--no-restart", "--config", str(config)])
    cluster.start()
    try:
        with Client(cluster.service_url) as c:  # a topic with a cursor to persist
            c.subscribe(topic, "s")
            c.create_producer(topic).send(b"x")
        pids = cluster.endpoints["pids"]
        os.kill(pids["metastore"], signal.SIGKILL)
        wait_for(lambda: not _alive(pids["metastore"]), 5, "the metastore to die")
        started = time.monotonic()
        os.kill(pids[role], signal.SIGTERM)
        # The bound is shutdown_timeout_s (3 s here); 2 s of margin for a
        # loaded machine. Without it a broker took ~30 s.
        wait_for(lambda: not _alive(pids[role]), 5, f"the {role} to exit")
        assert time.monotonic() - started < 5
        log = (cluster.data_dir / "logs" / f"{role}.log").read_text()
        assert f"{role} stopped" in log  # its own stop ran to the end, not the last-resort timer
    finally:
        cluster.stop()


def test_the_raft_port_of_a_standalone_listens_on_loopback_only(fresh_cluster):
    cluster = fresh_cluster.start()
    raft = json.loads((cluster.data_dir / "run" / "metastore.ready.json").read_text())["raft"]
    assert _listening_on(int(raft.rpartition(":")[2])) == {"127.0.0.1"}


def test_what_processes_advertise_is_advertised_address_not_the_bind_address(tmp_path, topic):
    config = tmp_path / "magnetar.toml"
    config.write_text(
        "".join(
            f'[{r}]\nadvertised_address = "localhost"\n' for r in ("metastore", "bookie", "broker")
        )
    )
    cluster = StandaloneCluster(tmp_path / "data", ["--config", str(config)]).start()
    try:
        e = cluster.endpoints
        assert [e["service_url"].partition("//")[2], e["bookie"], e["metastore"]] == [
            f"localhost:{a.rpartition(':')[2]}" for a in (e["broker"], e["bookie"], e["metastore"])
        ]
        assert e["broker"].startswith("localhost:")
        with Client(cluster.service_url) as c:  # lookups answer the advertised name
            consumer = c.subscribe(topic, "s")
            c.create_producer(topic).send(b"via localhost")
            assert consumer.receive(timeout_millis=10000).data() == b"via localhost"
        assert _listening_on(int(e["broker"].rpartition(":")[2])) == {"127.0.0.1"}
    finally:
        cluster.stop()


def test_a_supervisor_checks_its_children_where_they_listen_not_where_they_are_advertised(tmp_path):
    """An advertised name this machine cannot resolve (a public DNS name, a
    pod name) does not stop the standalone from starting."""
    config = tmp_path / "magnetar.toml"
    config.write_text(
        "".join(
            f'[{r}]\nadvertised_address = "magnetar-test.invalid"\n'
            for r in ("metastore", "bookie", "broker")
        )
    )
    cluster = StandaloneCluster(tmp_path / "data", ["--config", str(config)]).start()
    try:
        assert cluster.service_url.startswith("magnetar://magnetar-test.invalid:")
        assert cluster.endpoints["states"] == dict.fromkeys(
            ("metastore", "bookie", "broker"), "running"
        )
    finally:
        cluster.stop()


def test_a_bad_peer_list_is_one_line(tmp_path):
    out = _magnetar("metastore", "--data-dir", str(tmp_path), "--id", "1", "--peers", "1=nonsense")
    assert out.returncode == 1
    assert out.stderr.strip().splitlines() == [
        "Error: peer '1=nonsense': expected ID=HOST:CLIENT_PORT:RAFT_PORT"
    ]
