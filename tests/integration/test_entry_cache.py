"""The broker's entry cache holds entries of topics with a cursor only (as
Pulsar's: it serves tailing reads), so a topic nobody reads keeps nothing
in memory (issue 26: broker memory per idle topic). Counted on the broker's
``pulsar_ml_cache_inserted_entries_total``."""

from __future__ import annotations

import itertools

from client import Client
from tests.harness import wait_for
from tests.metrics_scrape import scrape

_n = itertools.count()
N = 50


def _inserted(cluster) -> float:
    s = scrape(int(cluster.endpoints["metrics"]["broker"]))
    return s.value("pulsar_ml_cache_inserted_entries_total")


def test_only_a_topic_with_a_cursor_puts_its_entries_in_the_cache(cluster):
    unread = f"persistent://public/default/unread-{next(_n)}"
    tailed = f"persistent://public/default/tailed-{next(_n)}"
    with Client(cluster.service_url) as c:
        producer = c.create_producer(unread, batching_enabled=False)
        producer.send(b"loads the topic")
        before = _inserted(cluster)
        for i in range(N):
            producer.send(f"{i}".encode())
        assert _inserted(cluster) - before < N // 2  # (other topics' traffic may add a few)

        consumer = c.subscribe(tailed, "tail")
        producer = c.create_producer(tailed, batching_enabled=False)
        before = _inserted(cluster)
        for i in range(N):
            producer.send(f"{i}".encode())
        assert wait_for(lambda: _inserted(cluster) - before >= N, 10, "entries to be cached")
        assert [consumer.receive(timeout_millis=10000).data() for _ in range(N)] == [
            f"{i}".encode() for i in range(N)
        ]
