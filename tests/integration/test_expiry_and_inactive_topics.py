"""Subscription expiration and inactive topic policies on real processes
(issue 22, point 7), with the check intervals shortened in the TOML file.
Pulsar counts subscription expiration in whole minutes, so one test waits
a little over a minute."""

from __future__ import annotations

import pytest

from client import Client
from client.admin import Admin
from tests.harness import wait_for
from tests.tenancy import own_namespace, standalone_with

SETTINGS = """\
subscription_expiry_check_interval_s = 1
inactive_topic_check_interval_s = 1
"""


@pytest.fixture(scope="module")
def checks_cluster(tmp_path_factory):
    with standalone_with(tmp_path_factory.mktemp("inactive"), SETTINGS) as c:
        yield c


@pytest.fixture
def admin(checks_cluster):
    with Admin(checks_cluster.service_url) as a:
        yield a


@pytest.fixture
def namespace(admin):
    with own_namespace(admin, "idle") as ns:
        yield ns


def test_an_idle_subscription_expires_and_a_used_one_stays(admin, namespace, checks_cluster):
    topic = f"persistent://{namespace}/subs"
    admin.namespaces.set_subscription_expiration_time(namespace, 1)
    with Client(checks_cluster.service_url) as c:
        c.subscribe(topic, "idle").close()
        busy = c.subscribe(topic, "busy")
        c.create_producer(topic).send(b"x")
        assert wait_for(
            lambda: set(admin.topics.stats(topic)["subscriptions"]) == {"busy"},
            90,
            "the idle subscription to expire after a minute",
        )
        assert busy.receive(timeout_millis=10000).data() == b"x"


def test_an_inactive_topic_with_no_subscriptions_is_deleted(admin, namespace, checks_cluster):
    gone, kept = f"persistent://{namespace}/gone", f"persistent://{namespace}/kept"
    admin.namespaces.set_inactive_topic_policies(namespace, True, 2)
    with Client(checks_cluster.service_url) as c:
        c.create_producer(gone).send(b"x")
        c.subscribe(kept, "s").close()
        c.create_producer(kept).send(b"y")
    assert wait_for(
        lambda: gone not in admin.namespaces.get_topics(namespace),
        20,
        "the inactive topic without subscriptions to be deleted",
    )
    assert kept in admin.namespaces.get_topics(namespace)  # its subscription keeps it


def test_delete_when_subscriptions_caught_up(admin, namespace, checks_cluster):
    topic = f"persistent://{namespace}/caught-up"
    admin.namespaces.set_inactive_topic_policies(
        namespace, True, 2, mode="delete_when_subscriptions_caught_up"
    )
    with Client(checks_cluster.service_url) as c:
        consumer = c.subscribe(topic, "s")
        c.create_producer(topic).send(b"x")
        consumer.acknowledge(consumer.receive(timeout_millis=10000))
        consumer.close()
    assert wait_for(
        lambda: topic not in admin.namespaces.get_topics(namespace),
        20,
        "the caught-up inactive topic to be deleted",
    )
