"""Partitioned topics on real processes: creation and metadata (admin and
CLI), producer routing (key hashing, round-robin on batch boundaries,
single partition, custom router), consumers and readers over every
partition, and Failover spreading partitions over consumers."""

from __future__ import annotations

import json
import subprocess
import sys

import grpc
import pytest

from client import (
    Client,
    ConsumerType,
    HashingScheme,
    InitialPosition,
    InvalidConfiguration,
    InvalidTopicName,
    MessageId,
    NotAllowedError,
    PartitionsRoutingMode,
    Timeout,
    TopicNotFound,
)
from client.admin import Admin
from protos import broker_pb2, broker_pb2_grpc, common_pb2
from protos.hashing import java_string_hash, murmur3_32
from tests.harness import ROOT, wait_for

FULL = "persistent://public/default/"


def _cli(cluster, *args: str) -> subprocess.CompletedProcess:  # type: ignore[no-untyped-def]
    return subprocess.run(
        [sys.executable, "-m", "client.admin_cli", "--service-url", cluster.service_url, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _receive_all(consumer, n: int, ack: bool = True) -> list:  # type: ignore[no-untyped-def]
    got = []
    for _ in range(n):
        m = consumer.receive(timeout_millis=10000)
        if ack:
            consumer.acknowledge(m)
        got.append(m)
    return got


def test_create_partitioned_topic_metadata_and_refusals(cluster, topic):
    with Admin(cluster.service_url) as admin, Client(cluster.service_url) as c:
        assert admin.topics.create_partitioned_topic(topic, 4) == {
            "topic": FULL + topic,
            "partitions": 4,
        }
        assert admin.topics.get_partitioned_topic_metadata(topic) == {"partitions": 4}
        assert c.get_topic_partitions(topic) == [f"{FULL}{topic}-partition-{i}" for i in range(4)]
        with pytest.raises(NotAllowedError, match="already exists"):
            admin.topics.create_partitioned_topic(topic, 2)
        with pytest.raises(InvalidConfiguration, match="1 to 1000"):
            admin.topics.create_partitioned_topic(topic + "-zero", 0)
        with pytest.raises(InvalidTopicName):
            admin.topics.create_partitioned_topic(topic + "-partition-1", 2)
        # A non-partitioned topic of that name exists: refused.
        c.create_producer(topic + "-plain").close()
        with pytest.raises(NotAllowedError, match="non-partitioned"):
            admin.topics.create_partitioned_topic(topic + "-plain", 2)
        assert c.get_topic_partitions(topic + "-plain") == [f"{FULL}{topic}-plain"]
        # No partition 4 of a 4-partition topic.
        with pytest.raises(TopicNotFound, match="4 partitions"):
            c.create_producer(f"{topic}-partition-4")
    # The CLI, as pulsar-admin spells it.
    out = _cli(cluster, "topics", "create-partitioned-topic", topic + "-cli", "--partitions", "3")
    assert out.returncode == 0, out.stderr
    out = _cli(cluster, "topics", "get-partitioned-topic-metadata", topic + "-cli")
    assert json.loads(out.stdout) == {"partitions": 3}


def test_the_partitioned_topic_itself_is_not_served(cluster, topic):
    with Admin(cluster.service_url) as admin:
        admin.topics.create_partitioned_topic(topic, 2)
    # A raw producer on the parent name (the SDK would route to partitions).
    with grpc.insecure_channel(cluster.endpoints["broker"]) as ch:
        stub = broker_pb2_grpc.BrokerStub(ch)
        req = broker_pb2.ProducerRequest(create=broker_pb2.CreateProducer(topic=topic))
        first = next(iter(stub.Produce(iter([req]), timeout=30)))
        assert first.error.code == common_pb2.NOT_ALLOWED
        assert "partitioned topic" in first.error.message


def test_keys_route_by_java_string_hash_or_murmur3(cluster, topic):
    with Admin(cluster.service_url) as admin:
        admin.topics.create_partitioned_topic(topic, 5)
    keys = [f"order-{i}" for i in range(20)]
    with Client(cluster.service_url) as c:
        for scheme, fn in (
            (HashingScheme.JavaStringHash, java_string_hash),
            (HashingScheme.Murmur3_32Hash, murmur3_32),
        ):
            p = c.create_producer(topic, hashing_scheme=scheme, batching_enabled=False)
            for key in keys:
                mid = p.send(key.encode(), partition_key=key)
                assert mid.partition() == (fn(key) & 0x7FFFFFFF) % 5, (scheme, key)
            p.close()
        # Default scheme is JavaStringHash; both schemes spread keys.
        assert len({(java_string_hash(k) & 0x7FFFFFFF) % 5 for k in keys}) > 2


def test_round_robin_switches_partition_on_batch_boundaries(cluster, topic):
    with Admin(cluster.service_url) as admin:
        admin.topics.create_partitioned_topic(topic, 4)
    with Client(cluster.service_url) as c:
        p = c.create_producer(topic, batching_max_messages=5, batching_max_publish_delay_ms=60000)
        ids: list = [None] * 20

        def keep(i: int):  # type: ignore[no-untyped-def]
            return lambda res, mid: ids.__setitem__(i, mid)

        for i in range(20):
            p.send_async(str(i).encode(), keep(i))
        p.flush()
        parts = [mid.partition() for mid in ids]
        runs = [parts[i : i + 5] for i in range(0, 20, 5)]
        assert all(len(set(r)) == 1 for r in runs), parts  # whole batches
        firsts = [r[0] for r in runs]
        assert firsts == [(firsts[0] + k) % 4 for k in range(4)], parts  # then the next partition
        p.close()
        unbatched = c.create_producer(topic, batching_enabled=False)
        parts = [unbatched.send(b"x").partition() for _ in range(8)]
        assert parts == [(parts[0] + k) % 4 for k in range(8)]


def test_single_partition_and_custom_router(cluster, topic):
    with Admin(cluster.service_url) as admin:
        admin.topics.create_partitioned_topic(topic, 4)
    with Client(cluster.service_url) as c:
        single = c.create_producer(
            topic,
            message_routing_mode=PartitionsRoutingMode.UseSinglePartition,
            batching_enabled=False,
        )
        assert len({single.send(b"x").partition() for _ in range(10)}) == 1
        keyed = single.send(b"k", partition_key="abc").partition()
        assert keyed == (java_string_hash("abc") & 0x7FFFFFFF) % 4
        custom = c.create_producer(
            topic,
            message_router=lambda msg, n: int(msg.data()) % n,
            batching_enabled=False,
        )
        assert [custom.send(str(i).encode()).partition() for i in range(6)] == [0, 1, 2, 3, 0, 1]
        bad = c.create_producer(topic, message_router=lambda msg, n: n, batching_enabled=False)
        with pytest.raises(InvalidConfiguration, match=r"0\.\.3"):
            bad.send(b"x")
        with pytest.raises(InvalidConfiguration):
            c.create_producer(topic, message_routing_mode=PartitionsRoutingMode.CustomPartition)


def test_consumers_and_readers_read_every_partition_in_key_order(cluster, topic):
    with Admin(cluster.service_url) as admin:
        admin.topics.create_partitioned_topic(topic, 3)
    with Client(cluster.service_url) as c:
        consumer = c.subscribe(
            topic,
            "all",
            consumer_type=ConsumerType.Shared,
            initial_position=InitialPosition.Earliest,
        )
        p = c.create_producer(topic, batching_enabled=False)
        sent: dict[str, list[int]] = {}
        for i in range(30):
            key = f"k{i % 6}"
            sent.setdefault(key, []).append(i)
            p.send(str(i).encode(), partition_key=key)
        got = _receive_all(consumer, 30)
        assert len({m.message_id().partition() for m in got}) == 3
        by_key: dict[str, list[int]] = {}
        for m in got:
            by_key.setdefault(m.partition_key(), []).append(int(m.data()))
        assert by_key == sent  # per key (one partition each), in send order
        assert consumer.topic() == FULL + topic
        with pytest.raises(Timeout):
            consumer.receive(timeout_millis=300)
        consumer.close()
        # Every ack reached its partition: a new consumer finds nothing left.
        again = c.subscribe(topic, "all", consumer_type=ConsumerType.Shared)
        with pytest.raises(Timeout):
            again.receive(timeout_millis=500)
        with Admin(cluster.service_url) as admin:
            for name in c.get_topic_partitions(topic):

                def drained(name: str = name) -> bool:
                    return admin.topics.stats(name)["subscriptions"]["all"]["msgBacklog"] == 0

                wait_for(
                    drained,
                    10,
                    f"{name} backlog to drain",
                )
        reader = c.create_reader(topic, MessageId.earliest)
        read = [reader.read_next(timeout_millis=10000) for _ in range(30)]
        assert sorted(int(m.data()) for m in read) == list(range(30))
        assert not reader.has_message_available()
        with pytest.raises(InvalidConfiguration, match="partitioned"):
            c.create_reader(topic, got[0].message_id())


def test_failover_spreads_partitions_over_consumers(cluster, topic):
    with Admin(cluster.service_url) as admin:
        admin.topics.create_partitioned_topic(topic, 4)
    with Client(cluster.service_url) as c:
        consumers = {
            n: c.subscribe(
                topic,
                "fo",
                consumer_type=ConsumerType.Failover,
                consumer_name=n,
                initial_position=InitialPosition.Earliest,
            )
            for n in ("a", "b")
        }
        p = c.create_producer(topic, message_router=lambda msg, n: int(msg.data()) % n)
        for i in range(8):
            p.send(str(i).encode())
        seen: dict[str, set[int]] = {"a": set(), "b": set()}
        for name, consumer in consumers.items():
            for m in _receive_all(consumer, 4):
                seen[name].add(m.message_id().partition())
        assert seen == {"a": {0, 2}, "b": {1, 3}}  # partition i -> consumer i mod 2
