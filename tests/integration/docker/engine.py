"""Helpers of the container tests: the images' tags, `docker` and
`docker-compose` through subprocess (testcontainers' compose class needs
compose v2, which Debian does not ship), container health, and running the
host client (tests/integration/docker/host_client.py) with the brokers' names mapped to
127.0.0.1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
IMAGE = os.environ.get("MAGNETAR_IMAGE", "local/magnetar:latest")
PROMETHEUS_IMAGE = os.environ.get("MAGNETAR_PROMETHEUS_IMAGE", "local/magnetar-prometheus:latest")


def run(*cmd: str, timeout_s: float = 120, check: bool = True) -> str:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    if check and done.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {done.returncode}: {done.stderr[-2000:]}")
    return done.stdout


def image_exists(tag: str) -> bool:
    return subprocess.run(["docker", "image", "inspect", tag], capture_output=True).returncode == 0


def inspect(container: str) -> dict[str, Any]:
    return dict(json.loads(run("docker", "inspect", container))[0])


def health(container: str) -> str:
    """'healthy', 'unhealthy', 'starting', or the state when not running."""
    state = inspect(container)["State"]
    if not state.get("Running"):
        return str(state.get("Status"))
    return str(state.get("Health", {}).get("Status", "none"))


def host_client(hosts: list[str], *args: str) -> subprocess.Popen[str]:
    """Start tests/integration/docker/host_client.py in a mount namespace of its own
    whose /etc/hosts maps ``hosts`` to 127.0.0.1 (needs root and unshare)."""
    hosts_file = Path(args[args.index("--out") + 1]).with_suffix(".hosts")
    hosts_file.write_text(f"127.0.0.1 localhost {' '.join(hosts)}\n")
    script = 'mount --bind "$0" /etc/hosts && exec "$@"'
    cmd = [
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        script,
        str(hosts_file),
        sys.executable,
        "-m",
        "tests.integration.docker.host_client",
        *args,
    ]
    return subprocess.Popen(
        cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def events(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    lines = path.read_text().splitlines()
    # The last line may be half written while the client runs.
    return [json.loads(line) for line in lines if line.endswith("}")]


def can_map_hosts() -> bool:
    """Whether host_client can run (root, with unshare)."""
    if os.geteuid() != 0:
        return False
    return subprocess.run(["unshare", "--mount", "true"], capture_output=True).returncode == 0
