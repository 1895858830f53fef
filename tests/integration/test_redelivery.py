"""Negative acks (fixed delay and backoff), ack timeouts, dead letter topics
and the receive modes, on real processes. Timing checks are bounds: never
earlier than allowed, not later than allowed + a tolerance."""

from __future__ import annotations

import asyncio
import time

import pytest

from client import (
    Client,
    ConsumerBatchReceivePolicy,
    ConsumerDeadLetterPolicy,
    ConsumerType,
    InitialPosition,
    InvalidConfiguration,
    MultiplierRedeliveryBackoff,
    SubscriptionNotFound,
    Timeout,
    aio,
)
from client.admin import Admin
from tests.harness import wait_for

SLACK_S = 1.5  # how late a redelivery may come on a loaded 2-core machine


def _shared(c: Client, topic: str, sub: str = "s", **kw):  # type: ignore[no-untyped-def]
    kw.setdefault("consumer_type", ConsumerType.Shared)
    return c.subscribe(topic, sub, initial_position=InitialPosition.Earliest, **kw)


def test_a_nacked_message_comes_back_after_the_delay_and_only_it(cluster, topic):
    with Client(cluster.service_url) as c:
        consumer = _shared(c, topic, negative_ack_redelivery_delay_ms=1000)
        p = c.create_producer(topic, batching_enabled=False)
        for i in range(3):
            p.send(f"{i}".encode())
        got = [consumer.receive(timeout_millis=5000) for _ in range(3)]
        consumer.acknowledge(got[0])
        consumer.acknowledge(got[2])
        nacked_at = time.monotonic()
        consumer.negative_acknowledge(got[1])
        again = consumer.receive(timeout_millis=10000)
        waited = time.monotonic() - nacked_at
        assert again.data() == b"1" and again.redelivery_count() == 1
        assert 1.0 <= waited <= 1.0 + SLACK_S, waited
        consumer.acknowledge(again)
        with pytest.raises(Timeout):
            consumer.receive(timeout_millis=500)


def test_nack_backoff_grows_with_the_redelivery_count(cluster, topic):
    backoff = MultiplierRedeliveryBackoff(min_delay_ms=300, max_delay_ms=1000, multiplier=2)
    with Client(cluster.service_url) as c:
        consumer = _shared(c, topic, negative_ack_redelivery_backoff=backoff)
        c.create_producer(topic).send(b"x")
        msg = consumer.receive(timeout_millis=5000)
        waits = []
        for expected_ms in (300, 600, 1000, 1000):
            start = time.monotonic()
            consumer.negative_acknowledge(msg)
            msg = consumer.receive(timeout_millis=10000)
            waited = time.monotonic() - start
            waits.append(round(waited, 2))
            assert expected_ms / 1000 <= waited <= expected_ms / 1000 + SLACK_S, waits
        assert msg.redelivery_count() == 4


def test_on_exclusive_a_nack_redelivers_everything_unacked_in_order(cluster, topic):
    with Client(cluster.service_url) as c:
        consumer = c.subscribe(
            topic,
            "ex",
            initial_position=InitialPosition.Earliest,
            negative_ack_redelivery_delay_ms=200,
        )
        p = c.create_producer(topic, batching_enabled=False)
        for i in range(4):
            p.send(f"{i}".encode())
        got = [consumer.receive(timeout_millis=5000) for _ in range(4)]
        consumer.acknowledge(got[0])
        consumer.negative_acknowledge(got[3])
        again = [consumer.receive(timeout_millis=10000) for _ in range(3)]
        assert [m.data() for m in again] == [b"1", b"2", b"3"]


def test_a_nack_in_a_batch_redelivers_the_whole_batch(cluster, topic):
    with Client(cluster.service_url) as c:
        consumer = _shared(c, topic, negative_ack_redelivery_delay_ms=200)
        p = c.create_producer(topic, batching_max_publish_delay_ms=1000)
        for i in range(5):
            p.send_async(f"{i}".encode(), None)
        p.flush()
        got = [consumer.receive(timeout_millis=5000) for _ in range(5)]
        assert len({m.message_id().position for m in got}) == 1  # one entry
        for m in got[:4]:
            consumer.acknowledge(m)
        consumer.negative_acknowledge(got[4])
        again = [consumer.receive(timeout_millis=10000) for _ in range(5)]
        assert [m.data() for m in again] == [f"{i}".encode() for i in range(5)]


def test_ack_timeout_redelivers_what_was_not_acknowledged(cluster, topic):
    with Client(cluster.service_url) as c:
        consumer = _shared(c, topic, unacked_messages_timeout_ms=1000, ack_timeout_tick_time_ms=100)
        p = c.create_producer(topic, batching_enabled=False)
        p.send(b"acked")
        p.send(b"forgotten")
        first = [consumer.receive(timeout_millis=5000) for _ in range(2)]
        taken_at = time.monotonic()
        consumer.acknowledge(next(m for m in first if m.data() == b"acked"))
        again = consumer.receive(timeout_millis=10000)
        waited = time.monotonic() - taken_at
        assert again.data() == b"forgotten" and again.redelivery_count() == 1
        assert 1.0 - 0.05 <= waited <= 1.0 + 0.1 + SLACK_S, waited
        consumer.acknowledge(again)
        with pytest.raises(Timeout):
            consumer.receive(timeout_millis=1500)


def test_ack_timeout_with_backoff_waits_timeout_plus_backoff(cluster, topic):
    backoff = MultiplierRedeliveryBackoff(min_delay_ms=500, max_delay_ms=5000, multiplier=2)
    with Client(cluster.service_url) as c:
        consumer = _shared(
            c,
            topic,
            unacked_messages_timeout_ms=1000,
            ack_timeout_tick_time_ms=50,
            ack_timeout_redelivery_backoff=backoff,
        )
        c.create_producer(topic).send(b"x")
        consumer.receive(timeout_millis=5000)
        for expected_s in (1.5, 2.0):  # timeout + backoff(0), timeout + backoff(1)
            start = time.monotonic()
            consumer.receive(timeout_millis=15000)
            waited = time.monotonic() - start
            assert expected_s - 0.05 <= waited <= expected_s + SLACK_S, (expected_s, waited)


@pytest.mark.parametrize("kind", [ConsumerType.Shared, ConsumerType.KeyShared])
def test_dead_letter_topic_after_max_redeliveries(cluster, topic, kind):
    policy = ConsumerDeadLetterPolicy(max_redeliver_count=2, initial_subscription_name="dlq-sub")
    dlq = f"persistent://public/default/{topic}-s-DLQ"
    with Client(cluster.service_url) as c, Admin(cluster.service_url) as admin:
        consumer = _shared(
            c,
            topic,
            consumer_type=kind,
            consumer_name="worker",
            negative_ack_redelivery_delay_ms=100,
            dead_letter_policy=policy,
        )
        p = c.create_producer(topic, batching_enabled=False)
        bad = p.send(b"poison", properties={"k": "v"}, partition_key="key-1")
        p.send(b"fine")
        counts = []
        while True:
            try:
                m = consumer.receive(timeout_millis=3000)
            except Timeout:
                break
            if m.data() == b"fine":
                consumer.acknowledge(m)
                continue
            counts.append(m.redelivery_count())
            consumer.negative_acknowledge(m)
        assert counts == [0, 1, 2]  # the third redelivery went to the DLQ instead
        # The initial subscription was made with the dead letter producer, before
        # its first send: joining it from "latest" still finds the message.
        dead = c.subscribe(dlq, "dlq-sub")
        m = dead.receive(timeout_millis=10000)
        assert m.data() == b"poison" and m.partition_key() == "key-1"
        props = m.properties()
        assert props["k"] == "v" and props["REAL_TOPIC"] == f"persistent://public/default/{topic}"
        assert props["ORIGIN_MESSAGE_ID"] == str(bad)
        producers = admin.topics.stats(dlq)["publishers"]
        name = producers[0]["producerName"] if producers else m.producer_name()
        assert name.startswith(f"persistent://public/default/{topic}-s-worker-")
        assert name.endswith("-DLQ")
        wait_for(
            lambda: admin.topics.stats(topic)["subscriptions"]["s"]["msgBacklog"] == 0,
            10,
            "the dead-lettered message to be acknowledged",
        )


def test_dead_letter_initial_subscription_fails_when_auto_creation_is_off(
    fresh_cluster, tmp_path, topic
):
    config = tmp_path / "magnetar.toml"
    config.write_text("[broker]\nallow_auto_subscription_creation = false\n")
    fresh_cluster.extra_args = ["--config", str(config)]
    fresh_cluster.start()
    url = fresh_cluster.service_url
    with Client(url) as c, Admin(url) as admin:
        with pytest.raises(SubscriptionNotFound):
            _shared(c, topic)
        admin.topics.create_subscription(topic, "s", earliest=True)
        policy = ConsumerDeadLetterPolicy(1, None, "dlq")  # the official positional order
        consumer = _shared(
            c, topic, dead_letter_policy=policy, negative_ack_redelivery_delay_ms=100
        )
        c.create_producer(topic, batching_enabled=False).send(b"poison")
        counts = []
        for _ in range(2):
            m = consumer.receive(timeout_millis=10000)
            counts.append(m.redelivery_count())
            consumer.negative_acknowledge(m)
        assert counts == [0, 1]
        # The dead letter producer cannot make its initial subscription, so the
        # message is not dead-lettered, nor acknowledged, nor given to the
        # application again: it is tried again after each nack delay.
        with pytest.raises(Timeout):
            consumer.receive(timeout_millis=3000)
        assert admin.topics.stats(topic)["subscriptions"]["s"]["msgBacklog"] == 1
        dlq = f"persistent://public/default/{topic}-s-DLQ"
        assert "dlq" not in admin.topics.stats(dlq).get("subscriptions", {})


def test_message_listener_pause_resume_and_batch_receive(cluster, topic):
    received: list[bytes] = []

    def on_message(consumer, msg) -> None:  # type: ignore[no-untyped-def]
        received.append(msg.data())
        consumer.acknowledge(msg)

    with Client(cluster.service_url) as c:
        listened = c.subscribe(
            topic, "listen", initial_position=InitialPosition.Earliest, message_listener=on_message
        )
        p = c.create_producer(topic, batching_enabled=False)
        for i in range(5):
            p.send(f"{i}".encode())
        wait_for(lambda: len(received) == 5, 10, "the listener to get 5 messages")
        listened.pause_message_listener()
        # The listener may be inside one receive while pausing: allow it that one.
        p.send(b"5")
        p.send(b"6")
        with pytest.raises(AssertionError):
            wait_for(lambda: len(received) == 7, 1.0, "nothing while paused")
        listened.resume_message_listener()
        wait_for(lambda: len(received) == 7, 10, "the listener to resume")
        assert received == [f"{i}".encode() for i in range(7)]

        batched = c.subscribe(
            topic,
            "batch",
            initial_position=InitialPosition.Earliest,
            batch_receive_policy=ConsumerBatchReceivePolicy(max_num_message=4, timeout_ms=2000),
        )
        first = batched.batch_receive()
        assert [m.data() for m in first] == [b"0", b"1", b"2", b"3"]
        rest = batched.batch_receive()  # only 3 left: returns at the timeout
        assert [m.data() for m in rest] == [b"4", b"5", b"6"]
        assert batched.batch_receive() == []


def test_asyncio_listener_and_batch_receive(cluster, topic):
    async def main() -> None:
        got: list[bytes] = []
        done = asyncio.Event()

        async def on_message(consumer, msg) -> None:  # type: ignore[no-untyped-def]
            got.append(msg.data())
            await consumer.acknowledge(msg)
            if len(got) == 3:
                done.set()

        async with aio.Client(cluster.service_url) as c:
            await c.subscribe(
                topic,
                "alisten",
                initial_position=InitialPosition.Earliest,
                message_listener=on_message,
            )
            p = await c.create_producer(topic, batching_enabled=False)
            for i in range(3):
                await p.send(f"{i}".encode())
            await asyncio.wait_for(done.wait(), 10)
            assert got == [b"0", b"1", b"2"]
            batched = await c.subscribe(
                topic,
                "abatch",
                initial_position=InitialPosition.Earliest,
                batch_receive_policy=ConsumerBatchReceivePolicy(max_num_message=2, timeout_ms=1000),
            )
            assert [m.data() for m in await batched.batch_receive()] == [b"0", b"1"]

    asyncio.run(main())


def test_reconsume_later_goes_through_the_retry_topic_then_the_dlq(cluster, topic):
    full = f"persistent://public/default/{topic}"
    policy = ConsumerDeadLetterPolicy(max_redeliver_count=2)
    with Client(cluster.service_url) as c, Admin(cluster.service_url) as admin:
        consumer = _shared(c, topic, retry_enable=True, dead_letter_policy=policy)
        dead = c.subscribe(f"{topic}-s-DLQ", "d", initial_position=InitialPosition.Earliest)
        original = c.create_producer(topic).send(b"job", properties={"mine": "1"})
        m = consumer.receive(timeout_millis=5000)
        assert m.topic_name() == full
        for times in (1, 2):
            consumer.reconsume_later(m, 200, properties={"why": f"try{times}"})
            m = consumer.receive(timeout_millis=10000)
            props = m.properties()
            assert m.topic_name() == f"{full}-s-RETRY" and m.data() == b"job"
            assert props["RECONSUMETIMES"] == str(times) and props["DELAY_TIME"] == "200"
            assert props["REAL_TOPIC"] == full and props["ORIGIN_MESSAGE_ID"] == str(original)
            assert props["mine"] == "1" and props["why"] == f"try{times}"
        consumer.reconsume_later(m, 200)  # a third time: over max_redeliver_count
        gone = dead.receive(timeout_millis=10000)
        assert gone.data() == b"job" and gone.properties()["REAL_TOPIC"] == full
        with pytest.raises(Timeout):
            consumer.receive(timeout_millis=1500)
        for t in (topic, f"{topic}-s-RETRY"):
            wait_for(
                lambda t=t: admin.topics.stats(t)["subscriptions"]["s"]["msgBacklog"] == 0,  # type: ignore[misc]
                10,
                f"{t} to be acknowledged",
            )
        plain = _shared(c, topic, sub="plain")
        with pytest.raises(InvalidConfiguration, match="retry_enable"):
            plain.reconsume_later(m, 10)
