"""``magnetar local-cluster``: a whole cluster on one machine, by default 3
metastore nodes (one Raft group), 3 bookies and 3 brokers, as child
processes under one supervisor (the standalone supervisor's start, stop
and child-death handling).

Ports are fixed so that a restart finds the same cluster: node ``i`` (from
0) of each role listens on its role's default port plus an offset, shifted
again by ``--port-offset``:

    metastore i   gRPC 2379 + 2i, Raft 2380 + 2i, metrics 7000 + i, TLS 2479 + i
    bookie i      gRPC 3181 + i,                  metrics 8000 + i, TLS 3281 + i
    broker i      gRPC 6650 + i,                  metrics 8080 + i, TLS 6750 + i

(the TLS ports with ``--secure`` only: broker/secure_setup.py)

Data lives under ``<data-dir>/metastore-i`` and ``<data-dir>/bookie-i``; logs
under ``<data-dir>/logs``. Brokers keep the cluster defaults (E/Qw/Qa =
2/2/2). The printed service URL lists every broker; ``endpoints.json``
holds every address, pid and state. A process that dies is restarted (or,
with ``--no-restart``, left down) while the rest keeps serving: kill one to
watch the cluster fail over.
"""

from __future__ import annotations

import socket
from pathlib import Path

from broker.secure_setup import ensure_secure_files
from broker.supervision import RestartPolicy
from broker.supervisor import SHUTDOWN_TIMEOUT_S, StartupError, Supervisor
from protos.serving import advertised

METASTORE_PORT, RAFT_PORT, BOOKIE_PORT, BROKER_PORT = 2379, 2380, 3181, 6650
METASTORE_METRICS, BOOKIE_METRICS, BROKER_METRICS = 7000, 8000, 8080
METASTORE_TLS, BOOKIE_TLS, BROKER_TLS = 2479, 3281, 6750


def free_port_offset(first: int = 20000, last: int = 40000, step: int = 97) -> int | None:
    """A ``--port-offset`` under which every default plaintext port of a
    3x3x3 cluster is free on 127.0.0.1 (tests and benchmarks start
    clusters beside others); None when no offset in the range is."""
    for offset in range(first, last, step):
        ports = [METASTORE_PORT + offset + i for i in range(6)]
        for base in (BOOKIE_PORT, BROKER_PORT, METASTORE_METRICS, BOOKIE_METRICS, BROKER_METRICS):
            ports += [base + offset + i for i in range(3)]
        if all(port_is_free(p) for p in ports):
            return offset
    return None


def port_is_free(port: int) -> bool:
    """Whether ``port`` can be bound on 127.0.0.1 now."""
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


class LocalCluster(Supervisor):
    kind = "magnetar local-cluster"

    def __init__(
        self,
        data_dir: Path,
        *,
        metastores: int = 3,
        bookies: int = 3,
        brokers: int = 3,
        port_offset: int = 0,
        config_file: str | None = None,
        policy: RestartPolicy | None = None,
        shutdown_timeout_s: float = SHUTDOWN_TIMEOUT_S,
        secure: bool = False,
    ) -> None:
        super().__init__(
            data_dir,
            config_file=config_file,
            policy=policy or RestartPolicy(start_timeout_s=90),
            shutdown_timeout_s=shutdown_timeout_s,
        )
        if secure:
            self.secure = ensure_secure_files(self.data_dir)
        if not (metastores % 2 == 1 and bookies >= 1 and brokers >= 1):
            raise StartupError(
                f"{metastores} metastores, {bookies} bookies, {brokers} brokers: a cluster "
                "needs an odd number of metastore nodes and at least one bookie and broker"
            )
        self.counts = (metastores, bookies, brokers)
        self.offset = port_offset

    def planned_ports(self) -> list[tuple[str, int, str]]:
        metastores, bookies, brokers = self.counts
        o = self.offset
        ports = []
        for i in range(metastores):
            ports += [
                ("metastore", METASTORE_PORT + 2 * i + o, f"metastore-{i} gRPC"),
                ("metastore", RAFT_PORT + 2 * i + o, f"metastore-{i} raft"),
                ("metastore", METASTORE_METRICS + i + o, f"metastore-{i} metrics"),
            ]
        for i in range(bookies):
            ports += [
                ("bookie", BOOKIE_PORT + i + o, f"bookie-{i} gRPC"),
                ("bookie", BOOKIE_METRICS + i + o, f"bookie-{i} metrics"),
            ]
        for i in range(brokers):
            ports += [
                ("broker", BROKER_PORT + i + o, f"broker-{i} gRPC"),
                ("broker", BROKER_METRICS + i + o, f"broker-{i} metrics"),
            ]
        if self.secure is not None:
            for role, first, n in (
                ("metastore", METASTORE_TLS, metastores),
                ("bookie", BOOKIE_TLS, bookies),
                ("broker", BROKER_TLS, brokers),
            ):
                ports += [(role, first + i + o, f"{role}-{i} gRPC TLS") for i in range(n)]
        return ports

    def child_dirs(self) -> list[Path]:
        metastores, bookies, _ = self.counts
        return [self.data_dir / f"metastore-{i}" for i in range(metastores)] + [
            self.data_dir / f"bookie-{i}" for i in range(bookies)
        ]

    def start_children(self) -> dict:
        metastores, bookies, brokers = self.counts
        o = self.offset
        ms_settings = self.settings["metastore"]
        host = advertised(self.bind_address("metastore"), ms_settings.advertised_address)
        peers = ",".join(
            f"{i + 1}={host}:{METASTORE_PORT + 2 * i + o}:{RAFT_PORT + 2 * i + o}"
            for i in range(metastores)
        )
        # The metastore nodes start together: none is ready before a majority runs.
        ms = self.await_ready(
            [
                self.launch(
                    f"metastore-{i}",
                    "metastore",
                    METASTORE_PORT + 2 * i + o,
                    METASTORE_METRICS + i + o,
                    [
                        *("--id", str(i + 1), "--peers", peers),
                        *("--data-dir", str(self.data_dir / f"metastore-{i}")),
                        *self.secure_args("metastore", METASTORE_TLS + i + o),
                    ],
                )
                for i in range(metastores)
            ]
        )
        metastore = self.metastore_for_children(ms)
        bk = self.await_ready(
            [
                self.launch(
                    f"bookie-{i}",
                    "bookie",
                    BOOKIE_PORT + i + o,
                    BOOKIE_METRICS + i + o,
                    [
                        *("--data-dir", str(self.data_dir / f"bookie-{i}")),
                        *("--metastore", metastore),
                        *self.secure_args("bookie", BOOKIE_TLS + i + o),
                    ],
                )
                for i in range(bookies)
            ]
        )
        br = self.await_ready(
            [
                self.launch(
                    f"broker-{i}",
                    "broker",
                    BROKER_PORT + i + o,
                    BROKER_METRICS + i + o,
                    ["--metastore", metastore, *self.secure_args("broker", BROKER_TLS + i + o)],
                )
                for i in range(brokers)
            ]
        )
        return {
            "service_url": "magnetar://" + ",".join(c.info["grpc"] for c in br),
            "brokers": [c.info["grpc"] for c in br],
            "bookies": [c.info["grpc"] for c in bk],
            "metastores": [c.info["grpc"] for c in ms],
            "metrics": {c.name: c.info.get("metrics") for c in self.children},
            **self.secure_endpoints(
                "magnetar+tls://" + ",".join(str(c.info.get("grpc_tls")) for c in br)
            ),
        }
