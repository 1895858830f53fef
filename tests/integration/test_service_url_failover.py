"""A service URL that lists several brokers, with the first one killed
(issue 19, point 2): three brokers on one metastore and three bookies; the
URL lists the topic's owner first; a producer and a consumer run; the owner
is killed with SIGKILL. Both resume by themselves once its bundle is
reassigned (its metastore session expires), nothing acknowledged is lost,
and a fresh client and ``magnetar-admin`` work with the dead broker still
listed first.

Clients here start at the first listed broker (``pick_start`` patched to
0): the worst case, which a random start only makes rarer.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from client import Client
from client.admin_cli import main as admin_main
from tests.harness import BookieCluster, wait_for
from tests.traffic import Traffic, check_traffic, owner_of, place_topic_on, sends_go_on

TOPIC = "persistent://public/default/listed-first"
OTHER_TOPIC = "persistent://public/default/fresh-client"
BROKERS = ("broker-a", "broker-b", "broker-c")
SESSION_TTL_MS = 5000
SETTINGS = [
    "load_balancer_shedding_enabled=false",
    "load_balancer_auto_bundle_split_enabled=false",
    "load_balancer_report_interval_ms=500",
    f"session_ttl_ms={SESSION_TTL_MS}",
]
# The session TTL, then the new owner's ledger recovery and the clients'
# reconnection backoff (at most 2 s), with room for a loaded machine.
RESUME_DEADLINE_S = SESSION_TTL_MS / 1000 + 25


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[BookieCluster, dict[str, str]]]:
    c = BookieCluster(tmp_path, 3, broker_settings=SETTINGS).start_all()
    urls = {name: c.start_broker(name) for name in BROKERS}
    yield c, urls
    c.stop_all()


@pytest.fixture
def first_listed_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """Clients and the admin command start at the first listed broker (the
    dead one): the worst case, which a random start only sometimes is."""
    monkeypatch.setattr("client._connection.pick_start", lambda n: 0)
    monkeypatch.setattr("client.admin.pick_start", lambda n: 0)


def _service_url(urls: dict[str, str]) -> str:
    return "magnetar://" + ",".join(urls[b].removeprefix("magnetar://") for b in BROKERS)


def _admin(service_url: str, *args: str) -> Result:
    """``magnetar-admin --admin-url URL ARGS`` in this process (so that it
    starts at the first listed broker too)."""
    return CliRunner().invoke(admin_main, ["--admin-url", service_url, *args])


def test_clients_and_admin_move_past_a_killed_first_listed_broker(cluster, first_listed_first):
    c, urls = cluster
    url = _service_url(urls)  # broker-a first
    place_topic_on(urls["broker-a"], TOPIC)
    # Another bundle, served by a live broker: a fresh client needs no
    # ownership failover for it, only to get past the dead first entry.
    place_topic_on(urls["broker-b"], OTHER_TOPIC)
    traffic = Traffic(url, TOPIC)
    try:
        wait_for(lambda: len(traffic.received) > 20, 20, "traffic to flow")
        c.kill9_broker("broker-a")

        # A fresh client and the admin command: broker-a is still listed first.
        with Client(url) as fresh:
            assert fresh.get_topic_partitions(OTHER_TOPIC) == [OTHER_TOPIC]
            producer = fresh.create_producer(OTHER_TOPIC, batching_enabled=False)
            producer.send(b"fresh")
        listed = _admin(url, "topics", "list", "public/default")
        assert listed.exit_code == 0, listed.output
        assert TOPIC in json.loads(listed.stdout)

        # The running producer and consumer resume by themselves.
        sends_go_on(traffic, timeout_s=RESUME_DEADLINE_S)
        acked = list(traffic.acked)
        wait_for(
            lambda: not set(acked) - set(traffic.received),
            RESUME_DEADLINE_S,
            "the consumer to receive every acknowledged message",
        )
        after = owner_of(urls["broker-b"], TOPIC)
        assert after in (urls["broker-b"], urls["broker-c"])
        looked_up = _admin(url, "topics", "lookup", TOPIC)
        assert looked_up.exit_code == 0, looked_up.output
        assert json.loads(looked_up.stdout) == {"brokerUrl": after}
    finally:
        traffic.stop_producing()
    traffic.drain()
    traffic.close()
    check_traffic(traffic)
