"""The topics verbs of issue 22 on real processes: delete (also a
partitioned topic whose partitions nobody used), unsubscribe, clear-backlog,
partitioned-stats and last-message-id."""

from __future__ import annotations

import pytest

from client import Client, ConsumerType, MessageId
from client.admin import Admin
from client.exceptions import (
    InvalidConfiguration,
    NotFound,
    PreconditionFailed,
    TopicNotFound,
    TopicTerminated,
)
from tests.harness import wait_for


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


def test_a_producer_of_a_force_deleted_topic_sends_on_to_the_topic_made_anew(admin, cluster, topic):
    """What it sends after the deletion is stored in the new topic's records
    (and read after a reload). The broker does not load the topic again
    until the deletion has removed its records: a reload in between would
    write to a ledger that the deletion then unlists. That window is a few
    milliseconds and this test does not hit it reliably."""
    name = f"persistent://public/default/{topic}"
    with Client(cluster.service_url) as c:
        producer = c.create_producer(name)
        producer.send(b"before")
        admin.topics.delete(name, force=True)
        producer.send(b"after")  # on the topic made anew
    admin.namespaces.unload("public/default")  # the topic loads again from its records
    with Client(cluster.service_url) as c:
        reader = c.create_reader(name, MessageId.earliest)
        got = []
        while reader.has_message_available():
            got.append(reader.read_next(5000).data())
    assert got == [b"after"]


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


def _fill(c: Client, name: str, n: int, batched: bool = False) -> list:
    producer = c.create_producer(name, batching_enabled=batched, batching_max_publish_delay_ms=50)
    if batched:
        for i in range(n):
            producer.send_async(f"m{i}".encode(), None)
        producer.flush()
        return []
    return [producer.send(f"m{i}".encode(), properties={"i": str(i)}) for i in range(n)]


def test_peek_messages_leaves_them_unacknowledged(admin, cluster, topic):
    name = f"persistent://public/default/{topic}"
    with Client(cluster.service_url) as c:
        c.subscribe(name, "s").close()
        _fill(c, name, 3)
        _fill(c, name, 5, batched=True)  # batches are unpacked by the admin client
        peeked = admin.topics.peek_messages(name, "s", 6)
        assert [m.data() for m in peeked] == [b"m0", b"m1", b"m2", b"m0", b"m1", b"m2"]
        assert peeked[1].properties() == {"i": "1"}
        assert admin.topics.stats(name)["subscriptions"]["s"]["msgBacklog"] == 8
        consumer = c.subscribe(name, "s")
        assert consumer.receive(timeout_millis=10000).data() == b"m0"


def test_skip_acknowledges_the_oldest_messages(admin, cluster, topic):
    name = f"persistent://public/default/{topic}"
    with Client(cluster.service_url) as c:
        c.subscribe(name, "s").close()
        _fill(c, name, 10)
        assert admin.topics.skip(name, "s", 4)["skipped"] == 4
        assert admin.topics.stats(name)["subscriptions"]["s"]["msgBacklog"] == 6
        consumer = c.subscribe(name, "s")
        assert consumer.receive(timeout_millis=10000).data() == b"m4"


def _first_after_reset(consumer, expected: int) -> bytes:
    """The first message at or before m``expected`` that the consumer gets:
    messages past it were delivered before the reset (the receiver queue
    held them when the broker disconnected the consumer; Pulsar's client
    has the same window), and only the reset can bring an earlier one."""
    for _ in range(12):
        data = consumer.receive(timeout_millis=15000).data()
        if int(data.removeprefix(b"m")) <= expected:
            return data
    raise AssertionError(f"nothing at or before m{expected} after the reset")


def test_reset_cursor_by_message_id_and_by_time(admin, cluster, topic):
    name = f"persistent://public/default/{topic}"
    with Client(cluster.service_url) as c:
        consumer = c.subscribe(name, "s")
        ids = _fill(c, name, 10)
        for _ in range(10):
            consumer.acknowledge(consumer.receive(timeout_millis=10000))
        at = f"{ids[3].ledger_id()}:{ids[3].entry_id()}"
        admin.topics.reset_cursor(name, "s", message_id=at)
        # The consumer was disconnected; it reconnects and receives from m3.
        assert _first_after_reset(consumer, 3) == b"m3"
        admin.topics.reset_cursor(name, "s", message_id=at, exclude=True)
        assert _first_after_reset(consumer, 4) == b"m4"
        admin.topics.reset_cursor(name, "s", timestamp_ms=0)  # everything again
        assert _first_after_reset(consumer, 0) == b"m0"
    with pytest.raises(InvalidConfiguration, match="not ledgerId:entryId"):
        admin.topics.reset_cursor(name, "s", message_id="yesterday")


def test_stats_internal_shows_ledgers_and_cursor_positions(admin, cluster, topic):
    name = f"persistent://public/default/{topic}"
    with Client(cluster.service_url) as c:
        consumer = c.subscribe(name, "s", consumer_type=ConsumerType.Shared)
        ids = _fill(c, name, 6)
        got = {}
        for _ in range(6):
            msg = consumer.receive(timeout_millis=10000)
            got[msg.data()] = msg
        consumer.acknowledge(got[b"m0"])
        consumer.acknowledge(got[b"m3"])
        consumer.acknowledge(got[b"m4"])
        first, fourth, fifth = ids[0], ids[3], ids[4]

        def positions() -> dict:
            return admin.topics.stats_internal(name)["cursors"]["s"]

        def settled() -> bool:
            return positions()["markDeletePosition"] == f"{first.ledger_id()}:{first.entry_id()}"

        assert wait_for(settled, 10, "the acknowledgements to reach the broker")
        cursor = positions()
        before_fourth = f"{fourth.ledger_id()}:{fourth.entry_id() - 1}"
        assert cursor["individuallyDeletedMessages"] == (
            f"[({before_fourth}..{fifth.ledger_id()}:{fifth.entry_id()}]]"
        )
        internal = admin.topics.stats_internal(name)
        assert internal["numberOfEntries"] == 6
        last = ids[-1]
        assert internal["lastConfirmedEntry"] == f"{last.ledger_id()}:{last.entry_id()}"
        assert internal["ledgers"][-1]["ledgerId"] == last.ledger_id()


def test_terminate_refuses_messages_and_readers_see_the_end(admin, cluster, topic):
    name = f"persistent://public/default/{topic}"
    with Client(cluster.service_url) as c:
        producer = c.create_producer(name, batching_enabled=False)
        ids = [producer.send(f"m{i}".encode()) for i in range(3)]
        reader = c.create_reader(name, MessageId.earliest)
        assert not reader.has_reached_end_of_topic()
        last = admin.topics.terminate(name)
        assert (last["ledgerId"], last["entryId"]) == (ids[-1].ledger_id(), ids[-1].entry_id())
        with pytest.raises(TopicTerminated, match="was terminated"):
            producer.send(b"late")
        with pytest.raises(TopicTerminated):
            c.create_producer(name)
        assert not reader.has_reached_end_of_topic()  # three messages are still to read
        assert [reader.read_next(10000).data() for _ in range(3)] == [b"m0", b"m1", b"m2"]
        assert reader.has_reached_end_of_topic()
        assert admin.topics.terminate(name) == last  # again: the same answer
    admin.namespaces.unload("public/default")  # reloaded, it stays terminated
    with Client(cluster.service_url) as c, pytest.raises(TopicTerminated):
        c.create_producer(name)
