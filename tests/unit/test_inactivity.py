"""Subscription expiration and inactive topics (broker/inactivity.py) as tables."""

from __future__ import annotations

from broker.inactivity import subscription_expired, topic_inactive
from broker.policy_values import InactiveTopicDeleteMode, InactiveTopicPolicies

# (durable, consumers, idle seconds, expiration minutes) -> expired
SUBSCRIPTIONS = [
    (True, 0, 61.0, 1, True),
    (True, 0, 59.0, 1, False),
    (True, 1, 3600.0, 1, False),  # a consumer is connected
    (False, 0, 3600.0, 1, False),  # a reader's: it goes with its reader
    (True, 0, 10**6, 0, False),  # 0: never
]


def test_subscription_expiration():
    for durable, consumers, idle, minutes, expected in SUBSCRIPTIONS:
        assert subscription_expired(durable, consumers, idle, minutes) is expected


NO_SUBS = InactiveTopicPolicies(InactiveTopicDeleteMode.DELETE_WHEN_NO_SUBSCRIPTIONS, 60, True)
CAUGHT_UP = InactiveTopicPolicies(
    InactiveTopicDeleteMode.DELETE_WHEN_SUBSCRIPTIONS_CAUGHT_UP, 60, True
)
OFF = InactiveTopicPolicies(InactiveTopicDeleteMode.DELETE_WHEN_NO_SUBSCRIPTIONS, 60, False)

# (policy, system, connected, subscriptions, caught up, idle s) -> delete
TOPICS = [
    (NO_SUBS, False, 0, 0, True, 61.0, True),
    (NO_SUBS, False, 0, 1, True, 61.0, False),  # a subscription keeps it
    (NO_SUBS, False, 0, 0, True, 59.0, False),  # not idle long enough
    (NO_SUBS, False, 1, 0, True, 3600.0, False),  # a producer or consumer is connected
    (NO_SUBS, True, 0, 0, True, 3600.0, False),  # the cluster's own topics stay
    (CAUGHT_UP, False, 0, 2, True, 61.0, True),
    (CAUGHT_UP, False, 0, 2, False, 61.0, False),  # a backlog keeps it
    (OFF, False, 0, 0, True, 3600.0, False),
]


def test_inactive_topics():
    for policy, system, connected, subs, caught_up, idle, expected in TOPICS:
        got = topic_inactive(policy, system, connected, subs, caught_up, idle)
        assert got is expected, (policy.mode, system, connected, subs, caught_up, idle)
