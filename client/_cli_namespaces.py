"""The lifecycle verbs of ``magnetar-admin namespaces`` (list, create,
policies, topics, delete, clear-backlog, unsubscribe) and of ``topics``
(delete, unsubscribe, clear-backlog, expire-messages, partitioned-stats,
last-message-id, peek-messages, skip, reset-cursor), as pulsar-admin has
them. The policy verbs are in client/_cli_policies.py."""

from __future__ import annotations

import base64
import time
from typing import Any

import click

from client._cli_common import SECONDS, admin_call, names

# ---------------------------------------------------------------- namespaces


@click.command("list")
@click.argument("tenant")
@click.pass_obj
def namespaces_list(service_url: str, tenant: str) -> None:
    """Namespaces of TENANT (tenant/namespace)."""
    admin_call(service_url, lambda a: a.namespaces.get_namespaces(tenant))


@click.command("create")
@click.argument("namespace", metavar="TENANT/NAMESPACE")
@click.option(
    "--bundles",
    "-b",
    type=click.IntRange(min=1),
    default=None,
    help="Number of bundles (default: the broker's default_number_of_namespace_bundles).",
)
@click.option("--clusters", "-c", default=None, help="Comma-separated clusters (c1,c2).")
@click.pass_obj
def namespaces_create(
    service_url: str, namespace: str, bundles: int | None, clusters: str | None
) -> None:
    """Create NAMESPACE in an existing tenant; prints its policies."""
    admin_call(
        service_url, lambda a: a.namespaces.create_namespace(namespace, bundles, names(clusters))
    )


@click.command("policies")
@click.argument("namespace", metavar="TENANT/NAMESPACE")
@click.pass_obj
def namespaces_policies(service_url: str, namespace: str) -> None:
    """NAMESPACE's whole Policies document (Pulsar's field names)."""
    admin_call(service_url, lambda a: a.namespaces.get_policies(namespace))


@click.command("topics")
@click.argument("namespace", metavar="TENANT/NAMESPACE")
@click.pass_obj
def namespaces_topics(service_url: str, namespace: str) -> None:
    """Every topic of NAMESPACE (partitions one by one)."""
    admin_call(service_url, lambda a: a.namespaces.get_topics(namespace))


@click.command("delete")
@click.argument("namespace", metavar="TENANT/NAMESPACE")
@click.option("--force", "-f", is_flag=True, help="Delete its topics too.")
@click.pass_obj
def namespaces_delete(service_url: str, namespace: str, force: bool) -> None:
    """Delete NAMESPACE; refused while it has topics unless --force."""
    admin_call(service_url, lambda a: a.namespaces.delete_namespace(namespace, force))


@click.command("clear-backlog")
@click.argument("namespace", metavar="TENANT/NAMESPACE")
@click.option(
    "--sub", "--subscription", "-s", "sub", default="", help="One subscription (default: all)."
)
@click.option(
    "--force", "-force", is_flag=True, help="Accepted for pulsar-admin's sake (no prompt here)."
)
@click.pass_obj
def namespaces_clear_backlog(service_url: str, namespace: str, sub: str, force: bool) -> None:
    """Acknowledge every message of SUB (or of every subscription) on every
    topic of NAMESPACE."""
    del force  # pulsar-admin asks for confirmation without it; this command never asks
    admin_call(service_url, lambda a: a.namespaces.clear_backlog(namespace, sub))


@click.command("unsubscribe")
@click.argument("namespace", metavar="TENANT/NAMESPACE")
@click.option("--sub", "--subscription", "-s", "sub", required=True, help="The subscription.")
@click.pass_obj
def namespaces_unsubscribe(service_url: str, namespace: str, sub: str) -> None:
    """Delete subscription SUB from every topic of NAMESPACE that has it."""
    admin_call(service_url, lambda a: a.namespaces.unsubscribe(namespace, sub))


# ---------------------------------------------------------------- topics


@click.command("delete")
@click.argument("topic")
@click.option("--force", "-f", is_flag=True, help="Even with producers or consumers connected.")
@click.pass_obj
def topics_delete(service_url: str, topic: str, force: bool) -> None:
    """Delete TOPIC (a partitioned topic: every partition); refused while
    producers or consumers are connected unless --force."""
    admin_call(service_url, lambda a: a.topics.delete(topic, force))


@click.command("unsubscribe")
@click.argument("topic")
@click.option("--subscription", "-s", required=True, help="The subscription to delete.")
@click.option("--force", "-f", is_flag=True, help="Even with consumers connected.")
@click.pass_obj
def topics_unsubscribe(service_url: str, topic: str, subscription: str, force: bool) -> None:
    """Delete SUBSCRIPTION of TOPIC; refused while it has consumers unless --force."""
    admin_call(service_url, lambda a: a.topics.unsubscribe(topic, subscription, force))


@click.command("clear-backlog")
@click.argument("topic")
@click.option("--subscription", "-s", required=True, help="The subscription to clear.")
@click.pass_obj
def topics_clear_backlog(service_url: str, topic: str, subscription: str) -> None:
    """Acknowledge every message of SUBSCRIPTION on TOPIC (skip all)."""
    admin_call(service_url, lambda a: a.topics.clear_backlog(topic, subscription))


@click.command("expire-messages")
@click.argument("topic")
@click.option("--subscription", "-s", required=True, help="The subscription.")
@click.option(
    "--expireTime", "-t", "expire_time", type=SECONDS, required=True,
    help="Expire messages older than this (seconds, or 10m, 1h, ...).",
)  # fmt: skip
@click.pass_obj
def topics_expire_messages(
    service_url: str, topic: str, subscription: str, expire_time: int
) -> None:
    """Acknowledge the messages of SUBSCRIPTION older than --expireTime."""
    admin_call(service_url, lambda a: a.topics.expire_messages(topic, subscription, expire_time))


@click.command("expire-messages-all-subscriptions")
@click.argument("topic")
@click.option(
    "--expireTime", "-t", "expire_time", type=SECONDS, required=True,
    help="Expire messages older than this (seconds, or 10m, 1h, ...).",
)  # fmt: skip
@click.pass_obj
def topics_expire_messages_all(service_url: str, topic: str, expire_time: int) -> None:
    """expire-messages on every subscription of TOPIC."""
    admin_call(
        service_url, lambda a: a.topics.expire_messages_all_subscriptions(topic, expire_time)
    )


@click.command("partitioned-stats")
@click.argument("topic")
@click.option("--per-partition", is_flag=True, help="Each partition's stats too.")
@click.pass_obj
def topics_partitioned_stats(service_url: str, topic: str, per_partition: bool) -> None:
    """The stats of a partitioned TOPIC, its partitions added up."""
    admin_call(service_url, lambda a: a.topics.partitioned_stats(topic, per_partition))


@click.command("last-message-id")
@click.argument("topic")
@click.pass_obj
def topics_last_message_id(service_url: str, topic: str) -> None:
    """The id of TOPIC's last stored message."""
    admin_call(service_url, lambda a: a.topics.last_message_id(topic))


@click.command("peek-messages")
@click.argument("topic")
@click.option("--subscription", "-s", required=True, help="The subscription.")
@click.option("--count", "-n", type=int, default=1, show_default=True, help="Messages to show.")
@click.pass_obj
def topics_peek_messages(service_url: str, topic: str, subscription: str, count: int) -> None:
    """The first COUNT messages SUBSCRIPTION has not acknowledged, left as
    they are (data as UTF-8 text, or base64 when it is not text)."""

    def peek(a: Any) -> list[dict[str, Any]]:
        return [_shown(m) for m in a.topics.peek_messages(topic, subscription, count)]

    admin_call(service_url, peek)


def _shown(m: Any) -> dict[str, Any]:
    try:
        data, encoding = m.data().decode(), "utf-8"
    except UnicodeDecodeError:
        data, encoding = base64.b64encode(m.data()).decode(), "base64"
    mid = m.message_id()
    return {
        "messageId": f"{mid.ledger_id()}:{mid.entry_id()}:{mid.batch_index()}",
        "publishTime": m.publish_timestamp(),
        "eventTime": m.event_timestamp(),
        "key": m.partition_key(),
        "properties": m.properties(),
        "producerName": m.producer_name(),
        "data": data,
        "encoding": encoding,
    }


@click.command("terminate")
@click.argument("topic")
@click.pass_obj
def topics_terminate(service_url: str, topic: str) -> None:
    """Seal TOPIC: no more messages; readers see its end. Prints the last message id."""
    admin_call(service_url, lambda a: a.topics.terminate(topic))


@click.command("compact")
@click.argument("topic")
@click.pass_obj
def topics_compact(service_url: str, topic: str) -> None:
    """Start compacting TOPIC (every partition of a partitioned one); see compaction-status."""
    admin_call(service_url, lambda a: a.topics.compact(topic))


@click.command("compaction-status")
@click.argument("topic")
@click.option("--wait-complete", "-w", is_flag=True, help="Wait while it is RUNNING.")
@click.pass_obj
def topics_compaction_status(service_url: str, topic: str, wait_complete: bool) -> None:
    """Whether TOPIC's last compaction ran: NOT_RUN, RUNNING, SUCCESS or ERROR."""
    admin_call(service_url, lambda a: a.topics.compaction_status(topic, wait=wait_complete))


@click.command("stats-internal")
@click.argument("topic")
@click.pass_obj
def topics_stats_internal(service_url: str, topic: str) -> None:
    """TOPIC's managed ledger: its ledgers and its cursors' positions."""
    admin_call(service_url, lambda a: a.topics.stats_internal(topic))


@click.command("skip")
@click.argument("topic")
@click.option("--subscription", "-s", required=True, help="The subscription.")
@click.option("--count", "-n", type=int, required=True, help="Messages to skip.")
@click.pass_obj
def topics_skip(service_url: str, topic: str, subscription: str, count: int) -> None:
    """Acknowledge the oldest COUNT messages of SUBSCRIPTION (whole entries:
    never more than COUNT)."""
    admin_call(service_url, lambda a: a.topics.skip(topic, subscription, count))


@click.command("reset-cursor")
@click.argument("topic")
@click.option("--subscription", "-s", required=True, help="The subscription.")
@click.option(
    "--time", "-t", "ago", type=SECONDS, default=None,
    help="Go back this long (10m, 3h, 2d, 1w; a bare number is seconds).",
)  # fmt: skip
@click.option("--messageId", "-m", "message_id", default=None, help="ledgerId:entryId.")
@click.option(
    "--exclude-reset-position", "-e", "exclude", is_flag=True,
    help="With -m: start just after that message.",
)  # fmt: skip
@click.pass_obj
def topics_reset_cursor(
    service_url: str,
    topic: str,
    subscription: str,
    ago: int | None,
    message_id: str | None,
    exclude: bool,
) -> None:
    """Move SUBSCRIPTION back (or forward) in time or to a message id; its
    consumers reconnect and receive from there."""
    if (ago is None) == (message_id is None):
        raise click.UsageError("give exactly one of --time/-t and --messageId/-m")
    at = None if ago is None else int(time.time() * 1000) - ago * 1000
    admin_call(
        service_url,
        lambda a: a.topics.reset_cursor(topic, subscription, at, message_id, exclude),
    )


NAMESPACE_COMMANDS = (
    namespaces_list,
    namespaces_create,
    namespaces_policies,
    namespaces_topics,
    namespaces_delete,
    namespaces_clear_backlog,
    namespaces_unsubscribe,
)
TOPIC_COMMANDS = (
    topics_delete,
    topics_unsubscribe,
    topics_clear_backlog,
    topics_expire_messages,
    topics_expire_messages_all,
    topics_partitioned_stats,
    topics_last_message_id,
    topics_peek_messages,
    topics_skip,
    topics_reset_cursor,
    topics_stats_internal,
    topics_terminate,
    topics_compact,
    topics_compaction_status,
)


def add_lifecycle_commands(namespaces: click.Group, topics: click.Group) -> None:
    for cmd in NAMESPACE_COMMANDS:
        namespaces.add_command(cmd)
    for cmd in TOPIC_COMMANDS:
        topics.add_command(cmd)
