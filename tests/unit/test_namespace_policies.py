"""Typed namespace policies (broker/namespace_policies.py, broker/namespaces.py): one document, Pulsar's
field names, defaults applied where a policy is used."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from broker.bundles import NamespaceBundles
from broker.errors import BrokerError
from broker.ledger_rules import RetentionPolicy
from broker.namespace_policies import NamespacePolicies, default_policies, system_policies
from broker.namespaces import applied_policies, parse_namespace
from broker.policies import Policies, applied
from broker.settings import BrokerSettings


def test_policies_round_trip_with_pulsars_field_names():
    policies = NamespacePolicies(
        bundles=NamespaceBundles.equal(2).split(NamespaceBundles.equal(2).bundles[0]),
        replication_clusters=("c1",),
        policies=Policies(deduplication_enabled=True),
    )
    doc = json.loads(policies.encode())
    assert doc == {
        "bundles": {
            "boundaries": ["0x00000000", "0x40000000", "0x80000000", "0xffffffff"],
            "numBundles": 3,
        },
        "replication_clusters": ["c1"],
        "deduplicationEnabled": True,
    }
    again = NamespacePolicies.decode(policies.encode())
    assert again.bundles is not None and again.bundles.boundaries == policies.bundles.boundaries  # type: ignore[union-attr]
    assert (again.replication_clusters, again.policies) == (("c1",), policies.policies)


def test_unset_policies_fall_back_to_the_broker_settings_when_used():
    settings = replace(
        BrokerSettings(), default_number_of_namespace_bundles=8, broker_deduplication_enabled=True
    )
    bare = NamespacePolicies.decode(b"{}")
    assert bare.bundles is None and bare.policies == Policies()
    assert len(bare.bundles_or_default(settings.default_number_of_namespace_bundles).bundles) == 8
    assert applied(None, bare.policies, settings).deduplication_enabled is True
    off = bare.with_policy("deduplication_enabled", False)
    assert applied(None, off.policies, settings).deduplication_enabled is False
    assert json.loads(bare.encode()) == {}  # unset stays unset


# stored "deleted" -> read as; written back as
@pytest.mark.parametrize(
    ("stored", "deleted", "written"),
    [
        ({}, False, {}),  # never marked: not written
        ({"deleted": True}, True, {"deleted": True}),
        ({"deleted": False}, False, {"deleted": False}),  # unmarked: kept, as false
        ({"deleted": "yes"}, False, {"deleted": False}),  # only true marks it
    ],
)
def test_the_deleted_mark_round_trips(stored, deleted, written):
    policies = NamespacePolicies.decode(json.dumps(stored).encode())
    assert policies.deleted is deleted
    assert json.loads(policies.encode()) == written
    assert json.loads(replace(policies, deleted=True).encode()) == {"deleted": True}


def test_an_older_documents_bundle_count_reads_as_equal_bundles():
    old = NamespacePolicies.decode(b'{"bundles": 4, "replication_clusters": ["standalone"]}')
    assert old.bundles is not None
    assert old.bundles.boundaries == NamespaceBundles.equal(4).boundaries


def test_public_default_gets_the_default_number_of_bundles():
    for count in (1, 4, 16):
        settings = replace(BrokerSettings(), default_number_of_namespace_bundles=count)
        policies = default_policies(settings)
        assert policies.bundles is not None and len(policies.bundles.bundles) == count
        stored = NamespacePolicies.decode(policies.encode())
        assert len(stored.bundles_or_default(99).bundles) == count  # the count is stored
        assert stored.replication_clusters == (settings.cluster_name,)


@pytest.mark.parametrize("bad", ["public", "public/", "/default", "a/b/c", "a b/c", "a/b?"])
def test_bad_namespace_names_are_refused(bad):
    with pytest.raises(BrokerError, match="tenant/namespace"):
        parse_namespace(bad)
    assert parse_namespace("my-tenant/ns.1") == "my-tenant/ns.1"


def test_writing_back_keeps_what_it_does_not_change():
    """A policy change rewrites the document with that change only: fields
    this broker does not know stay, and an older document's bundle count
    stays a count until the bundles change."""
    stored = b'{"bundles": 4, "replication_clusters": ["standalone"], "x-newer": {"a": 1}}'
    policies = NamespacePolicies.decode(stored)
    deduped = json.loads(policies.with_policy("deduplication_enabled", True).encode())
    assert deduped == {
        "bundles": 4,
        "replication_clusters": ["standalone"],
        "x-newer": {"a": 1},
        "deduplicationEnabled": True,
    }
    assert policies.bundles is not None
    split = replace(policies, bundles=policies.bundles.split(policies.bundles.bundles[0]))
    doc = json.loads(split.encode())
    assert doc["bundles"]["numBundles"] == 5 and doc["x-newer"] == {"a": 1}


def test_retention_policies_round_trip_in_minutes_and_mb():
    week = RetentionPolicy(7 * 86400.0, -1)
    doc = json.loads(NamespacePolicies(policies=Policies(retention=week)).encode())
    assert doc == {"retention_policies": {"retentionTimeInMinutes": 10080, "retentionSizeInMB": -1}}
    assert NamespacePolicies.decode(json.dumps(doc).encode()).policies.retention == week
    sized = {"retention_policies": {"retentionTimeInMinutes": -1, "retentionSizeInMB": 2}}
    back = NamespacePolicies.decode(json.dumps(sized).encode()).policies.retention
    assert back == RetentionPolicy(-1.0, 2 * 1024 * 1024)


# (namespace, its retention policy, broker settings) -> the retention that applies
# (a topic override, when set, wins over all of them: test_policies.py)
RETENTION_PRECEDENCE = [
    ("public/default", None, {}, RetentionPolicy(0.0, 0)),  # Pulsar's default: none
    (
        "public/default",
        None,
        {"default_retention_time_in_minutes": 60, "default_retention_size_in_mb": -1},
        RetentionPolicy(3600.0, -1),
    ),
    ("magnetar/system", None, {}, RetentionPolicy(7 * 86400.0, -1)),  # the stats topic's
    (
        "magnetar/system",
        None,
        {"stats_retention_time_minutes": 30, "stats_retention_size_mb": 10},
        RetentionPolicy(1800.0, 10 * 1024 * 1024),
    ),
    ("magnetar/system", RetentionPolicy(60.0, -1), {}, RetentionPolicy(60.0, -1)),  # set wins
    ("public/default", RetentionPolicy(-1.0, -1), {}, RetentionPolicy(-1.0, -1)),
]


def test_retention_comes_from_the_namespace_else_the_broker_settings():
    for namespace, retention, settings, expected in RETENTION_PRECEDENCE:
        got = applied_policies(
            namespace,
            None,
            Policies(retention=retention),
            BrokerSettings(**settings),  # type: ignore[arg-type]
        ).retention
        assert got == expected, (namespace, retention, settings)


def test_the_system_namespace_has_one_bundle_and_no_retention_of_its_own():
    policies = system_policies(BrokerSettings(cluster_name="c9"))
    assert policies.bundles is not None
    assert policies.bundles.boundaries == NamespaceBundles.equal(1).boundaries
    assert policies.replication_clusters == ("c9",)
    assert policies.policies.retention is None  # the stats_retention_* settings apply
