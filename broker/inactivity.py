"""What goes for lack of use: subscriptions past their expiration time and
inactive topics (Pulsar's ``subscription_expiration_time_minutes`` and
``inactive_topic_policies``). Decisions only; the registry's periodic
checks act on them.

A durable subscription expires when it has had no consumer and no
acknowledgement for the namespace's expiration time (0: never); a reader's
subscription goes with its reader anyway. A topic is inactive when nothing
has published to it, no producer or consumer has been connected and no
consumer has subscribed for ``max_inactive_s``; it is then deleted if its
policy says so: ``delete_when_no_subscriptions`` only when it has no
subscription left, ``delete_when_subscriptions_caught_up`` also when every
subscription has acknowledged everything. The cluster's own topics (the
system namespace, names starting ``__``) never go.
"""

from __future__ import annotations

from broker.policy_values import InactiveTopicDeleteMode, InactiveTopicPolicies


def subscription_expired(
    durable: bool, consumers: int, idle_s: float, expiration_minutes: int
) -> bool:
    return (
        durable and consumers == 0 and expiration_minutes > 0 and idle_s >= expiration_minutes * 60
    )


def topic_inactive(
    policy: InactiveTopicPolicies,
    system: bool,
    connected: int,
    subscriptions: int,
    caught_up: bool,
    idle_s: float,
) -> bool:
    """``connected``: producers and consumers; ``caught_up``: every
    subscription has no backlog."""
    if system or not policy.delete_while_inactive or connected or idle_s < policy.max_inactive_s:
        return False
    if policy.mode is InactiveTopicDeleteMode.DELETE_WHEN_NO_SUBSCRIPTIONS:
        return subscriptions == 0
    return caught_up
