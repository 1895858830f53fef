"""Policies (broker/policies.py, broker/policy_values.py): Pulsar's JSON in
and out, bad values refused with the value and what is allowed, and the
precedence topic → namespace → broker setting, as step tables."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import pytest

from broker.errors import BrokerError
from broker.ledger_rules import RetentionPolicy
from broker.policies import (
    BY_VERB,
    POLICY_FIELDS,
    AppliedPolicies,
    Policies,
    applied,
    applied_value,
    field_by_verb,
)
from broker.policy_values import (
    BacklogQuota,
    BacklogQuotaPolicy,
    BacklogQuotaType,
    DispatchRate,
    Persistence,
)
from broker.settings import BrokerSettings

S = BrokerSettings()

# (verb, Pulsar's JSON value) — each reads and writes back unchanged.
ROUND_TRIPS: list[tuple[str, Any]] = [
    ("retention", {"retentionTimeInMinutes": 180, "retentionSizeInMB": 10240}),
    ("retention", {"retentionTimeInMinutes": -1, "retentionSizeInMB": -1}),
    ("retention", {"retentionTimeInMinutes": 0, "retentionSizeInMB": 0}),
    ("message-ttl", 3600),
    (
        "backlog-quota",
        {
            "destination_storage": {
                "limitSize": 2 << 30,
                "limitTime": -1,
                "policy": "producer_exception",
            },
            "message_age": {
                "limitSize": -1,
                "limitTime": 600,
                "policy": "consumer_backlog_eviction",
            },
        },
    ),
    (
        "dispatch-rate",
        {
            "dispatchThrottlingRateInMsg": 100,
            "dispatchThrottlingRateInByte": -1,
            "ratePeriodInSecond": 5,
            "relativeToPublishRate": False,
        },
    ),
    ("publish-rate", {"publishThrottlingRateInMsg": 10, "publishThrottlingRateInByte": 1024}),
    ("subscribe-rate", {"subscribeThrottlingRatePerConsumer": 3, "ratePeriodInSecond": 30}),
    ("deduplication", True),
    (
        "persistence",
        {
            "bookkeeperEnsemble": 3,
            "bookkeeperWriteQuorum": 2,
            "bookkeeperAckQuorum": 2,
            "managedLedgerMaxMarkDeleteRate": 0.0,
        },
    ),
    (
        "subscription-dispatch-rate",
        {
            "dispatchThrottlingRateInMsg": -1,
            "dispatchThrottlingRateInByte": 1 << 20,
            "ratePeriodInSecond": 1,
            "relativeToPublishRate": False,
        },
    ),
    ("max-producers-per-topic", 5),
    ("max-consumers-per-topic", 50),
    ("max-consumers-per-subscription", 2),
    ("max-subscriptions-per-topic", 7),
    ("max-unacked-messages-per-subscription", 1000),
    ("max-unacked-messages-per-consumer", 0),
    (
        "inactive-topic-policies",
        {
            "inactiveTopicDeleteMode": "delete_when_subscriptions_caught_up",
            "maxInactiveDurationSeconds": 120,
            "deleteWhileInactive": True,
        },
    ),
    ("auto-topic-creation", {"allowAutoTopicCreation": False, "topicType": "non-partitioned"}),
    (
        "auto-topic-creation",
        {"allowAutoTopicCreation": True, "topicType": "partitioned", "defaultNumPartitions": 4},
    ),
    ("auto-subscription-creation", {"allowAutoSubscriptionCreation": False}),
    ("subscription-expiration-time", 1440),
    ("max-topics-per-namespace", 100),
    ("schema-compatibility-strategy", "FORWARD_TRANSITIVE"),
    ("compaction-threshold", 104857600),
    ("is-allow-auto-update-schema", False),
    ("schema-validation-enforce", True),
]


@pytest.mark.parametrize("verb, value", ROUND_TRIPS)
def test_every_policy_reads_and_writes_pulsars_json(verb, value):
    f = BY_VERB[verb]
    assert f.write(f.read(value)) == value
    doc = Policies().with_value(f.attr, f.read(value)).into_document({})
    assert doc == {f.key: value}
    assert getattr(Policies.from_document(doc), f.attr) == f.read(value)


def test_every_policy_has_a_round_trip_row():
    assert {f.verb for f in POLICY_FIELDS} == {verb for verb, _ in ROUND_TRIPS}


# (verb, bad value, what the error says)
BAD_VALUES: list[tuple[str, Any, str]] = [
    ("schema-compatibility-strategy", "SIDEWAYS", "unknown schema compatibility strategy"),
    ("schema-compatibility-strategy", 3, "is not a name"),
    ("is-allow-auto-update-schema", "yes", "is not true or false"),
    ("retention", {"retentionTimeInMinutes": -2, "retentionSizeInMB": 1}, "-2 is not allowed"),
    ("retention", {"retentionTimeInMinutes": 0, "retentionSizeInMB": 10}, "both 0"),
    ("retention", [1, 2], "is not a JSON object"),
    ("message-ttl", -1, "-1 is not allowed (0 or more)"),
    ("message-ttl", 1.5, "not a whole number"),
    ("message-ttl", True, "not a whole number"),
    ("backlog-quota", {"disk": {"limitSize": 1}}, "'disk' is not one of destination_storage"),
    (
        "backlog-quota",
        {"destination_storage": {"limitSize": 1, "policy": "hold"}},
        "'hold' is not one of producer_request_hold",
    ),
    ("dispatch-rate", {"ratePeriodInSecond": 0}, "ratePeriodInSecond = 0 is not allowed (1 or more)"),
    ("dispatch-rate", {"relativeToPublishRate": "yes"}, "not true or false"),
    ("persistence", {"bookkeeperEnsemble": 2, "bookkeeperWriteQuorum": 3, "bookkeeperAckQuorum": 1}, "E=2 Qw=3 Qa=1"),
    ("persistence", {"bookkeeperEnsemble": 2, "bookkeeperWriteQuorum": 2}, "bookkeeperAckQuorum is missing"),
    ("max-consumers-per-topic", -1, "-1 is not allowed"),
    ("auto-topic-creation", {"topicType": "partitioned"}, "allowAutoTopicCreation"),
    ("auto-topic-creation", {"allowAutoTopicCreation": True, "topicType": "partitioned", "defaultNumPartitions": 0}, "defaultNumPartitions = 0"),
    ("inactive-topic-policies", {"inactiveTopicDeleteMode": "delete_always", "maxInactiveDurationSeconds": 5}, "'delete_always'"),
    ("deduplication", "true", "not true or false"),
    ("dispatch-rate", {"relativeToPublishRate": True}, "relativeToPublishRate (a rate relative to the publish rate) is not supported"),
    ("persistence", {"bookkeeperEnsemble": 1, "bookkeeperWriteQuorum": 1, "bookkeeperAckQuorum": 1, "managedLedgerMaxMarkDeleteRate": 5}, "managedLedgerMaxMarkDeleteRate (cursor writes"),
]  # fmt: skip


@pytest.mark.parametrize("verb, value, message", BAD_VALUES)
def test_bad_values_name_the_value_and_what_is_allowed(verb, value, message):
    with pytest.raises(BrokerError, match=re.escape(message)):
        BY_VERB[verb].read(value)


def test_unknown_and_namespace_only_verbs():
    with pytest.raises(BrokerError, match="there is no policy 'retention-days'"):
        field_by_verb("retention-days", topic_level=False)
    for verb in ("max-topics-per-namespace", "auto-topic-creation", "subscription-expiration-time"):
        with pytest.raises(BrokerError, match="a topic cannot override it"):
            field_by_verb(verb, topic_level=True)
        assert field_by_verb(verb, topic_level=False).verb == verb


TTL = BY_VERB["message-ttl"]
MAX_PRODUCERS = BY_VERB["max-producers-per-topic"]
RETENTION = BY_VERB["retention"]

# (policy, topic level, namespace level, broker settings) -> applied value
PRECEDENCE: list[tuple[Any, Policies | None, Policies | None, BrokerSettings, Any]] = [
    (TTL, None, None, S, 0),
    (TTL, None, None, replace(S, ttl_duration_default_in_seconds=30), 30),
    (TTL, None, Policies(message_ttl_s=600), S, 600),
    (TTL, Policies(message_ttl_s=60), Policies(message_ttl_s=600), S, 60),
    (TTL, Policies(), Policies(message_ttl_s=600), S, 600),  # a topic record without TTL
    (TTL, Policies(message_ttl_s=0), Policies(message_ttl_s=600), S, 0),  # 0 set = off
    # A limit of 0 means "the broker's own bound", at either level.
    (MAX_PRODUCERS, None, None, S, 10000),
    (MAX_PRODUCERS, None, Policies(max_producers_per_topic=3), S, 3),
    (MAX_PRODUCERS, Policies(max_producers_per_topic=0), Policies(max_producers_per_topic=3), S, 10000),
    (MAX_PRODUCERS, None, None, replace(S, max_producers_per_topic=7), 7),
    (RETENTION, None, None, replace(S, default_retention_time_in_minutes=-1, default_retention_size_in_mb=5), RetentionPolicy(-1.0, 5 << 20)),
    (RETENTION, Policies(retention=RetentionPolicy(60.0, -1)), None, S, RetentionPolicy(60.0, -1)),
]  # fmt: skip


def test_the_topic_level_wins_then_the_namespace_then_the_broker():
    for f, topic, namespace, settings, expected in PRECEDENCE:
        assert applied_value(f, topic, namespace, settings) == expected, (f.verb, topic, namespace)


def test_backlog_quotas_resolve_per_type():
    f = BY_VERB["backlog-quota"]
    storage, age = BacklogQuotaType.DESTINATION_STORAGE, BacklogQuotaType.MESSAGE_AGE
    ns_quotas = {
        storage: BacklogQuota(2 << 30, -1, BacklogQuotaPolicy.PRODUCER_EXCEPTION),
        age: BacklogQuota(-1, 3600, BacklogQuotaPolicy.CONSUMER_BACKLOG_EVICTION),
    }
    topic_storage = BacklogQuota(100 << 20, -1, BacklogQuotaPolicy.PRODUCER_REQUEST_HOLD)
    got = applied_value(
        f, Policies(backlog_quotas={storage: topic_storage}), Policies(backlog_quotas=ns_quotas), S
    )
    assert got == {storage: topic_storage, age: ns_quotas[age]}


def test_default_backlog_quotas_come_from_the_broker_settings():
    assert applied(None, None, S).backlog_quotas == {}
    settings = replace(
        S,
        backlog_quota_default_limit_bytes=1 << 30,
        backlog_quota_default_retention_policy="producer_exception",
    )
    quotas = applied(None, None, settings)
    storage = BacklogQuotaType.DESTINATION_STORAGE
    assert quotas.backlog_quota(storage) == BacklogQuota(
        1 << 30, -1, BacklogQuotaPolicy.PRODUCER_EXCEPTION
    )
    assert quotas.backlog_quota(BacklogQuotaType.MESSAGE_AGE) is None


def test_applied_has_a_value_for_every_policy():
    every = applied(None, None, S)
    assert isinstance(every, AppliedPolicies)
    assert every.persistence == Persistence(2, 2, 2)
    assert every.dispatch_rate == DispatchRate(0, 0) and every.dispatch_rate.unlimited
    assert every.auto_topic_creation.allow and every.auto_subscription_creation
    assert {f.attr for f in POLICY_FIELDS} == set(AppliedPolicies.__dataclass_fields__)
