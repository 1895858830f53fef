"""The ``magnetar`` command: the server processes and the standalone cluster.

Settings come from ``--config FILE`` (TOML, one table per process), then
``MAGNETAR_<SECTION>_<KEY>`` variables, then the flags below and
``--set key=value`` for any other setting (docs/configuration.md).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

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


def with_common(fn):  # type: ignore[no-untyped-def]
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
    config, pairs, port, metrics_port, ready_file, data_dir, raft_port, node_id, peers
) -> None:  # type: ignore[no-untyped-def]
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
def bookie(config, pairs, port, metrics_port, ready_file, data_dir, metastore_addr) -> None:  # type: ignore[no-untyped-def]
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
def broker(config, pairs, port, metrics_port, ready_file, metastore_addr) -> None:  # type: ignore[no-untyped-def]
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
def standalone(  # type: ignore[no-untyped-def]
    data_dir,
    config,
    metastore_port,
    raft_port,
    bookie_port,
    broker_port,
    metastore_metrics_port,
    bookie_metrics_port,
    broker_metrics_port,
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
def local_cluster(data_dir, config, metastores, bookies, brokers, port_offset) -> None:  # type: ignore[no-untyped-def]
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


@main.group()
@click.option(
    "--service-url",
    envvar="MAGNETAR_SERVICE_URL",
    default="magnetar://localhost:6650",
    show_default=True,
    help="Broker to ask (also MAGNETAR_SERVICE_URL).",
)
@click.pass_context
def admin(ctx: click.Context, service_url: str) -> None:
    """Administration, mirroring pulsar-admin; prints JSON."""
    ctx.obj = service_url


@admin.group()
def topics() -> None:
    """Topics."""


@admin.group()
def namespaces() -> None:
    """Namespaces."""


@admin.group()
def brokers() -> None:
    """Brokers."""


@brokers.command("list")
@click.pass_obj
def brokers_list(service_url: str) -> None:
    """Addresses of the live brokers."""
    _admin_call(service_url, lambda a: a.brokers.list())


@brokers.command("leader-broker")
@click.pass_obj
def brokers_leader_broker(service_url: str) -> None:
    """The load manager leader."""
    _admin_call(service_url, lambda a: a.brokers.get_leader_broker())


@namespaces.command("split-bundle")
@click.argument("namespace")
@click.option("--bundle", "-b", required=True, help="The bundle to split (0xLOWER_0xUPPER).")
@click.option("--unload", "-u", is_flag=True, help="Unload both halves after the split.")
@click.pass_obj
def namespaces_split_bundle(service_url: str, namespace: str, bundle: str, unload: bool) -> None:
    """Split BUNDLE of NAMESPACE into two halves of its hash range."""
    _admin_call(service_url, lambda a: a.namespaces.split_bundle(namespace, bundle, unload))


@namespaces.command("unload")
@click.argument("namespace")
@click.option("--bundle", "-b", default=None, help="One bundle (0xLOWER_0xUPPER); default all.")
@click.pass_obj
def namespaces_unload(service_url: str, namespace: str, bundle: str | None) -> None:
    """Release NAMESPACE's bundles from their brokers (clients follow)."""
    _admin_call(service_url, lambda a: a.namespaces.unload(namespace, bundle))


@namespaces.command("bundles")
@click.argument("namespace")
@click.pass_obj
def namespaces_bundles(service_url: str, namespace: str) -> None:
    """Bundles of NAMESPACE (tenant/namespace) with their state and owner."""
    _admin_call(service_url, lambda a: a.namespaces.bundles(namespace))


@namespaces.command("set-deduplication")
@click.argument("namespace")
@click.option("--enable/--disable", required=True, help="Deduplication on or off.")
@click.pass_obj
def namespaces_set_deduplication(service_url: str, namespace: str, enable: bool) -> None:
    """Turn broker-side deduplication on or off for NAMESPACE (tenant/namespace)."""
    _admin_call(service_url, lambda a: a.namespaces.set_deduplication(namespace, enable))


def _admin_call(service_url: str, fn):  # type: ignore[no-untyped-def]
    import json

    from client.admin import Admin
    from client.exceptions import MagnetarError

    try:
        with Admin(service_url) as a:
            click.echo(json.dumps(fn(a), indent=2, sort_keys=True))
    except MagnetarError as exc:
        raise click.ClickException(f"{type(exc).__name__}: {exc}") from None


@topics.command("stats")
@click.argument("topic")
@click.pass_obj
def topics_stats(service_url: str, topic: str) -> None:
    """Statistics of TOPIC (Pulsar's field names)."""
    _admin_call(service_url, lambda a: a.topics.stats(topic))


@topics.command("create-partitioned-topic")
@click.argument("topic")
@click.option("--partitions", "-p", type=int, required=True, help="Number of partitions.")
@click.pass_obj
def topics_create_partitioned_topic(service_url: str, topic: str, partitions: int) -> None:
    """Create TOPIC with PARTITIONS partitions (TOPIC-partition-0 ...)."""
    _admin_call(service_url, lambda a: a.topics.create_partitioned_topic(topic, partitions))


@topics.command("lookup")
@click.argument("topic")
@click.pass_obj
def topics_lookup(service_url: str, topic: str) -> None:
    """The broker serving TOPIC."""
    _admin_call(service_url, lambda a: a.topics.lookup(topic))


@topics.command("create-subscription")
@click.argument("topic")
@click.option("--subscription", "-s", required=True, help="Name of the subscription.")
@click.option("--earliest", is_flag=True, help="Start at the first message (default: the end).")
@click.pass_obj
def topics_create_subscription(
    service_url: str, topic: str, subscription: str, earliest: bool
) -> None:
    """Create a durable SUBSCRIPTION on TOPIC with no consumer yet."""
    _admin_call(service_url, lambda a: a.topics.create_subscription(topic, subscription, earliest))


@topics.command("get-partitioned-topic-metadata")
@click.argument("topic")
@click.pass_obj
def topics_get_partitioned_topic_metadata(service_url: str, topic: str) -> None:
    """Partitions of TOPIC (0: not partitioned)."""
    _admin_call(service_url, lambda a: a.topics.get_partitioned_topic_metadata(topic))


@topics.command("key-shared-lookup")
@click.argument("topic")
@click.option("--subscription", "-s", required=True, help="A Key_Shared subscription of TOPIC.")
@click.option("--key", "-k", default=None, help="A message key (ordering or partition key).")
@click.option("--hash", "slot", type=int, default=None, help="A key hash slot in 0..65535.")
@click.pass_obj
def topics_key_shared_lookup(
    service_url: str, topic: str, subscription: str, key: str | None, slot: int | None
) -> None:
    """Where a key (or hash) of a Key_Shared subscription goes, and which
    unacknowledged message ids hold it (beyond pulsar-admin)."""
    if (key is None) == (slot is None):
        raise click.UsageError("give exactly one of --key and --hash")
    _admin_call(
        service_url, lambda a: a.topics.key_shared_lookup(topic, subscription, key=key, hash=slot)
    )


if __name__ == "__main__":
    main()
