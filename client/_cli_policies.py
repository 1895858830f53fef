"""The policy verbs of ``magnetar-admin namespaces`` and ``topics``:
``set-<policy>``, ``get-<policy> [--applied]`` and ``remove-<policy>`` for
each of the broker's policies (broker/policies.py, POLICY_FIELDS), the
four namespace-only ones on ``namespaces`` alone.

The get- and remove- verbs and the ``set-max-*`` limits are generated
from the tables below; the other set- verbs are written out in
client/_cli_policy_setters.py. A get- verb prints the value set at that
level (``null`` when none is), or with ``--applied`` the value that applies
there: topic → namespace → broker setting.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import click

from client import _cli_policy_setters as setters
from client._cli_policy_setters import NAMESPACE, TOPIC, Level


@dataclass(frozen=True)
class Policy:
    stem: str  # pulsar-admin's verb stem: set-<stem>, get-<stem>, remove-<stem>
    what: str  # what it is, for the help texts
    topic_level: bool = True  # False: a namespace policy no topic overrides


POLICIES: tuple[Policy, ...] = (
    Policy("retention", "retention of acknowledged messages (time and size)"),
    Policy("message-ttl", "message TTL in seconds"),
    Policy("backlog-quota", "backlog quotas, by type"),
    Policy("dispatch-rate", "dispatch rate limit of each topic"),
    Policy("subscription-dispatch-rate", "dispatch rate limit of each subscription"),
    Policy("publish-rate", "publish rate limit of each topic"),
    Policy("subscribe-rate", "subscribe rate limit of each consumer name"),
    Policy("deduplication", "deduplication switch (true/false)"),
    Policy("persistence", "ensemble, write quorum and ack quorum of new ledgers"),
    Policy("max-producers-per-topic", "limit of producers per topic"),
    Policy("max-consumers-per-topic", "limit of consumers per topic"),
    Policy("max-consumers-per-subscription", "limit of consumers per subscription"),
    Policy("max-subscriptions-per-topic", "limit of subscriptions per topic"),
    Policy("max-unacked-messages-per-consumer", "limit of unacked messages per consumer"),
    Policy("max-unacked-messages-per-subscription", "limit of unacked messages per subscription"),
    Policy("inactive-topic-policies", "inactive topic policies (deletion of idle topics)"),
    Policy("max-topics-per-namespace", "limit of topics in the namespace", False),
    Policy("auto-topic-creation", "auto topic creation override", False),
    Policy("auto-subscription-creation", "auto subscription creation override", False),
    Policy("subscription-expiration-time", "subscription expiration time in minutes", False),
    Policy("schema-compatibility-strategy", "schema compatibility strategy"),
    Policy("compaction-threshold", "automatic compaction threshold in bytes"),
    Policy("is-allow-auto-update-schema", "schema auto update switch (true/false)", False),
    Policy("schema-validation-enforce", "schema validation switch (true/false)", False),
)


@dataclass(frozen=True)
class Limit:
    stem: str  # set-<stem> --<stem> N
    short: str  # pulsar-admin's short flag
    counts: str  # what the number counts
    topic_level: bool = True


LIMITS: tuple[Limit, ...] = (
    Limit("max-producers-per-topic", "-p", "producers connected to one topic"),
    Limit("max-consumers-per-topic", "-c", "consumers of one topic, all subscriptions"),
    Limit("max-consumers-per-subscription", "-c", "consumers of one subscription"),
    Limit("max-subscriptions-per-topic", "-m", "subscriptions of one topic"),
    Limit(
        "max-unacked-messages-per-consumer",
        "-m",
        "unacknowledged messages one consumer holds before it gets no more",
    ),
    Limit(
        "max-unacked-messages-per-subscription",
        "-m",
        "unacknowledged messages of one subscription before dispatch stops",
    ),
    Limit("max-topics-per-namespace", "-t", "topics of the namespace", False),
)

# The written-out set- verbs: (factory, topic may override).
SETTERS: tuple[tuple[Callable[[Level], click.Command], bool], ...] = (
    (setters.set_retention, True),
    (setters.set_message_ttl, True),
    (setters.set_backlog_quota, True),
    (setters.remove_backlog_quota, True),
    (lambda level: setters.set_dispatch_rate(level, subscription=False), True),
    (lambda level: setters.set_dispatch_rate(level, subscription=True), True),
    (setters.set_publish_rate, True),
    (setters.set_subscribe_rate, True),
    (setters.set_persistence, True),
    (setters.set_deduplication, True),
    (setters.set_inactive_topic_policies, True),
    (setters.set_auto_topic_creation, False),
    (setters.set_auto_subscription_creation, False),
    (setters.set_subscription_expiration_time, False),
    (setters.set_schema_compatibility_strategy, True),
    (setters.set_compaction_threshold, True),
    (setters.set_is_allow_auto_update_schema, False),
    (setters.set_schema_validation_enforce, False),
)


def get_verb(policy: Policy) -> str:
    """pulsar-admin says get-backlog-quotas (the whole map), else get-<stem>."""
    return "get-backlog-quotas" if policy.stem == "backlog-quota" else f"get-{policy.stem}"


def get_command(level: Level, policy: Policy) -> click.Command:
    @click.command(
        get_verb(policy),
        short_help=f"Show the {policy.what} (or --applied).",
        help=f"Show the {policy.what} set on {level.metavar}; null when none is. "
        f"With --applied: the value that applies there (where {level.metavar} sets none, "
        f"{level.fallback}).",
    )
    @level.target
    @click.option(
        "--applied", "-ap", is_flag=True, help="The value that applies, not the one set here."
    )
    @click.pass_obj
    def command(service_url: str, target: str, applied: bool) -> None:
        level.call(service_url, lambda v: v.get_policy(target, policy.stem, applied))

    return command


def remove_command(level: Level, policy: Policy) -> click.Command:
    @click.command(
        f"remove-{policy.stem}",
        short_help=f"Remove the {policy.what}.",
        help=f"Remove the {policy.what} from {level.metavar}: {level.fallback} "
        "applies again. Prints null.",
    )
    @level.target
    @click.pass_obj
    def command(service_url: str, target: str) -> None:
        level.call(service_url, lambda v: v.remove_policy(target, policy.stem))

    return command


def set_limit_command(level: Level, limit: Limit) -> click.Command:
    @click.command(
        f"set-{limit.stem}",
        short_help=f"Set the most {limit.counts} ({limit.short}).",
        help=f"At most N {limit.counts}, for {level.metavar} (0 = the broker's own "
        f"bound; the broker's max_* setting always bounds it). Where {level.metavar} sets "
        f"none, {level.fallback} applies.",
    )
    @level.target
    @click.option(f"--{limit.stem}", limit.short, "n", type=click.IntRange(min=0), required=True)
    @click.pass_obj
    def command(service_url: str, target: str, n: int) -> None:
        level.call(service_url, lambda v: v.set_policy(target, limit.stem, n))

    return command


def policy_commands(level: Level) -> list[click.Command]:
    """Every policy verb of ``level``."""
    topic = level is TOPIC
    out = [factory(level) for factory, topic_level in SETTERS if topic_level or not topic]
    out += [set_limit_command(level, m) for m in LIMITS if m.topic_level or not topic]
    for policy in POLICIES:
        if policy.topic_level or not topic:
            out.append(get_command(level, policy))
            if policy.stem != "backlog-quota":  # remove-backlog-quota takes --type
                out.append(remove_command(level, policy))
    return out


def add_policy_commands(namespaces: click.Group, topics: click.Group) -> None:
    for group, level in ((namespaces, NAMESPACE), (topics, TOPIC)):
        for command in policy_commands(level):
            group.add_command(command)
