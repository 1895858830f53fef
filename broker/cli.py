"""The ``magnetar`` command: the server processes and the standalone cluster.
Administration is the client side's ``magnetar-admin`` (``client/admin_cli.py``).

Settings come from ``--config FILE`` (TOML, one table per process), then
``MAGNETAR_<SECTION>_<KEY>`` variables, then the flags below and
``--set key=value`` for any other setting (docs/configuration.md).
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import click

from broker.tokens_cli import tokens
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
    click.option("--bind-address", help="Address every port listens on (bind_address)."),
    click.option(
        "--advertised-address",
        help="Host given to clients and other processes (advertised_address).",
    ),
    click.option("--metrics-port", type=int, help="/metrics port (0 = free, -1 = off)."),
    click.option("--ready-file", type=click.Path(dir_okay=False), help="Written once serving."),
]


SECURE_HELP = (
    "Make a CA, certificates, a token key and a superuser token under the data dir "
    "(kept for later starts) and run with TLS ports, token authentication and "
    "authorization on; prints how to connect (docs/security.md)."
)

F = TypeVar("F", bound=Callable[..., Any])
Port = int | None
Text = str | None


def with_common(fn: F) -> F:
    for opt in reversed(common):
        fn = opt(fn)
    return fn


def _serve(server: Coroutine[Any, Any, None]) -> None:
    """Run a server process; refusals at start (a taken port, a data dir
    another process holds, a bad peer list) are one line and exit code 1."""
    from protos.data_dir_lock import DataDirLocked
    from protos.serving import PortInUse, StartRefused, die_with_parent

    supervisor = os.environ.get("MAGNETAR_SUPERVISOR_PID", "")
    if supervisor.isdigit():
        die_with_parent(int(supervisor))
    try:
        asyncio.run(server)
    except (PortInUse, DataDirLocked, StartRefused) as exc:
        raise click.ClickException(str(exc)) from None


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
def metastore(config: Text, pairs: tuple[str, ...], ready_file: Text, **flags: Any) -> None:
    """Run a metastore node (one node, or one of a Raft cluster with --id/--peers)."""
    from metastore.server import serve
    from metastore.settings import MetastoreSettings

    settings = _load(MetastoreSettings, "metastore", config, _overrides(pairs, **flags))
    _serve(serve(settings, ready_file))


@main.command()
@with_common
@click.option("--data-dir", help="Entry store directory.")
@click.option("--metastore", help="Metastore address(es).")
def bookie(config: Text, pairs: tuple[str, ...], ready_file: Text, **flags: Any) -> None:
    """Run a bookie."""
    from bookie.server import serve
    from bookie.settings import BookieSettings

    settings = _load(BookieSettings, "bookie", config, _overrides(pairs, **flags))
    _serve(serve(settings, ready_file))


@main.command()
@with_common
@click.option("--metastore", help="Metastore address(es).")
def broker(config: Text, pairs: tuple[str, ...], ready_file: Text, **flags: Any) -> None:
    """Run a broker."""
    from broker.server import serve
    from broker.settings import BrokerSettings

    settings = _load(BrokerSettings, "broker", config, _overrides(pairs, **flags))
    _serve(serve(settings, ready_file))


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
@click.option("--no-restart", is_flag=True, help="Leave a process that dies down.")
@click.option(
    "--shutdown-timeout-s",
    default=10.0,
    show_default=True,
    help="Longest stop after SIGTERM/SIGINT, all processes together.",
)
@click.option("--secure", is_flag=True, help=SECURE_HELP)
@click.option("--metastore-port-tls", default=2378, show_default=True, help="With --secure.")
@click.option("--bookie-port-tls", default=3182, show_default=True, help="With --secure.")
@click.option("--broker-port-tls", default=6651, show_default=True, help="With --secure.")
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
    no_restart: bool,
    shutdown_timeout_s: float,
    secure: bool,
    metastore_port_tls: int,
    bookie_port_tls: int,
    broker_port_tls: int,
) -> None:
    """Start metastore, bookie and broker; print the service URL once ready.
    A process that dies is restarted after a backoff (docs/deploy.md)."""
    from broker.standalone import Standalone
    from broker.supervision import RestartPolicy
    from broker.supervisor import StartupError, run

    try:
        sup = Standalone(
            Path(data_dir),
            metastore_port=metastore_port,
            raft_port=raft_port,
            bookie_port=bookie_port,
            broker_port=broker_port,
            metrics_ports=(metastore_metrics_port, bookie_metrics_port, broker_metrics_port),
            config_file=config,
            policy=RestartPolicy(restart=not no_restart),
            shutdown_timeout_s=shutdown_timeout_s,
            tls_ports=(metastore_port_tls, bookie_port_tls, broker_port_tls) if secure else None,
        )
    except StartupError as exc:
        raise click.UsageError(str(exc)) from None
    sys.exit(run(sup))


@main.command("local-cluster")
@click.option("--data-dir", default="./data-cluster", show_default=True, help="Data directory.")
@click.option("--config", type=click.Path(exists=True, dir_okay=False), help="TOML settings file.")
@click.option("--metastores", default=3, show_default=True, help="Metastore nodes (odd).")
@click.option("--bookies", default=3, show_default=True, help="Bookies.")
@click.option("--brokers", default=3, show_default=True, help="Brokers.")
@click.option("--port-offset", default=0, show_default=True, help="Added to every default port.")
@click.option("--no-restart", is_flag=True, help="Leave a process that dies down.")
@click.option(
    "--shutdown-timeout-s",
    default=10.0,
    show_default=True,
    help="Longest stop after SIGTERM/SIGINT, all processes together.",
)
@click.option("--secure", is_flag=True, help=SECURE_HELP)
def local_cluster(
    data_dir: str,
    config: Text,
    metastores: int,
    bookies: int,
    brokers: int,
    port_offset: int,
    no_restart: bool,
    shutdown_timeout_s: float,
    secure: bool,
) -> None:
    """Start a cluster on this machine (3 metastore nodes, 3 bookies, 3
    brokers by default); print the service URL once every process is ready.
    A process that dies is restarted after a backoff while the rest keeps
    serving (or left down with --no-restart)."""
    from broker.local_cluster import LocalCluster
    from broker.supervision import RestartPolicy
    from broker.supervisor import StartupError, run

    try:
        sup = LocalCluster(
            Path(data_dir),
            metastores=metastores,
            bookies=bookies,
            brokers=brokers,
            port_offset=port_offset,
            config_file=config,
            policy=RestartPolicy(restart=not no_restart, start_timeout_s=90),
            shutdown_timeout_s=shutdown_timeout_s,
            secure=secure,
        )
    except StartupError as exc:
        raise click.UsageError(str(exc)) from None
    sys.exit(run(sup))


@main.command()
@click.argument("address", metavar="HOST:PORT")
@click.option("--timeout", "timeout_s", default=2.0, show_default=True, help="Seconds to wait.")
@click.option(
    "--tls", is_flag=True, help="HOST:PORT is a TLS port (its certificate is not checked)."
)
def health(address: str, timeout_s: float, tls: bool) -> None:
    """Exit 0 when the process at HOST:PORT says SERVING on its gRPC health
    service, 1 otherwise (for HEALTHCHECK and probes)."""
    from protos.serving import health_serving
    from protos.tls import TlsClient

    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise click.BadParameter(f"{address!r} is not HOST:PORT", param_hint="ADDRESS")
    insecure = TlsClient(validate_hostname=False, allow_insecure=True) if tls else None
    serving = health_serving(address, timeout_s, insecure)
    click.echo(f"{address}: {'SERVING' if serving else 'NOT SERVING'}")
    sys.exit(0 if serving else 1)


@main.command(
    context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
    add_help_option=False,
)
@click.pass_context
def verify(ctx: click.Context) -> None:
    """Fault-injection verifier: a workload, faults from a schedule, a
    verdict and a report (`magnetar verify --help`; docs/reliability.md).
    It is an SDK program (client/verify_cli.py): this runs it as is."""
    os.execv(sys.executable, [sys.executable, "-m", "client.verify_cli", *ctx.args])


main.add_command(tokens)


if __name__ == "__main__":
    main()
