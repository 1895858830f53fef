"""Starting and stopping a real standalone cluster for the tests.

``StandaloneCluster`` runs ``magnetar standalone`` (three child processes:
metastore, bookie, broker) on free loopback ports in a data directory, and
waits for ``endpoints.json`` with a deadline. Nothing is mocked.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def wait_for(
    predicate: Callable[[], Any], timeout_s: float, what: str, poll_s: float = 0.02
) -> Any:
    """Poll ``predicate`` until it returns a truthy value; fail after the deadline."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")
        time.sleep(poll_s)


class StandaloneCluster:
    def __init__(
        self,
        data_dir: Path,
        extra_args: list[str] | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.extra_args = extra_args or []
        # Settings for the children, e.g. MAGNETAR_BROKER_STATS_UPDATE_FREQUENCY_IN_SECS.
        self.env = env or {}
        self.proc: subprocess.Popen | None = None
        self.endpoints: dict[str, Any] = {}

    @property
    def service_url(self) -> str:
        return str(self.endpoints["service_url"])

    def start(self, timeout_s: float = 90) -> StandaloneCluster:
        endpoints = self.data_dir / "endpoints.json"
        endpoints.unlink(missing_ok=True)
        cmd = [
            sys.executable,
            "-m",
            "broker.cli",
            "standalone",
            "--data-dir",
            str(self.data_dir),
            "--metastore-port",
            "0",
            "--raft-port",
            "0",
            "--bookie-port",
            "0",
            "--broker-port",
            "0",
            "--metastore-metrics-port",
            "0",
            "--bookie-metrics-port",
            "0",
            "--broker-metrics-port",
            "0",
            *self.extra_args,
        ]
        self.data_dir.mkdir(parents=True, exist_ok=True)
        # A process group of its own, as under a container runtime: a test
        # may kill the whole group. What it prints goes to a file beside the
        # data dir (a pipe nobody reads could fill up).
        with open(self.supervisor_log, "a") as out:
            self.proc = subprocess.Popen(
                cmd,
                cwd=ROOT,
                stdout=out,
                stderr=out,
                text=True,
                start_new_session=True,
                env={**os.environ, **self.env},
            )

        def ready() -> bool:
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(
                    f"standalone exited with {self.proc.returncode}: {self.stderr_so_far()}"
                    f"\n{self.logs()}"
                )
            return endpoints.exists()

        wait_for(ready, timeout_s, "the standalone cluster to start")
        self.endpoints = json.loads(endpoints.read_text())
        return self

    @property
    def supervisor_log(self) -> Path:
        return self.data_dir.parent / f"{self.data_dir.name}.supervisor.log"

    def stderr_so_far(self) -> str:
        """What the supervisor printed (service URL, deaths and restarts)."""
        try:
            return self.supervisor_log.read_text()
        except FileNotFoundError:
            return ""

    def logs(self) -> str:
        out = []
        for log in sorted((self.data_dir / "logs").glob("*.log")):
            out.append(f"--- {log.name}\n{log.read_text()[-3000:]}")
        return "\n".join(out)

    def stop(self, timeout_s: float = 15) -> float:
        """SIGTERM the supervisor; returns how long the stop took."""
        if self.proc is None or self.proc.poll() is not None:
            return 0.0
        started = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=timeout_s)
        return time.monotonic() - started

    def kill9(self) -> None:
        """kill -9 the supervisor and every child: a crash of the whole machine's processes."""
        pids = list(self.endpoints.get("pids", {}).values())
        if self.proc is not None:
            pids.append(self.proc.pid)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.proc is not None:
            self.proc.wait(timeout=10)
        for pid in pids:
            wait_for(lambda p=pid: not _alive(p), 10, f"pid {pid} to die")  # type: ignore[misc]

    def child_pids_alive(self) -> list[int]:
        return [pid for pid in self.endpoints.get("pids", {}).values() if _alive(pid)]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return False


async def async_wait_for(
    predicate: Callable[[], Any], timeout_s: float, what: str, poll_s: float = 0.02
) -> Any:
    """``wait_for`` for coroutines: ``predicate`` may be async."""
    import asyncio
    import inspect

    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")
        await asyncio.sleep(poll_s)


def kill9_process(proc: subprocess.Popen) -> None:
    proc.kill()
    proc.wait(timeout=10)


def stop_process(proc: subprocess.Popen, timeout_s: float = 15) -> None:
    """SIGTERM, wait; kill -9 when it does not stop in time."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        kill9_process(proc)
        raise


class MetastoreCluster:
    """N ``magnetar metastore`` processes forming one Raft cluster on loopback."""

    def __init__(self, data_dir: Path, n: int = 3, settings: list[str] | None = None) -> None:
        from protos.serving import free_port

        self.data_dir = data_dir
        self.n = n
        self.settings = settings or []
        self.ids = [str(i + 1) for i in range(n)]
        self.ports = {i: (free_port(), free_port()) for i in self.ids}
        self.peers = ",".join(f"{i}=127.0.0.1:{c}:{r}" for i, (c, r) in self.ports.items())
        self.procs: dict[str, subprocess.Popen] = {}

    def address(self, node_id: str) -> str:
        return f"127.0.0.1:{self.ports[node_id][0]}"

    @property
    def addresses(self) -> list[str]:
        return [self.address(i) for i in self.ids]

    def start(self, node_id: str) -> None:
        node_dir = self.data_dir / f"node{node_id}"
        node_dir.mkdir(parents=True, exist_ok=True)
        ready = node_dir / "ready.json"
        ready.unlink(missing_ok=True)
        log = open(node_dir / "metastore.log", "a")  # noqa: SIM115 (kept by the process)
        cmd = [sys.executable, "-m", "broker.cli", "metastore"]
        if not self.peers:
            c, r = self.ports[node_id]
            cmd += ["--port", str(c), "--raft-port", str(r)]
        elif node_id == self.ids[-1] and self.n > 1:
            # The last node takes its identity from a config file, the others from flags.
            config = node_dir / "magnetar.toml"
            config.write_text(f'[metastore]\nnode_id = "{node_id}"\npeers = "{self.peers}"\n')
            cmd += ["--config", str(config)]
        else:
            cmd += ["--id", node_id, "--peers", self.peers]
        cmd += ["--data-dir", str(node_dir / "data")]
        cmd += ["--metrics-port", "-1", "--ready-file", str(ready)]
        for s in self.settings:
            cmd += ["--set", s]
        self.procs[node_id] = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=log)

    def start_all(self, timeout_s: float = 60) -> MetastoreCluster:
        for i in self.ids:
            self.start(i)
        for i in self.ids:
            self.wait_ready(i, timeout_s)
        return self

    def wait_ready(self, node_id: str, timeout_s: float = 60) -> None:
        ready = self.data_dir / f"node{node_id}" / "ready.json"

        def check() -> bool:
            proc = self.procs[node_id]
            if proc.poll() is not None:
                raise AssertionError(f"metastore {node_id} exited: {self.log(node_id)}")
            return ready.exists()

        wait_for(check, timeout_s, f"metastore node {node_id} to be ready")

    def log(self, node_id: str) -> str:
        path = self.data_dir / f"node{node_id}" / "metastore.log"
        return path.read_text()[-4000:] if path.exists() else ""

    def kill9(self, node_id: str) -> None:
        kill9_process(self.procs.pop(node_id))

    def stop(self, node_id: str, timeout_s: float = 15) -> None:
        stop_process(self.procs.pop(node_id), timeout_s)

    def stop_all(self) -> None:
        for i in list(self.procs):
            try:
                self.stop(i)
            except subprocess.TimeoutExpired:
                pass  # stop_process killed it


class BookieCluster:
    """A metastore (one node, or a Raft cluster of ``metastore_nodes``), N
    bookies and any number of brokers, as separate processes on loopback."""

    def __init__(
        self,
        data_dir: Path,
        n: int = 3,
        bookie_settings: list[str] | None = None,
        metastore_nodes: int = 1,
        broker_settings: list[str] | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.n = n
        self.metastore_nodes = metastore_nodes
        self.broker_settings = broker_settings or []
        self.bookie_settings = bookie_settings or []
        self.metastore: MetastoreCluster | None = None
        self.procs: dict[int, subprocess.Popen] = {}
        self.info: dict[int, dict] = {}
        self.brokers: dict[str, subprocess.Popen] = {}

    @property
    def metastore_address(self) -> str:
        assert self.metastore is not None
        return ",".join(self.metastore.addresses)

    def start_all(self, timeout_s: float = 60) -> BookieCluster:
        self.metastore = MetastoreCluster(self.data_dir / "metastore", self.metastore_nodes)
        if self.metastore_nodes == 1:
            self.metastore.peers = ""  # a one-node cluster
        self.metastore.start_all(timeout_s)
        for i in range(self.n):
            self.start(i)
        for i in range(self.n):
            self.wait_ready(i, timeout_s)
        return self

    def bookie_dir(self, i: int) -> Path:
        return self.data_dir / f"bookie{i}"

    def start(self, i: int, port: int = 0) -> None:
        """Start bookie ``i`` (``port``: its gRPC port, 0 for a free one)."""
        d = self.bookie_dir(i)
        d.mkdir(parents=True, exist_ok=True)
        ready = d / "ready.json"
        ready.unlink(missing_ok=True)
        log = open(d / "bookie.log", "a")  # noqa: SIM115 (kept by the process)
        cmd = [sys.executable, "-m", "broker.cli", "bookie", "--metastore", self.metastore_address]
        cmd += ["--data-dir", str(d / "data"), "--port", str(port), "--metrics-port", "-1"]
        cmd += ["--ready-file", str(ready)]
        for s in self.bookie_settings:
            cmd += ["--set", s]
        self.procs[i] = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=log)

    def wait_ready(self, i: int, timeout_s: float = 60) -> None:
        ready = self.bookie_dir(i) / "ready.json"

        def check() -> bool:
            if self.procs[i].poll() is not None:
                raise AssertionError(f"bookie {i} exited: {self.log(i)}")
            return ready.exists()

        wait_for(check, timeout_s, f"bookie {i} to be ready")
        self.info[i] = json.loads(ready.read_text())

    def log(self, i: int) -> str:
        path = self.bookie_dir(i) / "bookie.log"
        return path.read_text()[-4000:] if path.exists() else ""

    def index_of(self, bookie_id: str) -> int:
        return next(i for i, info in self.info.items() if info["bookie_id"] == bookie_id)

    def kill9(self, i: int) -> None:
        kill9_process(self.procs.pop(i))

    def stop(self, i: int, timeout_s: float = 15) -> None:
        stop_process(self.procs.pop(i), timeout_s)

    def stop_all(self) -> None:
        for name in list(self.brokers):
            try:
                stop_process(self.brokers.pop(name))
            except subprocess.TimeoutExpired:
                pass
        for i in list(self.procs):
            try:
                self.stop(i)
            except subprocess.TimeoutExpired:
                pass  # stop_process killed it
        if self.metastore is not None:
            self.metastore.stop_all()

    def start_broker(
        self, name: str = "broker", timeout_s: float = 60, settings: list[str] | None = None
    ) -> str:
        """Start a broker process on this cluster (``settings``: ``key=value``
        after the cluster's ``broker_settings``); returns its service URL."""
        d = self.data_dir / name
        d.mkdir(parents=True, exist_ok=True)
        ready = d / "ready.json"
        ready.unlink(missing_ok=True)
        log = open(d / "broker.log", "a")  # noqa: SIM115 (kept by the process)
        cmd = [sys.executable, "-m", "broker.cli", "broker", "--metastore", self.metastore_address]
        cmd += ["--port", "0", "--metrics-port", "-1", "--ready-file", str(ready)]
        for setting in [*self.broker_settings, *(settings or [])]:
            cmd += ["--set", setting]
        proc = self.brokers[name] = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=log)

        def check() -> bool:
            if proc.poll() is not None:
                raise AssertionError(f"broker exited: {(d / 'broker.log').read_text()[-3000:]}")
            return ready.exists()

        wait_for(check, timeout_s, f"{name} to be ready")
        return "magnetar://" + str(json.loads(ready.read_text())["grpc"])

    def kill9_broker(self, name: str = "broker") -> None:
        kill9_process(self.brokers.pop(name))
