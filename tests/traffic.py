"""Client traffic for tests of topics moving between brokers: one producer
(sync sends) and one consumer on their own threads, and the checks that
nothing acknowledged was lost or reordered."""

from __future__ import annotations

import threading
import time
from typing import Any

import grpc

from broker.bundles import BundleRange
from client import Client, InitialPosition, Result, Timeout
from client.admin import Admin
from protos import broker_pb2, broker_pb2_grpc
from protos.hashing import topic_crc32
from tests.harness import wait_for

DUPLICATE_RECEIPT = (-1, -1)  # the position a send dropped by deduplication is given


class Traffic:
    """One producer (sync sends) and one consumer, each on its own thread,
    until stopped; records what was acknowledged and what was received."""

    def __init__(
        self,
        url: str,
        topic: str,
        tag: str = "p",
        client_options: dict[str, Any] | None = None,
        **producer_options: Any,
    ) -> None:
        # Several Traffics may share a topic: each has its own subscription
        # and counts only its own producer's messages.
        self.tag = tag
        self.client = Client(url, operation_timeout_seconds=30, **(client_options or {}))
        self.consumer = self.client.subscribe(
            topic, f"audit-{tag}", initial_position=InitialPosition.Earliest
        )
        self.producer = self.client.create_producer(
            topic, batching_enabled=False, **producer_options
        )
        self.acked: list[int] = []
        self.positions: list[tuple[int, int]] = []  # where each acknowledged send was stored
        self.received: list[int] = []
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._produce, daemon=True),
            threading.Thread(target=self._consume, daemon=True),
        ]
        for t in self._threads:
            t.start()

    def _produce(self) -> None:
        i = 0
        while not self._stop.is_set() and i < 100000:  # bounded
            try:
                msg_id = self.producer.send(f"{self.tag}:{i}".encode())
            except BaseException as exc:
                self.errors.append(exc)
                return
            self.positions.append(msg_id.position)
            self.acked.append(i)
            i += 1

    def _consume(self) -> None:
        while not self._stop.is_set():
            try:
                m = self.consumer.receive(timeout_millis=200)
            except Timeout:
                continue
            except BaseException as exc:
                self.errors.append(exc)
                return
            self._got(m.data())
            self.consumer.acknowledge(m)

    def _got(self, data: bytes) -> None:
        tag, _, i = data.decode().partition(":")
        if tag == self.tag:
            self.received.append(int(i))

    def stop_producing(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(15)

    def drain(self) -> None:
        """Receive until every acknowledged send has arrived (bounded)."""
        deadline = time.monotonic() + 30
        while set(self.acked) - set(self.received) and time.monotonic() < deadline:
            try:
                m = self.consumer.receive(timeout_millis=500)
            except Timeout:
                continue
            self._got(m.data())
            self.consumer.acknowledge(m)

    def close(self) -> None:
        self.client.close()


class AsyncTraffic(Traffic):
    """The same with ``send_async``: up to 200 sends in flight (the producer
    blocks when its queue is full), ~500 offered per second; also records
    when each acknowledgement arrived."""

    def __init__(
        self, url: str, topic: str, tag: str = "a", client_options: dict[str, Any] | None = None
    ) -> None:
        self.ack_times: list[float] = []
        self._lock = threading.Lock()
        super().__init__(
            url, topic, tag, client_options, block_if_queue_full=True, max_pending_messages=200
        )

    def _produce(self) -> None:
        for i in range(100_000):  # bounded
            if self._stop.is_set() or self.errors:
                break
            try:
                self.producer.send_async(f"{self.tag}:{i}".encode(), self._done(i))
            except BaseException as exc:
                self.errors.append(exc)
                return
            time.sleep(0.002)  # pacing only
        self.producer.flush()

    def _done(self, i: int):  # type: ignore[no-untyped-def]
        def callback(result: Result, msg_id: Any) -> None:
            with self._lock:
                if result != Result.Ok:
                    self.errors.append(RuntimeError(f"send {i}: {result}"))
                    return
                self.acked.append(i)
                self.ack_times.append(time.monotonic())
                self.positions.append(msg_id.position)

        return callback


def sends_go_on(traffic: Traffic, more: int = 20, timeout_s: float = 40) -> None:
    """Wait until ``more`` sends beyond the current ones are acknowledged."""
    acked = len(traffic.acked)
    wait_for(lambda: len(traffic.acked) > acked + more, timeout_s, "sends to go on")


def check_traffic(traffic: Traffic) -> None:
    """No error, no loss, per-producer order, and one writer at a time: the
    positions of acknowledged sends only rise (a new owner writes a new,
    higher ledger; an old owner acknowledging after it would break this)."""
    assert not traffic.errors, traffic.errors
    assert len(traffic.acked) > 20, "the producer barely ran"
    missing = set(traffic.acked) - set(traffic.received)
    assert not missing, (
        f"{len(missing)} acknowledged messages never arrived: {sorted(missing)[:10]}"
    )
    # Per producer, in order: redeliveries may repeat a stretch, never reorder within it.
    firsts = []
    seen: set[int] = set()
    for x in traffic.received:
        if x not in seen:
            seen.add(x)
            firsts.append(x)
    assert firsts == sorted(firsts)
    # A resend that deduplication dropped is answered with no position (-1:-1).
    stored = [p for p in traffic.positions if p != DUPLICATE_RECEIPT]
    assert stored == sorted(stored), "two brokers acknowledged writes"


def owner_of(url: str, topic: str) -> str:
    with Admin(url) as admin:
        return str(admin.topics.lookup(topic)["brokerUrl"])


def place_topic_on(url: str, topic: str) -> None:
    """Make the broker at ``url`` own ``topic``'s bundle: unload it from its
    owner, then send that broker an authoritative lookup (what a leader's
    redirect makes a client send), so it takes the free bundle itself."""
    name = topic.removeprefix("persistent://")
    namespace = name.rsplit("/", 1)[0]
    with Admin(url) as admin:
        if owner_of(url, topic) == url:
            return
        bundle = next(
            b["bundle"]
            for b in admin.namespaces.bundles(namespace)["bundles"]
            if BundleRange.parse(b["bundle"]).contains(topic_crc32(topic))
        )
        admin.namespaces.unload(namespace, bundle)
    address = url.removeprefix("magnetar://")
    with grpc.insecure_channel(address) as channel:
        resp = broker_pb2_grpc.BrokerStub(channel).Lookup(
            broker_pb2.LookupRequest(topic=topic, authoritative=True), timeout=30
        )
    assert resp.error.code == 0 and resp.broker_url == address, resp
