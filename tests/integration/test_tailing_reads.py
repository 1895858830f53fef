"""A consumer that keeps up with its producer is served from the broker's
entry cache alone: the dispatcher never asks the bookies for an entry they
have just confirmed whose add the broker has not finished handling (it
waits that one callback for the entry to be cached; before, a few percent
of a tailing consumer's entries made a bookie round trip each and came
late)."""

from __future__ import annotations

import threading
import time

from client import Client, InitialPosition
from tests.harness import wait_for
from tests.metrics_scrape import scrape

RATE = 2000  # messages a second, open loop, in 1 ms batches (as the latency benchmark)
SECONDS = 3


def _bookie_reads(cluster) -> float:  # type: ignore[no-untyped-def]
    s = scrape(int(cluster.endpoints["metrics"]["bookie"]))
    return s.get("bookkeeper_server_READ_ENTRY_count", success="true") or 0.0


def test_a_tailing_consumer_reads_nothing_from_the_bookies(fresh_cluster, topic):
    fresh_cluster.start()
    n = RATE * SECONDS
    received: list[int] = []
    done = threading.Event()
    with Client(fresh_cluster.service_url) as c, Client(fresh_cluster.service_url) as cc:

        def listener(consumer, msg) -> None:  # type: ignore[no-untyped-def]
            consumer.acknowledge(msg)
            received.append(int(msg.data()))
            if len(received) > n:  # and the first, "-1"
                done.set()

        cc.subscribe(
            topic,
            "tail",
            initial_position=InitialPosition.Earliest,
            message_listener=listener,
        )
        producer = c.create_producer(topic, batching_max_publish_delay_ms=1)
        producer.send(b"-1")  # the topic and its ledger exist before the timed part
        wait_for(lambda: received, 10, "the first message")
        before = _bookie_reads(fresh_cluster)
        t0 = time.perf_counter()
        for i in range(n):  # bounded: n sends at RATE a second
            while time.perf_counter() < t0 + i / RATE:
                time.sleep(0.0002)  # pacing an open-loop producer, not synchronisation
            producer.send_async(str(i).encode(), None)
        producer.flush()
        wait_for(done.is_set, 60, f"the consumer to receive {n + 1} messages")
        assert received[:2] == [-1, 0] and sorted(received[1:]) == list(range(n))
        assert _bookie_reads(fresh_cluster) - before == 0
