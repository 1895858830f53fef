"""Producing and consuming through a real standalone cluster."""

from __future__ import annotations

import asyncio
import json
import threading

import grpc
import pytest

from client import Client, InitialPosition, MessageId, Result, Timeout
from client import aio as client_aio
from client._consumer import ConsumerEngine
from client.admin import Admin
from metastore.client import MetastoreClient
from tests.harness import wait_for


def test_send_receive_in_order_with_increasing_ids(cluster, topic):
    with Client(cluster.service_url) as c:
        consumer = c.subscribe(topic, "s", initial_position=InitialPosition.Earliest)
        producer = c.create_producer(topic)
        ids = [producer.send(f"m-{i}".encode(), properties={"i": str(i)}) for i in range(50)]
        assert ids == sorted(ids) and len(set(ids)) == 50
        got = []
        for _ in range(50):
            msg = consumer.receive(timeout_millis=10000)
            got.append(msg)
            consumer.acknowledge(msg)
        assert [m.data() for m in got] == [f"m-{i}".encode() for i in range(50)]
        assert [m.message_id() for m in got] == ids
        assert got[7].properties() == {"i": "7"}
        assert got[0].topic_name() == f"persistent://public/default/{topic}"
        assert got[0].producer_name() == producer.producer_name()
        assert got[0].publish_timestamp() > 0
        with pytest.raises(Timeout):
            consumer.receive(timeout_millis=200)


def test_batched_send_async_delivers_every_message_once(cluster, topic):
    n = 5000
    results: list[tuple[Result, MessageId]] = []
    done = threading.Event()

    def callback(result, msg_id):
        results.append((result, msg_id))
        if len(results) == n:
            done.set()

    with Client(cluster.service_url) as c:
        consumer = c.subscribe(topic, "s", initial_position=InitialPosition.Earliest)
        producer = c.create_producer(topic, block_if_queue_full=True, batching_max_messages=100)
        for i in range(n):
            producer.send_async(i.to_bytes(4, "big"), callback)
        producer.flush()
        assert done.wait(30)
        assert all(r == Result.Ok for r, _ in results)
        ids = [m for _, m in results]
        assert len(set(ids)) == n and any(m.batch_index() > 0 for m in ids)
        seen = []
        for _ in range(n):
            msg = consumer.receive(timeout_millis=10000)
            seen.append(int.from_bytes(msg.data(), "big"))
            consumer.acknowledge(msg)
        assert seen == list(range(n))


def test_latest_subscription_sees_only_new_messages(cluster, topic):
    with Client(cluster.service_url) as c:
        producer = c.create_producer(topic)
        producer.send(b"old")
        consumer = c.subscribe(topic, "late")  # InitialPosition.Latest is the default
        producer.send(b"new")
        assert consumer.receive(timeout_millis=10000).data() == b"new"


def _send_numbers_and_receive(c, topic: str, sub: str, sent: int, received: int):
    producer = c.create_producer(topic, batching_enabled=False)
    for i in range(sent):
        producer.send(str(i).encode())
    consumer = c.subscribe(topic, sub, initial_position=InitialPosition.Earliest)
    return consumer, [consumer.receive(timeout_millis=10000) for _ in range(received)]


def test_cumulative_ack_and_redelivery_to_the_next_consumer(cluster, topic):
    with Client(cluster.service_url) as c:
        first, msgs = _send_numbers_and_receive(c, topic, "cum", 10, 6)
        first.acknowledge_cumulative(msgs[3])  # 0..3 done; 4, 5 received, not acked
        first.close()
        second = c.subscribe(topic, "cum", initial_position=InitialPosition.Earliest)
        again = [second.receive(timeout_millis=10000).data() for _ in range(6)]
        assert again == [b"4", b"5", b"6", b"7", b"8", b"9"]


def test_individual_acks_leave_holes_that_are_redelivered(cluster, topic):
    with Client(cluster.service_url) as c:
        first, msgs = _send_numbers_and_receive(c, topic, "ind", 6, 6)
        for m in msgs:
            if int(m.data()) % 2 == 0:
                first.acknowledge(m)
        first.close()
        second = c.subscribe(topic, "ind", initial_position=InitialPosition.Earliest)
        assert [second.receive(timeout_millis=10000).data() for _ in range(3)] == [b"1", b"3", b"5"]
        with pytest.raises(Timeout):
            second.receive(timeout_millis=300)


def test_batch_is_acknowledged_when_all_its_messages_are(cluster, topic):
    with Client(cluster.service_url) as c:
        producer = c.create_producer(
            topic, batching_max_messages=4, batching_max_publish_delay_ms=1000
        )
        for i in range(4):
            producer.send_async(str(i).encode(), None)
        producer.flush()
        first = c.subscribe(topic, "b", initial_position=InitialPosition.Earliest)
        msgs = [first.receive(timeout_millis=10000) for _ in range(4)]
        assert {m.message_id().entry_id() for m in msgs} == {msgs[0].message_id().entry_id()}
        for m in msgs[:3]:
            first.acknowledge(m)
        first.close()
        # One message of the batch is unacknowledged: the whole entry comes back.
        second = c.subscribe(topic, "b", initial_position=InitialPosition.Earliest)
        assert len([second.receive(timeout_millis=10000) for _ in range(4)]) == 4
        second.acknowledge(msgs[3])
        for m in msgs[:3]:
            second.acknowledge(m)
        second.close()
        third = c.subscribe(topic, "b", initial_position=InitialPosition.Earliest)
        with pytest.raises(Timeout):
            third.receive(timeout_millis=500)


def test_a_full_ack_group_goes_to_the_broker_before_its_time(cluster, topic):
    # Grouped for 10 minutes, but at most 5 acks: the fifth sends all five.
    with Client(cluster.service_url) as c, Admin(cluster.service_url) as admin:
        producer = c.create_producer(topic, batching_enabled=False)
        consumer = c.subscribe(
            topic,
            "grouped",
            initial_position=InitialPosition.Earliest,
            ack_grouping_time_ms=600_000,
            ack_grouping_max_size=5,
        )
        for i in range(6):
            producer.send(str(i).encode())
        got = [consumer.receive(timeout_millis=10000) for _ in range(6)]
        for m in got[:5]:
            consumer.acknowledge(m)
        wait_for(
            lambda: admin.topics.stats(topic)["subscriptions"]["grouped"]["msgBacklog"] == 1,
            10,
            "the group of 5 acks to reach the broker",
        )


def test_flow_control_never_exceeds_the_receiver_queue(cluster, topic):
    with Client(cluster.service_url) as c:
        producer = c.create_producer(topic, batching_enabled=False)
        for i in range(30):
            producer.send(str(i).encode())
        consumer = c.subscribe(
            topic, "flow", initial_position=InitialPosition.Earliest, receiver_queue_size=5
        )
        engine = consumer._engine
        assert isinstance(engine, ConsumerEngine)
        # wait until the first permits are used, then check nothing beyond them arrived
        wait_for(lambda: len(engine._incoming) == 5, 10, "5 messages to arrive")
        assert len(engine._incoming) == 5
        got = [consumer.receive(timeout_millis=10000).data() for _ in range(30)]
        assert got == [str(i).encode() for i in range(30)]


def test_asyncio_api(cluster, topic):
    async def main():
        async with client_aio.Client(cluster.service_url) as c:
            consumer = await c.subscribe(topic, "aio", initial_position=InitialPosition.Earliest)
            producer = await c.create_producer(topic)
            futures = [producer.send(f"a{i}".encode()) for i in range(100)]
            ids = await asyncio.gather(*futures)
            assert ids == sorted(ids)
            for i in range(100):
                msg = await consumer.receive(timeout_millis=10000)
                assert msg.data() == f"a{i}".encode()
                await consumer.acknowledge(msg)
            with pytest.raises(Timeout):
                await consumer.receive(timeout_millis=100)

    asyncio.run(main())


def test_cursor_is_persisted_in_the_metastore(cluster, topic):
    with Client(cluster.service_url) as c:
        producer = c.create_producer(topic, batching_enabled=False)
        ids = [producer.send(b"x") for _ in range(3)]
        consumer = c.subscribe(topic, "persisted", initial_position=InitialPosition.Earliest)
        for _ in range(3):
            consumer.acknowledge(consumer.receive(timeout_millis=10000))

        async def cursor():
            ms = MetastoreClient(cluster.endpoints["metastore"])
            try:
                stat = await ms.get(f"/managed-ledgers/public/default/persistent/{topic}/persisted")
                return json.loads(stat.value) if stat else None
            finally:
                await ms.close()

        from tests.harness import wait_for

        last = ids[-1]
        wait_for(
            lambda: (
                (asyncio.run(cursor()) or {}).get("mark_delete")
                == [last.ledger_id(), last.entry_id()]
            ),
            10,
            "the mark-delete position to be persisted",
            poll_s=0.2,
        )


def test_health_service_answers(cluster):
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    for role in ("metastore", "bookie", "broker"):
        with grpc.insecure_channel(cluster.endpoints[role]) as ch:
            resp = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=5)
            assert resp.status == health_pb2.HealthCheckResponse.SERVING, role
