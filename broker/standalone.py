"""``magnetar standalone``: metastore, bookie and broker as three child
processes under one supervisor.

Each child is started with ``--ready-file``; it writes the addresses it
listens on there once it serves. The supervisor starts them in dependency
order (metastore, bookie, broker), waits for each one's ready file *and* a
SERVING answer from its gRPC health service, then writes
``<data-dir>/endpoints.json`` and prints the service URL. SIGTERM or SIGINT
stops the children in reverse order; one that has not exited in time is
killed, so the whole stop stays under 10 s. If a child dies, the rest are
stopped and the supervisor exits non-zero.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

STOP_BUDGET_S = 9.0


class StartupError(RuntimeError):
    pass


@dataclass
class Child:
    role: str
    proc: subprocess.Popen
    ready_file: Path
    info: dict = field(default_factory=dict)


def health_serving(address: str, timeout_s: float = 1.0) -> bool:
    with grpc.insecure_channel(address) as channel:
        try:
            resp = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=""), timeout=timeout_s
            )
        except grpc.RpcError:
            return False
    return resp.status == health_pb2.HealthCheckResponse.SERVING


class Supervisor:
    def __init__(
        self,
        data_dir: Path,
        *,
        metastore_port: int,
        raft_port: int,
        bookie_port: int,
        broker_port: int,
        metrics_ports: tuple[int, int, int],
        config_file: str | None,
        startup_timeout_s: float = 60.0,
    ) -> None:
        self.data_dir = data_dir.resolve()
        self.ports = {
            "metastore": metastore_port,
            "bookie": bookie_port,
            "broker": broker_port,
        }
        self.raft_port = raft_port
        self.metrics_ports = dict(
            zip(("metastore", "bookie", "broker"), metrics_ports, strict=True)
        )
        self.config_file = config_file
        self.startup_timeout_s = startup_timeout_s
        self.children: list[Child] = []
        self._stopping = False
        self.stop_budget_s = STOP_BUDGET_S

    def _spawn(self, role: str, extra: list[str]) -> Child:
        child = self._launch(role, role, self.ports[role], self.metrics_ports[role], extra)
        self._await_ready(child)
        return child

    def _launch(
        self, name: str, role: str, port: int, metrics_port: int, extra: list[str]
    ) -> Child:
        """Start one child process (``name`` names its log and ready files)."""
        run_dir = self.data_dir / "run"
        logs = self.data_dir / "logs"
        run_dir.mkdir(parents=True, exist_ok=True)
        logs.mkdir(parents=True, exist_ok=True)
        ready = run_dir / f"{name}.ready.json"
        ready.unlink(missing_ok=True)
        cmd = [
            sys.executable,
            "-m",
            "broker.cli",
            role,
            "--port",
            str(port),
            "--metrics-port",
            str(metrics_port),
            "--ready-file",
            str(ready),
            *extra,
        ]
        if self.config_file:
            cmd += ["--config", self.config_file]
        log_file = open(logs / f"{name}.log", "ab")  # noqa: SIM115 - owned by the child
        proc = subprocess.Popen(
            cmd, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True
        )
        log_file.close()
        child = Child(name, proc, ready)
        self.children.append(child)
        return child

    def _await_ready(self, child: Child) -> None:
        """Until the child wrote its ready file and its health service says SERVING."""
        deadline = time.monotonic() + self.startup_timeout_s
        log = self.data_dir / "logs" / f"{child.role}.log"
        while time.monotonic() < deadline:
            if self._stopping:
                raise StartupError("stopped while starting")
            if child.proc.poll() is not None:
                raise StartupError(
                    f"the {child.role} exited with code {child.proc.returncode} while "
                    f"starting; see {log}"
                )
            if child.ready_file.exists():
                child.info = json.loads(child.ready_file.read_text())
                if health_serving(child.info["grpc"]):
                    return
            time.sleep(0.05)
        raise StartupError(
            f"the {child.role} did not become ready within {self.startup_timeout_s:g} s"
        )

    def start(self) -> dict:
        ms = self._spawn(
            "metastore",
            ["--data-dir", str(self.data_dir / "metastore"), "--raft-port", str(self.raft_port)],
        )
        bk = self._spawn(
            "bookie",
            ["--data-dir", str(self.data_dir / "bookie"), "--metastore", ms.info["grpc"]],
        )
        # One bookie: ledgers of one copy (a cluster's default is 2/2/2). One
        # broker: bundle records of an earlier run are its own, taken over at once.
        one_copy = [
            f"managed_ledger_default_{q}=1" for q in ("ensemble_size", "write_quorum", "ack_quorum")
        ] + ["take_over_stale_bundles=true"]
        br = self._spawn(
            "broker",
            ["--metastore", ms.info["grpc"], *[a for s in one_copy for a in ("--set", s)]],
        )
        endpoints = {
            "service_url": f"magnetar://{br.info['grpc']}",
            "broker": br.info["grpc"],
            "bookie": bk.info["grpc"],
            "metastore": ms.info["grpc"],
            "metrics": {c.role: c.info.get("metrics") for c in self.children},
            "pids": {c.role: c.proc.pid for c in self.children},
            "supervisor_pid": os.getpid(),
        }
        self.write_endpoints(endpoints)
        return endpoints

    def write_endpoints(self, endpoints: dict) -> None:
        """``<data-dir>/endpoints.json``, replaced atomically."""
        tmp = self.data_dir / "endpoints.json.tmp"
        tmp.write_text(json.dumps(endpoints, indent=2))
        os.replace(tmp, self.data_dir / "endpoints.json")

    def stop(self) -> None:
        self._stopping = True
        deadline = time.monotonic() + self.stop_budget_s
        for child in reversed(self.children):
            if child.proc.poll() is None:
                child.proc.send_signal(signal.SIGTERM)
                # Each child gets a share of what is left; the metastore goes last.
                left = deadline - time.monotonic()
                try:
                    child.proc.wait(timeout=max(0.5, left / 2))
                except subprocess.TimeoutExpired:
                    child.proc.kill()
                    child.proc.wait(timeout=2)
        (self.data_dir / "endpoints.json").unlink(missing_ok=True)

    def wait(self) -> int:
        """Block until a signal or a child's death; returns the exit code."""
        stop = {"signal": None}

        def on_signal(signum: int, frame: object) -> None:
            stop["signal"] = signum  # type: ignore[assignment]

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        while stop["signal"] is None:
            for child in self.children:
                if child.proc.poll() is not None:
                    print(
                        f"magnetar: the {child.role} exited with code {child.proc.returncode}; "
                        "stopping",
                        file=sys.stderr,
                    )
                    self.stop()
                    return 1
            time.sleep(0.2)
        self.stop()
        return 0


def run(supervisor: Supervisor) -> int:
    def early_stop(signum: int, frame: object) -> None:
        supervisor._stopping = True

    signal.signal(signal.SIGTERM, early_stop)
    signal.signal(signal.SIGINT, early_stop)
    try:
        endpoints = supervisor.start()
    except StartupError as exc:
        print(f"magnetar: {exc}", file=sys.stderr)
        supervisor.stop()
        return 1
    print(endpoints["service_url"], flush=True)
    return supervisor.wait()
