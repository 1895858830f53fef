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
from tests.harness import wait_for
from tests.metrics_scrape import scrape
from tests.tenancy import own_namespace

READS = ("get", "children", "list")
_n = itertools.count()


def _ops(cluster, kinds: tuple[str, ...]) -> dict[str, float]:
    """Operations of each kind; a get or list sent inside a Read call (with
    others) counts as one of its kind too, and ``read`` counts the calls."""
    s = scrape(int(cluster.endpoints["metrics"]["metastore"]))

    def calls(k: str) -> float:
        return s.get("pulsar_metadata_store_ops_latency_ms_count", type=k, status="success") or 0.0

    def carried(k: str) -> float:
        return s.get("magnetar_metastore_read_items_total", type=k) or 0.0

    return {k: calls(k) + carried(k) for k in kinds} | {f"{k} calls": calls(k) for k in kinds}


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
    assert sum(spent[k] for k in READS) <= n + 10, spent


def test_new_topics_read_their_namespace_once_and_do_not_list_it(cluster):
    with Admin(cluster.service_url) as admin, own_namespace(admin, "load") as ns:
        with Client(cluster.service_url) as c:
            c.create_producer(f"persistent://{ns}/first").send(b"x")
            n = 20
            kinds = (*READS, "read", "increment", "txn")
            before = _ops(cluster, kinds)
            for i in range(n):
                c.create_producer(f"persistent://{ns}/t{i}").send(b"x")
            spent = _spent(before, _ops(cluster, kinds))
        # Per new topic, 4 gets: the partitioned-topic record by the
        # metadata call, and by the load again with the topic's overrides
        # and its ledger list; one listing (the schemas) and the transaction
        # that makes the ledger. No longer per topic: the namespace's
        # policies (twice), its topics (a children listing), its bundle
        # record, each bookie's record, the overrides and the ledger list
        # read by the metadata call, the ledger list a third time, (the load
        # made the list) the terminated marker and the cursors, the listing
        # of the bookies and the ledger id's increment (a block of 64 ids).
        # The load's three gets and the schemas' listing go as one Read
        # call: per topic one get call and one read call (before: 4 gets and
        # a list, then 6 calls in all).
        assert n <= spent["read calls"] <= n + 5, spent
        reads = ("get calls", "list calls", "children calls", "read calls")
        assert sum(spent[k] for k in reads) <= 2 * n + 10, spent
        assert spent["children"] <= 5, spent  # before: 2n, then n
        assert spent["get"] <= 4 * n + 10, spent  # before: 12n, then 7n, then 6n
        assert spent["list"] <= n + 5, spent  # before: 2n
        assert spent["increment"] <= 1, spent  # before: n
        assert n <= spent["txn"] <= n + 5, spent
        assert admin.namespaces.get_topics(ns) == sorted(
            [f"persistent://{ns}/first"] + [f"persistent://{ns}/t{i}" for i in range(n)]
        )


def test_a_namespace_change_reaches_loaded_topics_without_reading_their_overrides(cluster):
    """A namespace's policies applied again to its loaded topics keep each
    topic's overrides as last read (their changes come as their own events):
    a change, or a bundle split, no longer reads every topic's overrides."""
    n = 60
    with Admin(cluster.service_url) as admin, own_namespace(admin, "kept") as ns:
        topics = [f"persistent://{ns}/t{i}" for i in range(n)]
        with Client(cluster.service_url) as c:
            for t in topics:
                loader = c.create_producer(t)
                loader.send(b"loads the topic")
                loader.close()
            overridden, plain = topics[0], topics[1]
            admin.topics.set_max_producers_per_topic(overridden, 2)
            held = [c.create_producer(overridden), c.create_producer(overridden)]

            def refused(topic: str) -> bool:
                try:
                    c.create_producer(topic).close()
                except NotAllowedError:
                    return True
                return False

            assert wait_for(lambda: refused(overridden), 10, "the override to apply")
            held.pop().close()
            first = c.create_producer(plain)
            before = _ops(cluster, READS)
            admin.namespaces.set_max_producers_per_topic(ns, 1)
            assert wait_for(lambda: refused(plain), 10, "the namespace limit to apply")
            spent = _spent(before, _ops(cluster, READS))
            assert not refused(overridden)  # its override (2) still wins over the namespace's 1
            bundle = admin.namespaces.bundles(ns)["bundles"][0]["bundle"]
            before = _ops(cluster, READS)
            admin.namespaces.split_bundle(ns, bundle)
            # A later change: the events arrive in order, so once it applies
            # the split's has been handled too.
            admin.namespaces.set_max_producers_per_topic(ns, 2)
            assert wait_for(lambda: not refused(plain), 10, "the new limit after a split")
            split = _spent(before, _ops(cluster, READS))
            first.close()
            for p in held:
                p.close()
        # Before: one read of the overrides per loaded topic of the namespace.
        assert spent["get"] < n // 2, spent
        assert split["get"] < n // 2, split


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
