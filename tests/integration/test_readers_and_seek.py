"""Readers from earliest, latest or a message id; seek by id and by publish time."""

from __future__ import annotations

import time

import pytest

from client import Client, ConsumerType, InitialPosition, MessageId, SubscriptionMode, Timeout
from client.admin import Admin
from tests.harness import wait_for


def _send(client: Client, topic: str, n: int, prefix: str = "m", batched: bool = False) -> list:
    p = client.create_producer(topic, batching_enabled=batched)
    if batched:
        ids: list = []
        for i in range(n):
            p.send_async(f"{prefix}{i}".encode(), lambda res, mid: ids.append(mid))
        p.flush()
    else:
        ids = [p.send(f"{prefix}{i}".encode()) for i in range(n)]
    p.close()
    return sorted(ids)


def _read_all(reader, limit: int = 1000, timeout_ms: int = 1000) -> list[bytes]:  # type: ignore[no-untyped-def]
    out: list[bytes] = []
    while len(out) < limit:
        try:
            out.append(reader.read_next(timeout_millis=timeout_ms).data())
        except Timeout:
            break
    return out


def test_reader_from_earliest_latest_and_a_message_id(cluster, topic):
    with Client(cluster.service_url) as c:
        ids = _send(c, topic, 10)
        everything = [f"m{i}".encode() for i in range(10)]
        assert _read_all(c.create_reader(topic, MessageId.earliest)) == everything
        assert _read_all(c.create_reader(topic, ids[4])) == everything[5:]
        assert (
            _read_all(c.create_reader(topic, ids[4], start_message_id_inclusive=True))
            == everything[4:]
        )
        latest = c.create_reader(topic, MessageId.latest)
        assert _read_all(latest, timeout_ms=300) == []
        inclusive_latest = c.create_reader(topic, MessageId.latest, start_message_id_inclusive=True)
        assert _read_all(inclusive_latest) == [b"m9"]
        _send(c, topic, 2, prefix="new")
        assert _read_all(latest) == [b"new0", b"new1"]


def test_reader_from_a_message_inside_a_batch(cluster, topic):
    with Client(cluster.service_url) as c:
        ids = _send(c, topic, 10, batched=True)
        assert ids[3].batch_index() >= 0, "the messages were not batched"
        names = [f"m{i}".encode() for i in range(10)]
        assert _read_all(c.create_reader(topic, ids[3])) == names[4:]
        assert (
            _read_all(c.create_reader(topic, ids[3], start_message_id_inclusive=True)) == names[3:]
        )


def test_has_message_available(cluster, topic):
    with Client(cluster.service_url) as c:
        empty = c.create_reader(topic, MessageId.earliest)
        assert not empty.has_message_available()
        _send(c, topic, 3)
        reader = c.create_reader(topic, MessageId.earliest)
        seen = []
        while reader.has_message_available():  # bounded: 3 messages
            seen.append(reader.read_next(timeout_millis=5000).data())
            assert len(seen) <= 3
        assert seen == [b"m0", b"m1", b"m2"]
        assert c.create_reader(topic, MessageId.latest).has_message_available() is False


def test_consumer_seek_by_message_id_and_by_publish_time(cluster, topic):
    with Client(cluster.service_url) as c:
        consumer = c.subscribe(topic, "s", initial_position=InitialPosition.Earliest)
        first = _send(c, topic, 5, prefix="a")
        # Publish times are in ms: a gap makes the boundary unambiguous.
        boundary = int(time.time() * 1000) + 50
        wait_for(lambda: int(time.time() * 1000) > boundary, 5, "the clock to pass the boundary")
        second = _send(c, topic, 5, prefix="b")
        got = []
        for _ in range(10):
            msg = consumer.receive(timeout_millis=5000)
            consumer.acknowledge(msg)
            got.append(msg.data())
        assert len(got) == 10
        last = consumer.get_last_message_id()
        assert last.position == second[-1].position
        # Pulsar's rule: the seek target itself comes again only with
        # start_message_id_inclusive; acknowledged or not, what follows does.
        consumer.seek(first[2])
        assert consumer.receive(timeout_millis=5000).data() == b"a3"
        consumer.seek(boundary)
        assert consumer.receive(timeout_millis=5000).data() == b"b0"
        consumer.seek(MessageId.earliest)
        assert consumer.receive(timeout_millis=5000).data() == b"a0"
        consumer.close()
        inclusive = c.subscribe(topic, "s", start_message_id_inclusive=True)
        inclusive.seek(first[2])
        assert inclusive.receive(timeout_millis=5000).data() == b"a2"


def test_get_last_message_id_and_seek_on_a_shared_subscription(cluster, topic):
    with Client(cluster.service_url) as c:
        consumer = c.subscribe(topic, "sh", consumer_type=ConsumerType.Shared)
        assert consumer.get_last_message_id().entry_id() == -1
        ids = _send(c, topic, 4)
        last = consumer.get_last_message_id()
        assert (last.ledger_id(), last.entry_id()) == (ids[-1].ledger_id(), ids[-1].entry_id())
        got = [consumer.receive(timeout_millis=5000) for _ in range(4)]
        for m in got:
            consumer.acknowledge(m)
        consumer.seek(ids[1])
        again = []
        for _ in range(2):
            m = consumer.receive(timeout_millis=5000)
            consumer.acknowledge(m)
            again.append(m.data())
        assert sorted(again) == [b"m2", b"m3"]


def test_reader_seek(cluster, topic):
    with Client(cluster.service_url) as c:
        ids = _send(c, topic, 6)
        reader = c.create_reader(topic, MessageId.earliest)
        assert _read_all(reader, limit=6)[-1] == b"m5"
        reader.seek(ids[3])
        # a seek reconnects the reader: give it more than the 1 s gap that
        # ends _read_all, then check nothing else follows
        assert _read_all(reader, limit=2, timeout_ms=10000) == [b"m4", b"m5"]
        assert _read_all(reader) == []
        inclusive = c.create_reader(topic, MessageId.earliest, start_message_id_inclusive=True)
        assert _read_all(inclusive, limit=6)[-1] == b"m5"
        inclusive.seek(ids[3])
        assert _read_all(inclusive, limit=3, timeout_ms=10000) == [b"m3", b"m4", b"m5"]


def test_create_reader_rejects_a_bad_start(cluster, topic):
    from client import InvalidConfiguration

    with Client(cluster.service_url) as c, pytest.raises(InvalidConfiguration):
        c.create_reader(topic, "earliest")  # type: ignore[arg-type]


def test_a_non_durable_subscription_goes_with_its_last_consumer(cluster, topic):
    """As in Pulsar: a reader's (non-durable) subscription is removed when its
    consumer leaves, however it leaves; a durable one stays."""
    with Client(cluster.service_url) as client, Admin(cluster.service_url) as admin:
        _send(client, topic, 3)
        subs = lambda: set(admin.topics.stats(topic)["subscriptions"])  # noqa: E731
        reader = client.subscribe(
            topic,
            "nd",
            subscription_mode=SubscriptionMode.NonDurable,
            initial_position=InitialPosition.Earliest,
        )
        reader.receive(5000)
        client.subscribe(topic, "d").close()
        assert subs() == {"nd", "d"}
        reader.close()
        wait_for(lambda: subs() == {"d"}, 10, "the non-durable subscription to go")


def test_a_reader_resumes_inside_a_batch_after_its_topic_moves(cluster, topic):
    """A reconnected reader starts again at the entry it was reading; the
    messages of that batch it already returned are not returned twice."""
    with Client(cluster.service_url) as client, Admin(cluster.service_url) as admin:
        _send(client, topic, 100, batched=True)
        reader = client.create_reader(topic, MessageId.earliest)
        got = [reader.read_next(5000).data() for _ in range(15)]
        admin.namespaces.unload("public/default")  # every topic of it moves (reloads)
        got += _read_all(reader, limit=200, timeout_ms=3000)
        reader.close()
    assert got == [f"m{i}".encode() for i in range(100)]
