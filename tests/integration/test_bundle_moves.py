"""Topics moving between brokers while clients produce and consume: an admin
unload of the bundle, and a graceful shutdown (SIGTERM) of the owner. The
application sees no error; every acknowledged send is consumed once or more,
in order per producer; the bundle lands on the other broker."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.bundles import NamespaceBundles
from client import Client, InitialPosition, Timeout
from client.admin import Admin
from tests.harness import BookieCluster, stop_process, wait_for

TOPIC = "persistent://public/default/mover"
BUNDLE = NamespaceBundles.equal(4).bundle_for_topic(TOPIC).name


@pytest.fixture
def two_brokers(tmp_path: Path) -> Iterator[tuple[BookieCluster, dict[str, str]]]:
    c = BookieCluster(tmp_path, 3).start_all()
    urls = {name: c.start_broker(name) for name in ("broker-a", "broker-b")}
    yield c, urls
    c.stop_all()


class Traffic:
    """One producer (sync sends) and one consumer, each on its own thread,
    until stopped; records what was acknowledged and what was received."""

    def __init__(self, url: str) -> None:
        self.client = Client(url, operation_timeout_seconds=30)
        self.consumer = self.client.subscribe(
            TOPIC, "audit", initial_position=InitialPosition.Earliest
        )
        self.producer = self.client.create_producer(TOPIC, batching_enabled=False)
        self.acked: list[int] = []
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
                self.producer.send(str(i).encode())
            except BaseException as exc:
                self.errors.append(exc)
                return
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
            self.received.append(int(m.data()))
            self.consumer.acknowledge(m)

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
            self.received.append(int(m.data()))
            self.consumer.acknowledge(m)

    def close(self) -> None:
        self.client.close()


def _owner(admin: Admin) -> str:
    return str(admin.topics.lookup(TOPIC)["brokerUrl"])


def _put_on_broker_a(urls: dict[str, str]) -> None:
    """Make broker-a own the topic: an unload never hands a bundle straight
    back to the broker that gave it up."""
    with Admin(urls["broker-a"]) as admin:
        if _owner(admin) != urls["broker-a"]:
            admin.namespaces.unload("public/default", BUNDLE)
        assert _owner(admin) == urls["broker-a"]


def _check(traffic: Traffic) -> None:
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


def test_an_unloaded_bundle_moves_to_the_other_broker_without_errors(two_brokers):
    _, urls = two_brokers
    traffic = Traffic(urls["broker-a"])
    with Admin(urls["broker-a"]) as admin:
        wait_for(lambda: len(traffic.received) > 20, 20, "traffic to flow")
        before = _owner(admin)
        assert admin.namespaces.unload("public/default", BUNDLE) == {"unloaded": [BUNDLE]}
        acked_at_unload = len(traffic.acked)
        wait_for(lambda: len(traffic.acked) > acked_at_unload + 20, 30, "sends to go on")
        after = _owner(admin)
        assert after != before and after in urls.values()
    traffic.stop_producing()
    traffic.drain()
    traffic.close()
    _check(traffic)


def test_a_broker_stopped_with_sigterm_hands_its_bundles_over(two_brokers):
    cluster, urls = two_brokers
    _put_on_broker_a(urls)  # the one to stop
    traffic = Traffic(urls["broker-b"])
    wait_for(lambda: len(traffic.received) > 20, 20, "traffic to flow")
    stop_process(cluster.brokers.pop("broker-a"))  # SIGTERM: unload first, then stop
    acked = len(traffic.acked)
    wait_for(lambda: len(traffic.acked) > acked + 20, 30, "sends to go on elsewhere")
    with Admin(urls["broker-b"]) as admin:
        assert _owner(admin) == urls["broker-b"]
    traffic.stop_producing()
    traffic.drain()
    traffic.close()
    _check(traffic)


def test_clients_follow_a_bundle_when_its_owner_is_killed(two_brokers):
    cluster, urls = two_brokers
    _put_on_broker_a(urls)  # the one to kill
    traffic = Traffic(urls["broker-b"])
    wait_for(lambda: len(traffic.received) > 20, 20, "traffic to flow")
    cluster.kill9_broker("broker-a")
    acked = len(traffic.acked)
    # The dead broker keeps the bundle until its session expires (10 s).
    wait_for(lambda: len(traffic.acked) > acked + 20, 40, "sends to go on at broker-b")
    with Admin(urls["broker-b"]) as admin:
        assert _owner(admin) == urls["broker-b"]
    traffic.stop_producing()
    traffic.drain()
    traffic.close()
    _check(traffic)
