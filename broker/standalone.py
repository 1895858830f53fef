"""``magnetar standalone``: metastore, bookie and broker as three child
processes of one supervisor (``broker/supervisor.py``: locking, port
checks, readiness, restarts, stop).

They start in dependency order (metastore, bookie, broker), each once the
one before is ready; then ``<data-dir>/endpoints.json`` is written and the
service URL printed. Ledgers are written with one copy (E/Qw/Qa 1/1/1: there
is one bookie) and the broker takes over bundle records of an earlier run
at once (they can only be its own).
"""

from __future__ import annotations

from pathlib import Path

from broker.secure_setup import ensure_secure_files
from broker.supervision import RestartPolicy
from broker.supervisor import SHUTDOWN_TIMEOUT_S, Supervisor

ROLES = ("metastore", "bookie", "broker")


class Standalone(Supervisor):
    kind = "magnetar standalone"

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
        policy: RestartPolicy | None = None,
        shutdown_timeout_s: float = SHUTDOWN_TIMEOUT_S,
        tls_ports: tuple[int, int, int] | None = None,
    ) -> None:
        """``tls_ports`` (metastore, bookie, broker): --secure, with TLS there."""
        super().__init__(
            data_dir, config_file=config_file, policy=policy, shutdown_timeout_s=shutdown_timeout_s
        )
        self.tls_ports = dict(zip(ROLES, tls_ports or (-1, -1, -1), strict=True))
        if tls_ports is not None:
            self.secure = ensure_secure_files(self.data_dir)
        self.ports = dict(zip(ROLES, (metastore_port, bookie_port, broker_port), strict=True))
        self.raft_port = raft_port
        self.metrics_ports = dict(zip(ROLES, metrics_ports, strict=True))

    def planned_ports(self) -> list[tuple[str, int, str]]:
        ports = [(r, self.ports[r], f"{r} gRPC") for r in ROLES]
        ports.append(("metastore", self.raft_port, "raft"))
        ports += [(r, self.metrics_ports[r], f"{r} metrics") for r in ROLES]
        if self.secure is not None:
            ports += [(r, self.tls_ports[r], f"{r} gRPC TLS") for r in ROLES]
        return ports

    def child_dirs(self) -> list[Path]:
        return [self.data_dir / "metastore", self.data_dir / "bookie"]

    def _start(self, role: str, extra: list[str]) -> dict:
        extra = [*extra, *self.secure_args(role, self.tls_ports[role])]
        child = self.launch(role, role, self.ports[role], self.metrics_ports[role], extra)
        return self.await_ready([child])[0].info

    def start_children(self) -> dict:
        ms = self._start(
            "metastore",
            ["--data-dir", str(self.data_dir / "metastore"), "--raft-port", str(self.raft_port)],
        )
        metastore = self.metastore_for_children(self.children[:1])
        bk = self._start(
            "bookie", ["--data-dir", str(self.data_dir / "bookie"), "--metastore", metastore]
        )
        one_copy = [
            f"managed_ledger_default_{q}=1" for q in ("ensemble_size", "write_quorum", "ack_quorum")
        ] + ["take_over_stale_bundles=true"]
        br = self._start(
            "broker", ["--metastore", metastore, *[a for s in one_copy for a in ("--set", s)]]
        )
        plain, tls = br.get("grpc_plain", br["grpc"]), br.get("grpc_tls", "")
        return {
            "service_url": f"magnetar://{plain}" if plain else f"magnetar+tls://{tls}",
            **({"service_url_tls": f"magnetar+tls://{tls}", "broker_tls": tls} if tls else {}),
            "broker": br["grpc"],
            "bookie": bk["grpc"],
            "metastore": ms["grpc"],
            "metrics": {c.name: c.info.get("metrics") for c in self.children},
            **self.secure_endpoints(f"magnetar+tls://{tls}"),
        }
