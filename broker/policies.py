"""Pulsar's policies, at the three levels where they are set, and the value
a topic applies.

Theory of operation. A policy is set on a topic (its override record), on
its namespace (the namespace's ``Policies`` document) or nowhere, in which
case the broker setting that stands for it applies: topic → namespace →
broker, Pulsar's precedence. :class:`Policies` holds what one level sets
(``None`` = not set here); :func:`applied` folds the three levels into an
:class:`AppliedPolicies` whose every field is a concrete value, which is
what the rest of the broker reads (never a policy document, never a
``.get("…")``).

Each policy is one row of :data:`POLICY_FIELDS`: its attribute, its JSON key
in Pulsar's namespace document, the stem of its pulsar-admin verbs
(``retention`` → ``set-retention`` / ``get-retention`` /
``remove-retention``), whether a topic may override it, how its JSON value
is read (validated: a :class:`~broker.errors.BrokerError` INVALID_ARGUMENT
naming the value and what is allowed, so nothing wrong is ever stored) and
written, and the broker's value when no level sets it. Units follow
Pulsar's JSON: retention in minutes and MB, TTL and quota ages in seconds,
quota sizes in bytes; -1 means "no limit" where Pulsar says so, and a
limit of 0 means "no limit beyond the broker's own bound" (the broker's
``max_*`` settings always bound what one topic may hold).

Magnetar has one cluster per metastore, so the rate policies that Pulsar
keeps as maps by cluster name (``topicDispatchRate``,
``subscriptionDispatchRate``, ``publishMaxMessageRate``,
``clusterSubscribeRate``) hold their one value directly.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from broker.ledger_rules import RetentionPolicy
from broker.policy_values import (
    AutoTopicCreation,
    BacklogQuota,
    BacklogQuotaPolicy,
    BacklogQuotaType,
    DispatchRate,
    InactiveTopicDeleteMode,
    InactiveTopicPolicies,
    Persistence,
    PublishRate,
    SubscribeRate,
    as_is,
    invalid,
    read_auto_subscription_creation,
    read_auto_topic_creation,
    read_backlog_quotas,
    read_bool,
    read_dispatch_rate,
    read_inactive_topic_policies,
    read_limit,
    read_persistence,
    read_publish_rate,
    read_retention,
    read_subscribe_rate,
    retention_from,
    write_auto_subscription_creation,
    write_auto_topic_creation,
    write_backlog_quotas,
    write_dispatch_rate,
    write_inactive_topic_policies,
    write_persistence,
    write_publish_rate,
    write_retention,
    write_subscribe_rate,
)
from broker.schema_compatibility import Strategy, strategy_of
from broker.settings import BrokerSettings
from protos.errors import InvalidArgumentError

# ---------------------------------------------------------------- the levels


@dataclass(frozen=True)
class Policies:
    """What one level (a topic or a namespace) sets; None = not set here."""

    retention: RetentionPolicy | None = None
    message_ttl_s: int | None = None
    backlog_quotas: Mapping[BacklogQuotaType, BacklogQuota] | None = None
    dispatch_rate: DispatchRate | None = None
    subscription_dispatch_rate: DispatchRate | None = None
    publish_rate: PublishRate | None = None
    subscribe_rate: SubscribeRate | None = None
    deduplication_enabled: bool | None = None
    persistence: Persistence | None = None
    max_producers_per_topic: int | None = None
    max_consumers_per_topic: int | None = None
    max_consumers_per_subscription: int | None = None
    max_subscriptions_per_topic: int | None = None
    max_unacked_messages_per_consumer: int | None = None
    max_unacked_messages_per_subscription: int | None = None
    inactive_topic_policies: InactiveTopicPolicies | None = None
    schema_compatibility_strategy: Strategy | None = None
    compaction_threshold_bytes: int | None = None
    # Namespace level only:
    max_topics_per_namespace: int | None = None
    auto_topic_creation: AutoTopicCreation | None = None
    auto_subscription_creation: bool | None = None
    subscription_expiration_time_minutes: int | None = None
    is_allow_auto_update_schema: bool | None = None
    schema_validation_enforced: bool | None = None

    def with_value(self, attr: str, value: Any) -> Policies:
        return replace(self, **{attr: value})

    @classmethod
    def from_document(cls, doc: Mapping[str, Any], topic_level: bool = False) -> Policies:
        """The policies of a stored document (keys it does not know are left to the caller)."""
        values = {}
        for f in POLICY_FIELDS:
            if f.key in doc and doc[f.key] is not None and (f.topic_level or not topic_level):
                values[f.attr] = f.read(doc[f.key])
        return cls(**values)

    def into_document(self, doc: dict[str, Any]) -> dict[str, Any]:
        """``doc`` with these policies written in (unset ones removed)."""
        for f in POLICY_FIELDS:
            value = getattr(self, f.attr)
            if value is None:
                doc.pop(f.key, None)
            else:
                doc[f.key] = f.write(value)
        return doc

    def is_empty(self) -> bool:
        return all(getattr(self, f.name) is None for f in fields(self))


@dataclass(frozen=True)
class AppliedPolicies:
    """Every policy's value for one topic, after topic → namespace → broker."""

    retention: RetentionPolicy
    message_ttl_s: int
    backlog_quotas: Mapping[BacklogQuotaType, BacklogQuota]
    dispatch_rate: DispatchRate
    subscription_dispatch_rate: DispatchRate
    publish_rate: PublishRate
    subscribe_rate: SubscribeRate
    deduplication_enabled: bool
    persistence: Persistence
    max_producers_per_topic: int
    max_consumers_per_topic: int
    max_consumers_per_subscription: int
    max_subscriptions_per_topic: int
    max_unacked_messages_per_consumer: int
    max_unacked_messages_per_subscription: int
    inactive_topic_policies: InactiveTopicPolicies
    schema_compatibility_strategy: Strategy
    compaction_threshold_bytes: int
    max_topics_per_namespace: int
    auto_topic_creation: AutoTopicCreation
    auto_subscription_creation: bool
    subscription_expiration_time_minutes: int
    is_allow_auto_update_schema: bool
    schema_validation_enforced: bool

    def backlog_quota(self, kind: BacklogQuotaType) -> BacklogQuota | None:
        """The quota of ``kind`` if it limits anything."""
        q = self.backlog_quotas.get(kind)
        if q is None:
            return None
        limit = (
            q.limit_size_bytes if kind is BacklogQuotaType.DESTINATION_STORAGE else q.limit_time_s
        )
        return q if limit >= 0 else None


@dataclass(frozen=True)
class PolicyField:
    attr: str  # attribute of Policies and AppliedPolicies
    key: str  # Pulsar's key in the namespace Policies document
    verb: str  # pulsar-admin's verbs: set-<verb>, get-<verb>, remove-<verb>
    read: Callable[[Any], Any]
    write: Callable[[Any], Any]
    broker_default: Callable[[BrokerSettings], Any]
    topic_level: bool = True


def _bounded(setting: str) -> Callable[[BrokerSettings], int]:
    return lambda s: int(getattr(s, setting))


def _default_quotas(s: BrokerSettings) -> dict[BacklogQuotaType, BacklogQuota]:
    policy = BacklogQuotaPolicy(s.backlog_quota_default_retention_policy)
    quotas = {}
    if s.backlog_quota_default_limit_bytes >= 0:
        quotas[BacklogQuotaType.DESTINATION_STORAGE] = BacklogQuota(
            limit_size_bytes=s.backlog_quota_default_limit_bytes, policy=policy
        )
    if s.backlog_quota_default_limit_second >= 0:
        quotas[BacklogQuotaType.MESSAGE_AGE] = BacklogQuota(
            limit_time_s=s.backlog_quota_default_limit_second, policy=policy
        )
    return quotas


def _read_strategy(value: Any) -> Strategy:
    """A schema compatibility strategy by name (Pulsar's, old names too)."""
    if not isinstance(value, str):
        raise invalid(f"schema compatibility strategy: {value!r} is not a name")
    try:
        return strategy_of(value)
    except InvalidArgumentError as exc:
        raise invalid(exc.message) from None


def _default_retention(s: BrokerSettings) -> RetentionPolicy:
    return retention_from(s.default_retention_time_in_minutes, s.default_retention_size_in_mb)


# fmt: off
POLICY_FIELDS: tuple[PolicyField, ...] = (
    PolicyField(
        "retention", "retention_policies", "retention", read_retention, write_retention,
        _default_retention,
    ),
    PolicyField(
        "message_ttl_s", "message_ttl_in_seconds", "message-ttl", read_limit("message TTL"),
        as_is, _bounded("ttl_duration_default_in_seconds"),
    ),
    PolicyField(
        "backlog_quotas", "backlog_quota_map", "backlog-quota", read_backlog_quotas,
        write_backlog_quotas, _default_quotas,
    ),
    PolicyField(
        "dispatch_rate", "topicDispatchRate", "dispatch-rate", read_dispatch_rate,
        write_dispatch_rate,
        lambda s: DispatchRate(
            s.dispatch_throttling_rate_per_topic_in_msg,
            s.dispatch_throttling_rate_per_topic_in_byte,
        ),
    ),
    PolicyField(
        "subscription_dispatch_rate", "subscriptionDispatchRate", "subscription-dispatch-rate",
        read_dispatch_rate, write_dispatch_rate,
        lambda s: DispatchRate(
            s.dispatch_throttling_rate_per_subscription_in_msg,
            s.dispatch_throttling_rate_per_subscription_in_byte,
        ),
    ),
    PolicyField(
        "publish_rate", "publishMaxMessageRate", "publish-rate", read_publish_rate,
        write_publish_rate,
        lambda s: PublishRate(
            s.max_publish_rate_per_topic_in_messages, s.max_publish_rate_per_topic_in_bytes
        ),
    ),
    PolicyField(
        "subscribe_rate", "clusterSubscribeRate", "subscribe-rate", read_subscribe_rate,
        write_subscribe_rate,
        lambda s: SubscribeRate(
            s.subscribe_throttling_rate_per_consumer, s.subscribe_rate_period_per_consumer_in_second
        ),
    ),
    PolicyField(
        "deduplication_enabled", "deduplicationEnabled", "deduplication",
        lambda v: read_bool(v, "deduplication"), as_is, lambda s: s.broker_deduplication_enabled,
    ),
    PolicyField(
        "persistence", "persistence", "persistence", read_persistence, write_persistence,
        lambda s: Persistence(
            s.managed_ledger_default_ensemble_size,
            s.managed_ledger_default_write_quorum,
            s.managed_ledger_default_ack_quorum,
        ),
    ),
    PolicyField(
        "max_producers_per_topic", "max_producers_per_topic", "max-producers-per-topic",
        read_limit("max producers per topic"), as_is, _bounded("max_producers_per_topic"),
    ),
    PolicyField(
        "max_consumers_per_topic", "max_consumers_per_topic", "max-consumers-per-topic",
        read_limit("max consumers per topic"), as_is, _bounded("max_consumers_per_topic"),
    ),
    PolicyField(
        "max_consumers_per_subscription", "max_consumers_per_subscription",
        "max-consumers-per-subscription", read_limit("max consumers per subscription"), as_is,
        _bounded("max_consumers_per_subscription"),
    ),
    PolicyField(
        "max_subscriptions_per_topic", "max_subscriptions_per_topic",
        "max-subscriptions-per-topic", read_limit("max subscriptions per topic"), as_is,
        _bounded("max_subscriptions_per_topic"),
    ),
    PolicyField(
        "max_unacked_messages_per_consumer", "max_unacked_messages_per_consumer",
        "max-unacked-messages-per-consumer", read_limit("max unacked messages per consumer"),
        as_is, _bounded("max_unacked_messages_per_consumer"),
    ),
    PolicyField(
        "max_unacked_messages_per_subscription", "max_unacked_messages_per_subscription",
        "max-unacked-messages-per-subscription",
        read_limit("max unacked messages per subscription"), as_is,
        _bounded("max_unacked_messages_per_subscription"),
    ),
    PolicyField(
        "inactive_topic_policies", "inactive_topic_policies", "inactive-topic-policies",
        read_inactive_topic_policies, write_inactive_topic_policies,
        lambda s: InactiveTopicPolicies(
            InactiveTopicDeleteMode(s.broker_delete_inactive_topics_mode),
            s.broker_delete_inactive_topics_max_inactive_duration_seconds,
            s.broker_delete_inactive_topics_enabled,
        ),
    ),
    PolicyField(
        "schema_compatibility_strategy", "schema_compatibility_strategy",
        "schema-compatibility-strategy", _read_strategy, lambda v: v.name,
        lambda s: _read_strategy(s.schema_compatibility_strategy),
    ),
    PolicyField(
        "compaction_threshold_bytes", "compaction_threshold", "compaction-threshold",
        read_limit("compaction threshold"), as_is,
        lambda s: s.broker_service_compaction_threshold_in_bytes,
    ),
    PolicyField(
        "max_topics_per_namespace", "max_topics_per_namespace", "max-topics-per-namespace",
        read_limit("max topics per namespace"), as_is, _bounded("max_topics_per_namespace"),
        topic_level=False,
    ),
    PolicyField(
        "auto_topic_creation", "autoTopicCreationOverride", "auto-topic-creation",
        read_auto_topic_creation, write_auto_topic_creation,
        lambda s: AutoTopicCreation(
            s.allow_auto_topic_creation,
            s.allow_auto_topic_creation_type == "partitioned",
            s.default_num_partitions,
        ),
        topic_level=False,
    ),
    PolicyField(
        "auto_subscription_creation", "autoSubscriptionCreationOverride",
        "auto-subscription-creation", read_auto_subscription_creation,
        write_auto_subscription_creation, lambda s: s.allow_auto_subscription_creation,
        topic_level=False,
    ),
    PolicyField(
        "subscription_expiration_time_minutes", "subscription_expiration_time_minutes",
        "subscription-expiration-time", read_limit("subscription expiration time"), as_is,
        _bounded("subscription_expiration_time_minutes"), topic_level=False,
    ),
    PolicyField(
        "is_allow_auto_update_schema", "is_allow_auto_update_schema",
        "is-allow-auto-update-schema", lambda v: read_bool(v, "is-allow-auto-update-schema"),
        as_is, lambda s: s.is_allow_auto_update_schema_enabled, topic_level=False,
    ),
    PolicyField(
        "schema_validation_enforced", "schema_validation_enforced", "schema-validation-enforce",
        lambda v: read_bool(v, "schema-validation-enforce"), as_is,
        lambda s: s.schema_validation_enforced, topic_level=False,
    ),
)
# fmt: on

BY_VERB: dict[str, PolicyField] = {f.verb: f for f in POLICY_FIELDS}
BY_ATTR: dict[str, PolicyField] = {f.attr: f for f in POLICY_FIELDS}

# A limit policy: 0 there means "the broker's bound", not "nothing allowed".
_LIMITS = frozenset(a for a in BY_ATTR if a.startswith("max_"))


def field_by_verb(verb: str, topic_level: bool) -> PolicyField:
    """The policy of a pulsar-admin verb stem; INVALID_ARGUMENT when there is
    none (at that level)."""
    f = BY_VERB.get(verb)
    if f is None:
        raise invalid(f"there is no policy {verb!r}; policies: {', '.join(sorted(BY_VERB))}")
    if topic_level and not f.topic_level:
        raise invalid(f"{verb} is a namespace policy; a topic cannot override it")
    return f


def applied_value(
    f: PolicyField, topic: Policies | None, namespace: Policies | None, settings: BrokerSettings
) -> Any:
    """One policy's value: the topic's, else the namespace's, else the broker's.
    A limit of 0 means the broker's own bound. Backlog quotas resolve per
    quota type (a topic's storage quota leaves the namespace's age quota)."""
    if f.attr == "backlog_quotas":
        quotas = dict(f.broker_default(settings))
        for level in (namespace, topic):
            quotas.update((level.backlog_quotas or {}) if level is not None else {})
        return quotas
    for level in (topic, namespace):
        value = None if level is None else getattr(level, f.attr)
        if value is None:
            continue
        if f.attr in _LIMITS and value == 0:
            break
        return value
    return f.broker_default(settings)


def applied(
    topic: Policies | None, namespace: Policies | None, settings: BrokerSettings
) -> AppliedPolicies:
    return AppliedPolicies(
        **{f.attr: applied_value(f, topic, namespace, settings) for f in POLICY_FIELDS}
    )
