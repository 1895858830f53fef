"""Reads of more bytes than one gRPC message may carry (16 MiB): the bookie
cuts its read answers by bytes (``max_bytes_per_read_response``), and a
broker reading from the bookies asks for about ``dispatcher_max_read_size_bytes``
at a time, so a reader of large entries not in the entry cache gets them all.
Before, one answer held up to 500 entries whatever their size, and a reader
of such a topic from its start never got its first message."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from bookie.ledger_client import LedgerClient
from client import Client, ConsumerType, InitialPosition, MessageId
from metastore.client import MetastoreClient
from protos import bookie_pb2, bookie_pb2_grpc
from protos.channel import MAX_GRPC_MESSAGE_BYTES, grpc_options
from tests.harness import StandaloneCluster

MIB = 1024 * 1024
ENTRIES = 20  # 20 MiB: more than one gRPC message holds
RESPONSE_BOUND = 4 * MIB  # the bookie's default max_bytes_per_read_response


def _payload(i: int) -> bytes:
    return bytes([i]) * MIB


def test_a_bookie_read_bigger_than_a_grpc_message_is_cut_by_bytes(cluster):
    async def write_and_read() -> int:
        ms = MetastoreClient(cluster.endpoints["metastore"])
        lc = LedgerClient(ms)
        try:
            writer = await lc.create_ledger(1, 1, 1)
            for i in range(ENTRIES):
                assert await writer.add(_payload(i)) == i
            md = await lc.metadata(writer.ledger_id)
            rows = await lc.read(md, 0, ENTRIES - 1)
            assert [eid for eid, _ in rows] == list(range(ENTRIES))
            assert all(p == _payload(eid) for eid, p in rows)
            return int(writer.ledger_id)
        finally:
            await lc.close()
            await ms.close()

    ledger_id = asyncio.run(write_and_read())
    assert ENTRIES * MIB > MAX_GRPC_MESSAGE_BYTES
    with grpc.insecure_channel(cluster.endpoints["bookie"], options=grpc_options()) as ch:
        stub = bookie_pb2_grpc.BookieStub(ch)
        ranged = list(
            stub.ReadRange(
                bookie_pb2.ReadRangeRequest(
                    ledger_id=ledger_id, first_entry_id=0, last_entry_id=ENTRIES - 1
                ),
                timeout=30,
            )
        )
        listed = list(
            stub.ReadEntries(
                bookie_pb2.ReadEntriesRequest(ledger_id=ledger_id, entry_ids=range(ENTRIES)),
                timeout=30,
            )
        )
    for answer in (ranged, listed):
        assert [e for r in answer for e in r.entry_ids] == list(range(ENTRIES))
        assert not any(r.HasField("error") for r in answer)
        assert len(answer) > 1
        assert all(sum(map(len, r.payloads)) <= RESPONSE_BOUND for r in answer)


@pytest.fixture(scope="module")
def small_cache_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    c = StandaloneCluster(
        Path(tmp_path_factory.mktemp("large-reads")) / "data",
        # 1 MiB: an entry of a 1 MiB message is larger, so none is cached and
        # every read goes to the bookie.
        env={"MAGNETAR_BROKER_MANAGED_LEDGER_CACHE_SIZE_MB": "1"},
    )
    c.start()
    yield c
    c.stop()


def test_a_reader_gets_large_uncached_entries_from_the_start(small_cache_cluster):
    topic = "persistent://public/default/large-reads"
    with Client(small_cache_cluster.service_url) as client:
        producer = client.create_producer(topic, batching_enabled=False)
        for i in range(ENTRIES):
            producer.send(_payload(i))
        reader = client.create_reader(topic, MessageId.earliest)
        got = [reader.read_next(30_000).data() for _ in range(ENTRIES)]
        assert got == [_payload(i) for i in range(ENTRIES)]
        assert not reader.has_message_available()
        sub = client.subscribe(topic, "from-start", initial_position=InitialPosition.Earliest)
        for i in range(ENTRIES):
            msg = sub.receive(30_000)
            assert msg.data() == _payload(i)
            sub.acknowledge(msg)


@pytest.mark.parametrize(
    "kind", [ConsumerType.Shared, ConsumerType.KeyShared], ids=["Shared", "KeyShared"]
)
def test_large_entries_delivered_again_fit_in_deliveries(small_cache_cluster, kind):
    """A consumer that leaves with 20 MiB unacknowledged: its entries go to
    the next consumer (Shared redeliveries, Key_Shared replays) in deliveries
    within the read bound, not in one message past gRPC's limit."""
    topic = f"persistent://public/default/large-again-{kind.name}"
    with Client(small_cache_cluster.service_url) as client:
        first = client.subscribe(topic, "again", consumer_type=kind)
        producer = client.create_producer(topic, batching_enabled=False)
        for i in range(ENTRIES):
            producer.send(_payload(i), partition_key="one-key")
        taken = [first.receive(30_000).data() for _ in range(ENTRIES)]
        assert taken == [_payload(i) for i in range(ENTRIES)]
        second = client.subscribe(topic, "again", consumer_type=kind)
        first.close()  # nothing acknowledged: all of it goes to the other consumer
        again = []
        for _ in range(ENTRIES):
            msg = second.receive(30_000)
            again.append(msg.data())
            second.acknowledge(msg)
        assert sorted(again) == [_payload(i) for i in range(ENTRIES)]
