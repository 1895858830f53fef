"""Producer batching limits and pending-queue semantics: batching_max_messages,
batching_max_allowed_size_in_bytes, batching_max_publish_delay_ms, a sync
send flushing the open batch, max_pending_messages with and without
block_if_queue_full, and send_timeout_millis."""

from __future__ import annotations

import functools
import os
import signal
import threading
import time

import pytest

from client import Client, InitialPosition, MessageId, ProducerQueueIsFull, Result, Timeout
from tests.harness import wait_for


def _ids(p, payloads: list[bytes]) -> list[MessageId]:  # type: ignore[no-untyped-def]
    ids: list = [None] * len(payloads)
    for i, data in enumerate(payloads):
        p.send_async(data, lambda res, mid, i=i: ids.__setitem__(i, mid))
    p.flush()
    return ids


def _groups(ids: list[MessageId]) -> list[int]:
    """Messages per entry, in order."""
    sizes: list[int] = []
    last = None
    for mid in ids:
        if mid.position != last:
            sizes.append(0)
            last = mid.position
        sizes[-1] += 1
    return sizes


def test_batches_close_at_the_message_count_and_the_byte_size(cluster, topic):
    with Client(cluster.service_url) as c:
        consumer = c.subscribe(topic, "s", initial_position=InitialPosition.Earliest)
        by_count = c.create_producer(
            topic, batching_max_messages=10, batching_max_publish_delay_ms=60000
        )
        ids = _ids(by_count, [f"{i}".encode() for i in range(25)])
        assert _groups(ids) == [10, 10, 5]
        assert [m.batch_index() for m in ids[:10]] == list(range(10))
        by_size = c.create_producer(
            topic, batching_max_allowed_size_in_bytes=1000, batching_max_publish_delay_ms=60000
        )
        assert _groups(_ids(by_size, [b"x" * 300] * 7)) == [3, 3, 1]
        got = [consumer.receive(timeout_millis=5000) for _ in range(32)]
        assert [m.data() for m in got[:25]] == [f"{i}".encode() for i in range(25)]
        assert [m.message_id() for m in got[:25]] == ids


def test_the_publish_delay_closes_a_batch_and_a_sync_send_flushes_it(cluster, topic):
    with Client(cluster.service_url) as c:
        timed = c.create_producer(topic, batching_max_publish_delay_ms=100)
        done = threading.Event()
        timed.send_async(b"alone", lambda res, mid: done.set())
        assert done.wait(5), "the 100 ms timer did not send the batch"
        held = c.create_producer(topic, batching_max_publish_delay_ms=60000)
        ids: list = []
        for i in range(3):
            held.send_async(f"{i}".encode(), lambda res, mid: ids.append(mid))
        started = time.monotonic()
        last = held.send(b"sync")  # does not wait the 60 s: the open batch goes now
        assert time.monotonic() - started < 5
        assert {m.position for m in ids} == {last.position} and last.batch_index() == 3


def test_a_full_pending_queue_raises_or_blocks(cluster, topic):
    with Client(cluster.service_url) as c:
        strict = c.create_producer(
            topic, max_pending_messages=5, batching_max_publish_delay_ms=60000
        )
        for i in range(5):
            strict.send_async(f"{i}".encode(), None)
        with pytest.raises(ProducerQueueIsFull, match="max_pending_messages = 5"):
            strict.send_async(b"6th", None)
        strict.flush()
        strict.send_async(b"room again", None)
        strict.flush()
        patient = c.create_producer(
            topic,
            max_pending_messages=5,
            block_if_queue_full=True,
            batching_max_messages=5,
            batching_max_publish_delay_ms=60000,
        )
        ids = _ids(patient, [f"{i}".encode() for i in range(40)])  # waits, never raises
        assert all(ids) and _groups(ids) == [5] * 8


def test_a_batch_that_fills_the_pending_queue_goes_at_once(cluster, topic):
    # It can grow no more: waiting for its 60 s timer would only stall the
    # blocked sender (and, on a partitioned topic, keep round-robin on it).
    with Client(cluster.service_url) as c:
        p = c.create_producer(
            topic,
            max_pending_messages=5,
            block_if_queue_full=True,
            batching_max_messages=1000,
            batching_max_publish_delay_ms=60000,
        )
        started = time.monotonic()
        ids = _ids(p, [f"{i}".encode() for i in range(12)])
        assert time.monotonic() - started < 20
        assert _groups(ids) == [5, 5, 2]


def test_send_timeout_fails_pending_sends_with_timeout(fresh_cluster, topic):
    fresh_cluster.start()
    bookie = fresh_cluster.endpoints["pids"]["bookie"]
    with Client(fresh_cluster.service_url) as c:
        p = c.create_producer(topic, send_timeout_millis=1000, batching_enabled=False)
        p.send(b"before")
        os.kill(bookie, signal.SIGSTOP)  # the bookie stops answering; nothing is stored
        try:
            started = time.monotonic()
            with pytest.raises(Timeout, match="send_timeout_millis"):
                p.send(b"stuck")
            assert time.monotonic() - started < 1.0 + 2.5
        finally:
            os.kill(bookie, signal.SIGCONT)
        assert p.send(b"after").entry_id() >= 0  # the producer goes on, as Pulsar's does


def ended(results: list, n: int) -> bool:
    return len(results) == n


def test_sends_made_while_the_producer_cannot_reconnect_time_out_too(fresh_cluster, topic):
    """A producer whose broker is gone keeps trying to reconnect (a send
    timeout does not end it); the sends it takes meanwhile wait unsent, and
    fail with Timeout after send_timeout_millis like sent ones."""
    fresh_cluster.extra_args = ["--no-restart"]
    cluster = fresh_cluster.start()
    with Client(cluster.service_url) as c:
        p = c.create_producer(topic, send_timeout_millis=1000, batching_enabled=False)
        p.send(b"before")
        os.kill(cluster.endpoints["pids"]["broker"], signal.SIGKILL)  # nothing to reconnect to
        results: list = []
        for i in range(2):  # the second comes after the first timed out
            p.send_async(f"m{i}".encode(), lambda res, msg_id: results.append(res))
            wait_for(functools.partial(ended, results, i + 1), 10, f"send {i} to end")
        assert results == [Result.Timeout, Result.Timeout]
