"""The SDK as a pulsar-client 3.x user writes it (issue 25, point 11).

Every scenario is written as it would be against the official client, with
only the import changed (``import client as pulsar``) and a ``pulsar://``
URL, and covers the rows of ``shared/API.md`` in order: Client, producer
options, Producer, consumer options, Consumer, Reader, Message and
MessageId, policies and enums, errors, the asyncio API, and Admin.
"""

from __future__ import annotations

import asyncio
import datetime
import itertools
import re
import threading
import time

import pytest

import client as pulsar
from client import aio
from client.admin import Admin
from client.schema import AvroSchema, Integer, Record, String, StringSchema
from tests.harness import wait_for

_n = itertools.count()


@pytest.fixture
def url(cluster) -> str:  # type: ignore[no-untyped-def]
    return cluster.service_url.replace("magnetar://", "pulsar://")


@pytest.fixture
def topic() -> str:
    return f"compat-{next(_n)}-{int(time.time() * 1000)}"


# ---------------------------------------------------------------- Client


def test_client_urls_context_manager_and_closed_use(url, topic):
    with pulsar.Client(url, operation_timeout_seconds=30, connection_timeout_ms=10000) as c:
        assert c.get_topic_partitions(topic) == [f"persistent://public/default/{topic}"]
        c.create_producer(topic).send(b"x")
    with pytest.raises(pulsar.AlreadyClosed):
        c.create_producer(topic)
    bare = url.removeprefix("pulsar://")
    c2 = pulsar.Client(bare)  # a bare host:port
    c2.create_producer(topic).close()
    c2.shutdown()
    with pytest.raises(pulsar.InvalidUrl):
        pulsar.Client("http://localhost:8080")
    # The official client's tuning knobs at their defaults are accepted.
    pulsar.Client(url, io_threads=1, message_listener_threads=1, use_tls=False).close()
    with pytest.raises(pulsar.InvalidConfiguration, match="io_threads"):
        pulsar.Client(url, io_threads=4)


# ---------------------------------------------------------------- producers


def test_producer_options_and_methods(url, topic):
    client = pulsar.Client(url)
    producer = client.create_producer(
        topic,
        producer_name="compat-producer",
        initial_sequence_id=None,
        send_timeout_millis=30000,
        compression_type=pulsar.CompressionType.LZ4,
        max_pending_messages=1000,
        max_pending_messages_across_partitions=50000,
        block_if_queue_full=False,
        batching_enabled=True,
        batching_max_messages=1000,
        batching_max_allowed_size_in_bytes=131072,
        batching_max_publish_delay_ms=10,
        batching_type=pulsar.BatchingType.Default,
        message_routing_mode=pulsar.PartitionsRoutingMode.RoundRobinDistribution,
        lazy_start_partitioned_producers=False,
        properties={"app": "compat"},
        access_mode=pulsar.ProducerAccessMode.Shared,
        encryption_key=None,
        crypto_key_reader=None,
    )
    assert producer.topic() == f"persistent://public/default/{topic}"
    assert producer.producer_name() == "compat-producer"
    assert producer.is_connected()
    msg_id = producer.send(
        b"hello",
        properties={"k": "v"},
        partition_key="order-1",
        ordering_key="ok",
        sequence_id=5,
        event_timestamp=1234,
        replication_clusters=None,
        disable_replication=False,
    )
    assert isinstance(msg_id, pulsar.MessageId)
    results = []
    done = threading.Event()

    def callback(res, mid):  # type: ignore[no-untyped-def]
        results.append((res, mid))
        done.set()

    producer.send_async(b"async", callback, deliver_after=datetime.timedelta(milliseconds=1))
    producer.flush()
    assert done.wait(10) and results[0][0] == pulsar.Result.Ok
    assert producer.last_sequence_id() == 6
    with Admin(url) as admin:
        stats = admin.topics.stats(topic)
    assert stats["publishers"][0]["metadata"] == {"app": "compat"}
    with pytest.raises(pulsar.InvalidConfiguration, match="encryption"):
        client.create_producer(topic, encryption_key="my-key")
    with pytest.raises(pulsar.InvalidConfiguration, match="replication"):
        producer.send(b"x", replication_clusters=["other"])
    producer.close()
    client.close()


def test_chunking_alone_turns_batching_off_and_both_on_is_an_error(url, topic):
    with pulsar.Client(url) as client:
        client.create_producer(topic, chunking_enabled=True).send(b"chunkable")
        with pytest.raises(ValueError, match="batching"):
            client.create_producer(topic, chunking_enabled=True, batching_enabled=True)


# ---------------------------------------------------------------- consumers


def test_consumer_options_and_methods(url, topic):
    client = pulsar.Client(url)
    consumer = client.subscribe(
        topic,
        "compat-sub",
        consumer_type=pulsar.ConsumerType.Shared,
        schema=None,
        receiver_queue_size=1000,
        max_total_receiver_queue_size_across_partitions=50000,
        consumer_name="compat-consumer",
        unacked_messages_timeout_ms=None,
        broker_consumer_stats_cache_time_ms=30000,
        negative_ack_redelivery_delay_ms=1000,
        is_read_compacted=False,
        properties={"team": "compat"},
        pattern_auto_discovery_period=60,
        initial_position=pulsar.InitialPosition.Earliest,
        crypto_key_reader=None,
        replicate_subscription_state_enabled=False,
        max_pending_chunked_message=10,
        auto_ack_oldest_chunked_message_on_queue_full=False,
        start_message_id_inclusive=False,
        batch_receive_policy=pulsar.ConsumerBatchReceivePolicy(10, 1 << 20, 100),
        key_shared_policy=None,
        batch_index_ack_enabled=False,
        regex_subscription_mode=pulsar.RegexSubscriptionMode.PersistentOnly,
        dead_letter_policy=pulsar.ConsumerDeadLetterPolicy(3),
        crypto_failure_action=pulsar.ConsumerCryptoFailureAction.FAIL,
    )
    assert consumer.topic() == f"persistent://public/default/{topic}"
    assert consumer.subscription_name() == "compat-sub"
    assert consumer.consumer_name() == "compat-consumer"
    producer = client.create_producer(topic, batching_enabled=False)
    ids = [producer.send(f"m{i}".encode()) for i in range(3)]
    msg = consumer.receive(timeout_millis=10000)
    consumer.acknowledge(msg)
    second = consumer.receive(timeout_millis=10000)
    consumer.negative_acknowledge(second)
    third = consumer.receive(timeout_millis=10000)
    consumer.acknowledge(third.message_id())
    again = consumer.receive(timeout_millis=10000)  # the nacked one, one second later
    assert again.data() == second.data() and again.redelivery_count() == 1
    consumer.acknowledge(again)
    with pytest.raises(pulsar.CumulativeAcknowledgementNotAllowedError):
        consumer.acknowledge_cumulative(again)
    assert consumer.get_last_message_id().entry_id() == ids[-1].entry_id()
    consumer.redeliver_unacknowledged_messages()
    with pytest.raises(pulsar.Timeout):
        consumer.receive(timeout_millis=300)
    assert consumer.is_connected()
    with Admin(url) as admin:
        sub = admin.topics.stats(topic)["subscriptions"]["compat-sub"]
    assert sub["consumers"][0]["metadata"] == {"team": "compat"}
    consumer.seek(ids[0])  # the one after ids[0] comes next
    batch = consumer.batch_receive()
    assert [m.data() for m in batch][:1] == [b"m1"]
    consumer.unsubscribe()
    client.close()


def test_exclusive_cumulative_ack_listener_and_pause(url, topic):
    client = pulsar.Client(url)
    got: list[bytes] = []

    def listener(consumer, msg):  # type: ignore[no-untyped-def]
        got.append(msg.data())
        consumer.acknowledge_cumulative(msg)

    consumer = client.subscribe(
        topic,
        "listened",
        message_listener=listener,
        initial_position=pulsar.InitialPosition.Earliest,
    )
    producer = client.create_producer(topic)
    for i in range(3):
        producer.send(f"{i}".encode())
    wait_for(lambda: len(got) == 3, 10, "the listener to get 3 messages")
    consumer.pause_message_listener()
    consumer.resume_message_listener()
    consumer.close()
    client.close()


def test_list_and_regex_subscriptions_and_the_async_clients_pattern_flag(url, topic):
    with pulsar.Client(url) as client:
        for suffix in ("a", "b"):
            client.create_producer(f"{topic}-{suffix}").send(suffix.encode())
        listed = client.subscribe(
            [f"{topic}-a", f"{topic}-b"], "l", initial_position=pulsar.InitialPosition.Earliest
        )
        assert sorted(listed.receive(10000).data() for _ in range(2)) == [b"a", b"b"]
        pattern = re.compile(f"persistent://public/default/{topic}-.*")
        regex = client.subscribe(pattern, "r", initial_position=pulsar.InitialPosition.Earliest)
        assert sorted(regex.receive(10000).data() for _ in range(2)) == [b"a", b"b"]

    async def run() -> list[bytes]:
        async with aio.Client(url) as ac:
            consumer = await ac.subscribe(
                f"persistent://public/default/{topic}-.*",
                "flagged",
                is_pattern_topic=True,
                initial_position=pulsar.InitialPosition.Earliest,
            )
            return sorted([(await consumer.receive()).data() for _ in range(2)])

    assert asyncio.run(run()) == [b"a", b"b"]


def test_zero_receiver_queue_asks_for_each_message(url, topic):
    with pulsar.Client(url) as client, Admin(url) as admin:
        consumer = client.subscribe(
            topic, "zero", receiver_queue_size=0, consumer_type=pulsar.ConsumerType.Shared
        )
        producer = client.create_producer(topic, batching_enabled=False)
        for i in range(3):
            producer.send(f"{i}".encode())
        # Nothing is pushed before a receive asks for it.
        stats = admin.topics.stats(topic)["subscriptions"]["zero"]
        assert stats["consumers"][0]["availablePermits"] == 0
        assert stats["msgBacklog"] == 3
        assert consumer.receive(timeout_millis=10000).data() == b"0"
        # A second Shared consumer gets the rest: the first holds nothing.
        other = client.subscribe(topic, "zero", consumer_type=pulsar.ConsumerType.Shared)
        rest = sorted(other.receive(timeout_millis=10000).data() for _ in range(2))
        assert rest == [b"1", b"2"]
        with pytest.raises(pulsar.InvalidConfiguration, match="non-partitioned"):
            client.subscribe([topic, f"{topic}-x"], "z", receiver_queue_size=0)


# ---------------------------------------------------------------- readers


def test_reader_options_and_methods(url, topic):
    with pulsar.Client(url) as client:
        producer = client.create_producer(topic, batching_enabled=False)
        ids = [producer.send(f"r{i}".encode()) for i in range(3)]
        reader = client.create_reader(
            topic,
            pulsar.MessageId.earliest,
            schema=None,
            receiver_queue_size=1000,
            reader_name="compat-reader",
            subscription_role_prefix="compat",
            is_read_compacted=False,
            crypto_key_reader=None,
            start_message_id_inclusive=False,
        )
        assert reader.topic() == f"persistent://public/default/{topic}" and reader.is_connected()
        assert reader.read_next(timeout_millis=10000).data() == b"r0"
        assert reader.has_message_available()
        reader.seek(ids[0])
        assert reader.read_next(timeout_millis=10000).data() == b"r1"
        reader.close()
        assert not reader.is_connected()
        with Admin(url) as admin:
            subs = admin.topics.stats(topic)["subscriptions"]
        assert not subs  # the reader's subscription went with it
        heard: list[bytes] = []
        listened = client.create_reader(
            topic, ids[0], reader_listener=lambda r, m: heard.append(m.data())
        )
        wait_for(lambda: heard == [b"r1", b"r2"], 10, "the reader listener")
        listened.close()


# ---------------------------------------------------------------- messages and ids


def test_message_accessors_and_message_ids(url, topic):
    with pulsar.Client(url) as client:
        consumer = client.subscribe(topic, "m")
        producer = client.create_producer(topic, producer_name="p-m", batching_enabled=False)
        sent = producer.send(
            b"body", properties={"a": "b"}, partition_key="pk", ordering_key="ok", event_timestamp=7
        )
        producer.send(None, partition_key="pk")  # a tombstone
        m = consumer.receive(timeout_millis=10000)
        assert (m.data(), m.value(), m.properties()) == (b"body", b"body", {"a": "b"})
        assert (m.partition_key(), m.ordering_key(), m.event_timestamp()) == ("pk", "ok", 7)
        assert m.publish_timestamp() > 0 and m.redelivery_count() == 0
        assert m.topic_name() == f"persistent://public/default/{topic}"
        assert m.producer_name() == "p-m" and m.schema_version() == b""
        assert m.message_id() == sent and not m.has_null_value()
        tomb = consumer.receive(timeout_millis=10000)
        assert tomb.has_null_value() and tomb.value() is None
    mid = pulsar.MessageId(2, 10, 5, 3)  # partition first, as the official client
    assert (mid.partition(), mid.ledger_id(), mid.entry_id(), mid.batch_index()) == (2, 10, 5, 3)
    assert str(mid) == "(10,5,2,3)"
    assert pulsar.MessageId.deserialize(mid.serialize()) == mid
    assert pulsar.MessageId.wrap(mid) is mid
    assert pulsar.MessageId.earliest < mid < pulsar.MessageId.latest
    assert len({mid, pulsar.MessageId(2, 10, 5, 3)}) == 1
    default = pulsar.MessageId()
    assert (default.ledger_id(), default.entry_id()) == (-1, -1)


# ---------------------------------------------------------------- policies and enums


def test_policies_and_enums_as_the_official_client():
    dlq = pulsar.ConsumerDeadLetterPolicy(5, "my-dlq", "dlq-sub")
    assert (dlq.max_redeliver_count, dlq.dead_letter_topic, dlq.initial_subscription_name) == (
        5,
        "my-dlq",
        "dlq-sub",
    )
    assert pulsar.ConsumerDeadLetterPolicy(1).dead_letter_topic == ""
    with pytest.raises(AttributeError):
        dlq.dead_letter_topic = "x"  # type: ignore[misc]
    with pytest.raises(ValueError):
        pulsar.ConsumerDeadLetterPolicy(0)
    ks = pulsar.ConsumerKeySharedPolicy(pulsar.KeySharedMode.Sticky, True, [(0, 99)])
    assert (ks.key_shared_mode, ks.allow_out_of_order_delivery, ks.sticky_ranges) == (
        pulsar.KeySharedMode.Sticky,
        True,
        [(0, 99)],
    )
    with pytest.raises(ValueError):
        pulsar.ConsumerKeySharedPolicy(pulsar.KeySharedMode.Sticky)
    batch = pulsar.ConsumerBatchReceivePolicy(10, 1024, 50)
    assert (batch.max_num_message, batch.max_num_bytes, batch.timeout_ms) == (10, 1024, 50)
    values = {
        pulsar.ConsumerType: {"Exclusive": 0, "Shared": 1, "Failover": 2, "KeyShared": 3},
        pulsar.InitialPosition: {"Latest": 0, "Earliest": 1},
        pulsar.CompressionType: {"NONE": 0, "LZ4": 1, "ZLib": 2, "ZSTD": 3, "SNAPPY": 4},
        pulsar.PartitionsRoutingMode: {
            "UseSinglePartition": 0,
            "RoundRobinDistribution": 1,
            "CustomPartition": 2,
        },
        pulsar.BatchingType: {"Default": 0, "KeyBased": 1},
        pulsar.ProducerAccessMode: {
            "Shared": 0,
            "Exclusive": 1,
            "WaitForExclusive": 2,
            "ExclusiveWithFencing": 3,
        },
        pulsar.KeySharedMode: {"AutoSplit": 0, "Sticky": 1},
        pulsar.RegexSubscriptionMode: {"PersistentOnly": 0, "NonPersistentOnly": 1, "AllTopics": 2},
        pulsar.ConsumerCryptoFailureAction: {"FAIL": 0, "DISCARD": 1, "CONSUME": 2},
    }
    for enum, members in values.items():
        assert {m.name: m.value for m in enum} == members, enum
    assert pulsar.Result.Ok == 0 and pulsar.Result.Interrupted == 45


# ---------------------------------------------------------------- errors


def test_every_result_has_its_exception_under_pulsar_exception(url, topic):
    for result in pulsar.Result:
        if result is pulsar.Result.Ok:
            continue
        cls = getattr(pulsar, result.name)
        assert issubclass(cls, pulsar.PulsarException) and cls.result is result
        assert result.name in pulsar.__all__
    with pulsar.Client(url) as client:
        consumer = client.subscribe(topic, "err")
        with pytest.raises(pulsar.Timeout):
            consumer.receive(timeout_millis=100)
        with pytest.raises(pulsar.ConsumerBusy):
            client.subscribe(topic, "err")
        with pytest.raises(pulsar.PulsarException):
            client.create_producer("persistent://no-tenant/no-ns/t")


# ---------------------------------------------------------------- asyncio


def test_the_asyncio_api(url, topic):
    async def run() -> None:
        async with aio.Client(url) as client:
            producer = await client.create_producer(topic)
            consumer = await client.subscribe(
                topic, "aio", initial_position=pulsar.InitialPosition.Earliest
            )
            sent = await producer.send(b"a1")
            msg = await consumer.receive()
            assert msg.message_id() == sent
            await consumer.acknowledge(msg)
            reader = await client.create_reader(topic, pulsar.MessageId.earliest)
            assert (await reader.read_next()).data() == b"a1" and reader.is_connected()
            await producer.flush()
            await producer.close()

    asyncio.run(run())


# ---------------------------------------------------------------- schemas and admin


def test_schemas_as_pulsar_schema(url, topic):
    class Greeting(Record):
        text = String()
        times = Integer()

    with pulsar.Client(url) as client:
        producer = client.create_producer(topic, schema=AvroSchema(Greeting))
        consumer = client.subscribe(
            topic,
            "schema",
            schema=AvroSchema(Greeting),
            initial_position=pulsar.InitialPosition.Earliest,
        )
        producer.send(Greeting(text="hi", times=2))
        assert consumer.receive(timeout_millis=10000).value() == Greeting(text="hi", times=2)
        s = client.create_producer(f"{topic}-s", schema=StringSchema())
        s.send("plain text")
    with Admin(url) as admin:
        assert admin.schemas.get(topic)["type"] == "AVRO"
        admin.topics.create_partitioned_topic(f"{topic}-p", 2)
        with pulsar.Client(url) as client:
            assert len(client.get_topic_partitions(f"{topic}-p")) == 2
