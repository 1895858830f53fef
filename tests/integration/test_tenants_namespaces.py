"""Tenants and namespaces on real processes (issue 22, points 1, 2 and the
bad input): create, get, update, list and delete, refused while not empty
unless forced; a client of a namespace that does not exist gets
TopicNotFound naming it; an administrator gets NotFound."""

from __future__ import annotations

import asyncio
import itertools
import json
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
from metastore.client import MetastoreClient
from protos import metadata_paths
from protos.topic_name import TopicName
from tests.harness import ROOT, wait_for
from tests.metrics_scrape import scrape

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
        # The producer was closed cleanly: its reconnection finds no namespace
        # (or, before its record went, the namespace being deleted).
        with pytest.raises(
            TopicNotFound, match=f"namespace {ns} (does not exist|is being deleted)"
        ):
            producer.send(b"y")
    with (
        Client(cluster.service_url) as c,
        pytest.raises(TopicNotFound, match=f"namespace {ns} does not exist"),
    ):
        c.create_producer(topic)


def _metastore_writes(cluster) -> dict[str, float]:
    s = scrape(int(cluster.endpoints["metrics"]["metastore"]))
    return {
        k: s.get("pulsar_metadata_store_ops_latency_ms_count", type=k, status="success") or 0.0
        for k in ("del", "txn")
    }


async def _keys_of(cluster, names: list[TopicName]) -> list[str]:
    """Every metastore key a topic of ``names`` has (its ledger list and
    cursors, end mark, deduplication snapshot, policy overrides)."""
    ms = MetastoreClient(cluster.endpoints["metastore"])
    try:
        found: list[str] = []
        for name in names:
            for key in (
                metadata_paths.managed_ledger(name),
                metadata_paths.terminated(name),
                metadata_paths.dedup_snapshot(name),
                metadata_paths.topic_policies(name),
            ):
                records, _ = await ms.list_prefix(key)
                found += [r.key for r in records]
        return found
    finally:
        await ms.close()


def test_a_forced_namespace_delete_removes_each_topics_records_in_one_write(admin, tenant, cluster):
    """Each topic's records (2 cursors, the ledger list, the end mark, a
    policy override) go in one metastore transaction, not a delete each."""
    ns = f"{tenant}/records"
    admin.namespaces.create_namespace(ns, bundles=1)
    topics = [f"persistent://{ns}/t{i}" for i in range(4)]
    with Client(cluster.service_url) as c:
        for topic in topics:
            c.create_producer(topic).send(b"x")
            admin.topics.create_subscription(topic, "a")
            admin.topics.create_subscription(topic, "b")
            admin.topics.set_message_ttl(topic, 60)
        admin.topics.terminate(topics[0])
        names = [TopicName.parse(t) for t in topics]
        stored = asyncio.run(_keys_of(cluster, names))
        assert len(stored) == 4 * 4 + 1, stored  # list, 2 cursors, overrides; one end mark
        before = _metastore_writes(cluster)
        deleted = admin.namespaces.delete_namespace(ns, force=True)
        spent = {k: v - before[k] for k, v in _metastore_writes(cluster).items()}
    assert sorted(deleted["topics"]) == topics
    assert asyncio.run(_keys_of(cluster, names)) == []
    # One transaction per topic; the deletes left are each topic's ledger
    # record and the namespace's own (its bundle and policies), and any the
    # cluster makes meanwhile: before, the 17 records above were 17 deletes more.
    assert spent["txn"] >= 4, spent
    assert spent["del"] < 17, spent


def test_a_forced_namespace_delete_passes_over_partitions_nobody_used(admin, tenant, cluster):
    ns = f"{tenant}/parted"
    admin.namespaces.create_namespace(ns, bundles=1)
    topic = f"persistent://{ns}/p"
    admin.topics.create_partitioned_topic(topic, 3)
    with Client(cluster.service_url) as c:
        c.create_producer(f"{topic}-partition-1").send(b"x")  # 0 and 2 never made
    deleted = admin.namespaces.delete_namespace(ns, force=True)
    assert deleted["topics"] == [f"{topic}-partition-{i}" for i in range(3)]
    assert ns not in admin.namespaces.get_namespaces(tenant)
    names = [TopicName.parse(f"{topic}-partition-{i}") for i in range(3)]
    assert asyncio.run(_keys_of(cluster, names)) == []


async def _put(cluster, key: str, value: bytes) -> None:
    ms = MetastoreClient(cluster.endpoints["metastore"])
    try:
        await ms.put(key, value)
    finally:
        await ms.close()


def test_a_forced_namespace_delete_removes_records_left_under_a_deleted_topic(
    admin, tenant, cluster
):
    """A cursor record written after its topic's deletion makes the
    namespace list the topic (its ledger list is gone): the deletion
    removes the record rather than finding the topic there on every pass."""
    ns = f"{tenant}/stray"
    admin.namespaces.create_namespace(ns, bundles=1)
    ghost = TopicName.parse(f"persistent://{ns}/ghost")
    asyncio.run(_put(cluster, metadata_paths.cursor(ghost, "sub"), b"{}"))
    assert admin.namespaces.get_topics(ns) == [ghost.full_name]
    admin.namespaces.delete_namespace(ns, force=True)
    assert ns not in admin.namespaces.get_namespaces(tenant)
    assert asyncio.run(_keys_of(cluster, [ghost])) == []


async def _mark_deleted(cluster, namespace: str) -> None:
    """Set the namespace's ``deleted`` mark as a deletion does before its
    topics go (here, with no deletion following)."""
    ms = MetastoreClient(cluster.endpoints["metastore"])
    try:
        key = metadata_paths.namespace_policies(namespace)
        stat = await ms.get(key)
        assert stat is not None
        doc = json.loads(stat.value) | {"deleted": True}
        await ms.put(key, json.dumps(doc).encode(), expected_version=stat.version)
    finally:
        await ms.close()


def test_no_topic_is_made_in_a_namespace_being_deleted(admin, tenant, cluster):
    """A deletion marks the namespace first: a new topic is refused from
    then on (a producer reconnecting between two topics' deletions made its
    topic again, left behind once the namespace was gone); a stored topic
    still loads, so that the deletion can delete it."""
    ns = f"{tenant}/going"
    admin.namespaces.create_namespace(ns, bundles=1)
    old, new = f"persistent://{ns}/old", f"persistent://{ns}/new"
    hidden = f"persistent://{ns}/__old"  # named as the cluster's own topics are
    with Client(cluster.service_url) as c:
        c.create_producer(old).send(b"x")
        c.create_producer(hidden).send(b"x")
    asyncio.run(_mark_deleted(cluster, ns))

    def refused() -> bool:
        try:
            with Client(cluster.service_url) as c:
                c.create_producer(new).close()
        except TopicNotFound as exc:
            assert f"namespace {ns} is being deleted" in str(exc)
            return True
        admin.topics.delete(new, force=True)  # made before the broker saw the mark
        return False

    wait_for(refused, 10, "a new topic refused in a namespace being deleted")
    with pytest.raises(NotAllowedError, match=f"namespace {ns} is being deleted"):
        admin.topics.create_partitioned_topic(f"persistent://{ns}/parted", 2)
    admin.namespaces.unload(ns)
    with Client(cluster.service_url) as c:
        c.create_producer(old).send(b"y")  # loads again
        c.create_producer(hidden).send(b"y")
        with pytest.raises(TopicNotFound, match=f"namespace {ns} is being deleted"):
            c.create_producer(f"persistent://{ns}/__new")
    assert admin.namespaces.get_topics(ns) == [hidden, old]
    assert admin.namespaces.delete_namespace(ns, force=True)["topics"] == [hidden, old]
    names = [TopicName.parse(t) for t in (old, hidden)]
    assert asyncio.run(_keys_of(cluster, names)) == []


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
