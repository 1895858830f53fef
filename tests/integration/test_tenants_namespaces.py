"""Tenants and namespaces on real processes (issue 22, points 1, 2 and the
bad input): create, get, update, list and delete, refused while not empty
unless forced; a client of a namespace that does not exist gets
TopicNotFound naming it; an administrator gets NotFound."""

from __future__ import annotations

import itertools
import subprocess
import sys

import pytest

from client import Client, InitialPosition
from client.admin import Admin
from client.exceptions import (
    Conflict,
    InvalidConfiguration,
    NotAllowedError,
    NotFound,
    PreconditionFailed,
    TopicNotFound,
)
from tests.harness import ROOT

_n = itertools.count()


@pytest.fixture
def admin(cluster):
    with Admin(cluster.service_url) as a:
        yield a


@pytest.fixture
def tenant(admin):
    name = f"tenant-{next(_n)}"
    admin.tenants.create_tenant(name, admin_roles=["ops"])
    yield name
    try:
        admin.tenants.delete_tenant(name, force=True)
    except NotFound:
        pass


def test_public_and_the_system_tenant_exist_from_the_start(admin):
    tenants = admin.tenants.get_tenants()
    assert {"public", "magnetar"} <= set(tenants)
    assert admin.tenants.get_tenant_info("public")["allowedClusters"] == ["standalone"]
    assert "public/default" in admin.namespaces.get_namespaces("public")
    assert "magnetar/system" in admin.namespaces.get_namespaces("magnetar")


def test_tenant_create_get_update_list_delete(admin):
    name = f"acme-{next(_n)}"
    created = admin.tenants.create_tenant(name, admin_roles=["r1", "r2"])
    assert created == {"adminRoles": ["r1", "r2"], "allowedClusters": ["standalone"]}
    assert name in admin.tenants.get_tenants()
    with pytest.raises(Conflict, match=f"tenant {name} already exists"):
        admin.tenants.create_tenant(name)
    updated = admin.tenants.update_tenant(name, admin_roles=["r3"])
    assert updated == {"adminRoles": ["r3"], "allowedClusters": ["standalone"]}
    assert admin.tenants.get_tenant_info(name) == updated
    admin.tenants.delete_tenant(name)
    assert name not in admin.tenants.get_tenants()
    with pytest.raises(NotFound, match=f"tenant {name} does not exist"):
        admin.tenants.get_tenant_info(name)


def test_a_users_first_namespace_works_end_to_end(admin, tenant, cluster):
    ns = f"{tenant}/app"
    doc = admin.namespaces.create_namespace(ns, bundles=2)
    assert doc["bundles"]["numBundles"] == 2
    assert admin.namespaces.get_namespaces(tenant) == [ns]
    assert admin.namespaces.get_policies(ns)["replication_clusters"] == ["standalone"]
    topic = f"persistent://{ns}/orders"
    with Client(cluster.service_url) as c:
        consumer = c.subscribe(topic, "s", initial_position=InitialPosition.Earliest)
        c.create_producer(topic).send(b"first")
        assert consumer.receive(timeout_millis=10000).data() == b"first"
    assert admin.namespaces.get_topics(ns) == [topic]


def test_a_missing_namespace_is_named_to_clients_and_administrators(admin, cluster):
    with (
        Client(cluster.service_url) as c,
        pytest.raises(TopicNotFound, match="namespace nobody/nowhere does not exist"),
    ):
        c.create_producer("persistent://nobody/nowhere/t")
    with pytest.raises(NotFound, match="namespace public/nowhere does not exist"):
        admin.namespaces.get_policies("public/nowhere")
    with pytest.raises(NotFound, match="tenant nobody does not exist"):
        admin.namespaces.create_namespace("nobody/ns")
    with pytest.raises(NotFound, match="tenant nobody does not exist"):
        admin.namespaces.get_namespaces("nobody")


@pytest.mark.parametrize(
    "name, error",
    [
        ("no-slash", InvalidConfiguration),
        ("bad tenant/ns", InvalidConfiguration),
        ("public/bad*ns", InvalidConfiguration),
        ("public/", InvalidConfiguration),
    ],
)
def test_malformed_namespace_names_are_refused(admin, name, error):
    with pytest.raises(error, match="is not tenant/namespace"):
        admin.namespaces.create_namespace(name)


def test_bad_bundle_counts_and_clusters_are_refused_and_nothing_is_stored(admin, tenant):
    with pytest.raises(InvalidConfiguration, match="0 bundles: a namespace has 1 to 128"):
        admin.namespaces.create_namespace(f"{tenant}/zero", bundles=0)
    with pytest.raises(PreconditionFailed, match="elsewhere"):
        admin.namespaces.create_namespace(f"{tenant}/far", clusters=["elsewhere"])
    with pytest.raises(PreconditionFailed, match="elsewhere"):
        admin.tenants.create_tenant(f"{tenant}-far", allowed_clusters=["elsewhere"])
    assert admin.namespaces.get_namespaces(tenant) == []
    assert f"{tenant}-far" not in admin.tenants.get_tenants()


def test_namespace_delete_is_refused_while_it_has_topics_unless_forced(admin, tenant, cluster):
    ns = f"{tenant}/busy"
    admin.namespaces.create_namespace(ns, bundles=1)
    topic = f"persistent://{ns}/t"
    with Client(cluster.service_url) as c:
        producer = c.create_producer(topic)
        producer.send(b"x")
        with pytest.raises(PreconditionFailed, match=f"namespace {ns} still has 1 topic"):
            admin.namespaces.delete_namespace(ns)
        assert admin.namespaces.get_topics(ns) == [topic]
        deleted = admin.namespaces.delete_namespace(ns, force=True)
        assert deleted["topics"] == [topic]
        assert ns not in admin.namespaces.get_namespaces(tenant)
        # The producer was closed cleanly: its reconnection finds no namespace.
        with pytest.raises(TopicNotFound, match=f"namespace {ns} does not exist"):
            producer.send(b"y")
    with (
        Client(cluster.service_url) as c,
        pytest.raises(TopicNotFound, match=f"namespace {ns} does not exist"),
    ):
        c.create_producer(topic)


def test_tenant_delete_is_refused_while_it_has_namespaces_unless_forced(admin, cluster):
    name = f"doomed-{next(_n)}"
    admin.tenants.create_tenant(name)
    admin.namespaces.create_namespace(f"{name}/a", bundles=1)
    admin.namespaces.create_namespace(f"{name}/b", bundles=1)
    with Client(cluster.service_url) as c:
        c.create_producer(f"persistent://{name}/a/t").send(b"x")
    with pytest.raises(PreconditionFailed, match=f"tenant {name} still has 2 namespace"):
        admin.tenants.delete_tenant(name)
    result = admin.tenants.delete_tenant(name, force=True)
    assert result["namespaces"] == [f"{name}/a", f"{name}/b"]
    assert name not in admin.tenants.get_tenants()
    # A tenant of the same name starts empty.
    admin.tenants.create_tenant(name)
    assert admin.namespaces.get_namespaces(name) == []
    admin.tenants.delete_tenant(name)


def test_the_clusters_own_tenants_and_namespaces_cannot_be_deleted(admin):
    with pytest.raises(NotAllowedError, match="public is the cluster's own"):
        admin.tenants.delete_tenant("public", force=True)
    with pytest.raises(NotAllowedError, match="magnetar/system is the cluster's own"):
        admin.namespaces.delete_namespace("magnetar/system", force=True)
    assert "public/default" in admin.namespaces.get_namespaces("public")
    assert "magnetar/system" in admin.namespaces.get_namespaces("magnetar")


def test_namespace_clear_backlog_and_unsubscribe_reach_every_topic(admin, tenant, cluster):
    ns = f"{tenant}/subs"
    admin.namespaces.create_namespace(ns, bundles=2)
    topics = [f"persistent://{ns}/t{i}" for i in range(3)]
    with Client(cluster.service_url) as c:
        for t in topics:
            for sub in ("a", "b"):
                c.subscribe(t, sub).close()
            producer = c.create_producer(t)
            for _ in range(4):
                producer.send(b"m")
    assert len(admin.namespaces.clear_backlog(ns, "a")["cleared"]) == 3
    for t in topics:
        subs = admin.topics.stats(t)["subscriptions"]
        assert (subs["a"]["msgBacklog"], subs["b"]["msgBacklog"]) == (0, 4)
    assert sorted(admin.namespaces.unsubscribe(ns, "b")["topics"]) == topics
    assert all(set(admin.topics.stats(t)["subscriptions"]) == {"a"} for t in topics)
    admin.namespaces.clear_backlog(ns)  # every subscription
    assert all(admin.topics.stats(t)["subscriptions"]["a"]["msgBacklog"] == 0 for t in topics)


def test_magnetar_admin_exits_1_naming_what_is_missing(cluster):
    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "client.admin_cli", "--service-url", cluster.service_url, *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )

    for args, named in [
        (("tenants", "get", "nobody"), "tenant nobody does not exist"),
        (("namespaces", "policies", "public/nowhere"), "namespace public/nowhere does not exist"),
        (("namespaces", "list", "nobody"), "tenant nobody does not exist"),
        (("topics", "stats", "persistent://public/default/never-made"), "does not exist"),
        (
            ("namespaces", "set-retention", "public/nowhere", "-s", "1G", "-t", "1h"),
            "public/nowhere",
        ),
    ]:
        out = run(*args)
        assert out.returncode == 1, (args, out.stdout, out.stderr)
        assert named in out.stderr and out.stderr.startswith("Error: "), (args, out.stderr)
    ok = run("namespaces", "get-retention", "public/default", "--applied")
    assert ok.returncode == 0 and '"retentionTimeInMinutes"' in ok.stdout, ok.stderr
