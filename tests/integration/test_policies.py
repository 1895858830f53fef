"""Namespace and topic policies on real processes (issue 22): set, get and
remove with Pulsar's JSON, the precedence topic → namespace → broker setting
(``applied``), bad values refused with nothing stored, compare-and-set under
concurrent administrators, and changes applied live by the brokers owning
the topics, without reloading them."""

from __future__ import annotations

import itertools
from concurrent.futures import ThreadPoolExecutor

import pytest

from client import Client, ConsumerType, InitialPosition
from client.admin import Admin
from client.exceptions import (
    InvalidConfiguration,
    NotAllowedError,
    NotFound,
    SubscriptionNotFound,
    Timeout,
    TopicNotFound,
)
from tests.harness import wait_for
from tests.tenancy import own_namespace

_n = itertools.count()


@pytest.fixture
def admin(cluster):
    with Admin(cluster.service_url) as a:
        yield a


@pytest.fixture
def namespace(admin):
    with own_namespace(admin, "pol") as ns:
        yield ns


def test_retention_set_get_remove_and_the_broker_default_applies_after_remove(admin, namespace):
    assert admin.namespaces.get_retention(namespace) is None
    applied = admin.namespaces.get_retention(namespace, applied=True)
    assert applied == {"retentionTimeInMinutes": 0, "retentionSizeInMB": 0}
    doc = admin.namespaces.set_retention(namespace, 180, 10240)
    assert doc == {"retentionTimeInMinutes": 180, "retentionSizeInMB": 10240}
    assert admin.namespaces.get_retention(namespace) == doc
    assert admin.namespaces.get_policies(namespace)["retention_policies"] == doc
    admin.namespaces.remove_retention(namespace)
    assert admin.namespaces.get_retention(namespace) is None
    assert "retention_policies" not in admin.namespaces.get_policies(namespace)


@pytest.mark.parametrize(
    "policy, value, message",
    [
        (
            "retention",
            {"retentionTimeInMinutes": 10, "retentionSizeInMB": -2},
            "retentionSizeInMB = -2",
        ),
        ("retention", {"retentionTimeInMinutes": 10, "retentionSizeInMB": 0}, "both 0"),
        ("message-ttl", -5, "-5 is not allowed"),
        ("message-ttl", "soon", "not a whole number"),
        (
            "persistence",
            {"bookkeeperEnsemble": 1, "bookkeeperWriteQuorum": 2, "bookkeeperAckQuorum": 1},
            "ensemble >= write quorum >= ack quorum",
        ),
        (
            "persistence",
            {"bookkeeperEnsemble": 3, "bookkeeperWriteQuorum": 2, "bookkeeperAckQuorum": 1},
            "only 1 bookie",
        ),
        (
            "dispatch-rate",
            {"dispatchThrottlingRateInMsg": 10, "ratePeriodInSecond": 0},
            "ratePeriodInSecond = 0",
        ),
        ("max-producers-per-topic", -1, "-1 is not allowed"),
        (
            "auto-topic-creation",
            {"allowAutoTopicCreation": True, "topicType": "sharded"},
            "sharded",
        ),
        ("no-such-policy", 1, "there is no policy 'no-such-policy'"),
    ],
)
def test_bad_policy_values_are_refused_and_nothing_is_stored(
    admin, namespace, policy, value, message
):
    before = admin.namespaces.get_policies(namespace)
    with pytest.raises(InvalidConfiguration, match=message):
        admin.namespaces.set_policy(namespace, policy, value)
    assert admin.namespaces.get_policies(namespace) == before


def test_a_backlog_quota_policy_name_that_does_not_exist_is_refused(admin, namespace):
    with pytest.raises(InvalidConfiguration, match="'hold_everything' is not one of"):
        admin.namespaces.set_backlog_quota(namespace, limit_size=10, policy="hold_everything")
    with pytest.raises(InvalidConfiguration, match="'disk' is not one of"):
        admin.namespaces.set_backlog_quota(namespace, limit_size=10, backlog_quota_type="disk")
    assert admin.namespaces.get_backlog_quotas(namespace) is None


def test_backlog_quotas_are_kept_per_type(admin, namespace):
    admin.namespaces.set_backlog_quota(namespace, limit_size=2 << 30, policy="producer_exception")
    admin.namespaces.set_backlog_quota(
        namespace,
        limit_time=3600,
        policy="consumer_backlog_eviction",
        backlog_quota_type="message_age",
    )
    quotas = admin.namespaces.get_backlog_quotas(namespace)
    assert quotas == {
        "destination_storage": {
            "limitSize": 2 << 30,
            "limitTime": -1,
            "policy": "producer_exception",
        },
        "message_age": {"limitSize": -1, "limitTime": 3600, "policy": "consumer_backlog_eviction"},
    }
    admin.namespaces.remove_backlog_quota(namespace, backlog_quota_type="destination_storage")
    assert list(admin.namespaces.get_backlog_quotas(namespace)) == ["message_age"]


def test_a_policy_on_a_missing_namespace_or_topic_is_not_found(admin, namespace):
    with pytest.raises(NotFound, match="namespace public/nowhere does not exist"):
        admin.namespaces.set_message_ttl("public/nowhere", 60)
    with pytest.raises(NotFound, match=f"topic persistent://{namespace}/ghost does not exist"):
        admin.topics.set_message_ttl(f"persistent://{namespace}/ghost", 60)
    with pytest.raises(InvalidConfiguration, match="namespace policy; a topic cannot override"):
        admin.topics.set_policy(f"persistent://{namespace}/ghost", "max-topics-per-namespace", 1)


def test_topic_overrides_take_precedence_and_applied_shows_the_effective_value(
    admin, namespace, cluster
):
    topic = f"persistent://{namespace}/t"
    with Client(cluster.service_url) as c:
        c.create_producer(topic).send(b"x")
    assert admin.topics.get_message_ttl(topic, applied=True) == 0  # the broker's default
    admin.namespaces.set_message_ttl(namespace, 600)
    assert admin.topics.get_message_ttl(topic) is None
    assert admin.topics.get_message_ttl(topic, applied=True) == 600
    admin.topics.set_message_ttl(topic, 60)
    assert admin.topics.get_message_ttl(topic, applied=True) == 60
    assert admin.namespaces.get_message_ttl(namespace) == 600
    admin.topics.remove_message_ttl(topic)
    assert admin.topics.get_message_ttl(topic, applied=True) == 600
    admin.namespaces.remove_message_ttl(namespace)
    assert admin.topics.get_message_ttl(topic, applied=True) == 0


def test_concurrent_administrators_never_lose_each_others_changes(admin, namespace, cluster):
    """Two administrators set different policies at once, many times: every
    change is in the record afterwards (compare-and-set on the policy record)."""
    limits = [
        "max-producers-per-topic",
        "max-consumers-per-topic",
        "max-consumers-per-subscription",
        "max-subscriptions-per-topic",
    ]

    def set_all(which: int) -> None:
        with Admin(cluster.service_url) as mine:
            for i in range(10):
                for policy in limits[which::2]:
                    mine.namespaces.set_policy(namespace, policy, 100 + i)

    with ThreadPoolExecutor(2) as pool:
        list(pool.map(set_all, [0, 1]))
    for policy in limits:
        assert admin.namespaces.get_policy(namespace, policy) == 109, policy


def test_max_producers_per_topic_applies_live_to_a_loaded_topic(admin, namespace, cluster):
    topic = f"persistent://{namespace}/limited"
    with Client(cluster.service_url) as c:
        first = c.create_producer(topic)
        first.send(b"x")
        admin.namespaces.set_max_producers_per_topic(namespace, 1)

        def refused() -> bool:
            try:
                c.create_producer(topic).close()
            except NotAllowedError as exc:
                assert "max producers per topic = 1" in str(exc)
                return True
            return False

        assert wait_for(refused, 10, "the namespace limit to reach the loaded topic")
        admin.topics.set_max_producers_per_topic(topic, 2)  # the topic's override wins
        assert wait_for(lambda: not refused(), 10, "the topic override to apply")
        first.send(b"still connected")


def test_max_consumers_and_subscriptions_per_topic(admin, namespace, cluster):
    topic = f"persistent://{namespace}/consumers"
    admin.namespaces.set_max_subscriptions_per_topic(namespace, 1)
    admin.namespaces.set_max_consumers_per_subscription(namespace, 2)
    with Client(cluster.service_url) as c:
        c.subscribe(topic, "a", consumer_type=ConsumerType.Shared)
        c.subscribe(topic, "a", consumer_type=ConsumerType.Shared)
        with pytest.raises(NotAllowedError, match="max consumers per subscription = 2"):
            c.subscribe(topic, "a", consumer_type=ConsumerType.Shared)
        with pytest.raises(NotAllowedError, match="max subscriptions per topic = 1"):
            c.subscribe(topic, "b")
        admin.topics.set_max_consumers_per_topic(topic, 2)
        admin.namespaces.set_max_consumers_per_subscription(namespace, 5)

        def refused() -> bool:
            try:
                c.subscribe(topic, "a", consumer_type=ConsumerType.Shared).close()
            except NotAllowedError as exc:
                return "max consumers per topic = 2" in str(exc)
            return False

        assert wait_for(refused, 10, "max consumers per topic to apply")


def test_auto_subscription_creation_off_refuses_a_missing_subscription(admin, namespace, cluster):
    topic = f"persistent://{namespace}/subs"
    with Client(cluster.service_url) as c:
        c.create_producer(topic).send(b"x")
        admin.namespaces.set_auto_subscription_creation(namespace, False)

        def refused() -> bool:
            try:
                c.subscribe(topic, f"new-{next(_n)}").close()
            except SubscriptionNotFound as exc:
                assert "auto subscription creation is off" in str(exc)
                return True
            return False

        assert wait_for(refused, 10, "auto subscription creation off to apply")
        admin.topics.create_subscription(topic, "made", earliest=True)
        consumer = c.subscribe(topic, "made")
        assert consumer.receive(timeout_millis=10000).data() == b"x"


def test_auto_topic_creation_off_and_partitioned(admin, namespace, cluster):
    admin.namespaces.set_auto_topic_creation(namespace, False)
    with Client(cluster.service_url) as c:
        with pytest.raises(TopicNotFound, match="auto topic creation is off"):
            c.create_producer(f"persistent://{namespace}/never")
        admin.namespaces.set_auto_topic_creation(
            namespace, True, topic_type="partitioned", num_partitions=3
        )
        topic = f"persistent://{namespace}/split"
        producer = c.create_producer(topic)
        producer.send(b"x")
    assert admin.topics.get_partitioned_topic_metadata(topic) == {"partitions": 3}
    assert len([t for t in admin.namespaces.get_topics(namespace) if "split" in t]) >= 1


def test_max_topics_per_namespace(admin, namespace, cluster):
    admin.namespaces.set_max_topics_per_namespace(namespace, 2)
    with Client(cluster.service_url) as c:
        c.create_producer(f"persistent://{namespace}/one").send(b"1")
        c.create_producer(f"persistent://{namespace}/two").send(b"2")
        with pytest.raises(NotAllowedError, match="max topics per namespace = 2"):
            c.create_producer(f"persistent://{namespace}/three")
        c.create_producer(f"persistent://{namespace}/one").send(b"existing topics still work")


def test_persistence_for_new_ledgers(admin, namespace):
    doc = admin.namespaces.set_persistence(namespace, 1, 1, 1)
    assert doc == {
        "bookkeeperEnsemble": 1,
        "bookkeeperWriteQuorum": 1,
        "bookkeeperAckQuorum": 1,
        "managedLedgerMaxMarkDeleteRate": 0.0,
    }
    assert admin.namespaces.get_persistence(namespace) == doc


def test_a_consumerless_subscription_shows_no_type_until_a_consumer_comes(
    admin, namespace, cluster
):
    topic = f"persistent://{namespace}/typed"
    admin_sub = "made-by-admin"
    with Client(cluster.service_url) as c:
        c.create_producer(topic).send(b"x")
        admin.topics.create_subscription(topic, admin_sub)
        assert admin.topics.stats(topic)["subscriptions"][admin_sub]["type"] is None
        consumer = c.subscribe(topic, admin_sub, consumer_type=ConsumerType.Shared)
        assert admin.topics.stats(topic)["subscriptions"][admin_sub]["type"] == "Shared"
        consumer.close()
        # The last type used stays while the topic is loaded here.
        assert admin.topics.stats(topic)["subscriptions"][admin_sub]["type"] == "Shared"
    admin.namespaces.unload(namespace)
    assert wait_for(
        lambda: admin.topics.stats(topic)["subscriptions"][admin_sub]["type"] is None,
        10,
        "the reloaded subscription to show no type",
    )


def test_initial_position_earliest_reads_what_the_namespace_retains(admin, namespace, cluster):
    admin.namespaces.set_retention(namespace, -1, -1)
    topic = f"persistent://{namespace}/kept"
    with Client(cluster.service_url) as c:
        consumer = c.subscribe(topic, "first")
        producer = c.create_producer(topic)
        for i in range(20):
            producer.send(str(i).encode())
        for _ in range(20):
            consumer.acknowledge(consumer.receive(timeout_millis=10000))
        later = c.subscribe(topic, "later", initial_position=InitialPosition.Earliest)
        got = [later.receive(timeout_millis=10000).data() for _ in range(20)]
    assert got == [str(i).encode() for i in range(20)]


def test_a_topic_quota_overrides_its_type_only(admin, namespace, cluster):
    topic = f"persistent://{namespace}/quota"
    with Client(cluster.service_url) as c:
        c.create_producer(topic).send(b"x")
    admin.namespaces.set_backlog_quota(namespace, limit_size=2 << 30, policy="producer_exception")
    admin.namespaces.set_backlog_quota(
        namespace, limit_time=36000, policy="producer_exception", backlog_quota_type="message_age"
    )
    admin.topics.set_backlog_quota(topic, limit_size=100 << 20)
    applied = admin.topics.get_backlog_quotas(topic, applied=True)
    assert applied["destination_storage"]["limitSize"] == 100 << 20
    assert applied["message_age"]["limitTime"] == 36000


def test_max_unacked_messages_per_consumer_is_a_policy_applied_live(admin, namespace, cluster):
    topic = f"persistent://{namespace}/unacked"
    admin.namespaces.set_max_unacked_messages_per_consumer(namespace, 5)
    with Client(cluster.service_url) as c:
        consumer = c.subscribe(topic, "s", consumer_type=ConsumerType.Shared)
        producer = c.create_producer(topic, batching_enabled=False)
        for i in range(20):
            producer.send(str(i).encode())
        held = [consumer.receive(timeout_millis=10000) for _ in range(5)]
        with pytest.raises(Timeout):
            consumer.receive(timeout_millis=1500)  # blocked at 5 unacknowledged
        stats = admin.topics.stats(topic)["subscriptions"]["s"]["consumers"][0]
        assert stats["blockedConsumerOnUnackedMsgs"] is True
        admin.topics.set_max_unacked_messages_per_consumer(topic, 100)  # live, no reload
        rest = [consumer.receive(timeout_millis=10000) for _ in range(15)]
        assert sorted(int(m.data()) for m in held + rest) == list(range(20))


def test_the_system_namespace_applies_the_stats_retention(admin):
    """Its retention comes from stats_retention_* (7 days, no size limit)
    unless the namespace sets one; --applied says so."""
    assert admin.namespaces.get_retention("magnetar/system") is None
    assert admin.namespaces.get_retention("magnetar/system", applied=True) == {
        "retentionTimeInMinutes": 10080,
        "retentionSizeInMB": -1,
    }
