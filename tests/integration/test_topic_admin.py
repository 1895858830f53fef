"""The topics verbs of issue 22 on real processes: delete (also a
partitioned topic whose partitions nobody used), unsubscribe, clear-backlog,
partitioned-stats and last-message-id."""

from __future__ import annotations

import pytest

from client import Client, ConsumerType
from client.admin import Admin
from client.exceptions import NotFound, PreconditionFailed, TopicNotFound


@pytest.fixture
def admin(cluster):
    with Admin(cluster.service_url) as a:
        yield a


def test_delete_a_topic_refused_while_connected_unless_forced(admin, cluster, topic):
    name = f"persistent://public/default/{topic}"
    with Client(cluster.service_url) as c:
        producer = c.create_producer(name)
        producer.send(b"x")
        with pytest.raises(PreconditionFailed, match="1 producer"):
            admin.topics.delete(name)
        producer.close()
        assert admin.topics.delete(name) == {"deleted": name}
    assert name not in admin.namespaces.get_topics("public/default")
    with pytest.raises(TopicNotFound, match="does not exist"):
        admin.topics.stats(name)


def test_delete_a_partitioned_topic_whose_partitions_nobody_used(admin, topic):
    name = f"persistent://public/default/{topic}"
    admin.topics.create_partitioned_topic(name, 3)
    assert admin.topics.delete(name) == {"deleted": name, "partitions": 3}
    assert admin.topics.get_partitioned_topic_metadata(name) == {"partitions": 0}


def test_unsubscribe_and_clear_backlog(admin, cluster, topic):
    name = f"persistent://public/default/{topic}"
    with Client(cluster.service_url) as c:
        consumer = c.subscribe(name, "busy", consumer_type=ConsumerType.Shared)
        c.subscribe(name, "idle").close()
        producer = c.create_producer(name)
        for _ in range(5):
            producer.send(b"m")
        assert admin.topics.stats(name)["subscriptions"]["idle"]["msgBacklog"] == 5
        admin.topics.clear_backlog(name, "idle")
        assert admin.topics.stats(name)["subscriptions"]["idle"]["msgBacklog"] == 0
        with pytest.raises(PreconditionFailed, match="1 consumer"):
            admin.topics.unsubscribe(name, "busy")
        admin.topics.unsubscribe(name, "busy", force=True)
        assert set(admin.topics.stats(name)["subscriptions"]) == {"idle"}
        with pytest.raises(NotFound, match="subscription 'gone' does not exist"):
            admin.topics.unsubscribe(name, "gone")
        consumer.close()


def test_partitioned_stats_add_up_the_partitions(admin, cluster, topic):
    name = f"persistent://public/default/{topic}"
    admin.topics.create_partitioned_topic(name, 2)
    with Client(cluster.service_url) as c:
        c.subscribe(name, "s").close()
        producer = c.create_producer(name)
        for i in range(10):
            producer.send(b"m", partition_key=str(i))
    stats = admin.topics.partitioned_stats(name, per_partition=True)
    assert stats["metadata"] == {"partitions": 2}
    assert stats["msgInCounter"] == 10
    assert stats["subscriptions"]["s"]["msgBacklog"] == 10
    parts = stats["partitions"]
    assert sum(p["msgInCounter"] for p in parts.values()) == 10


def test_last_message_id(admin, cluster, topic):
    name = f"persistent://public/default/{topic}"
    with Client(cluster.service_url) as c:
        c.create_producer(name).close()
        assert admin.topics.last_message_id(name)["entryId"] == -1
        msg_id = c.create_producer(name).send(b"last")
    last = admin.topics.last_message_id(name)
    assert (last["ledgerId"], last["entryId"]) == (msg_id.ledger_id(), msg_id.entry_id())
