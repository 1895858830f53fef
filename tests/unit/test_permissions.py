"""Pulsar's authorization model (broker/permissions.py) as a table: who
may do what on which topic, namespace or subscription. Each row is one
decision with the grants in place."""

from __future__ import annotations

import pytest

from broker.authorizer import topic_target
from broker.errors import BrokerError
from broker.permissions import (
    AuthAction,
    AuthPolicies,
    Need,
    Target,
    decide,
    read_actions,
)

P, C = AuthAction.PRODUCE, AuthAction.CONSUME
TOPIC = "persistent://acme/ns/orders"
PARTITION = "persistent://acme/ns/orders-partition-3"
OTHER = "persistent://acme/ns/other"
SUPERUSERS = frozenset({"admin"})
TENANT_ADMINS = frozenset({"acme-admin"})

GRANTS = (
    AuthPolicies()
    .granted("writer", frozenset({P}))
    .granted("reader", frozenset({C}))
    .granted("topic-writer", frozenset({P}), TOPIC)
    .granted("topic-reader", frozenset({C}), TOPIC)
    .subscription_roles_set("audit", {"auditor"})
    .granted("auditor", frozenset({C}))
)

NS = Target(tenant="acme", namespace="acme/ns")

# (role, need, target, allowed)
CASES = [
    # superusers may do everything, tenant admins everything in their tenant
    ("admin", Need.SUPERUSER, Target(), True),
    ("admin", Need.PRODUCE, topic_target(TOPIC), True),
    ("acme-admin", Need.TENANT_ADMIN, NS, True),
    ("acme-admin", Need.PRODUCE, topic_target(TOPIC), True),
    ("acme-admin", Need.CONSUME, topic_target(TOPIC, "audit"), True),
    ("acme-admin", Need.SUPERUSER, Target(), False),
    ("writer", Need.TENANT_ADMIN, NS, False),
    # namespace grants
    ("writer", Need.PRODUCE, topic_target(TOPIC), True),
    ("writer", Need.PRODUCE, topic_target(OTHER), True),
    ("writer", Need.CONSUME, topic_target(TOPIC, "s"), False),
    ("reader", Need.CONSUME, topic_target(TOPIC, "s"), True),
    ("reader", Need.PRODUCE, topic_target(TOPIC), False),
    # topic grants: on that topic (and its partitions) only
    ("topic-writer", Need.PRODUCE, topic_target(TOPIC), True),
    ("topic-writer", Need.PRODUCE, topic_target(PARTITION), True),
    ("topic-writer", Need.PRODUCE, topic_target(OTHER), False),
    ("topic-reader", Need.CONSUME, topic_target(PARTITION, "s"), True),
    # lookup needs produce or consume; listing a namespace needs them on the namespace
    ("writer", Need.LOOKUP, topic_target(TOPIC), True),
    ("reader", Need.LOOKUP, topic_target(TOPIC), True),
    ("topic-reader", Need.LOOKUP, topic_target(TOPIC), True),
    ("nobody", Need.LOOKUP, topic_target(TOPIC), False),
    ("reader", Need.NAMESPACE_LOOKUP, NS, True),
    ("topic-reader", Need.NAMESPACE_LOOKUP, NS, False),
    # a subscription with roles is theirs only (they still need consume)
    ("auditor", Need.CONSUME, topic_target(TOPIC, "audit"), True),
    ("reader", Need.CONSUME, topic_target(TOPIC, "audit"), False),
    ("auditor", Need.CONSUME, topic_target(TOPIC, "other-sub"), True),
    # nothing granted: nothing allowed
    ("nobody", Need.PRODUCE, topic_target(TOPIC), False),
    ("nobody", Need.CONSUME, topic_target(TOPIC, "s"), False),
]


@pytest.mark.parametrize("role, need, target, allowed", CASES)
def test_decision(role, need, target, allowed):
    verdict = decide(role, need, target, SUPERUSERS, TENANT_ADMINS, GRANTS)
    assert verdict.allowed is allowed
    if not allowed:
        assert role in verdict.why  # a refusal names the role and what it lacks


def test_a_tenant_admin_of_another_tenant_is_nobody_here():
    other = topic_target("persistent://other/ns/t")
    assert not decide("acme-admin", Need.PRODUCE, other, SUPERUSERS, frozenset(), GRANTS).allowed


def test_revoking_takes_only_that_grant():
    after = GRANTS.revoked("writer")
    assert "writer" not in after.namespace_auth and "reader" in after.namespace_auth
    after = GRANTS.revoked("topic-writer", TOPIC)
    assert "topic-writer" not in after.destination_auth.get(TOPIC, {})
    assert "topic-reader" in after.destination_auth[TOPIC]
    after = GRANTS.subscription_role_removed("audit", "auditor")
    assert "audit" not in after.subscription_auth_roles


def test_the_grants_keep_pulsars_document_shape():
    doc = GRANTS.document()
    assert doc["namespace_auth"]["writer"] == ["produce"]
    assert doc["destination_auth"][TOPIC]["topic-reader"] == ["consume"]
    assert doc["subscription_auth_roles"] == {"audit": ["auditor"]}
    assert AuthPolicies.from_document(doc) == GRANTS


@pytest.mark.parametrize("bad", [[], "", ["produce", "write"], 5, None])
def test_actions_are_pulsars_auth_actions(bad):
    with pytest.raises(BrokerError):
        read_actions(bad)
    assert read_actions("produce,consume") == frozenset({P, C})
