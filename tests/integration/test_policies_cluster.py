"""Policies across brokers and restarts (issue 22, point 10): a change made
through one broker reaches the broker owning the topic within seconds
(metastore watch), topic admin calls are forwarded to the owner, and the
policies stay through a bundle move and a restart."""

from __future__ import annotations

import pytest

from client import Client
from client.admin import Admin
from client.exceptions import NotAllowedError
from tests.harness import wait_for
from tests.integration.test_local_cluster import _free_offset, _start, _stop
from tests.traffic import owner_of, place_topic_on


def _refused(url: str, topic: str) -> bool:
    with Client(url) as c:
        try:
            c.create_producer(topic).close()
        except NotAllowedError as exc:
            assert "max producers per topic = 1" in str(exc)
            return True
    return False


def test_a_policy_set_through_one_broker_applies_on_the_owner_and_after_a_move(tmp_path):
    proc, endpoints = _start(tmp_path, "--port-offset", str(_free_offset()))
    brokers = [f"magnetar://{b}" for b in endpoints["brokers"]]
    url = endpoints["service_url"]
    ns, topic = "acme/app", "persistent://acme/app/orders"
    try:
        with Admin(brokers[1]) as admin:
            admin.tenants.create_tenant("acme")
            admin.namespaces.create_namespace(ns, bundles=1)
        place_topic_on(brokers[0], topic)
        with Client(url) as c:
            producer = c.create_producer(topic)
            producer.send(b"x")
            assert owner_of(url, topic) == brokers[0]
            with Admin(brokers[1]) as other:  # not the owner: it writes the record only
                other.namespaces.set_max_producers_per_topic(ns, 1)
                # A topic call through a broker that does not own it is forwarded.
                assert other.topics.stats(topic)["msgInCounter"] == 1
            assert wait_for(lambda: _refused(url, topic), 15, "the owner to apply the policy")
            with Admin(url) as admin:
                admin.namespaces.unload(ns)  # a bundle move: the leader avoids the last owner
            producer.send(b"after the move")  # the producer followed the topic
            assert owner_of(url, topic) != brokers[0]
            assert _refused(url, topic)  # the moved topic still applies the limit
    finally:
        _stop(proc, tmp_path)


def test_policies_stay_through_a_restart(fresh_cluster):
    cluster = fresh_cluster.start()
    with Admin(cluster.service_url) as admin:
        admin.tenants.create_tenant("kept")
        admin.namespaces.create_namespace("kept/ns", bundles=2)
        admin.namespaces.set_retention("kept/ns", 60, 100)
        admin.namespaces.set_max_producers_per_topic("kept/ns", 1)
    cluster.stop()
    cluster.start()
    topic = "persistent://kept/ns/t"
    with Admin(cluster.service_url) as admin:
        assert admin.tenants.get_tenant_info("kept")["allowedClusters"] == ["standalone"]
        assert admin.namespaces.get_retention("kept/ns") == {
            "retentionTimeInMinutes": 60,
            "retentionSizeInMB": 100,
        }
        with Client(cluster.service_url) as c:
            c.create_producer(topic).send(b"x")
            with pytest.raises(NotAllowedError, match="max producers per topic = 1"):
                c.create_producer(topic)
