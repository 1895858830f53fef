"""Every producer of a client connection on one ``ProduceMany`` stream
(client/_produce_mux.py, broker/producer_mux.py): the bound on the streams
of one connection, a stream freed when its producer closes, and a
partitioned producer's partitions sharing the stream, and the bound on
what a connection reads ahead."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from client import Client, InitialPosition, NotAllowedError
from client.admin import Admin
from tests.harness import StandaloneCluster, wait_for

LIMIT = 3
PENDING = 4  # max_pending_publish_requests_per_connection


@pytest.fixture(scope="module")
def bounded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    c = StandaloneCluster(
        tmp_path_factory.mktemp("mux") / "data",
        env={
            "MAGNETAR_BROKER_MAX_PRODUCER_STREAMS_PER_CONNECTION": str(LIMIT),
            "MAGNETAR_BROKER_MAX_PENDING_PUBLISH_REQUESTS_PER_CONNECTION": str(PENDING),
        },
    )
    c.start()
    yield c
    c.stop()


def _created(client: Client, topic: str) -> bool:
    try:
        client.create_producer(topic)
    except NotAllowedError:
        return False
    return True


def test_a_connection_holds_at_most_max_producer_streams_per_connection(bounded):
    with Client(bounded.service_url) as c:
        producers = [c.create_producer(f"mux-bound-{i}") for i in range(LIMIT)]
        with pytest.raises(NotAllowedError, match="max_producer_streams_per_connection"):
            c.create_producer("mux-bound-extra")
        for p in producers:  # the refusal changed nothing for the others
            p.send(b"still here")
        producers[0].close()
        wait_for(lambda: _created(c, "mux-bound-extra"), 10, "the closed producer's stream freed")
        with Client(bounded.service_url) as other:  # each connection has its own bound
            other.create_producer("mux-bound-0").send(b"from another connection")
        with Admin(bounded.service_url) as admin:
            admin.topics.create_partitioned_topic("mux-bound-parts", LIMIT + 1)
        with (
            Client(bounded.service_url) as fresh,
            pytest.raises(NotAllowedError, match="max_producer_streams_per_connection"),
        ):
            fresh.create_producer("mux-bound-parts")


def test_the_partitions_of_a_producer_share_one_stream_and_keep_their_order(bounded):
    topic = "mux-parts"
    with Admin(bounded.service_url) as admin:
        admin.topics.create_partitioned_topic(topic, LIMIT)
    keys = [f"k{i}" for i in range(12)]
    with Client(bounded.service_url) as c:
        consumer = c.subscribe(topic, "s", initial_position=InitialPosition.Earliest)
        p = c.create_producer(topic, batching_max_publish_delay_ms=5)
        for i in range(600):
            p.send_async(f"{keys[i % 12]}:{i}".encode(), None, partition_key=keys[i % 12])
        p.flush()
        got: dict[str, list[int]] = {}
        for _ in range(600):
            m = consumer.receive(timeout_millis=10000)
            key, _, n = m.data().decode().partition(":")
            assert key == m.partition_key()
            got.setdefault(key, []).append(int(n))
            consumer.acknowledge(m)
        assert sorted(got) == sorted(keys)
        assert all(ns == sorted(ns) and len(ns) == 50 for ns in got.values())


def test_a_connection_whose_producers_closed_often_is_still_read(bounded):
    """Every request read counts against the connection's read-ahead until
    its producer takes it, the close request included: more closes than the
    bound must leave the connection read."""
    with Client(bounded.service_url, operation_timeout_seconds=10) as c:
        for i in range(3 * PENDING):
            c.create_producer(f"mux-closing-{i}").close()
        p = c.create_producer("mux-closing-last")
        for i in range(3 * PENDING):  # more sends than the bound, one at a time
            p.send(f"m{i}".encode())
