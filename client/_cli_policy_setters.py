"""The ``set-*`` policy verbs of ``magnetar-admin namespaces`` and ``topics``
that take more than one number (docs/admin.md lists them all with their
JSON). Each factory builds the command for one level (a namespace or a
topic); client/_cli_policies.py adds them, with the generated get-,
remove- and max-* verbs, to both groups."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import click

from client._admin_policies import PolicyVerbs
from client._cli_common import (
    BYTES,
    MEGABYTES,
    MINUTES,
    RETENTION_MINUTES,
    SECONDS,
    admin_call,
    switch_given,
)


@dataclass(frozen=True)
class Level:
    """Where a policy is set: on a namespace or on one topic."""

    name: str  # "namespace" or "topic"
    metavar: str  # the argument naming the target, in usage and help
    fallback: str  # what applies where this level sets nothing

    def call(self, service_url: str, fn: Callable[[PolicyVerbs], object]) -> None:
        admin_call(service_url, lambda a: fn(a.topics if self.name == "topic" else a.namespaces))

    def target(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        return click.argument("target", metavar=self.metavar)(fn)


NAMESPACE = Level("namespace", "TENANT/NAMESPACE", "the broker's setting")
TOPIC = Level("topic", "TOPIC", "its namespace's policy, else the broker's setting")

QUOTA_POLICIES = ("producer_request_hold", "producer_exception", "consumer_backlog_eviction")
QUOTA_TYPES = ("destination_storage", "message_age")
DELETE_MODES = ("delete_when_no_subscriptions", "delete_when_subscriptions_caught_up")
UNLIMITED_HELP = "-1 = no limit"


def _overrides(level: Level) -> str:
    return f"Where {level.metavar} sets none, {level.fallback} applies."


def set_retention(level: Level) -> click.Command:
    @click.command(
        "set-retention",
        short_help="Set the retention of acknowledged messages (-t, -s).",
        help=f"Keep acknowledged messages of {level.metavar} up to --time and --size "
        "(retentionTimeInMinutes, retentionSizeInMB; -1 = no limit of that kind). Both 0 "
        "= delete once every subscription consumed them; else both non-zero. " + _overrides(level),
    )
    @level.target
    @click.option(
        "--size",
        "-s",
        type=MEGABYTES,
        required=True,
        help="Size: 10M, 2G, 1T (K=1024; bare number: bytes), whole MB; " + UNLIMITED_HELP,
    )
    @click.option(
        "--time",
        "-t",
        "minutes",
        type=RETENTION_MINUTES,
        required=True,
        help="Time: 30m, 3h, 7d, 1w (bare number: seconds), whole minutes; " + UNLIMITED_HELP,
    )
    @click.pass_obj
    def command(service_url: str, target: str, size: int, minutes: int) -> None:
        level.call(service_url, lambda v: v.set_retention(target, minutes, size))

    return command


def set_message_ttl(level: Level) -> click.Command:
    @click.command(
        "set-message-ttl",
        short_help="Set the message TTL (-ttl).",
        help=f"Acknowledge unacknowledged messages of {level.metavar} once older than "
        "the TTL (message_ttl_in_seconds; 0 = never). " + _overrides(level),
    )
    @level.target
    @click.option(
        "--messageTTL",
        "-ttl",
        "ttl",
        type=SECONDS,
        required=True,
        help="TTL: 3600, 30m, 1h, 7d (bare number: seconds).",
    )
    @click.pass_obj
    def command(service_url: str, target: str, ttl: int) -> None:
        level.call(service_url, lambda v: v.set_message_ttl(target, ttl))

    return command


def _quota_limit(kind: str, limit: int | None, limit_time: int | None) -> None:
    if kind == "destination_storage" and limit is None:
        raise click.UsageError("a destination_storage backlog quota needs --limit (a size)")
    if kind == "message_age" and limit_time is None:
        raise click.UsageError("a message_age backlog quota needs --limitTime (a time)")


def set_backlog_quota(level: Level) -> click.Command:
    @click.command(
        "set-backlog-quota",
        short_help="Set a backlog quota (-l or -lt, -p, -t).",
        help=f"Set the backlog quota of one --type on {level.metavar}: the most "
        "backlog (destination_storage, --limit) or the oldest unacknowledged message's age "
        "(message_age, --limitTime), and what happens beyond it (--policy). " + _overrides(level),
    )
    @level.target
    @click.option(
        "--limit", "-l", type=BYTES, default=None, help="Size: 10M, 2G (bare number: bytes)."
    )
    @click.option(
        "--limitTime",
        "-lt",
        "limit_time",
        type=SECONDS,
        default=None,
        help="Age: 36000, 10h, 1d (bare number: seconds).",
    )
    @click.option("--policy", "-p", type=click.Choice(QUOTA_POLICIES), required=True)
    @click.option("--type", "-t", "kind", type=click.Choice(QUOTA_TYPES), default=QUOTA_TYPES[0])
    @click.pass_obj
    def command(
        service_url: str,
        target: str,
        limit: int | None,
        limit_time: int | None,
        policy: str,
        kind: str,
    ) -> None:
        _quota_limit(kind, limit, limit_time)
        size = -1 if limit is None else limit
        age = -1 if limit_time is None else limit_time
        level.call(service_url, lambda v: v.set_backlog_quota(target, size, age, policy, kind))

    return command


def remove_backlog_quota(level: Level) -> click.Command:
    @click.command(
        "remove-backlog-quota",
        short_help="Remove the backlog quota of one type (-t).",
        help=f"Remove the backlog quota of one --type from {level.metavar}. " + _overrides(level),
    )
    @level.target
    @click.option("--type", "-t", "kind", type=click.Choice(QUOTA_TYPES), default=QUOTA_TYPES[0])
    @click.pass_obj
    def command(service_url: str, target: str, kind: str) -> None:
        level.call(service_url, lambda v: v.remove_backlog_quota(target, kind))

    return command


def set_dispatch_rate(level: Level, subscription: bool) -> click.Command:
    each = "subscription" if subscription else "topic"

    @click.command(
        "set-subscription-dispatch-rate" if subscription else "set-dispatch-rate",
        short_help=f"Set the dispatch rate limit of each {each} (-md, -bd, -dt, -rp).",
        help=f"Dispatch at most --msg-dispatch-rate messages and --byte-dispatch-rate "
        f"bytes per --dispatch-rate-period seconds from each {each} of {level.metavar} "
        "(-1 or 0 = no limit). " + _overrides(level),
    )
    @level.target
    @click.option("--msg-dispatch-rate", "-md", type=click.IntRange(min=-1), default=-1)
    @click.option(
        "--byte-dispatch-rate", "-bd", type=BYTES, default=-1, help="Bytes: 1048576, 1M, 10M."
    )
    @click.option("--dispatch-rate-period", "-dt", type=click.IntRange(min=1), default=1)
    @click.option("--relative-to-publish-rate", "-rp", is_flag=True)
    @click.pass_obj
    def command(
        service_url: str,
        target: str,
        msg_dispatch_rate: int,
        byte_dispatch_rate: int,
        dispatch_rate_period: int,
        relative_to_publish_rate: bool,
    ) -> None:
        level.call(
            service_url,
            lambda v: v.set_dispatch_rate(
                target,
                msg_dispatch_rate,
                byte_dispatch_rate,
                dispatch_rate_period,
                relative_to_publish_rate,
                subscription=subscription,
            ),
        )

    return command


def set_publish_rate(level: Level) -> click.Command:
    @click.command(
        "set-publish-rate",
        short_help="Set the publish rate limit of each topic (-m, -b).",
        help=f"Accept at most --msg-publish-rate messages and --byte-publish-rate bytes "
        f"per second on each topic of {level.metavar} (-1 or 0 = no limit). " + _overrides(level),
    )
    @level.target
    @click.option("--msg-publish-rate", "-m", type=click.IntRange(min=-1), default=-1)
    @click.option(
        "--byte-publish-rate", "-b", type=BYTES, default=-1, help="Bytes: 1048576, 1M, 10M."
    )
    @click.pass_obj
    def command(
        service_url: str, target: str, msg_publish_rate: int, byte_publish_rate: int
    ) -> None:
        level.call(
            service_url,
            lambda v: v.set_publish_rate(target, msg_publish_rate, byte_publish_rate),
        )

    return command


def set_subscribe_rate(level: Level) -> click.Command:
    @click.command(
        "set-subscribe-rate",
        short_help="Set the subscribe rate limit of each consumer name (-sr, -st).",
        help=f"Allow at most --subscribe-rate subscribes per --subscribe-rate-period "
        f"seconds from one consumer name on each topic of {level.metavar} (-1 or 0 = "
        "no limit). " + _overrides(level),
    )
    @level.target
    @click.option("--subscribe-rate", "-sr", type=click.IntRange(min=-1), default=-1)
    @click.option("--subscribe-rate-period", "-st", type=click.IntRange(min=1), default=30)
    @click.pass_obj
    def command(
        service_url: str, target: str, subscribe_rate: int, subscribe_rate_period: int
    ) -> None:
        level.call(
            service_url,
            lambda v: v.set_subscribe_rate(target, subscribe_rate, subscribe_rate_period),
        )

    return command


def set_persistence(level: Level) -> click.Command:
    @click.command(
        "set-persistence",
        short_help="Set E, Qw and Qa of new ledgers (-e, -w, -a, -r).",
        help=f"Store the next ledgers of {level.metavar}'s topics on --bookkeeper-ensemble "
        "bookies, each entry on --bookkeeper-write-quorum of them, acknowledged by "
        "--bookkeeper-ack-quorum (E >= Qw >= Qa >= 1, E <= writable bookies). " + _overrides(level),
    )
    @level.target
    @click.option("--bookkeeper-ensemble", "-e", type=click.IntRange(min=1), required=True)
    @click.option("--bookkeeper-write-quorum", "-w", type=click.IntRange(min=1), required=True)
    @click.option("--bookkeeper-ack-quorum", "-a", type=click.IntRange(min=1), required=True)
    @click.option(
        "--ml-mark-delete-max-rate",
        "-r",
        type=click.FloatRange(min=0),
        default=0.0,
        help="Cursor mark-delete updates per second (0 = the broker's).",
    )
    @click.pass_obj
    def command(
        service_url: str,
        target: str,
        bookkeeper_ensemble: int,
        bookkeeper_write_quorum: int,
        bookkeeper_ack_quorum: int,
        ml_mark_delete_max_rate: float,
    ) -> None:
        level.call(
            service_url,
            lambda v: v.set_persistence(
                target,
                bookkeeper_ensemble,
                bookkeeper_write_quorum,
                bookkeeper_ack_quorum,
                ml_mark_delete_max_rate,
            ),
        )

    return command


def set_deduplication(level: Level) -> click.Command:
    @click.command(
        "set-deduplication",
        short_help="Turn deduplication on or off (--enable|--disable).",
        help=f"Turn broker-side deduplication on or off for {level.metavar} (a resent "
        "message, same producer name and sequence id, is stored once). " + _overrides(level),
    )
    @level.target
    @click.option(
        "--enable/--disable", "-e/-d", default=None, callback=switch_given, help="On or off."
    )
    @click.pass_obj
    def command(service_url: str, target: str, enable: bool) -> None:
        level.call(service_url, lambda v: v.set_deduplication(target, enable))

    return command


def set_inactive_topic_policies(level: Level) -> click.Command:
    @click.command(
        "set-inactive-topic-policies",
        short_help="Set the deletion of inactive topics (-e|-d, -t, -m).",
        help=f"Delete topics of {level.metavar} that have had no producer and no consumer "
        "for --max-inactive-duration (and, per --delete-mode, no subscription or only "
        "caught-up ones). " + _overrides(level),
    )
    @level.target
    @click.option(
        "--enable-delete-while-inactive/--disable-delete-while-inactive",
        "-e/-d",
        "delete",
        default=None,
        callback=switch_given,
        help="Delete inactive topics or not.",
    )
    @click.option(
        "--max-inactive-duration",
        "-t",
        type=SECONDS,
        required=True,
        help="Inactivity before deletion: 60, 10m, 1h, 1d (bare number: seconds).",
    )
    @click.option("--delete-mode", "-m", type=click.Choice(DELETE_MODES), required=True)
    @click.pass_obj
    def command(
        service_url: str, target: str, delete: bool, max_inactive_duration: int, delete_mode: str
    ) -> None:
        level.call(
            service_url,
            lambda v: v.set_inactive_topic_policies(
                target, delete, max_inactive_duration, delete_mode
            ),
        )

    return command


# ---------------------------------------------------------------- namespace only


def set_auto_topic_creation(level: Level) -> click.Command:
    @click.command(
        "set-auto-topic-creation",
        short_help="Set auto topic creation (--enable|--disable, -t, -n).",
        help=f"Whether a topic of {level.metavar} is created on first use, and as what "
        "(overrides allow_auto_topic_creation(_type) and default_num_partitions).",
    )
    @level.target
    @click.option("--enable/--disable", "-e/-d", default=None, callback=switch_given)
    @click.option(
        "--type",
        "-t",
        "topic_type",
        type=click.Choice(("partitioned", "non-partitioned")),
        default="non-partitioned",
    )
    @click.option(
        "--num-partitions",
        "-n",
        type=click.IntRange(min=1),
        default=None,
        help="Partitions of a topic created as partitioned (needed with --type partitioned).",
    )
    @click.pass_obj
    def command(
        service_url: str, target: str, enable: bool, topic_type: str, num_partitions: int | None
    ) -> None:
        if enable and topic_type == "partitioned" and num_partitions is None:
            raise click.UsageError("--type partitioned needs --num-partitions N")
        admin_call(
            service_url,
            lambda a: a.namespaces.set_auto_topic_creation(
                target, enable, topic_type, num_partitions or 1
            ),
        )

    return command


def set_auto_subscription_creation(level: Level) -> click.Command:
    @click.command(
        "set-auto-subscription-creation",
        short_help="Set auto subscription creation (--enable|--disable).",
        help=f"Whether a consumer naming a new subscription of a topic of {level.metavar} "
        "creates it (overrides allow_auto_subscription_creation).",
    )
    @level.target
    @click.option("--enable/--disable", "-e/-d", default=None, callback=switch_given)
    @click.pass_obj
    def command(service_url: str, target: str, enable: bool) -> None:
        admin_call(
            service_url, lambda a: a.namespaces.set_auto_subscription_creation(target, enable)
        )

    return command


def set_subscription_expiration_time(level: Level) -> click.Command:
    @click.command(
        "set-subscription-expiration-time",
        short_help="Set the subscription expiration time (-t).",
        help=f"Delete a durable subscription of {level.metavar} with no consumer and no "
        "activity for --time (0 = never; overrides subscription_expiration_time_minutes).",
    )
    @level.target
    @click.option(
        "--time",
        "-t",
        "minutes",
        type=MINUTES,
        required=True,
        help="1440, 90m, 12h, 7d (bare number: minutes), whole minutes.",
    )
    @click.pass_obj
    def command(service_url: str, target: str, minutes: int) -> None:
        admin_call(
            service_url, lambda a: a.namespaces.set_subscription_expiration_time(target, minutes)
        )

    return command


STRATEGIES = (
    "ALWAYS_INCOMPATIBLE",
    "ALWAYS_COMPATIBLE",
    "BACKWARD",
    "FORWARD",
    "FULL",
    "BACKWARD_TRANSITIVE",
    "FORWARD_TRANSITIVE",
    "FULL_TRANSITIVE",
)


def set_schema_compatibility_strategy(level: Level) -> click.Command:
    @click.command(
        "set-schema-compatibility-strategy",
        short_help="Set the schema compatibility strategy (--compatibility).",
        help=f"How a new schema version on a topic of {level.metavar} must relate to the "
        "registered ones (docs/schemas.md). " + _overrides(level),
    )
    @level.target
    @click.option(
        "--compatibility",
        "-c",
        type=click.Choice(STRATEGIES, case_sensitive=False),
        required=True,
        help="The strategy (Pulsar's default: BACKWARD).",
    )
    @click.pass_obj
    def command(service_url: str, target: str, compatibility: str) -> None:
        level.call(
            service_url,
            lambda v: v.set_policy(target, "schema-compatibility-strategy", compatibility.upper()),
        )

    return command


def _schema_switch(verb: str, policy: str, what: str) -> Callable[[Level], click.Command]:
    def factory(level: Level) -> click.Command:
        @click.command(
            verb,
            short_help=f"{what} (--enable|--disable).",
            help=f"{what} on the topics of {level.metavar} (docs/schemas.md). " + _overrides(level),
        )
        @level.target
        @click.option("--enable/--disable", "-e/-d", default=None, callback=switch_given)
        @click.pass_obj
        def command(service_url: str, target: str, enable: bool) -> None:
            level.call(service_url, lambda v: v.set_policy(target, policy, enable))

        return command

    return factory


set_is_allow_auto_update_schema = _schema_switch(
    "set-is-allow-auto-update-schema",
    "is-allow-auto-update-schema",
    "Let producers and consumers register compatible new schema versions",
)
set_schema_validation_enforce = _schema_switch(
    "set-schema-validation-enforce",
    "schema-validation-enforce",
    "Refuse producers without a schema on topics that have one",
)


def set_compaction_threshold(level: Level) -> click.Command:
    @click.command(
        "set-compaction-threshold",
        short_help="Compact automatically past this backlog (--threshold).",
        help=f"Compact a topic of {level.metavar} once this many bytes are not compacted yet "
        "(0 = never; docs/compaction.md). " + _overrides(level),
    )
    @level.target
    @click.option(
        "--threshold", "-t", type=BYTES, required=True, help="10M, 1G, … (bare number: bytes)."
    )
    @click.pass_obj
    def command(service_url: str, target: str, threshold: int) -> None:
        level.call(service_url, lambda v: v.set_policy(target, "compaction-threshold", threshold))

    return command
