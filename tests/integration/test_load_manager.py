"""The load manager on real processes: automatic bundle splits (halves
unloaded only when another broker could take them) and load shedding with
thresholds set low, lookups of unowned bundles placed by the
leader, and an old owner that lost its bundle while paused (cut off from
the metastore) being fenced by storage, never acknowledging a write the new
owner does not see."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from bookie.ledger_client import LedgerClient
from broker.bundles import HASH_MAX, NamespaceBundles
from broker.managed_ledger import EntryCache, ManagedLedger, ManagedLedgerFencedError
from client.admin import Admin
from metastore.client import MetastoreClient
from protos import common_pb2
from protos.topic_name import TopicName
from tests.harness import ROOT, BookieCluster, wait_for
from tests.traffic import Traffic, check_traffic, owner_of, place_topic_on, sends_go_on

NS = "public/default"
FAST = ["load_balancer_report_interval_ms=300", "load_balancer_shedding_interval_minutes=0.01"]


def topics_in_one_bundle(prefix: str, n: int) -> list[str]:
    """``n`` topic names of the same default bundle."""
    bundles = NamespaceBundles.equal(4)
    first = f"persistent://{NS}/{prefix}-0"
    target = bundles.bundle_for_topic(first)
    names = [first]
    i = 1
    while len(names) < n:
        name = f"persistent://{NS}/{prefix}-{i}"
        if bundles.bundle_for_topic(name) == target:
            names.append(name)
        i += 1
    return names


def topics_one_per_bundle(prefix: str) -> list[str]:
    bundles = NamespaceBundles.equal(4)
    by_bundle: dict[str, str] = {}
    i = 0
    while len(by_bundle) < 4:
        name = f"persistent://{NS}/{prefix}-{i}"
        by_bundle.setdefault(bundles.bundle_for_topic(name).name, name)
        i += 1
    return list(by_bundle.values())


def _bundles(url: str) -> dict[str, dict]:
    with Admin(url) as admin:
        return {b["bundle"]: b for b in admin.namespaces.bundles(NS)["bundles"]}


def _reports(cluster: BookieCluster) -> dict[str, dict]:
    """Every broker's load report, by address."""

    async def read() -> dict[str, dict]:
        ms = MetastoreClient(cluster.metastore_address)
        try:
            records, _ = await ms.list_prefix("/loadbalance/brokers/")
            return {r.key.rsplit("/", 1)[1]: json.loads(r.value) for r in records}
        finally:
            await ms.close()

    return asyncio.run(read())


def _finish(traffics: list[Traffic]) -> None:
    for t in traffics:
        t.stop_producing()
    for t in traffics:
        t.drain()
        t.close()
        check_traffic(t)


_CLI = [sys.executable, "-m", "client.admin_cli"]


def _cli(url: str, *args: str) -> str:
    out = subprocess.run(
        [*_CLI, "--service-url", url, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return out.stdout


@pytest.fixture
def make_cluster(tmp_path: Path) -> Iterator:
    started: list[BookieCluster] = []

    def make(settings: list[str], brokers: int) -> tuple[BookieCluster, list[str]]:
        c = BookieCluster(tmp_path, 3, metastore_nodes=3, broker_settings=[*FAST, *settings])
        started.append(c.start_all())
        return c, [c.start_broker(f"broker-{i}") for i in range(brokers)]

    yield make
    for c in started:
        c.stop_all()


def test_a_bundle_over_the_topic_threshold_is_split_and_its_halves_move(make_cluster):
    _, urls = make_cluster(
        [
            "load_balancer_shedding_enabled=false",
            "load_balancer_namespace_bundle_max_topics=2",
        ],
        2,
    )
    topics = topics_in_one_bundle("crowded", 3)
    parent = NamespaceBundles.equal(4).bundle_for_topic(topics[0]).name
    traffics = [Traffic(urls[0], t) for t in topics]
    wait_for(lambda: parent not in _bundles(urls[0]), 30, "the crowded bundle to be split")
    for traffic in traffics:
        sends_go_on(traffic)
    assert len(_bundles(urls[1])) > 4

    def most_topics_in_one_bundle() -> int:
        bundles = _bundles(urls[1])
        cut = NamespaceBundles([*sorted(int(b[2:10], 16) for b in bundles), HASH_MAX])
        return max(Counter(cut.bundle_for_topic(t).name for t in topics).values())

    # Split until every bundle is within the threshold (two topics).
    wait_for(lambda: most_topics_in_one_bundle() <= 2, 30, "the bundles to be within limits")
    _finish(traffics)


def test_a_lone_broker_keeps_the_topics_of_the_halves_it_split_loaded(make_cluster):
    _, urls = make_cluster(
        ["load_balancer_shedding_enabled=false", "load_balancer_namespace_bundle_max_topics=2"],
        1,
    )
    topics = topics_in_one_bundle("lone", 3)
    parent = NamespaceBundles.equal(4).bundle_for_topic(topics[0]).name
    traffics = [Traffic(urls[0], t) for t in topics]
    for traffic in traffics:
        sends_go_on(traffic)
    wait_for(lambda: parent not in _bundles(urls[0]), 30, "the crowded bundle to be split")
    for traffic in traffics:
        sends_go_on(traffic)
    _finish(traffics)
    # Never unloaded, so never reopened: every send went to the ledger its
    # topic opened first (a reload writes a new one).
    for traffic in traffics:
        assert len({ledger for ledger, _ in traffic.positions}) == 1, traffic.positions[-3:]


def test_an_overloaded_broker_sheds_bundles_once_within_the_grace_period(make_cluster):
    # Usage is message bandwidth only, against a tiny NIC: the broker with
    # all the traffic is far above the average.
    c, urls = make_cluster(
        [
            "load_balancer_auto_bundle_split_enabled=false",
            "load_balancer_cpu_resource_weight=0",
            "load_balancer_memory_resource_weight=0",
            "load_balancer_history_resource_percentage=0",
            "load_balancer_override_broker_nic_speed_gbps=0.00001",
        ],
        2,
    )
    topics = topics_one_per_bundle("busy")
    for t in topics:
        place_topic_on(urls[0], t)
    first = urls[0].removeprefix("magnetar://")
    placed = _bundles(urls[0])
    assert {b["owner"] for b in placed.values()} == {first}
    # Every bundle starts on the busy broker: a move is seen even when it
    # happens before the first listing below.
    owners: dict[str, list[str]] = {name: [first] for name in placed}
    traffics = [Traffic(urls[1], t) for t in topics]

    def record() -> dict[str, list[str]]:
        for name, b in _bundles(urls[1]).items():
            seen = owners.setdefault(name, [])
            if b["owner"] and b["state"] == "owned" and (not seen or seen[-1] != b["owner"]):
                seen.append(b["owner"])
        return owners

    # The busy broker's load report: resources as fractions, per-bundle load.
    def busy_report() -> dict:
        return _reports(c)[urls[0].removeprefix("magnetar://")]

    # (Shedding may start as soon as a report shows the traffic.)
    wait_for(
        lambda: any(b["msgRateIn"] > 0 for b in busy_report()["bundles"].values()),
        30,
        "the report to show traffic",
    )
    report = busy_report()
    assert 0 <= report["cpu"] <= 1 and 0 < report["memory"] < 1
    assert report["bandwidthIn"] > 1 and report["msgRateIn"] > 0  # over the tiny NIC
    busy = [b for b in report["bundles"].values() if b["msgRateIn"] > 0]
    assert busy and {(b["topics"], b["sessions"]) for b in busy} == {(1, 2)}
    assert set(report["bundles"]) <= {f"{NS}/{b}" for b in _bundles(urls[0])}
    moved = lambda: [n for n, o in record().items() if len(o) > 1]  # noqa: E731
    wait_for(lambda: len(moved()) >= 1, 60, "the leader to shed a bundle from the busy broker")
    # Keep watching for a while (many shedding rounds): no bundle moves back.
    deadline = time.monotonic() + 8
    while time.monotonic() < deadline:
        wait_for(lambda: bool(record()), 5, "the bundle listing")
    for name, seq in owners.items():
        assert len(seq) <= 2, f"bundle {name} moved more than once: {seq}"
    for traffic in traffics:
        sends_go_on(traffic, 10)
    _finish(traffics)


def test_lookups_of_unowned_bundles_are_placed_by_the_leader(make_cluster):
    _, urls = make_cluster(
        ["load_balancer_shedding_enabled=false", "load_balancer_auto_bundle_split_enabled=false"],
        3,
    )

    def leader() -> str | None:
        with Admin(urls[0]) as admin:
            try:
                return str(admin.brokers.get_leader_broker()["serviceUrl"])
            except Exception:
                return None

    wait_for(lambda: leader() is not None, 20, "a leader to be elected")
    address = leader()
    follower = next(u for u in urls if u.removeprefix("magnetar://") != address)
    import grpc

    from protos import broker_pb2, broker_pb2_grpc

    topic = f"persistent://{NS}/placed-by-leader"
    with grpc.insecure_channel(follower.removeprefix("magnetar://")) as ch:
        resp = broker_pb2_grpc.BrokerStub(ch).Lookup(broker_pb2.LookupRequest(topic=topic))
    # A follower sends the lookup of an unowned bundle to the leader ...
    assert resp.error.code == 0 and resp.redirect and not resp.authoritative
    assert resp.broker_url == address
    # ... which places it (the SDK and admin lookup follow the redirects).
    owner = owner_of(follower, topic)
    assert owner in urls
    # Every broker answers the same owner now.
    assert {owner_of(u, topic) for u in urls} == {owner}
    # The CLI names the leader, and splits a bundle nobody owns yet (the
    # broker asked takes it first).
    assert json.loads(_cli(follower, "brokers", "leader-broker")) == {"serviceUrl": address}
    free = next(b for b, rec in _bundles(follower).items() if rec["state"] == "free")
    done = json.loads(_cli(follower, "namespaces", "split-bundle", NS, "--bundle", free))
    assert done["bundle"] == free and len(done["splitInto"]) == 2
    bundles = _bundles(urls[2])
    assert free not in bundles and set(done["splitInto"]) <= set(bundles) and len(bundles) == 5
    bad = subprocess.run(
        [*_CLI, "--service-url", follower, "namespaces", "split-bundle", NS, "-b", "0x1_0x0"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode != 0 and "0xLOWER_0xUPPER" in bad.stderr
    assert len(_bundles(urls[2])) == 5  # nothing changed
    # Unloading the whole namespace releases every owned bundle, wherever it is.
    owned = sorted(b for b, rec in _bundles(urls[2]).items() if rec["state"] == "owned")
    assert len(owned) >= 2  # the looked-up topic's bundle and the two halves
    assert json.loads(_cli(urls[2], "namespaces", "unload", NS)) == {"unloaded": owned}
    assert {rec["state"] for rec in _bundles(urls[2]).values()} == {"free"}


def test_an_old_owner_paused_past_its_session_is_fenced_and_acknowledges_nothing(make_cluster):
    c, urls = make_cluster(
        [
            "load_balancer_shedding_enabled=false",
            "load_balancer_auto_bundle_split_enabled=false",
            "session_ttl_ms=3000",
        ],
        2,
    )
    topic = f"persistent://{NS}/paused-owner"
    place_topic_on(urls[0], topic)
    first = Traffic(urls[1], topic, "first")  # connected to broker-0, the owner
    wait_for(lambda: len(first.received) > 20, 20, "traffic to flow")
    old = c.brokers["broker-0"]
    os.kill(old.pid, signal.SIGSTOP)  # a long pause: its session expires meanwhile
    try:
        bundle = NamespaceBundles.equal(4).bundle_for_topic(topic).name
        wait_for(
            lambda: (
                _bundles(urls[1])[bundle]["owner"] != urls[0].removeprefix("magnetar://")
                or _bundles(urls[1])[bundle]["state"] != "owned"
            ),
            30,
            "the paused owner's bundle to be freed",
        )
        second = Traffic(urls[1], topic, "second")  # takes the topic over on broker-1
        wait_for(lambda: len(second.acked) > 20, 30, "the new owner to acknowledge sends")
        assert owner_of(urls[1], topic) == urls[1]
    finally:
        os.kill(old.pid, signal.SIGCONT)
    # The old owner wakes up with sends in flight: it acknowledges none of
    # them (storage fencing), and the first producer moves to the new owner.
    sends_go_on(first)
    _finish([first, second])


def test_a_managed_ledger_fenced_by_a_new_owner_refuses_writes_and_keeps_confirmed_ones(
    make_cluster,
):
    # Two owners of one topic, as two brokers would be: the old one keeps
    # writing until storage fencing stops it.
    c, _ = make_cluster(["load_balancer_enabled=false"], 0)
    name = TopicName.parse(f"persistent://{NS}/two-owners")

    async def main() -> None:
        clients = [MetastoreClient(c.metastore_address) for _ in range(2)]
        ledgers = [LedgerClient(ms) for ms in clients]
        opened = [
            ManagedLedger(
                name,
                clients[i],
                ledgers[i],
                ensemble_size=2,
                write_quorum=2,
                ack_quorum=2,
                cache=EntryCache(1 << 20),
                max_outstanding_adds=1000,
            )
            for i in range(2)
        ]
        old, new = opened
        fenced: list[bool] = []
        old.on_fenced = lambda: fenced.append(True)
        await old.open()
        confirmed = [await old.add_entry(f"m{i}".encode()) for i in range(50)]
        await new.open()  # recovers and fences the old owner's ledger
        with pytest.raises(ManagedLedgerFencedError) as info:
            await old.add_entry(b"after the new owner took over")
        assert info.value.code == common_pb2.SERVICE_NOT_READY  # the client looks it up again
        assert fenced == [True] and old.fenced_by_other
        with pytest.raises(ManagedLedgerFencedError):
            await old.add_entry(b"and again")
        rows = await new.read_entries(new.next_position(new.before_first()), 100, 1 << 20)
        got = [data for _, data in rows][: len(confirmed)]
        assert got == [f"m{i}".encode() for i in range(50)]
        after = await new.add_entry(b"new owner")
        assert after > confirmed[-1]
        for ml in opened:
            await ml.close()
        for lc in ledgers:
            await lc.close()
        for ms in clients:
            await ms.close()

    asyncio.run(main())
