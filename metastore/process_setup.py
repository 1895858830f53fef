"""What a metastore process sets up around its Raft node: its ports (from
its settings or its cluster's peer list), its gRPC listeners (plaintext
and TLS), its HTTP port, and the Raft secret."""

from __future__ import annotations

from pathlib import Path

import grpc
from prometheus_client import REGISTRY, generate_latest

from metastore import metrics
from metastore.cluster_layout import ClusterLayout
from metastore.metrics import ServiceView
from metastore.settings import MetastoreSettings
from protos import serving
from protos.http_endpoint import HttpEndpoint
from protos.security_settings import ServerTls


def ports_of(settings: MetastoreSettings) -> tuple[ClusterLayout, str, int, int]:
    """This node's layout, bind address, gRPC port and Raft port (free
    ones picked for 0). StartRefused for a peer list it cannot use."""
    try:
        if settings.peers.strip():
            layout = ClusterLayout.from_settings(settings, 0, 0)
            host, _, client_port = layout.client_address.rpartition(":")
            bind = settings.bind_address or host  # reachable where the peers look for it
            port = -1 if settings.port < 0 else int(client_port)
            return layout, bind, port, int(layout.raft_address.rpartition(":")[2])
        bind = settings.bind_address or "127.0.0.1"
        raft_port = settings.raft_port or serving.free_port(bind)
        port = settings.port or serving.free_port(bind)
    except (ValueError, OSError) as exc:
        raise serving.StartRefused(str(exc)) from None
    return ClusterLayout.from_settings(settings, port, raft_port), bind, port, raft_port


async def bind_grpc(
    server: grpc.aio.Server, settings: MetastoreSettings, bind: str, port: int, tls: ServerTls
) -> serving.Listeners:
    """The client port (-1: none) and the TLS port (metastore_port_tls)."""
    return await serving.bind_listeners(
        server,
        bind,
        settings.advertised_address,
        port,
        settings.metastore_port_tls,
        tls.credentials,
    )


async def start_http(
    settings: MetastoreSettings,
    service: ServiceView,
    bind: str,
    listeners: serving.Listeners,
    tls: ServerTls,
) -> tuple[HttpEndpoint | None, int]:
    """/metrics (etcd's and Pulsar's series, metastore/metrics.py) and /status.html."""
    metrics.register(service, Path(settings.data_dir))
    endpoint, metrics_port = await serving.start_http_endpoint(
        bind,
        settings,
        serving.thread_render(lambda: generate_latest(REGISTRY)),
        listeners,
        tls.metrics,
        tls.health,
    )
    return endpoint, metrics_port


def raft_password(setting: str) -> str | None:
    """raft_password: the secret itself, or file:///path to a file holding it."""
    if not setting:
        return None
    if setting.startswith("file://"):
        path = setting.removeprefix("file://")
        try:
            with open(path) as f:
                secret = f.read().strip()
        except OSError as exc:
            raise serving.StartRefused(f"raft_password {setting}: {exc.strerror}") from None
        if not secret:
            raise serving.StartRefused(f"raft_password {setting}: the file is empty")
        return secret
    return setting
