"""What a producer's first use of a topic costs the metastore (issue 26),
counted on the metastore's own operation metrics: a producer of a topic
already loaded reads only the topic's schemas (its lookup is answered from
the broker's ownership, its partitioned-topic metadata from the loaded
topic), and a new topic reads its namespace's policies from memory and no
longer lists the namespace's topics for the max-topics check, except near
the limit."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from broker import ledger_list
from client import Client
from client.admin import Admin
from client.exceptions import NotAllowedError
from metastore.client import MetastoreClient
from protos import metadata_paths
from protos.topic_name import TopicName
from tests.metrics_scrape import scrape
from tests.tenancy import own_namespace

READS = ("get", "children", "list")
_n = itertools.count()


def _ops(cluster, kinds: tuple[str, ...]) -> dict[str, float]:
    s = scrape(int(cluster.endpoints["metrics"]["metastore"]))
    return {
        k: s.get("pulsar_metadata_store_ops_latency_ms_count", type=k, status="success") or 0.0
        for k in kinds
    }


def _spent(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {k: after[k] - before[k] for k in before}


def test_a_producer_of_a_loaded_topic_reads_only_its_schemas(cluster):
    topic = f"persistent://public/default/loaded-{next(_n)}"
    n = 20
    with Client(cluster.service_url) as c:
        c.create_producer(topic).send(b"loads the topic")
        before = _ops(cluster, READS)
        for _ in range(n):
            c.create_producer(topic).close()
        spent = _spent(before, _ops(cluster, READS))
    # One schema listing each; the rest is the cluster's own background
    # (load reports, the auditor). Before: five reads each (partitioned
    # metadata, namespace policies, the ledger list, the bundle record, schemas).
    assert spent["list"] >= n, spent
    assert sum(spent.values()) <= n + 10, spent


def test_new_topics_read_their_namespace_once_and_do_not_list_it(cluster):
    with Admin(cluster.service_url) as admin, own_namespace(admin, "load") as ns:
        with Client(cluster.service_url) as c:
            c.create_producer(f"persistent://{ns}/first").send(b"x")
            n = 20
            before = _ops(cluster, READS)
            for i in range(n):
                c.create_producer(f"persistent://{ns}/t{i}").send(b"x")
            spent = _spent(before, _ops(cluster, READS))
        # Per new topic, 6 gets: the partitioned-topic record, the topic's
        # overrides and its ledger list, each read by the metadata call and
        # again by the load. No longer read per topic: the namespace's
        # policies (twice), its topics (a children listing), its bundle
        # record, each bookie's record, the ledger list a third time, and
        # (the load made the list) the terminated marker and the cursors.
        assert spent["children"] <= 5, spent  # before: 2n, then n
        assert spent["get"] <= 6 * n + 10, spent  # before: 12n, then 7n
        assert admin.namespaces.get_topics(ns) == sorted(
            [f"persistent://{ns}/first"] + [f"persistent://{ns}/t{i}" for i in range(n)]
        )


def test_a_topic_made_again_after_a_delete_is_fresh(cluster):
    """A new topic's load reads no cursors and no termination marker: what a
    deleted topic of the same name had is gone before its ledger list."""
    with Admin(cluster.service_url) as admin, own_namespace(admin, "again") as ns:
        topic = f"persistent://{ns}/reborn"
        with Client(cluster.service_url) as c:
            sub = c.subscribe(topic, "old-sub")
            c.create_producer(topic).send(b"first life")
            sub.close()
            admin.topics.terminate(topic)
            admin.topics.delete(topic, force=True)
            c.create_producer(topic).send(b"second life")  # not terminated
            admin.namespaces.unload(ns)
            c.create_producer(topic).send(b"after a reload")
        assert admin.topics.stats(topic)["subscriptions"] == {}


def test_an_unload_closes_every_topic_of_a_big_bundle(cluster):
    """An unload closes its topics max_concurrent_topic_closes (64) at a
    time: every one of 150 is closed with its ledger's end recorded (its
    backlog counts what was sent before), and its producer sends again
    once the topic is reloaded."""
    n = 150
    with (
        Admin(cluster.service_url) as admin,
        own_namespace(admin, "big") as ns,
        Client(cluster.service_url) as c,
    ):
        topics = [f"persistent://{ns}/t{i}" for i in range(n)]
        producers = [c.create_producer(t) for t in topics]
        for t in topics:
            admin.topics.create_subscription(t, "s")
        for p in producers:
            p.send(b"before")
        admin.namespaces.unload(ns)
        for p in producers:
            p.send(b"after")
        backlogs = [admin.topics.stats(t)["subscriptions"]["s"]["msgBacklog"] for t in topics]
        assert backlogs == [2] * n


def test_near_its_limit_a_namespace_counts_the_topics_other_brokers_made(cluster):
    with (
        Admin(cluster.service_url) as admin,
        own_namespace(admin, "cap") as ns,
        Client(cluster.service_url) as c,
    ):
        for i in range(3):
            c.create_producer(f"persistent://{ns}/t{i}").send(b"x")
        admin.namespaces.set_max_topics_per_namespace(ns, 4)
        # A fourth topic, made behind this broker's back (as by another
        # broker): the broker's own count says 3, the namespace holds 4.
        elsewhere = TopicName.parse(f"persistent://{ns}/elsewhere")
        asyncio.run(_store_record(cluster, metadata_paths.managed_ledger(elsewhere)))
        with pytest.raises(NotAllowedError, match="already has 4 topics"):
            c.create_producer(f"persistent://{ns}/t3")


async def _store_record(cluster, key: str) -> None:
    ms = MetastoreClient(cluster.endpoints["metastore"])
    try:
        await ms.put(key, ledger_list.encode([], {}), expected_version=-1)
    finally:
        await ms.close()
