"""Compression of batches: LZ4, ZLIB, ZSTD and SNAPPY are stored compressed
and every consumer reads them, whatever it was configured with."""

from __future__ import annotations

import pytest

from client import Client, CompressionType, InitialPosition
from client.admin import Admin
from tests.harness import wait_for

KINDS = [CompressionType.LZ4, CompressionType.ZLib, CompressionType.ZSTD, CompressionType.SNAPPY]


def _stored(admin: Admin, topic: str) -> int:
    return int(admin.topics.stats(topic)["storageSize"])


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
def test_batches_are_stored_compressed_and_read_back(cluster, topic, kind):
    payloads = [(f"{i:04d}-" + "abcdefgh" * 120).encode() for i in range(200)]
    with Client(cluster.service_url) as c, Admin(cluster.service_url) as admin:
        consumer = c.subscribe(topic, "s", initial_position=InitialPosition.Earliest)
        plain = c.create_producer(topic + "-plain", batching_max_publish_delay_ms=1000)
        packed = c.create_producer(topic, compression_type=kind, batching_max_publish_delay_ms=1000)
        for i, data in enumerate(payloads):
            for p in (plain, packed):
                p.send_async(data, None, properties={"i": str(i)}, partition_key=f"k{i % 3}")
        plain.flush()
        packed.flush()
        one = packed.send(b"single " * 100)  # a batch of one: a plain entry, compressed too
        got = [consumer.receive(timeout_millis=10000) for _ in range(201)]
        assert [m.data() for m in got] == [*payloads, b"single " * 100]
        assert [m.properties()["i"] for m in got[:200]] == [str(i) for i in range(200)]
        assert [m.partition_key() for m in got[:3]] == ["k0", "k1", "k2"]
        assert got[-1].message_id() == one
        raw = sum(len(p) for p in payloads)
        wait_for(lambda: _stored(admin, topic + "-plain") >= raw, 10, "the plain topic's size")
        # The broker stored what it was sent: far less than the payloads.
        assert _stored(admin, topic) < raw / 4, (_stored(admin, topic), raw)


def test_one_consumer_reads_every_compression(cluster, topic):
    with Client(cluster.service_url) as c:
        consumer = c.subscribe(topic, "mixed", initial_position=InitialPosition.Earliest)
        for kind in [CompressionType.NONE, *KINDS]:
            p = c.create_producer(topic, compression_type=kind, batching_max_publish_delay_ms=500)
            for i in range(3):
                p.send_async(f"{kind.name}-{i}".encode() * 10, None)
            p.flush()
            p.close()
        got = [consumer.receive(timeout_millis=10000).data() for _ in range(15)]
        expected = [
            f"{k.name}-{i}".encode() * 10 for k in [CompressionType.NONE, *KINDS] for i in range(3)
        ]
        assert got == expected
