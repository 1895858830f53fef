"""The values of Pulsar's policies (retention, backlog quotas, rates,
persistence, auto-creation, inactive topics) and how each is read from and
written to Pulsar's JSON: reading validates, and a wrong value is a
:class:`~broker.errors.BrokerError` INVALID_ARGUMENT naming the value and
what is allowed, so nothing wrong is ever stored. :mod:`broker.policies`
puts them in its table of policies.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from broker.errors import BrokerError
from broker.ledger_rules import RetentionPolicy
from protos import common_pb2

MB = 1024 * 1024


def invalid(message: str) -> BrokerError:
    return BrokerError(message, common_pb2.INVALID_ARGUMENT)


# ---------------------------------------------------------------- value types


class BacklogQuotaType(enum.Enum):
    DESTINATION_STORAGE = "destination_storage"  # bytes of backlog
    MESSAGE_AGE = "message_age"  # age of the oldest unacknowledged message


class BacklogQuotaPolicy(enum.Enum):
    PRODUCER_REQUEST_HOLD = "producer_request_hold"
    PRODUCER_EXCEPTION = "producer_exception"
    CONSUMER_BACKLOG_EVICTION = "consumer_backlog_eviction"


class InactiveTopicDeleteMode(enum.Enum):
    DELETE_WHEN_NO_SUBSCRIPTIONS = "delete_when_no_subscriptions"
    DELETE_WHEN_SUBSCRIPTIONS_CAUGHT_UP = "delete_when_subscriptions_caught_up"


@dataclass(frozen=True)
class BacklogQuota:
    """Pulsar's BacklogQuota: ``limit_size_bytes`` (destination_storage) or
    ``limit_time_s`` (message_age); -1 = no limit."""

    limit_size_bytes: int = -1
    limit_time_s: int = -1
    policy: BacklogQuotaPolicy = BacklogQuotaPolicy.PRODUCER_REQUEST_HOLD


@dataclass(frozen=True)
class DispatchRate:
    """At most ``msgs`` messages and ``bytes`` bytes per ``period_s``
    seconds (each: -1 or 0 = no limit)."""

    msgs: int = -1
    bytes: int = -1
    period_s: int = 1
    relative_to_publish_rate: bool = False

    @property
    def unlimited(self) -> bool:
        return self.msgs <= 0 and self.bytes <= 0


@dataclass(frozen=True)
class PublishRate:
    """At most ``msgs`` messages and ``bytes`` bytes per second (-1 or 0 = no limit)."""

    msgs: int = -1
    bytes: int = -1

    @property
    def unlimited(self) -> bool:
        return self.msgs <= 0 and self.bytes <= 0


@dataclass(frozen=True)
class SubscribeRate:
    """At most ``per_consumer`` subscribes per ``period_s`` seconds from one
    consumer name (-1 or 0 = no limit)."""

    per_consumer: int = -1
    period_s: int = 30

    @property
    def unlimited(self) -> bool:
        return self.per_consumer <= 0


@dataclass(frozen=True)
class Persistence:
    """Ensemble size E, write quorum Qw, ack quorum Qa of new ledgers, and
    the cursor's mark-delete rate limit (per second, 0 = the broker's)."""

    ensemble: int
    write_quorum: int
    ack_quorum: int
    max_mark_delete_rate: float = 0.0


@dataclass(frozen=True)
class AutoTopicCreation:
    allow: bool
    partitioned: bool = False
    default_partitions: int = 1


@dataclass(frozen=True)
class InactiveTopicPolicies:
    mode: InactiveTopicDeleteMode
    max_inactive_s: int
    delete_while_inactive: bool


# ---------------------------------------------------------------- JSON readers


def read_int(doc: Mapping[str, Any], key: str, what: str, lowest: int, default: int | None) -> int:
    value = doc.get(key, default)
    if value is None:
        raise invalid(f"{what}: {key} is missing")
    if isinstance(value, bool) or not isinstance(value, int):
        raise invalid(f"{what}: {key} = {value!r} is not a whole number")
    if value < lowest:
        allowed = "-1 (no limit) or more" if lowest == -1 else f"{lowest} or more"
        raise invalid(f"{what}: {key} = {value} is not allowed ({allowed})")
    return value


def read_bool(value: Any, what: str) -> bool:
    if not isinstance(value, bool):
        raise invalid(f"{what}: {value!r} is not true or false")
    return value


def read_object(value: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise invalid(f"{what}: {value!r} is not a JSON object")
    return value


def read_enum(cls: type[enum.Enum], value: Any, what: str) -> Any:
    try:
        return cls(value)
    except ValueError:
        allowed = ", ".join(m.value for m in cls)
        raise invalid(f"{what}: {value!r} is not one of {allowed}") from None


def read_limit(what: str) -> Callable[[Any], int]:
    def read(value: Any) -> int:
        return read_int({"value": value}, "value", what, 0, None)

    return read


def as_is(value: Any) -> Any:
    return value


def read_retention(value: Any) -> RetentionPolicy:
    doc = read_object(value, "retention")
    minutes = read_int(doc, "retentionTimeInMinutes", "retention", -1, 0)
    size_mb = read_int(doc, "retentionSizeInMB", "retention", -1, 0)
    if (minutes == 0) != (size_mb == 0):
        raise invalid(
            f"retention of {minutes} minutes and {size_mb} MB: time and size are both 0 "
            "(keep nothing once consumed) or both non-zero (-1 = no limit of that kind)"
        )
    return retention_from(minutes, size_mb)


def retention_from(minutes: int, size_mb: int) -> RetentionPolicy:
    """Pulsar's retention units (minutes, MB; -1 = no limit) in seconds and bytes."""
    return RetentionPolicy(
        -1.0 if minutes < 0 else minutes * 60.0, -1 if size_mb < 0 else size_mb * MB
    )


def write_retention(r: RetentionPolicy) -> dict[str, int]:
    return {
        "retentionTimeInMinutes": -1 if r.time_s < 0 else int(r.time_s // 60),
        "retentionSizeInMB": -1 if r.size_bytes < 0 else r.size_bytes // MB,
    }


def read_backlog_quota(value: Any) -> BacklogQuota:
    doc = read_object(value, "backlog quota")
    size = doc.get("limitSize", doc.get("limit", -1))  # "limit": Pulsar before 2.9
    return BacklogQuota(
        limit_size_bytes=read_int({"limitSize": size}, "limitSize", "backlog quota", -1, -1),
        limit_time_s=read_int(doc, "limitTime", "backlog quota", -1, -1),
        policy=read_enum(
            BacklogQuotaPolicy, doc.get("policy", "producer_request_hold"), "backlog quota policy"
        ),
    )


def write_backlog_quota(q: BacklogQuota) -> dict[str, Any]:
    return {"limitSize": q.limit_size_bytes, "limitTime": q.limit_time_s, "policy": q.policy.value}


def read_backlog_quotas(value: Any) -> dict[BacklogQuotaType, BacklogQuota]:
    doc = read_object(value, "backlog quotas")
    return {
        read_enum(BacklogQuotaType, k, "backlog quota type"): read_backlog_quota(v)
        for k, v in doc.items()
    }


def write_backlog_quotas(quotas: Mapping[BacklogQuotaType, BacklogQuota]) -> dict[str, Any]:
    return {
        t.value: write_backlog_quota(q) for t, q in sorted(quotas.items(), key=lambda i: i[0].value)
    }


def read_dispatch_rate(value: Any) -> DispatchRate:
    doc = read_object(value, "dispatch rate")
    return DispatchRate(
        msgs=read_int(doc, "dispatchThrottlingRateInMsg", "dispatch rate", -1, -1),
        bytes=read_int(doc, "dispatchThrottlingRateInByte", "dispatch rate", -1, -1),
        period_s=read_int(doc, "ratePeriodInSecond", "dispatch rate", 1, 1),
        relative_to_publish_rate=_not_supported(
            read_bool(doc.get("relativeToPublishRate", False), "dispatch rate"),
            False,
            "dispatch rate: relativeToPublishRate (a rate relative to the publish rate)",
        ),
    )


def _not_supported(value: Any, default: Any, what: str) -> Any:
    """A Pulsar option Magnetar does not have: refused rather than ignored."""
    if value != default:
        raise invalid(f"{what} is not supported by Magnetar; leave it at {default!r}")
    return value


def write_dispatch_rate(r: DispatchRate) -> dict[str, Any]:
    return {
        "dispatchThrottlingRateInMsg": r.msgs,
        "dispatchThrottlingRateInByte": r.bytes,
        "ratePeriodInSecond": r.period_s,
        "relativeToPublishRate": r.relative_to_publish_rate,
    }


def read_publish_rate(value: Any) -> PublishRate:
    doc = read_object(value, "publish rate")
    return PublishRate(
        msgs=read_int(doc, "publishThrottlingRateInMsg", "publish rate", -1, -1),
        bytes=read_int(doc, "publishThrottlingRateInByte", "publish rate", -1, -1),
    )


def write_publish_rate(r: PublishRate) -> dict[str, int]:
    return {"publishThrottlingRateInMsg": r.msgs, "publishThrottlingRateInByte": r.bytes}


def read_subscribe_rate(value: Any) -> SubscribeRate:
    doc = read_object(value, "subscribe rate")
    return SubscribeRate(
        per_consumer=read_int(doc, "subscribeThrottlingRatePerConsumer", "subscribe rate", -1, -1),
        period_s=read_int(doc, "ratePeriodInSecond", "subscribe rate", 1, 30),
    )


def write_subscribe_rate(r: SubscribeRate) -> dict[str, int]:
    return {"subscribeThrottlingRatePerConsumer": r.per_consumer, "ratePeriodInSecond": r.period_s}


def read_persistence(value: Any) -> Persistence:
    doc = read_object(value, "persistence")
    e = read_int(doc, "bookkeeperEnsemble", "persistence", 1, None)
    qw = read_int(doc, "bookkeeperWriteQuorum", "persistence", 1, None)
    qa = read_int(doc, "bookkeeperAckQuorum", "persistence", 1, None)
    if not e >= qw >= qa >= 1:
        raise invalid(
            f"persistence E={e} Qw={qw} Qa={qa}: ensemble >= write quorum >= ack quorum >= 1"
        )
    rate = doc.get("managedLedgerMaxMarkDeleteRate", 0.0)
    if isinstance(rate, bool) or not isinstance(rate, int | float) or rate < 0:
        raise invalid(f"persistence: managedLedgerMaxMarkDeleteRate = {rate!r} is not >= 0")
    _not_supported(
        float(rate),
        0.0,
        "persistence: managedLedgerMaxMarkDeleteRate (cursor writes are limited by the "
        "broker setting managed_ledger_cursor_persist_interval_ms instead)",
    )
    return Persistence(e, qw, qa, float(rate))


def write_persistence(p: Persistence) -> dict[str, Any]:
    return {
        "bookkeeperEnsemble": p.ensemble,
        "bookkeeperWriteQuorum": p.write_quorum,
        "bookkeeperAckQuorum": p.ack_quorum,
        "managedLedgerMaxMarkDeleteRate": p.max_mark_delete_rate,
    }


_TOPIC_TYPES = {"non-partitioned": False, "partitioned": True}


def read_auto_topic_creation(value: Any) -> AutoTopicCreation:
    doc = read_object(value, "auto topic creation")
    allow = read_bool(
        doc.get("allowAutoTopicCreation"), "auto topic creation: allowAutoTopicCreation"
    )
    kind = doc.get("topicType", "non-partitioned")
    if kind not in _TOPIC_TYPES:
        raise invalid(
            f"auto topic creation: topicType {kind!r} is not partitioned or non-partitioned"
        )
    partitions = read_int(doc, "defaultNumPartitions", "auto topic creation", 1, 1)
    return AutoTopicCreation(allow, _TOPIC_TYPES[kind], partitions)


def write_auto_topic_creation(a: AutoTopicCreation) -> dict[str, Any]:
    doc: dict[str, Any] = {"allowAutoTopicCreation": a.allow}
    doc["topicType"] = "partitioned" if a.partitioned else "non-partitioned"
    if a.partitioned:
        doc["defaultNumPartitions"] = a.default_partitions
    return doc


def read_auto_subscription_creation(value: Any) -> bool:
    doc = read_object(value, "auto subscription creation")
    return read_bool(
        doc.get("allowAutoSubscriptionCreation"),
        "auto subscription creation: allowAutoSubscriptionCreation",
    )


def write_auto_subscription_creation(allow: bool) -> dict[str, bool]:
    return {"allowAutoSubscriptionCreation": allow}


def read_inactive_topic_policies(value: Any) -> InactiveTopicPolicies:
    doc = read_object(value, "inactive topic policies")
    return InactiveTopicPolicies(
        mode=read_enum(
            InactiveTopicDeleteMode,
            doc.get("inactiveTopicDeleteMode", "delete_when_no_subscriptions"),
            "inactiveTopicDeleteMode",
        ),
        max_inactive_s=read_int(
            doc, "maxInactiveDurationSeconds", "inactive topic policies", 1, None
        ),
        delete_while_inactive=read_bool(
            doc.get("deleteWhileInactive", True), "inactive topic policies: deleteWhileInactive"
        ),
    )


def write_inactive_topic_policies(p: InactiveTopicPolicies) -> dict[str, Any]:
    return {
        "inactiveTopicDeleteMode": p.mode.value,
        "maxInactiveDurationSeconds": p.max_inactive_s,
        "deleteWhileInactive": p.delete_while_inactive,
    }
