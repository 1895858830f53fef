"""A cluster for partition tests: every process in its own network
namespace of a :class:`tests.netlab.NetLab`, on the standard ports of its
own address (metastore nodes m1.., bookies b1.., brokers k1..). The test
process reaches them over the lab's bridge, as a client would."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.harness import ROOT, kill9_process, stop_process, wait_for
from tests.netlab import NetLab

METASTORE_PORT, RAFT_PORT, BOOKIE_PORT, BROKER_PORT = 2379, 2380, 3181, 6650


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
        log = open(d / "process.log", "a")  # noqa: SIM115 (kept by the process)
        self.procs[name] = self.lab.popen(
            name, self._command(name), cwd=ROOT, stdout=log, stderr=log
        )

    def wait_ready(self, name: str, timeout_s: float = 60) -> None:
        ready = self.data_dir / name / "ready.json"

        def check() -> bool:
            if self.procs[name].poll() is not None:
                raise AssertionError(f"{name} exited: {self.log(name)}")
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
        kill9_process(self.procs.pop(name))

    def stop_all(self) -> None:
        for name in [*self.brokers, *self.bookies, *self.metastores]:
            proc = self.procs.pop(name, None)
            if proc is not None:
                try:
                    stop_process(proc, 10)
                except Exception:  # the lab kills what is left
                    kill9_process(proc)
