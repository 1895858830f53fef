"""The compose cluster of deploy/compose/docker-compose.yml under a project
name and host ports of its own, driven through `docker-compose` v1."""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from pathlib import Path

from protos.serving import free_port
from tests.harness import wait_for
from tests.integration.docker.engine import IMAGE, PROMETHEUS_IMAGE, ROOT, health, run

COMPOSE_FILE = ROOT / "deploy" / "compose" / "docker-compose.yml"
SERVICES = [
    *(f"metastore{i}" for i in (1, 2, 3)),
    *(f"bookie{i}" for i in (1, 2, 3)),
    "broker1",
    "broker2",
    "prometheus",
]
UP_TIMEOUT_S = 240


class ComposeCluster:
    def __init__(self, log_dir: Path) -> None:
        self.project = f"mgtest{uuid.uuid4().hex[:8]}"
        self.log_dir = log_dir
        self.ports = {
            "MAGNETAR_BROKER1_PORT": free_port(),
            "MAGNETAR_BROKER2_PORT": free_port(),
            "MAGNETAR_PROMETHEUS_PORT": free_port(),
        }
        self.env = {
            **os.environ,
            **{k: str(v) for k, v in self.ports.items()},
            "MAGNETAR_IMAGE": IMAGE,
            "MAGNETAR_PROMETHEUS_IMAGE": PROMETHEUS_IMAGE,
        }

    @property
    def service_url(self) -> str:
        b1, b2 = self.ports["MAGNETAR_BROKER1_PORT"], self.ports["MAGNETAR_BROKER2_PORT"]
        return f"magnetar://127.0.0.1:{b1},127.0.0.1:{b2}"

    def broker_url(self, service: str) -> str:
        """The service URL of one broker's published port."""
        return f"magnetar://127.0.0.1:{self.ports[f'MAGNETAR_{service.upper()}_PORT']}"

    @property
    def prometheus_url(self) -> str:
        return f"http://127.0.0.1:{self.ports['MAGNETAR_PROMETHEUS_PORT']}"

    def compose(self, *args: str, timeout_s: float = UP_TIMEOUT_S) -> str:
        cmd = ["docker-compose", "-p", self.project, "-f", str(COMPOSE_FILE), *args]
        done = subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=timeout_s)
        if done.returncode != 0:
            raise AssertionError(f"{' '.join(cmd)} exited {done.returncode}: {done.stderr[-3000:]}")
        return done.stdout

    def container(self, service: str) -> str:
        return self.compose("ps", "-q", service).strip()

    def up(self) -> float:
        """`up -d` and wait until every service is healthy; returns the seconds it took."""
        started = time.monotonic()
        self.compose("up", "-d")
        self.wait_healthy()
        return time.monotonic() - started

    def wait_healthy(self, services: list[str] = SERVICES) -> None:
        def all_healthy() -> bool:
            return all(health(self.container(s)) == "healthy" for s in services)

        wait_for(all_healthy, UP_TIMEOUT_S, f"{', '.join(services)} to be healthy", 0.5)

    def kill(self, service: str) -> float:
        """`docker kill` (SIGKILL) a service's container; returns when (monotonic)."""
        container = self.container(service)
        run("docker", "kill", container)
        return time.monotonic()

    def ledger_bookies(self, ledger_id: int) -> list[str]:
        """The bookies of a ledger's last ensemble, read from the metastore
        inside the metastore1 container (its port is not published)."""
        script = (
            "import asyncio, sys\n"
            "from metastore.client import MetastoreClient\n"
            "async def main():\n"
            "    c = MetastoreClient('metastore1:2379,metastore2:2379,metastore3:2379')\n"
            f"    stat = await c.get('/ledgers/{ledger_id}')\n"
            "    sys.stdout.write(stat.value.decode())\n"
            "    await c.close()\n"
            "asyncio.run(main())\n"
        )
        out = self.compose("exec", "-T", "metastore1", "python", "-c", script, timeout_s=60)
        return list(json.loads(out)["ensembles"][-1][1])

    def save_logs(self) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        logs = subprocess.run(
            ["docker-compose", "-p", self.project, "-f", str(COMPOSE_FILE), "logs", "--no-color"],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        (self.log_dir / f"{self.project}.log").write_text(logs.stdout + logs.stderr)

    def down(self, volumes: bool) -> None:
        self.compose("down", "--remove-orphans", *(["-v"] if volumes else []), timeout_s=180)
