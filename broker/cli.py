"""The ``magnetar`` command: the server processes and the standalone cluster.
Administration is the client side's ``magnetar-admin`` (``client/admin_cli.py``).

Settings come from ``--config FILE`` (TOML, one table per process), then
``MAGNETAR_<SECTION>_<KEY>`` variables, then the flags below and
``--set key=value`` for any other setting (docs/configuration.md).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from protos.settings import SettingsError, load_settings


def _overrides(pairs: tuple[str, ...], **flags: Any) -> dict[str, Any]:
    out = {k: v for k, v in flags.items() if v is not None}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise click.BadParameter(f"{pair!r} is not key=value", param_hint="--set")
        out[key.strip()] = value
    return out


def _load(cls: type, section: str, config: str | None, overrides: dict[str, Any]) -> Any:
    try:
        return load_settings(cls, section, config, overrides)
    except SettingsError as exc:
        raise click.UsageError(str(exc)) from None


common = [
    click.option(
        "--config", type=click.Path(exists=True, dir_okay=False), help="TOML settings file."
    ),
    click.option("--set", "pairs", multiple=True, metavar="KEY=VALUE", help="Any setting."),
    click.option("--port", type=int, help="gRPC port (0 = free port)."),
    click.option("--metrics-port", type=int, help="/metrics port (0 = free, -1 = off)."),
    click.option("--ready-file", type=click.Path(dir_okay=False), help="Written once serving."),
]


F = TypeVar("F", bound=Callable[..., Any])
Port = int | None
Text = str | None


def with_common(fn: F) -> F:
    for opt in reversed(common):
        fn = opt(fn)
    return fn


@click.group()
def main() -> None:
    """Magnetar: Pulsar-style publish/subscribe messaging."""


@main.command()
@with_common
@click.option("--data-dir", help="Raft journal and snapshot directory.")
@click.option("--raft-port", type=int, help="Raft port (0 = free port).")
@click.option("--id", "node_id", help="This node's id in --peers.")
@click.option(
    "--peers",
    help="Every node, this one included: ID=HOST:CLIENT_PORT:RAFT_PORT, comma-separated.",
)
def metastore(
    config: Text,
    pairs: tuple[str, ...],
    port: Port,
    metrics_port: Port,
    ready_file: Text,
    data_dir: Text,
    raft_port: Port,
    node_id: Text,
    peers: Text,
) -> None:
    """Run a metastore node (one node, or one of a Raft cluster with --id/--peers)."""
    from metastore.server import serve
    from metastore.settings import MetastoreSettings

    settings = _load(
        MetastoreSettings,
        "metastore",
        config,
        _overrides(
            pairs,
            port=port,
            metrics_port=metrics_port,
            data_dir=data_dir,
            raft_port=raft_port,
            node_id=node_id,
            peers=peers,
        ),
    )
    asyncio.run(serve(settings, ready_file))


@main.command()
@with_common
@click.option("--data-dir", help="Entry store directory.")
@click.option("--metastore", "metastore_addr", help="Metastore address(es).")
def bookie(
    config: Text,
    pairs: tuple[str, ...],
    port: Port,
    metrics_port: Port,
    ready_file: Text,
    data_dir: Text,
    metastore_addr: Text,
) -> None:
    """Run a bookie."""
    from bookie.server import serve
    from bookie.settings import BookieSettings

    settings = _load(
        BookieSettings,
        "bookie",
        config,
        _overrides(
            pairs, port=port, metrics_port=metrics_port, data_dir=data_dir, metastore=metastore_addr
        ),
    )
    asyncio.run(serve(settings, ready_file))


@main.command()
@with_common
@click.option("--metastore", "metastore_addr", help="Metastore address(es).")
def broker(
    config: Text,
    pairs: tuple[str, ...],
    port: Port,
    metrics_port: Port,
    ready_file: Text,
    metastore_addr: Text,
) -> None:
    """Run a broker."""
    from broker.server import serve
    from broker.settings import BrokerSettings

    settings = _load(
        BrokerSettings,
        "broker",
        config,
        _overrides(pairs, port=port, metrics_port=metrics_port, metastore=metastore_addr),
    )
    asyncio.run(serve(settings, ready_file))


@main.command()
@click.option("--data-dir", default="./data", show_default=True, help="Where all data lives.")
@click.option("--config", type=click.Path(exists=True, dir_okay=False), help="TOML settings file.")
@click.option("--metastore-port", default=2379, show_default=True, help="0 = free port.")
@click.option("--raft-port", default=2380, show_default=True, help="0 = free port.")
@click.option("--bookie-port", default=3181, show_default=True, help="0 = free port.")
@click.option("--broker-port", default=6650, show_default=True, help="0 = free port.")
@click.option("--metastore-metrics-port", default=7000, show_default=True, help="-1 = off.")
@click.option("--bookie-metrics-port", default=8000, show_default=True, help="-1 = off.")
@click.option("--broker-metrics-port", default=8080, show_default=True, help="-1 = off.")
def standalone(
    data_dir: str,
    config: Text,
    metastore_port: int,
    raft_port: int,
    bookie_port: int,
    broker_port: int,
    metastore_metrics_port: int,
    bookie_metrics_port: int,
    broker_metrics_port: int,
) -> None:
    """Start metastore, bookie and broker; print the service URL once ready."""
    from broker.standalone import Supervisor, run

    sup = Supervisor(
        Path(data_dir),
        metastore_port=metastore_port,
        raft_port=raft_port,
        bookie_port=bookie_port,
        broker_port=broker_port,
        metrics_ports=(metastore_metrics_port, bookie_metrics_port, broker_metrics_port),
        config_file=config,
    )
    sys.exit(run(sup))


@main.command("local-cluster")
@click.option("--data-dir", default="./data-cluster", show_default=True, help="Data directory.")
@click.option("--config", type=click.Path(exists=True, dir_okay=False), help="TOML settings file.")
@click.option("--metastores", default=3, show_default=True, help="Metastore nodes (odd).")
@click.option("--bookies", default=3, show_default=True, help="Bookies.")
@click.option("--brokers", default=3, show_default=True, help="Brokers.")
@click.option("--port-offset", default=0, show_default=True, help="Added to every default port.")
def local_cluster(
    data_dir: str, config: Text, metastores: int, bookies: int, brokers: int, port_offset: int
) -> None:
    """Start a cluster on this machine (3 metastore nodes, 3 bookies, 3
    brokers by default); print the service URL once every process is ready."""
    from broker.local_cluster import LocalCluster
    from broker.standalone import StartupError, run

    try:
        sup = LocalCluster(
            Path(data_dir),
            metastores=metastores,
            bookies=bookies,
            brokers=brokers,
            port_offset=port_offset,
            config_file=config,
        )
    except StartupError as exc:
        raise click.UsageError(str(exc)) from None
    sys.exit(run(sup))


if __name__ == "__main__":
    main()
