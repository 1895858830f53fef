"""Exclusive, Failover and Shared subscriptions on the standalone cluster."""

from __future__ import annotations

import pytest

from client import (
    Client,
    ConsumerBusy,
    ConsumerType,
    CumulativeAcknowledgementNotAllowedError,
    InitialPosition,
    MagnetarError,
    Timeout,
)


def _send(client: Client, topic: str, n: int, prefix: str = "m") -> list[bytes]:
    p = client.create_producer(topic, batching_enabled=False)
    out = []
    for i in range(n):
        p.send(f"{prefix}{i}".encode())
        out.append(f"{prefix}{i}".encode())
    p.close()
    return out


def _drain(consumer, limit: int, timeout_ms: int = 1500, ack: bool = True) -> list:  # type: ignore[no-untyped-def]
    got: list = []
    while len(got) < limit:
        try:
            msg = consumer.receive(timeout_millis=timeout_ms)
        except Timeout:
            break
        if ack:
            consumer.acknowledge(msg)
        got.append(msg)
    return got


def _sub(client: Client, topic: str, sub: str, kind: ConsumerType, **kw):  # type: ignore[no-untyped-def]
    return client.subscribe(
        topic, sub, consumer_type=kind, initial_position=InitialPosition.Earliest, **kw
    )


def test_exclusive_refuses_a_second_consumer(cluster, topic):
    with Client(cluster.service_url) as c:
        _sub(c, topic, "ex", ConsumerType.Exclusive)
        with pytest.raises(ConsumerBusy):
            _sub(c, topic, "ex", ConsumerType.Exclusive)


def test_shared_spreads_messages_each_to_exactly_one_consumer(cluster, topic):
    with Client(cluster.service_url) as c:
        a = _sub(c, topic, "sh", ConsumerType.Shared, receiver_queue_size=10)
        b = _sub(c, topic, "sh", ConsumerType.Shared, receiver_queue_size=10)
        sent = _send(c, topic, 200)
        got_a: list[bytes] = []
        got_b: list[bytes] = []
        a_msgs = []
        # Alternate receives so neither consumer's small queue stalls the other.
        for _ in range(400):
            if len(got_a) + len(got_b) >= 200:
                break
            for consumer, got in ((a, got_a), (b, got_b)):
                try:
                    msg = consumer.receive(timeout_millis=200)
                except Timeout:
                    continue
                consumer.acknowledge(msg)
                got.append(msg.data())
                if consumer is a:
                    a_msgs.append(msg)
        assert sorted(got_a + got_b) == sorted(sent)
        assert not set(got_a) & set(got_b)
        assert got_a and got_b, "round-robin gave everything to one consumer"
        with pytest.raises(CumulativeAcknowledgementNotAllowedError):
            a.acknowledge_cumulative(a_msgs[-1])


def test_shared_redelivers_a_closed_consumers_unacked_messages_to_the_others(cluster, topic):
    with Client(cluster.service_url) as c:
        a = _sub(c, topic, "sh", ConsumerType.Shared, receiver_queue_size=50)
        sent = _send(c, topic, 30)
        held = _drain(a, 30, ack=False)  # received, never acknowledged
        assert [m.data() for m in held] == sent
        b = _sub(c, topic, "sh", ConsumerType.Shared, receiver_queue_size=50)
        a.close()
        again = _drain(b, 30)
        assert sorted(m.data() for m in again) == sorted(sent)
        assert all(m.redelivery_count() >= 1 for m in again)


def test_shared_serves_the_best_priority_level_first(cluster, topic):
    with Client(cluster.service_url) as c:
        low = _sub(c, topic, "sh", ConsumerType.Shared, priority_level=1, consumer_name="low")
        high = _sub(c, topic, "sh", ConsumerType.Shared, priority_level=0, consumer_name="high")
        sent = _send(c, topic, 50)  # fits in high's permits (receiver queue 1000)
        assert [m.data() for m in _drain(high, 50)] == sent
        assert _drain(low, 1, timeout_ms=500) == []


def test_failover_next_consumer_takes_over_every_unacked_and_later_message(cluster, topic):
    with Client(cluster.service_url) as c:
        first = _sub(c, topic, "fo", ConsumerType.Failover, consumer_name="first")
        second = _sub(c, topic, "fo", ConsumerType.Failover, consumer_name="second")
        sent = _send(c, topic, 20)
        got = _drain(first, 10)  # acknowledged: never seen again
        assert [m.data() for m in got] == sent[:10]
        _drain(first, 5, ack=False)  # received, unacknowledged
        assert _drain(second, 1, timeout_ms=500) == []  # standby gets nothing
        first.close()
        later = _send(c, topic, 5, prefix="later")
        rest = [m.data() for m in _drain(second, 100)]
        assert rest == sent[10:] + later


@pytest.mark.parametrize(
    ("partitions", "consumers", "expected"),
    [
        # The seed's examples: consumers sorted by priority then name; partition i -> i mod n.
        (2, 4, {0: "C1", 1: "C2"}),
        (9, 3, {i: f"C{i % 3 + 1}" for i in range(9)}),
    ],
)
def test_failover_assigns_partition_i_to_consumer_i_mod_n(
    cluster, topic, partitions, consumers, expected
):
    names = [f"C{i + 1}" for i in range(consumers)]
    with Client(cluster.service_url) as c:
        subs = {
            (name, p): _sub(
                c, f"{topic}-partition-{p}", "fo", ConsumerType.Failover, consumer_name=name
            )
            for name in reversed(names)  # subscription order does not matter
            for p in range(partitions)
        }
        for p in range(partitions):
            _send(c, f"{topic}-partition-{p}", 3, prefix=f"p{p}-")
        for p in range(partitions):
            owner = expected[p]
            got = _drain(subs[(owner, p)], 3)
            assert [m.data() for m in got] == [f"p{p}-{i}".encode() for i in range(3)], (p, owner)
            for name in names:
                if name != owner:
                    assert _drain(subs[(name, p)], 1, timeout_ms=200) == [], (p, name)


def test_a_different_type_is_refused_while_consumers_are_connected(cluster, topic):
    with Client(cluster.service_url) as c:
        shared = _sub(c, topic, "s", ConsumerType.Shared)
        with pytest.raises(MagnetarError, match="Shared with consumers connected"):
            _sub(c, topic, "s", ConsumerType.Failover)
        shared.close()
        # Once every consumer left, the next one sets the type.
        fo = _sub(c, topic, "s", ConsumerType.Failover)
        sent = _send(c, topic, 3)
        assert [m.data() for m in _drain(fo, 3)] == sent


def test_a_consumer_at_its_unacked_limit_gets_more_only_after_half_are_acked(
    fresh_cluster, tmp_path
):
    config = tmp_path / "magnetar.toml"
    config.write_text("[broker]\nmax_unacked_messages_per_consumer = 10\n")
    fresh_cluster.extra_args = ["--config", str(config)]
    cluster = fresh_cluster.start()
    topic = "unacked-limit"
    with Client(cluster.service_url) as c:
        consumer = _sub(c, topic, "sh", ConsumerType.Shared, receiver_queue_size=100)
        _send(c, topic, 50)
        first = _drain(consumer, 50, timeout_ms=1000, ack=False)
        assert len(first) == 10  # blocked at the limit although permits remain
        for m in first[:4]:
            consumer.acknowledge(m)
        assert _drain(consumer, 50, timeout_ms=1000, ack=False) == []  # 6 unacked > 10 / 2
        consumer.acknowledge(first[4])  # 5 unacked: unblocked
        more = _drain(consumer, 50, timeout_ms=1000, ack=False)
        assert len(more) == 5  # back up to the limit of 10
        assert [m.data() for m in more] == [f"m{i}".encode() for i in range(10, 15)]


@pytest.mark.parametrize("kind", [ConsumerType.Exclusive, ConsumerType.Shared])
def test_redeliver_unacknowledged_messages_counts_redeliveries(cluster, topic, kind):
    with Client(cluster.service_url) as c:
        consumer = _sub(c, topic, "r", kind)
        sent = _send(c, topic, 10)
        first = _drain(consumer, 10, ack=False)
        assert [m.data() for m in first] == sent
        assert all(m.redelivery_count() == 0 for m in first)
        consumer.acknowledge(first[0])
        consumer.redeliver_unacknowledged_messages()
        again = _drain(consumer, 20, ack=False)
        assert sorted(m.data() for m in again) == sorted(sent[1:])
        assert all(m.redelivery_count() == 1 for m in again)
        consumer.redeliver_unacknowledged_messages()
        assert all(m.redelivery_count() == 2 for m in _drain(consumer, 20))


def test_unsubscribe_is_refused_with_other_consumers_and_deletes_the_subscription(cluster, topic):
    with Client(cluster.service_url) as c:
        a = _sub(c, topic, "u", ConsumerType.Shared)
        b = _sub(c, topic, "u", ConsumerType.Shared)
        _send(c, topic, 5)
        with pytest.raises(MagnetarError, match="other consumer"):
            a.unsubscribe()
        b.close()
        _drain(a, 5, ack=False)  # unacknowledged when the subscription goes
        a.unsubscribe()
        with pytest.raises(MagnetarError):
            a.receive(timeout_millis=100)
        # A new subscription of that name starts from scratch (Latest by default).
        fresh = c.subscribe(topic, "u", consumer_type=ConsumerType.Shared)
        assert _drain(fresh, 1, timeout_ms=500) == []
        later = _send(c, topic, 2, prefix="after")
        assert [m.data() for m in _drain(fresh, 2)] == later


def test_a_subscription_at_its_unacked_limit_gets_more_only_after_half_are_acked(
    fresh_cluster, tmp_path
):
    config = tmp_path / "magnetar.toml"
    config.write_text("[broker]\nmax_unacked_messages_per_subscription = 10\n")
    fresh_cluster.extra_args = ["--config", str(config)]
    cluster = fresh_cluster.start()
    topic = "sub-unacked-limit"
    with Client(cluster.service_url) as c:
        a = _sub(c, topic, "sh", ConsumerType.Shared, receiver_queue_size=100)
        b = _sub(c, topic, "sh", ConsumerType.Shared, receiver_queue_size=100)
        _send(c, topic, 50)
        got_a = _drain(a, 50, timeout_ms=1000, ack=False)
        got_b = _drain(b, 50, timeout_ms=1000, ack=False)
        assert len(got_a) + len(got_b) == 10  # the two together are at the limit
        for m in got_a + got_b:
            (a if m in got_a else b).acknowledge(m)
        more = _drain(a, 50, timeout_ms=1000, ack=False) + _drain(b, 50, timeout_ms=1000, ack=False)
        assert len(more) == 10
