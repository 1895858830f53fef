"""Bundle ownership and lookup with two brokers on one metastore and three
bookies: topics spread over the brokers by bundle, a broker refuses a topic
it does not own and names the owner, lookups of one bundle agree, and after
the owner is killed its bundles go to the other broker with nothing lost."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from broker.bundles import NamespaceBundles
from client import Client, InitialPosition
from client.admin import Admin
from protos import broker_pb2, broker_pb2_grpc, common_pb2
from tests.harness import ROOT, BookieCluster


@pytest.fixture
def two_brokers(tmp_path: Path) -> Iterator[tuple[BookieCluster, str, str]]:
    c = BookieCluster(tmp_path, 3).start_all()
    a = c.start_broker("broker-a")
    b = c.start_broker("broker-b")
    yield c, a, b
    c.stop_all()


def _address(url: str) -> str:
    return url.removeprefix("magnetar://")


def _topics_one_per_bundle(prefix: str) -> list[str]:
    """Topic names that land in each of the 4 default bundles."""
    bundles = NamespaceBundles.equal(4)
    found: dict[str, str] = {}
    for i in range(1000):
        name = f"persistent://public/default/{prefix}-{i}"
        found.setdefault(bundles.bundle_for_topic(name).name, name)
        if len(found) == 4:
            break
    return sorted(found.values())


def test_topics_spread_over_brokers_and_a_non_owner_names_the_owner(two_brokers):
    _, url_a, url_b = two_brokers
    topics = _topics_one_per_bundle("spread")
    with Client(url_a) as c, Admin(url_a) as admin:
        for t in topics:
            p = c.create_producer(t, batching_enabled=False)
            for i in range(5):
                p.send(f"{t}/{i}".encode())
            consumer = c.subscribe(t, "s", initial_position=InitialPosition.Earliest)
            assert [consumer.receive(timeout_millis=10000).data() for _ in range(5)] == [
                f"{t}/{i}".encode() for i in range(5)
            ]
        owners = {t: admin.topics.lookup(t)["brokerUrl"] for t in topics}
        assert set(owners.values()) == {url_a, url_b}, owners  # both brokers got bundles
        # Each partition of a partitioned topic is a topic of its own bundle and broker.
        admin.topics.create_partitioned_topic("spread-parted", 8)
        c.create_producer("spread-parted").close()
        partition_owners = {
            admin.topics.lookup(p)["brokerUrl"] for p in c.get_topic_partitions("spread-parted")
        }
        assert partition_owners == {url_a, url_b}
        assert sorted(admin.brokers.list()) == sorted([_address(url_a), _address(url_b)])
        bundles = admin.namespaces.bundles("public/default")["bundles"]
        assert {b["state"] for b in bundles} == {"owned"} and len(bundles) == 4
        assert {f"magnetar://{b['owner']}" for b in bundles} == {url_a, url_b}
    # A raw producer at the broker that does not own the topic: NOT_OWNER, naming the owner.
    topic = topics[0]
    other = url_b if owners[topic] == url_a else url_a
    with grpc.insecure_channel(_address(other)) as ch:
        req = broker_pb2.ProducerRequest(create=broker_pb2.CreateProducer(topic=topic))
        first = next(iter(broker_pb2_grpc.BrokerStub(ch).Produce(iter([req]), timeout=30)))
    assert first.error.code == common_pb2.NOT_OWNER
    assert first.error.leader == _address(owners[topic])
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "client.admin_cli",
            "--service-url",
            other,
            "topics",
            "lookup",
            topic,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert json.loads(out.stdout) == {"brokerUrl": owners[topic]}


def test_concurrent_lookups_of_a_bundle_agree_on_one_owner(two_brokers):
    _, url_a, url_b = two_brokers
    topic = "persistent://public/default/raced"

    async def ask(url: str) -> str:
        async with grpc.aio.insecure_channel(_address(url)) as ch:
            stub = broker_pb2_grpc.BrokerStub(ch)
            resp = await stub.Lookup(broker_pb2.LookupRequest(topic=topic, authoritative=True))
            assert resp.error.code == 0, resp.error
            return resp.broker_url

    async def main() -> set[str]:
        return set(await asyncio.gather(*(ask(u) for u in [url_a, url_b] * 10)))

    answers = asyncio.run(main())
    assert len(answers) == 1, answers  # every broker, every lookup: the same owner


def test_the_owners_bundles_move_to_the_other_broker_when_it_dies(two_brokers):
    cluster, url_a, url_b = two_brokers
    topics = _topics_one_per_bundle("failover")
    with Client(url_a) as c, Admin(url_a) as admin:
        for t in topics:
            p = c.create_producer(t, batching_enabled=False)
            for i in range(10):
                p.send(f"{i}".encode())
            p.close()
        owners = {t: admin.topics.lookup(t)["brokerUrl"] for t in topics}
    victim = "broker-a" if url_a in owners.values() else "broker-b"
    survivor = url_b if victim == "broker-a" else url_a
    cluster.kill9_broker(victim)
    # The victim's bundles stay its own until its metastore session expires
    # (session_ttl_ms, 10 s); the client's lookup retries meanwhile.
    with Client(survivor, operation_timeout_seconds=40) as c, Admin(survivor) as admin:
        for t in topics:
            consumer = c.subscribe(t, "audit", initial_position=InitialPosition.Earliest)
            assert [consumer.receive(timeout_millis=20000).data() for _ in range(10)] == [
                f"{i}".encode() for i in range(10)
            ]
            assert admin.topics.lookup(t)["brokerUrl"] == survivor
