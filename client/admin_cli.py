"""The ``magnetar-admin`` command: administration from the client side, like
Pulsar's ``pulsar-admin`` (the server package has no admin commands).

    magnetar-admin [--service-url URL] <group> <verb> [ARGS] [FLAGS]

Groups, verbs and flags mirror ``pulsar-admin``'s (docs/admin.md lists them
all); tenants, the namespace and topic lifecycle verbs and the policy verbs
are in client/_cli_tenants.py, _cli_namespaces.py and _cli_policies.py.
Every verb is one call of :class:`client.admin.Admin` and prints its answer
as JSON (sorted keys; ``null`` for none); an error the broker answers prints
``Error: <PulsarName>: <message>`` on stderr and exits 1. The brokers come from ``--service-url`` (or pulsar-admin's
``--admin-url``), else ``MAGNETAR_SERVICE_URL``, else
``magnetar://localhost:6650``; a URL listing several brokers is used whole:
a call moves on to the next broker when one does not answer.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from pathlib import Path

import click

from client import stats_export
from client._cli_bookies import bookies
from client._cli_common import (
    AUTHENTICATION,
    DEFAULT_SERVICE_URL,
    TLS,
    authentication_of,
    tls_options,
)
from client._cli_common import admin_call as _admin_call
from client._cli_namespaces import add_lifecycle_commands
from client._cli_permissions import add_permission_commands
from client._cli_policies import add_policy_commands
from client._cli_schemas import schemas
from client._cli_tenants import tenants
from client.exceptions import MagnetarError
from protos import stats_schema


@click.group()
@click.option(
    "--service-url",
    "--admin-url",
    "service_url",
    envvar="MAGNETAR_SERVICE_URL",
    default=DEFAULT_SERVICE_URL,
    show_default=True,
    help="Brokers to ask, magnetar://h:p[,h2:p2...] (also MAGNETAR_SERVICE_URL).",
)
@click.option(
    "--auth-params",
    envvar="MAGNETAR_AUTH_PARAMS",
    default=None,
    help="token:<jwt> or file:///path/to/token (also MAGNETAR_AUTH_PARAMS).",
)
@click.option(
    "--auth-plugin",
    default=None,
    help="Only token authentication is available: token, or Pulsar's "
    "org.apache.pulsar.client.impl.auth.AuthenticationToken.",
)
@click.option(
    "--tls-trust-certs-file-path",
    "--tls-trust-cert-path",
    "tls_trust_certs_file_path",
    envvar="MAGNETAR_TLS_TRUST_CERTS_FILE_PATH",
    type=click.Path(exists=True, dir_okay=False),
    help="CA certificates (PEM) a magnetar+tls:// broker is checked against.",
)
@click.option("--tls-allow-insecure", is_flag=True, help="Trust any broker certificate.")
@click.option(
    "--tls-enable-hostname-verification",
    is_flag=True,
    help="Check that the broker's certificate is for the host connected to.",
)
@click.pass_context
def main(
    ctx: click.Context,
    service_url: str,
    auth_params: str | None,
    auth_plugin: str | None,
    tls_trust_certs_file_path: str | None,
    tls_allow_insecure: bool,
    tls_enable_hostname_verification: bool,
) -> None:
    """Administration, mirroring pulsar-admin; prints JSON."""
    ctx.obj = service_url
    ctx.meta[AUTHENTICATION] = authentication_of(auth_plugin, auth_params)
    ctx.meta[TLS] = tls_options(
        service_url,
        tls_trust_certs_file_path,
        tls_allow_insecure,
        tls_enable_hostname_verification,
    )


@main.group()
def topics() -> None:
    """Topics."""


@main.group()
def namespaces() -> None:
    """Namespaces."""


@main.group()
def brokers() -> None:
    """Brokers."""


# tenants; the lifecycle and policy verbs of namespaces and topics (docs/admin.md)
main.add_command(tenants)
main.add_command(bookies)
main.add_command(schemas)
add_lifecycle_commands(namespaces, topics)
add_policy_commands(namespaces, topics)
add_permission_commands(namespaces, topics)


# ---------------------------------------------------------------- brokers


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


# ---------------------------------------------------------------- namespaces


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


# ---------------------------------------------------------------- topics


@topics.command("list")
@click.argument("namespace")
@click.option(
    "--include-system-topic",
    "-ist",
    is_flag=True,
    help="List system topics too (magnetar/system, names starting with __).",
)
@click.pass_obj
def topics_list(service_url: str, namespace: str, include_system_topic: bool) -> None:
    """Topics of NAMESPACE (tenant/namespace), partitions listed one by one."""
    _admin_call(service_url, lambda a: a.topics.get_list(namespace, include_system_topic))


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


# ---------------------------------------------------------------- stats


@main.group()
def stats() -> None:
    """The stats history (docs/stats-schema.md)."""


@stats.command("export")
@click.option(
    "--since",
    default="0",
    show_default=True,
    help="Start: now, 6h, 7d, epoch ms or ISO-8601 (UTC).",
)
@click.option(
    "--until", "until", default="now", show_default=True, help="End (excluded), as --since."
)
@click.option(
    "--output",
    "-o",
    required=True,
    type=click.Path(file_okay=False),
    help="Directory for the files.",
)
@click.option(
    "--format", "fmt", type=click.Choice(stats_export.FORMATS), default="jsonl", show_default=True
)
@click.option(
    "--topic", default=stats_schema.STATS_TOPIC, show_default=True, help="The stats topic."
)
@click.pass_obj
def stats_export_cmd(
    service_url: str, since: str, until: str, output: str, fmt: str, topic: str
) -> None:
    """Write the stats records of [SINCE, UNTIL) to OUTPUT, one file per UTC hour
    (stats-YYYY-MM-DDTHH.jsonl or .parquet); prints a summary as JSON."""
    now_ms = int(time.time() * 1000)
    try:
        since_ms = stats_export.parse_time(since, now_ms)
        until_ms = stats_export.parse_time(until, now_ms)
    except stats_export.BadTime as exc:
        raise click.BadParameter(str(exc)) from None
    span = max(1, (until_ms - since_ms) // 1000)
    with click.progressbar(length=span, label="exporting", file=sys.stderr) as bar:
        done = 0

        def advance(timestamp_ms: int) -> None:
            nonlocal done
            at = min(span, max(0, (timestamp_ms - since_ms) // 1000))
            if at > done:
                bar.update(at - done)
                done = at

        try:
            summary = stats_export.export(
                service_url,
                since_ms,
                until_ms,
                Path(output),
                fmt,
                topic,
                advance,
                click.get_current_context().meta.get(AUTHENTICATION),
                click.get_current_context().meta.get(TLS) or {},
            )
        except ValueError as exc:
            raise click.BadParameter(str(exc)) from None
        except MagnetarError as exc:
            raise click.ClickException(f"{type(exc).__name__}: {exc}") from None
    click.echo(json.dumps(dataclasses.asdict(summary), indent=2, sort_keys=True))
    if summary.unknown_version:
        click.echo(
            f"warning: {summary.unknown_version} records of an unknown schema version skipped",
            err=True,
        )


if __name__ == "__main__":
    main(prog_name="magnetar-admin")
