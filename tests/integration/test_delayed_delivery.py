"""Delayed delivery: deliver_at / deliver_after on send, held by Shared and
Key_Shared subscriptions until due (one tick early at most unless strict),
never batched, delivered at once to Exclusive/Failover, and still delivered
after a broker restart."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest

from client import Client, ConsumerType, InitialPosition, InvalidConfiguration, Timeout

SLACK_S = 1.5


def _sub(c: Client, topic: str, sub: str, kind: ConsumerType):  # type: ignore[no-untyped-def]
    return c.subscribe(topic, sub, consumer_type=kind, initial_position=InitialPosition.Earliest)


def test_shared_and_key_shared_hold_a_message_until_its_time(cluster, topic):
    with Client(cluster.service_url) as c:
        shared = _sub(c, topic, "sh", ConsumerType.Shared)
        keyed = _sub(c, topic, "ks", ConsumerType.KeyShared)
        exclusive = _sub(c, topic, "ex", ConsumerType.Exclusive)
        p = c.create_producer(topic, batching_max_publish_delay_ms=500)
        sent_at = time.time()
        p.send_async(b"before", None, partition_key="a")
        p.send_async(b"later", None, partition_key="a", deliver_after=timedelta(seconds=3))
        p.send_async(b"after", None, partition_key="a")
        p.flush()
        due = sent_at + 3
        tick_s = 1.0  # delayed_delivery_tick_time_ms, not strict: up to one tick early
        for consumer in (shared, keyed):
            first = [consumer.receive(timeout_millis=5000).data() for _ in range(2)]
            assert first == [b"before", b"after"]
            m = consumer.receive(timeout_millis=10000)
            arrived = time.time()
            assert m.data() == b"later"
            assert due - tick_s - 0.05 <= arrived <= due + SLACK_S, arrived - sent_at
            assert m.message_id().batch_index() == -1  # never batched
            consumer.acknowledge(m)
        # Exclusive does not delay: everything at once, in order.
        got = [exclusive.receive(timeout_millis=5000).data() for _ in range(3)]
        assert got == [b"before", b"later", b"after"]


def test_deliver_at_in_the_past_and_bad_values(cluster, topic):
    with Client(cluster.service_url) as c:
        shared = _sub(c, topic, "sh", ConsumerType.Shared)
        p = c.create_producer(topic)
        p.send(b"past", deliver_at=int(time.time() * 1000) - 60000)
        assert shared.receive(timeout_millis=5000).data() == b"past"
        with pytest.raises(InvalidConfiguration):
            p.send(b"x", deliver_after=5)
        with pytest.raises(InvalidConfiguration):
            p.send(b"x", deliver_at=-1)
        with pytest.raises(InvalidConfiguration):
            p.send(b"x", deliver_at=1, deliver_after=timedelta(seconds=1))


def test_strict_delivery_and_a_broker_restart(fresh_cluster, tmp_path, topic):
    config = tmp_path / "magnetar.toml"
    config.write_text(
        "[broker]\ndelayed_delivery_tick_time_ms = 100\n"
        "is_delayed_delivery_deliver_at_time_strict = true\n"
    )
    fresh_cluster.extra_args = ["--config", str(config)]
    fresh_cluster.start()
    with Client(fresh_cluster.service_url) as c:
        shared = _sub(c, topic, "sh", ConsumerType.Shared)
        p = c.create_producer(topic)
        deliver_at = int(time.time() * 1000) + 1500
        p.send(b"strict", deliver_at=deliver_at)
        m = shared.receive(timeout_millis=10000)
        assert time.time() * 1000 >= deliver_at  # strict: never early
        assert m.data() == b"strict"
        shared.acknowledge(m)
        survivor_at = int(time.time() * 1000) + 4000
        p.send(b"survivor", deliver_at=survivor_at)
        with pytest.raises(Timeout):
            shared.receive(timeout_millis=300)
    fresh_cluster.stop()
    fresh_cluster.start()
    with Client(fresh_cluster.service_url) as c:
        shared = _sub(c, topic, "sh", ConsumerType.Shared)
        m = shared.receive(timeout_millis=15000)
        assert m.data() == b"survivor"
        assert time.time() * 1000 >= survivor_at
