"""Topics moving between brokers while clients produce and consume, on a
cluster of 3 metastore nodes, 3 bookies and 3 brokers: (a) an admin unload
of the bundle, (b) a split of it, (c) kill -9 of the owner, (d) kill -9 of
the load manager leader (owning the topic), and a graceful shutdown
(SIGTERM) of the owner. The application sees no error; every acknowledged
send is consumed, in order per producer; acknowledged positions only rise
(never two writers at once); the bundle lands on another live broker."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.bundles import NamespaceBundles
from client.admin import Admin
from tests.harness import BookieCluster, stop_process, wait_for
from tests.traffic import Traffic, check_traffic, owner_of, place_topic_on, sends_go_on

TOPIC = "persistent://public/default/mover"
BUNDLE = NamespaceBundles.equal(4).bundle_for_topic(TOPIC).name
BROKERS = ("broker-a", "broker-b", "broker-c")
# The scenarios move bundles themselves: no shedding or automatic split
# in between; a short session so a killed broker's bundles free up sooner.
SETTINGS = [
    "load_balancer_shedding_enabled=false",
    "load_balancer_auto_bundle_split_enabled=false",
    "load_balancer_report_interval_ms=500",
    "session_ttl_ms=5000",
]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[BookieCluster, dict[str, str]]]:
    c = BookieCluster(tmp_path, 3, metastore_nodes=3, broker_settings=SETTINGS).start_all()
    urls = {name: c.start_broker(name) for name in BROKERS}
    yield c, urls
    c.stop_all()


def _finish(traffic: Traffic) -> None:
    traffic.stop_producing()
    traffic.drain()
    traffic.close()
    check_traffic(traffic)


def test_a_unloaded_bundle_moves_to_another_broker_without_errors(cluster):
    _, urls = cluster
    place_topic_on(urls["broker-a"], TOPIC)
    traffic = Traffic(urls["broker-b"], TOPIC)
    wait_for(lambda: len(traffic.received) > 20, 20, "traffic to flow")
    with Admin(urls["broker-b"]) as admin:
        assert admin.namespaces.unload("public/default", BUNDLE) == {"unloaded": [BUNDLE]}
    sends_go_on(traffic)
    after = owner_of(urls["broker-b"], TOPIC)
    assert after != urls["broker-a"] and after in urls.values()
    _finish(traffic)


def test_b_a_split_bundle_moves_its_halves_without_errors(cluster):
    _, urls = cluster
    place_topic_on(urls["broker-a"], TOPIC)
    traffic = Traffic(urls["broker-b"], TOPIC)
    wait_for(lambda: len(traffic.received) > 20, 20, "traffic to flow")
    with Admin(urls["broker-c"]) as admin:  # not the owner: forwarded to it
        done = admin.namespaces.split_bundle("public/default", BUNDLE, unload=True)
        low, high = done["splitInto"]
        assert done["bundle"] == BUNDLE
        bundles = {b["bundle"]: b for b in admin.namespaces.bundles("public/default")["bundles"]}
    assert len(bundles) == 5 and BUNDLE not in bundles and {low, high} <= set(bundles)
    sends_go_on(traffic)
    after = owner_of(urls["broker-b"], TOPIC)
    assert after != urls["broker-a"] and after in urls.values()
    # The topic's half is owned by the broker the lookup named.
    half = NamespaceBundles([int(b.split("_")[0], 16) for b in sorted(bundles)] + [0xFFFFFFFF])
    mine = half.bundle_for_topic(TOPIC).name
    with Admin(urls["broker-b"]) as admin:
        states = {b["bundle"]: b for b in admin.namespaces.bundles("public/default")["bundles"]}
    assert states[mine]["state"] == "owned"
    assert "magnetar://" + states[mine]["owner"] == after
    _finish(traffic)


def test_c_clients_follow_a_bundle_when_its_owner_is_killed(cluster):
    c, urls = cluster
    place_topic_on(urls["broker-a"], TOPIC)
    traffic = Traffic(urls["broker-b"], TOPIC)
    wait_for(lambda: len(traffic.received) > 20, 20, "traffic to flow")
    c.kill9_broker("broker-a")
    # The dead broker keeps the bundle until its session expires (5 s here).
    sends_go_on(traffic)
    after = owner_of(urls["broker-b"], TOPIC)
    assert after in (urls["broker-b"], urls["broker-c"])
    _finish(traffic)


def test_d_killing_the_load_manager_leader_elects_another_and_moves_its_bundles(cluster):
    c, urls = cluster

    def leader() -> str | None:
        with Admin(urls["broker-b"]) as admin:
            try:
                return "magnetar://" + admin.brokers.get_leader_broker()["serviceUrl"]
            except Exception:
                return None

    wait_for(lambda: leader() is not None, 20, "a leader to be elected")
    old_leader = leader()
    name = next(n for n, u in urls.items() if u == old_leader)
    survivors = [u for n, u in urls.items() if n != name]
    place_topic_on(old_leader, TOPIC)  # type: ignore[arg-type]
    traffic = Traffic(survivors[0], TOPIC)
    wait_for(lambda: len(traffic.received) > 20, 20, "traffic to flow")
    c.kill9_broker(name)
    sends_go_on(traffic)
    wait_for(lambda: leader() in survivors, 30, "a surviving broker to lead")
    assert owner_of(survivors[0], TOPIC) in survivors
    _finish(traffic)


def test_a_broker_stopped_with_sigterm_hands_its_bundles_over(cluster):
    c, urls = cluster
    place_topic_on(urls["broker-a"], TOPIC)  # the one to stop
    traffic = Traffic(urls["broker-b"], TOPIC)
    wait_for(lambda: len(traffic.received) > 20, 20, "traffic to flow")
    stop_process(c.brokers.pop("broker-a"))  # SIGTERM: unload first, then stop
    sends_go_on(traffic, timeout_s=30)
    assert owner_of(urls["broker-b"], TOPIC) in (urls["broker-b"], urls["broker-c"])
    _finish(traffic)
