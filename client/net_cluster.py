"""A cluster for partitions: every process in its own network namespace of
a :class:`client.netlab.NetLab`, on the standard ports of its own address
(metastore nodes m1.., bookies b1.., brokers k1..). The process that made
it (``magnetar verify --netns``, a test) reaches them over the lab's
bridge, as a client would. The processes are ``python -m broker.cli``
of the interpreter running this (Magnetar must be installed in it)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from client.netlab import NetLab

METASTORE_PORT, RAFT_PORT, BOOKIE_PORT, BROKER_PORT = 2379, 2380, 3181, 6650


class NetClusterError(RuntimeError):
    """A process of the cluster exited or did not get ready in time."""


def wait_for(predicate: Callable[[], Any], timeout_s: float, what: str) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise NetClusterError(f"timed out after {timeout_s:g} s waiting for {what}")
        time.sleep(0.05)  # polling the condition, bounded by the deadline


def _kill9(proc: subprocess.Popen) -> None:
    proc.kill()
    proc.wait(timeout=10)


def _stop(proc: subprocess.Popen, timeout_s: float) -> None:
    """SIGTERM, wait; kill -9 when it does not stop in time."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill9(proc)


class NetCluster:
    def __init__(
        self,
        lab: NetLab,
        data_dir: Path,
        metastores: int = 1,
        bookies: int = 3,
        brokers: int = 2,
        settings: dict[str, list[str]] | None = None,
    ) -> None:
        """``settings``: ``key=value`` lists per kind ("metastore", "bookie", "broker")."""
        self.lab = lab
        self.data_dir = data_dir
        self.settings = settings or {}
        self.metastores = [f"m{i + 1}" for i in range(metastores)]
        self.bookies = [f"b{i + 1}" for i in range(bookies)]
        self.brokers = [f"k{i + 1}" for i in range(brokers)]
        for name in [*self.metastores, *self.bookies, *self.brokers]:
            lab.add_host(name)
        self.procs: dict[str, subprocess.Popen] = {}
        self.ready: dict[str, dict] = {}

    def ip(self, name: str) -> str:
        return self.lab.hosts[name].ip

    @property
    def metastore_address(self) -> str:
        return ",".join(f"{self.ip(m)}:{METASTORE_PORT}" for m in self.metastores)

    def url(self, broker: str) -> str:
        return f"magnetar://{self.ip(broker)}:{BROKER_PORT}"

    @property
    def service_url(self) -> str:
        """Every broker, as a client configured with the whole list."""
        return "magnetar://" + ",".join(f"{self.ip(k)}:{BROKER_PORT}" for k in self.brokers)

    def _command(self, name: str) -> list[str]:
        ip, d = self.ip(name), self.data_dir / name
        common = ["--bind-address", ip, "--advertised-address", ip, "--metrics-port", "-1"]
        common += ["--ready-file", str(d / "ready.json")]
        if name in self.metastores:
            i = self.metastores.index(name) + 1
            peers = ",".join(
                f"{k + 1}={self.ip(m)}:{METASTORE_PORT}:{RAFT_PORT}"
                for k, m in enumerate(self.metastores)
            )
            kind = ["metastore", "--data-dir", str(d / "data"), "--port", str(METASTORE_PORT)]
            kind += ["--raft-port", str(RAFT_PORT)]
            if len(self.metastores) > 1:
                kind += ["--id", str(i), "--peers", peers]
            extra = self.settings.get("metastore", [])
        elif name in self.bookies:
            kind = ["bookie", "--metastore", self.metastore_address, "--data-dir", str(d / "data")]
            kind += ["--port", str(BOOKIE_PORT)]
            extra = self.settings.get("bookie", [])
        else:
            kind = ["broker", "--metastore", self.metastore_address, "--port", str(BROKER_PORT)]
            extra = self.settings.get("broker", [])
        cmd = [sys.executable, "-m", "broker.cli", *kind, *common]
        for setting in extra:
            cmd += ["--set", setting]
        return cmd

    def start(self, name: str) -> None:
        d = self.data_dir / name
        d.mkdir(parents=True, exist_ok=True)
        (d / "ready.json").unlink(missing_ok=True)
        with open(d / "process.log", "a") as log:  # the process keeps its own copy
            self.procs[name] = self.lab.popen(name, self._command(name), stdout=log, stderr=log)

    def wait_ready(self, name: str, timeout_s: float = 60) -> None:
        ready = self.data_dir / name / "ready.json"

        def check() -> bool:
            if self.procs[name].poll() is not None:
                raise NetClusterError(f"{name} exited: {self.log(name)}")
            return ready.exists()

        wait_for(check, timeout_s, f"{name} to be ready")
        self.ready[name] = json.loads(ready.read_text())

    def start_all(self, timeout_s: float = 60) -> NetCluster:
        for group in (self.metastores, self.bookies, self.brokers):
            for name in group:
                self.start(name)
            for name in group:
                self.wait_ready(name, timeout_s)
        return self

    def log(self, name: str) -> str:
        path = self.data_dir / name / "process.log"
        return path.read_text()[-4000:] if path.exists() else ""

    def kill9(self, name: str) -> None:
        _kill9(self.procs.pop(name))

    def roles(self) -> dict[str, str]:
        """Each process's name and role ("metastore", "bookie", "broker")."""
        return {
            **{m: "metastore" for m in self.metastores},
            **{b: "bookie" for b in self.bookies},
            **{k: "broker" for k in self.brokers},
        }

    def stop_all(self) -> None:
        for name in [*self.brokers, *self.bookies, *self.metastores]:
            proc = self.procs.pop(name, None)
            if proc is not None:
                _stop(proc, 10)
