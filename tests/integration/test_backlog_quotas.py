"""Backlog quotas enforced on real processes (issue 22, point 5), each
policy: producer_request_hold, producer_exception, consumer_backlog_eviction
(by size and by age), with the quota shown in topics stats and /metrics."""

from __future__ import annotations

import threading
import time

import pytest

from client import Client
from client.admin import Admin
from client.exceptions import ProducerBlockedQuotaExceededException, Timeout
from tests.harness import wait_for
from tests.metrics_scrape import scrape
from tests.tenancy import own_namespace, standalone_with

KB = 1024
LIMIT = 8 * KB  # about 8 messages of 1 KB

SETTINGS = """\
backlog_quota_check_interval_s = 1
message_expiry_check_interval_s = 1
"""


@pytest.fixture(scope="module")
def quota_cluster(tmp_path_factory):
    with standalone_with(tmp_path_factory.mktemp("quotas"), SETTINGS) as c:
        yield c


@pytest.fixture
def admin(quota_cluster):
    with Admin(quota_cluster.service_url) as a:
        yield a


@pytest.fixture
def namespace(admin):
    with own_namespace(admin, "quota") as ns:
        yield ns


def _fill_until(producer, refused: type[Exception], most: int = 200) -> int:
    """Send 1 KB messages until one is refused; how many were stored."""
    for i in range(most):
        try:
            producer.send(b"x" * KB)
        except refused:
            return i
    raise AssertionError(f"{most} sends and none was refused")


def test_producer_exception_fails_sends_at_once_and_refuses_new_producers(
    admin, namespace, quota_cluster
):
    topic = f"persistent://{namespace}/exc"
    admin.namespaces.set_backlog_quota(namespace, limit_size=LIMIT, policy="producer_exception")
    with Client(quota_cluster.service_url) as c:
        slow = c.subscribe(topic, "slow")
        producer = c.create_producer(topic, batching_enabled=False, send_timeout_millis=30000)
        stored = _fill_until(producer, ProducerBlockedQuotaExceededException)
        assert 5 <= stored <= 20, stored
        with pytest.raises(ProducerBlockedQuotaExceededException, match="backlog quota exceeded"):
            c.create_producer(topic)
        stats = admin.topics.stats(topic)
        assert (stats["backlogQuotaLimitSize"], stats["backlogQuotaLimitTime"]) == (LIMIT, -1)
        for _ in range(stored):
            slow.acknowledge(slow.receive(timeout_millis=10000))

        def accepted() -> bool:
            try:
                producer.send(b"after")
            except ProducerBlockedQuotaExceededException:
                return False
            return True

        assert wait_for(accepted, 15, "sends to be accepted once under quota")
        c.create_producer(topic).close()


def test_producer_request_hold_holds_sends_until_consumers_catch_up(
    admin, namespace, quota_cluster
):
    topic = f"persistent://{namespace}/hold"
    admin.namespaces.set_backlog_quota(namespace, limit_size=LIMIT, policy="producer_request_hold")
    with Client(quota_cluster.service_url) as c:
        slow = c.subscribe(topic, "slow")
        short = c.create_producer(topic, batching_enabled=False, send_timeout_millis=1500)
        stored = _fill_until(short, Timeout)  # held, then timed out by the send timeout
        assert 5 <= stored <= 20, stored
        short.close()
        patient = c.create_producer(topic, batching_enabled=False, send_timeout_millis=60000)
        done = threading.Event()
        patient.send_async(b"held", lambda res, msg_id: done.set())
        assert not done.wait(2.0), "a send went through while over quota"
        # Read and acknowledge until the held send's receipt comes. The held
        # message itself may reach the consumer before its receipt reaches
        # the producer: a receive finding nothing is no failure, the deadline is.
        deadline = time.monotonic() + 30
        while not done.is_set() and time.monotonic() < deadline:
            try:
                slow.acknowledge(slow.receive(timeout_millis=500))
            except Timeout:
                continue
        assert done.is_set(), "the held send did not resume after the consumer caught up"


def test_a_held_producer_does_not_hold_the_other_producers_of_its_connection(
    admin, namespace, quota_cluster
):
    # Every producer of a client connection shares one ProduceMany stream:
    # the held one's requests wait in its own queue, and the connection keeps
    # being read for the others (and for its own retry and dead letters).
    topic = f"persistent://{namespace}/hold-one"
    admin.namespaces.set_backlog_quota(namespace, limit_size=LIMIT, policy="producer_request_hold")
    with Client(quota_cluster.service_url) as c:
        slow = c.subscribe(topic, "slow")
        short = c.create_producer(topic, batching_enabled=False, send_timeout_millis=1500)
        _fill_until(short, Timeout)  # the topic is over quota: its sends are held
        short.close()
        held = c.create_producer(topic, batching_enabled=False, send_timeout_millis=60000)
        done = threading.Event()
        for i in range(20):  # far more held requests than a stream reads ahead
            held.send_async(f"held {i}".encode(), lambda res, msg_id: done.set())
        other = c.create_producer("persistent://public/default/not-held", batching_enabled=False)
        for i in range(5):
            other.send(f"free {i}".encode())  # each within the client's operation timeout
        assert not done.is_set(), "a held send went through while over quota"
        slow.close()
        admin.topics.unsubscribe(topic, "slow")  # the backlog goes: sends resume
        assert done.wait(15), "the held sends did not resume"


def test_consumer_backlog_eviction_drops_the_oldest_backlog(admin, namespace, quota_cluster):
    topic = f"persistent://{namespace}/evict"
    admin.namespaces.set_backlog_quota(
        namespace, limit_size=LIMIT, policy="consumer_backlog_eviction"
    )
    with Client(quota_cluster.service_url) as c:
        c.subscribe(topic, "slow").close()
        producer = c.create_producer(topic, batching_enabled=False)
        for i in range(40):
            producer.send(f"{i:04d}".encode().ljust(KB, b"."))  # never refused or held

        def evicted() -> bool:
            return admin.topics.stats(topic)["subscriptions"]["slow"]["msgBacklog"] <= 9

        assert wait_for(evicted, 15, "the oldest backlog to be evicted")
        slow = c.subscribe(topic, "slow")
        first = int(slow.receive(timeout_millis=10000).data()[:4])
        assert first >= 31, first  # only the newest messages are left


def test_message_age_eviction_and_the_metrics(admin, namespace, quota_cluster):
    topic = f"persistent://{namespace}/aged"
    admin.namespaces.set_backlog_quota(
        namespace,
        limit_time=1,
        policy="consumer_backlog_eviction",
        backlog_quota_type="message_age",
    )
    with Client(quota_cluster.service_url) as c:
        c.subscribe(topic, "slow").close()
        producer = c.create_producer(topic)
        for _ in range(5):
            producer.send(b"old")
    assert wait_for(
        lambda: admin.topics.stats(topic)["subscriptions"]["slow"]["msgBacklog"] == 0,
        15,
        "messages older than the age quota to be evicted",
    )
    assert admin.topics.stats(topic)["backlogQuotaLimitTime"] == 1
    port = int(quota_cluster.endpoints["metrics"]["broker"])
    assert wait_for(
        lambda: scrape(port).get("pulsar_storage_backlog_quota_limit_time", topic=topic) == 1,
        15,
        "the quota in the metrics",
    )
    assert scrape(port).get("pulsar_storage_backlog_quota_limit", topic=topic) == -1
