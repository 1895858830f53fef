"""Bad input gets a typed error, changes nothing, and never kills a server."""

from __future__ import annotations

import grpc
import pytest

from client import (
    AlreadyClosed,
    Client,
    ConsumerBusy,
    InitialPosition,
    InvalidConfiguration,
    InvalidTopicName,
    MessageTooBig,
    ProducerBusy,
    Timeout,
    TopicNotFound,
)
from protos import broker_pb2, broker_pb2_grpc, common_pb2
from protos.digest import encode_record, pack_record
from tests.harness import wait_for


@pytest.mark.parametrize(
    ("name", "part"),
    [
        ("persistent://pub lic/default/t", "tenant"),
        ("a/b", "expected"),
        ("", "empty"),
        ("bogus://public/default/t", "domain"),
        ("persistent://public/default/x#y", "'#'"),
    ],
)
def test_invalid_topic_names(cluster, name, part):
    with Client(cluster.service_url) as c:
        with pytest.raises(InvalidTopicName, match=part):
            c.create_producer(name)
        with pytest.raises(InvalidTopicName, match=part):
            c.subscribe(name, "s")


def _raw_stub(cluster) -> broker_pb2_grpc.BrokerStub:
    channel = grpc.insecure_channel(
        cluster.endpoints["broker"], options=[("grpc.max_send_message_length", 64 << 20)]
    )
    return broker_pb2_grpc.BrokerStub(channel)


def test_invalid_topic_name_on_the_wire_is_refused_by_the_broker(cluster):
    responses = list(
        _raw_stub(cluster).Produce(
            iter([broker_pb2.ProducerRequest(create=broker_pb2.CreateProducer(topic="a/b/c/d"))]),
            timeout=10,
        )
    )
    assert responses[0].error.code == common_pb2.INVALID_TOPIC_NAME
    assert "a/b/c/d" in responses[0].error.message


def test_message_too_big_stores_nothing(cluster, topic):
    with Client(cluster.service_url) as c:
        consumer = c.subscribe(topic, "s", initial_position=InitialPosition.Earliest)
        producer = c.create_producer(topic)
        with pytest.raises(MessageTooBig, match="5242880"):
            producer.send(b"x" * (5 * 1024 * 1024 + 1))
        producer.send(b"small")
        assert consumer.receive(timeout_millis=10000).data() == b"small"
        with pytest.raises(Timeout):
            consumer.receive(timeout_millis=300)


def test_message_too_big_on_the_wire_is_refused_by_the_broker(cluster, topic):
    from client.message import PendingMessage, build_entry

    entry = build_entry([PendingMessage(b"y" * (5 * 1024 * 1024), 0, lambda e, m: None)], "raw", 1)
    ok_entry = build_entry([PendingMessage(b"fine", 1, lambda e, m: None)], "raw", 1)
    requests = [
        broker_pb2.ProducerRequest(create=broker_pb2.CreateProducer(topic=topic)),
        broker_pb2.ProducerRequest(
            send=broker_pb2.SendEntries(sequence_ids=[0], num_messages=[1], entries=[entry])
        ),
        broker_pb2.ProducerRequest(
            send=broker_pb2.SendEntries(sequence_ids=[1], num_messages=[1], entries=[ok_entry])
        ),
        broker_pb2.ProducerRequest(close=broker_pb2.CloseProducer()),
    ]
    responses = list(_raw_stub(cluster).Produce(iter(requests), timeout=20))
    kinds = [r.WhichOneof("response") for r in responses]
    assert kinds == ["created", "send_error", "receipts"]
    assert responses[1].send_error.error.code == common_pb2.MESSAGE_TOO_BIG
    with Client(cluster.service_url) as c:
        consumer = c.subscribe(topic, "check", initial_position=InitialPosition.Earliest)
        assert consumer.receive(timeout_millis=10000).data() == b"fine"
        with pytest.raises(Timeout):
            consumer.receive(timeout_millis=300)


def test_an_entry_claiming_no_messages_is_refused_and_nothing_is_counted(cluster, topic):
    """A raw client may claim 0 or fewer messages in an entry: a typed error,
    nothing stored or counted, and the next send on the stream is answered."""
    from client.message import PendingMessage, build_entry
    from tests.metrics_scrape import scrape

    entry = build_entry([PendingMessage(b"m", 0, lambda e, m: None)], "raw", 1)
    requests = [
        broker_pb2.ProducerRequest(create=broker_pb2.CreateProducer(topic=topic)),
        broker_pb2.ProducerRequest(
            send=broker_pb2.SendEntries(sequence_ids=[0], num_messages=[0], entries=[entry])
        ),
        broker_pb2.ProducerRequest(
            send=broker_pb2.SendEntries(sequence_ids=[1], num_messages=[-5], entries=[entry])
        ),
        broker_pb2.ProducerRequest(
            send=broker_pb2.SendEntries(sequence_ids=[2], num_messages=[1], entries=[entry])
        ),
        broker_pb2.ProducerRequest(close=broker_pb2.CloseProducer()),
    ]
    responses = list(_raw_stub(cluster).Produce(iter(requests), timeout=20))
    kinds = [r.WhichOneof("response") for r in responses]
    assert kinds == ["created", "send_error", "send_error", "receipts"]
    assert {r.send_error.error.code for r in responses[1:3]} == {common_pb2.INVALID_ARGUMENT}
    full = topic if "://" in topic else f"persistent://public/default/{topic}"
    port = int(cluster.endpoints["metrics"]["broker"])
    assert scrape(port).value("pulsar_in_messages_total", topic=full) == 1


def test_garbage_entries_and_requests_get_typed_errors(cluster, topic):
    requests = [
        broker_pb2.ProducerRequest(create=broker_pb2.CreateProducer(topic=topic)),
        broker_pb2.ProducerRequest(
            send=broker_pb2.SendEntries(sequence_ids=[0], num_messages=[1], entries=[b"\xff" * 50])
        ),
        broker_pb2.ProducerRequest(
            send=broker_pb2.SendEntries(sequence_ids=[1, 2], num_messages=[1], entries=[b""])
        ),
        broker_pb2.ProducerRequest(close=broker_pb2.CloseProducer()),
    ]
    responses = list(_raw_stub(cluster).Produce(iter(requests), timeout=10))
    codes = [r.send_error.error.code for r in responses[1:]]
    assert codes == [common_pb2.CORRUPTED_MESSAGE, common_pb2.INVALID_ARGUMENT]
    first = list(
        _raw_stub(cluster).Consume(
            iter([broker_pb2.ConsumerRequest(flow=broker_pb2.Flow(permits=1))]), timeout=10
        )
    )
    assert first[0].error.code == common_pb2.INVALID_ARGUMENT
    # raw bytes that are not a protobuf message at all
    channel = grpc.insecure_channel(cluster.endpoints["broker"])
    raw = channel.stream_stream("/magnetar.Broker/Produce")
    with pytest.raises(grpc.RpcError):
        list(raw(iter([b"\xff\xfe\xfd not protobuf"]), timeout=5))
    # the broker is still serving
    with Client(cluster.service_url) as c:
        c.create_producer(topic).send(b"alive")
    with Client(cluster.service_url) as c:
        consumer = c.subscribe(topic, "after-garbage", initial_position=InitialPosition.Earliest)
        assert consumer.receive(timeout_millis=10000).data() == b"alive"


def test_second_consumer_on_exclusive_subscription(cluster, topic):
    with Client(cluster.service_url) as c:
        c.subscribe(topic, "excl")
        with pytest.raises(ConsumerBusy, match="excl"):
            c.subscribe(topic, "excl")
        c.subscribe(topic, "other")  # another subscription is fine


def test_duplicate_producer_name(cluster, topic):
    with Client(cluster.service_url) as c:
        p = c.create_producer(topic, producer_name="unique-one")
        assert p.producer_name() == "unique-one"
        with pytest.raises(ProducerBusy, match="unique-one"):
            c.create_producer(topic, producer_name="unique-one")
        other = c.create_producer(topic)
        assert other.producer_name() and other.producer_name() != "unique-one"


def test_receive_on_closed_consumer_and_use_after_close(cluster, topic):
    c = Client(cluster.service_url)
    consumer = c.subscribe(topic, "s")
    producer = c.create_producer(topic)
    consumer.close()
    with pytest.raises(AlreadyClosed):
        consumer.receive(timeout_millis=100)
    producer.close()
    with pytest.raises(AlreadyClosed):
        producer.send(b"x")
    c.close()
    with pytest.raises(AlreadyClosed):
        c.create_producer(topic)


def test_wrong_options_are_refused(cluster, topic):
    with Client(cluster.service_url) as c:
        with pytest.raises(InvalidConfiguration, match="receiver_queue_size"):
            c.subscribe(topic, "s", receiver_queue_size=-1)
        with pytest.raises(InvalidConfiguration, match="no_such_option"):
            c.create_producer(topic, no_such_option=1)
        with pytest.raises(InvalidConfiguration, match="subscription_name"):
            c.subscribe(topic, "")


def test_unknown_namespace_is_topic_not_found(cluster):
    with Client(cluster.service_url) as c, pytest.raises(TopicNotFound, match="nope/nada"):
        c.create_producer("persistent://nope/nada/t")


def test_servers_survive_malformed_metastore_and_bookie_requests(cluster):
    from protos import bookie_pb2, bookie_pb2_grpc, metastore_pb2, metastore_pb2_grpc

    with grpc.insecure_channel(cluster.endpoints["metastore"]) as ch:
        stub = metastore_pb2_grpc.MetastoreStub(ch)
        assert (
            stub.Put(metastore_pb2.PutRequest(key="no-slash"), timeout=5).error.code
            == common_pb2.INVALID_KEY
        )
        raw = ch.unary_unary("/magnetar.Metastore/Get")
        with pytest.raises(grpc.RpcError):
            raw(b"\xff\xff garbage", timeout=5)
        assert (
            stub.Get(metastore_pb2.GetRequest(key="/bookies"), timeout=5).error.code
            == common_pb2.OK
        )
    with grpc.insecure_channel(cluster.endpoints["bookie"]) as ch:
        bookie = bookie_pb2_grpc.BookieStub(ch)
        good = pack_record(424242, 0, -1, b"x")
        bad_digest = encode_record(1, -1, 1, b"y")
        requests = [
            bookie_pb2.AddRequest(request_id=1, ledger_id=424242, entries=good + bad_digest),
            # the header claims more payload than the request holds
            bookie_pb2.AddRequest(request_id=2, ledger_id=424242, entries=good[:-1]),
            bookie_pb2.AddRequest(request_id=3, ledger_id=424242, entries=b"\x00garbage"),
            bookie_pb2.AddRequest(request_id=4, ledger_id=424242),
        ]
        resps = list(bookie.AddEntries(iter(requests), timeout=5))
        assert [r.error.code for r in resps] == [common_pb2.DIGEST_MISMATCH] + [
            common_pb2.INVALID_ARGUMENT
        ] * 3, [r.error.message for r in resps]
        assert "claims 1 payload bytes" in resps[1].error.message
        read = bookie.ReadEntry(
            bookie_pb2.ReadEntryRequest(ledger_id=424242, entry_id=0), timeout=5
        )
        assert read.error.code == common_pb2.NO_SUCH_ENTRY  # nothing of the bad add was stored
    wait_for(
        lambda: cluster.proc.poll() is None and len(cluster.child_pids_alive()) == 3,
        1,
        "servers alive",
    )
