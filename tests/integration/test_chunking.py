"""Chunking: messages over max_message_size split into chunks and
reassembled, interleaved producers, the pending-chunk limit (ack or
redeliver the oldest) and expiry of incomplete messages. One broker with
max_message_size = 20 000 so chunks are many and small."""

from __future__ import annotations

import os
import time

import grpc
import pytest

from client import (
    Client,
    CompressionType,
    ConsumerDeadLetterPolicy,
    ConsumerType,
    InitialPosition,
    InvalidConfiguration,
    MessageId,
    MessageTooBig,
    Timeout,
)
from client._consumer import ConsumerEngine
from client.admin import Admin
from client.message import PendingMessage, build_chunk_entries
from protos import broker_pb2, broker_pb2_grpc
from tests.harness import StandaloneCluster, wait_for

MAX = 20000


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    d = tmp_path_factory.mktemp("chunking")
    config = d / "magnetar.toml"
    config.write_text(f"[broker]\nmax_message_size = {MAX}\n")
    c = StandaloneCluster(d / "data", ["--config", str(config)])
    c.start()
    yield c
    c.stop()


def _raw_send(cluster: StandaloneCluster, topic: str, entries: list[bytes]) -> None:
    """Store these entries as they are, in this order (one producer stream)."""
    with grpc.insecure_channel(cluster.endpoints["broker"]) as ch:
        stub = broker_pb2_grpc.BrokerStub(ch)
        reqs = [broker_pb2.ProducerRequest(create=broker_pb2.CreateProducer(topic=topic))]
        reqs.append(
            broker_pb2.ProducerRequest(
                send=broker_pb2.SendEntries(
                    sequence_ids=list(range(len(entries))),
                    num_messages=[1] * len(entries),
                    entries=entries,
                )
            )
        )
        answers = stub.Produce(iter(reqs), timeout=30)
        assert next(answers).HasField("created")
        stored = 0
        for resp in answers:
            stored += len(resp.receipts.sequence_ids)
            assert not resp.HasField("send_error"), resp
            if stored == len(entries):
                break


def _wait_backlog(admin: Admin, topic: str, n: int, what: str) -> None:
    """Until subscription ``s`` has ``n`` entries unacknowledged."""
    wait_for(lambda: admin.topics.stats(topic)["subscriptions"]["s"]["msgBacklog"] == n, 10, what)


def _chunks(name: str, payload: bytes, seq: int) -> list[bytes]:
    msg = PendingMessage(payload, seq, lambda e, m: None)
    return build_chunk_entries(msg, name, int(time.time() * 1000), 0, MAX)


def test_a_big_message_is_chunked_and_reassembled(small, topic):
    big = os.urandom(5 * MAX + 123)
    with Client(small.service_url) as c, Admin(small.service_url) as admin:
        consumer = c.subscribe(topic, "s", initial_position=InitialPosition.Earliest)
        plain = c.create_producer(topic, batching_enabled=False)
        with pytest.raises(MessageTooBig):
            plain.send(big)
        p = c.create_producer(topic, batching_enabled=False, chunking_enabled=True)
        mid = p.send(big, properties={"k": "v"}, partition_key="key")
        small_id = p.send(b"small")
        m = consumer.receive(timeout_millis=10000)
        assert m.data() == big and m.properties() == {"k": "v"} and m.partition_key() == "key"
        assert m.message_id() == mid
        assert small_id.entry_id() == mid.entry_id() + 1  # 6 chunks, then the small one
        assert consumer.receive(timeout_millis=10000).data() == b"small"
        stats = admin.topics.stats(topic)
        assert stats["msgInCounter"] >= 6
        consumer.acknowledge(m)
        _wait_backlog(admin, topic, 1, "every chunk to be acknowledged with the message")


def test_chunks_of_compressed_messages_and_of_interleaved_producers(small, topic):
    payloads = {n: os.urandom(3 * MAX) for n in ("a", "b")}
    with Client(small.service_url) as c:
        consumer = c.subscribe(topic, "s", initial_position=InitialPosition.Earliest)
        producers = {
            n: c.create_producer(
                topic,
                producer_name=f"p-{n}",
                batching_enabled=False,
                chunking_enabled=True,
                compression_type=CompressionType.LZ4,
            )
            for n in payloads
        }
        for _ in range(3):
            for n, p in producers.items():
                p.send_async(payloads[n], None)
        for p in producers.values():
            p.flush()
        got = [consumer.receive(timeout_millis=10000) for _ in range(6)]
        for n in payloads:
            mine = [m.data() for m in got if m.producer_name() == f"p-{n}"]
            assert mine == [payloads[n]] * 3


def test_chunking_refusals(small, topic):
    with Client(small.service_url) as c:
        with pytest.raises(ValueError, match="batching"):
            c.create_producer(topic, chunking_enabled=True, batching_enabled=True)
        # Chunking alone turns batching off, as in the official client.
        alone = c.create_producer(topic, chunking_enabled=True)
        big = os.urandom(MAX * 2)
        mid = alone.send(big)
        reader = c.create_reader(topic, MessageId.earliest)
        got = reader.read_next(timeout_millis=10000)
        assert got.data() == big and mid is not None
        with pytest.raises(InvalidConfiguration, match="persistent"):
            c.create_producer(
                f"non-persistent://public/default/{topic}",
                chunking_enabled=True,
                batching_enabled=False,
            )


@pytest.mark.parametrize("auto_ack", [True, False])
def test_a_full_chunk_queue_drops_the_oldest_message(small, topic, auto_ack):
    a, b = os.urandom(MAX + 10), os.urandom(MAX + 20)
    ca, cb = _chunks("pa", a, 0), _chunks("pb", b, 0)
    assert len(ca) == len(cb) == 2
    with Client(small.service_url) as c, Admin(small.service_url) as admin:
        # Stored before the consumer comes, so the four arrive in one read.
        _raw_send(small, topic, [ca[0], cb[0], cb[1], ca[1]])  # A's start is evicted by B
        consumer = c.subscribe(
            topic,
            "s",
            consumer_type=ConsumerType.Shared,
            initial_position=InitialPosition.Earliest,
            max_pending_chunked_message=1,
            auto_ack_oldest_chunked_message_on_queue_full=auto_ack,
        )
        first = consumer.receive(timeout_millis=10000)
        assert first.data() == b
        consumer.acknowledge(first)
        if auto_ack:
            with pytest.raises(Timeout):
                consumer.receive(timeout_millis=1000)  # A was given up and acknowledged
        else:
            second = consumer.receive(timeout_millis=10000)  # redelivered, then whole
            assert second.data() == a and second.redelivery_count() == 1
            consumer.acknowledge(second)
        _wait_backlog(admin, topic, 0, "all four chunks to be acknowledged")


def test_an_incomplete_chunked_message_expires(small, topic):
    lonely = _chunks("px", os.urandom(MAX + 5), 0)
    with Client(small.service_url) as c, Admin(small.service_url) as admin:
        consumer = c.subscribe(
            topic,
            "s",
            initial_position=InitialPosition.Earliest,
            expire_time_of_incomplete_chunked_message_ms=500,
            auto_ack_oldest_chunked_message_on_queue_full=True,
        )
        _raw_send(small, topic, [lonely[0]])  # the last chunk never comes
        _wait_backlog(admin, topic, 0, "the expired chunk to be acknowledged")
        with pytest.raises(Timeout):
            consumer.receive(timeout_millis=200)


@pytest.mark.parametrize(
    "stored",
    [[0, 1, 1, 2, 2], [0, 1, 0, 1, 2], [0, 1, 2, 0, 1]],
    ids=["copies", "resent-from-the-start", "resent-without-its-last-chunk"],
)
def test_a_chunked_message_stored_with_copies_is_received_once_and_every_chunk_acknowledged(
    small, topic, stored
):
    """Chunks stored again by at-least-once resends (the same bytes; with
    deduplication the last chunk's copy would be refused, as in the third
    case): the message is received once, whole, and every copy is
    acknowledged (none redelivered again and again)."""
    payload = os.urandom(2 * MAX + 7)
    chunks = _chunks("pc", payload, 0)
    assert len(chunks) == 3
    with Client(small.service_url) as c, Admin(small.service_url) as admin:
        _raw_send(small, topic, [chunks[chunk_id] for chunk_id in stored])
        consumer = c.subscribe(topic, "s", initial_position=InitialPosition.Earliest)
        msg = consumer.receive(timeout_millis=10000)
        assert msg.data() == payload and msg.redelivery_count() == 0
        consumer.acknowledge(msg)
        _wait_backlog(admin, topic, 0, "every chunk and copy to be acknowledged")
        with pytest.raises(Timeout):
            consumer.receive(timeout_millis=500)


def test_a_chunked_message_nacked_on_a_shared_subscription_comes_back_whole_then_dead_letters(
    small, topic
):
    """A negative ack on Shared asks for the message's entries only: all its
    chunks come again, first to last (before, only the last chunk came, and
    it was dropped and asked for again and again). Past the dead letter
    policy's count the message is published to the dead letter topic (whose
    producer chunks, as Pulsar's does) and every chunk is acknowledged."""
    big = os.urandom(3 * MAX)
    policy = ConsumerDeadLetterPolicy(max_redeliver_count=1, initial_subscription_name="dlq")
    with Client(small.service_url) as c, Admin(small.service_url) as admin:
        consumer = c.subscribe(
            topic,
            "s",
            consumer_type=ConsumerType.Shared,
            negative_ack_redelivery_delay_ms=100,
            dead_letter_policy=policy,
        )
        p = c.create_producer(topic, batching_enabled=False, chunking_enabled=True)
        p.send(big)
        counts = []
        for _ in range(2):
            m = consumer.receive(timeout_millis=10000)
            assert m.data() == big
            counts.append(m.redelivery_count())
            consumer.negative_acknowledge(m)
        assert counts == [0, 1]
        _wait_backlog(admin, topic, 0, "every chunk to be acknowledged once dead-lettered")
        dead = c.subscribe(f"persistent://public/default/{topic}-s-DLQ", "dlq")
        assert dead.receive(timeout_millis=10000).data() == big


def test_a_reader_keeps_no_record_of_the_chunked_messages_it_read(small, topic):
    """A consumer remembers a chunked message's chunk positions until it is
    acknowledged; a reader acknowledges cumulatively as it reads, so what
    it remembers stays bounded however many it reads."""
    with Client(small.service_url) as c:
        p = c.create_producer(topic, batching_enabled=False, chunking_enabled=True)
        payloads = [os.urandom(MAX + i) for i in range(1, 6)]
        for payload in payloads:
            p.send_async(payload, None)
        p.flush()
        reader = c.create_reader(topic, MessageId.earliest)
        assert [reader.read_next(timeout_millis=10000).data() for _ in payloads] == payloads
        engine = reader._engine
        assert isinstance(engine, ConsumerEngine) and engine._chunked == {}
