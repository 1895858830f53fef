"""Batch-index acknowledgement: with the consumer's batch_index_ack_enabled
and the broker's acknowledgment_at_batch_index_level_enabled, acknowledged
messages of a batch are never redelivered, across a broker restart too."""

from __future__ import annotations

import pytest

from client import Client, ConsumerType, InitialPosition, Timeout


@pytest.fixture
def cluster_with_index_acks(fresh_cluster, tmp_path):  # type: ignore[no-untyped-def]
    config = tmp_path / "magnetar.toml"
    config.write_text("[broker]\nacknowledgment_at_batch_index_level_enabled = true\n")
    fresh_cluster.extra_args = ["--config", str(config)]
    fresh_cluster.start()
    return fresh_cluster


def _consumer(c: Client, topic: str, **kw):  # type: ignore[no-untyped-def]
    kw.setdefault("batch_index_ack_enabled", True)
    return c.subscribe(
        topic,
        "s",
        consumer_type=ConsumerType.Shared,
        initial_position=InitialPosition.Earliest,
        negative_ack_redelivery_delay_ms=200,
        **kw,
    )


def _batch(c: Client, topic: str, n: int) -> None:
    p = c.create_producer(topic, batching_max_publish_delay_ms=1000)
    for i in range(n):
        p.send_async(f"{i}".encode(), None)
    p.flush()
    p.close()


def test_acked_indexes_are_not_redelivered_even_after_a_restart(cluster_with_index_acks, topic):
    cluster = cluster_with_index_acks
    with Client(cluster.service_url) as c:
        consumer = _consumer(c, topic)
        _batch(c, topic, 5)
        got = [consumer.receive(timeout_millis=5000) for _ in range(5)]
        assert len({m.message_id().position for m in got}) == 1
        for m in got[:3]:
            consumer.acknowledge(m)
        consumer.negative_acknowledge(got[3])
        again = [consumer.receive(timeout_millis=10000) for _ in range(2)]
        assert [m.data() for m in again] == [b"3", b"4"]  # 0-2 stay acknowledged
        with pytest.raises(Timeout):
            consumer.receive(timeout_millis=500)
        consumer.close()  # unacked: 3 and 4; acked indexes persisted with the cursor
    cluster.stop()
    cluster.start()
    with Client(cluster.service_url) as c:
        consumer = _consumer(c, topic)
        after = [consumer.receive(timeout_millis=10000) for _ in range(2)]
        assert [m.data() for m in after] == [b"3", b"4"]
        for m in after:
            consumer.acknowledge(m)
        with pytest.raises(Timeout):
            consumer.receive(timeout_millis=500)


def test_without_index_acks_on_the_consumer_the_whole_batch_comes_back(
    cluster_with_index_acks, topic
):
    with Client(cluster_with_index_acks.service_url) as c:
        consumer = _consumer(c, topic, batch_index_ack_enabled=False)
        _batch(c, topic, 3)
        got = [consumer.receive(timeout_millis=5000) for _ in range(3)]
        consumer.acknowledge(got[0])
        consumer.negative_acknowledge(got[1])
        again = [consumer.receive(timeout_millis=10000) for _ in range(3)]
        assert [m.data() for m in again] == [b"0", b"1", b"2"]
