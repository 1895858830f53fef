"""Network partitions on real processes, each in its own network namespace
(client/netlab.py, client/net_cluster.py), with sync and async traffic
running and the usual checks: no application error, every acknowledged send
consumed, per-producer order, acknowledged positions only rise. Each test
prints the longest gap between two acknowledgements its producers saw.

Skipped (one line) where network namespaces cannot be made (not root)."""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from client import Client, MessageId, Timeout
from client.net_cluster import NetCluster
from client.netlab import NetLab
from metastore.client import MetastoreClient, MetastoreError
from protos import metadata_paths
from protos.topic_name import TopicName
from tests.harness import wait_for
from tests.traffic import (
    DUPLICATE_RECEIPT,
    AsyncTraffic,
    Traffic,
    check_traffic,
    owner_of,
    place_topic_on,
    sends_go_on,
)

FAST = {
    "broker": ["session_ttl_ms=2000"],
    "bookie": ["session_ttl_ms=2000", "lost_bookie_recovery_delay_s=600"],
}


@pytest.fixture
def lab() -> Iterator[NetLab]:
    why = NetLab.unavailable()
    if why is not None:
        pytest.skip(f"partition tests: {why}")
    with NetLab() as lab:
        yield lab


def longest_gap_s(times: list[float]) -> float:
    return max((b - a for a, b in itertools.pairwise(times)), default=0.0)


class Both:
    """A sync and an async traffic on one topic."""

    def __init__(self, url: str, topic: str, **client_options: Any) -> None:
        self.sync = Traffic(url, topic, "s", client_options)
        self.asyn = AsyncTraffic(url, topic, "a", client_options)

    def go_on(self, timeout_s: float = 60) -> None:
        sends_go_on(self.sync, 20, timeout_s)
        n = len(self.asyn.acked)
        wait_for(lambda: len(self.asyn.acked) > n + 20, timeout_s, "async sends to go on")

    def finish(self, what: str) -> None:
        for t in (self.sync, self.asyn):
            t.stop_producing()
            t.drain()
        check_traffic(self.sync)
        check_traffic(self.asyn)
        print(
            f"{what}: longest gap between async acknowledgements {longest_gap_s(self.asyn.ack_times):.2f} s"
        )
        self.sync.close()
        self.asyn.close()


def test_a_broker_cut_off_from_the_metastore_stops_acknowledging_and_its_topics_move(
    lab: NetLab, tmp_path: Path
) -> None:
    """k1 owns the topic and keeps its clients and bookies, but loses the
    metastore: its session expires, k2 takes the bundle and fences the
    ledger on the bookies, so k1 cannot acknowledge anything after that;
    the clients move to k2."""
    c = NetCluster(lab, tmp_path, settings=FAST).start_all()
    try:
        topic = "persistent://public/default/cut-off-broker"
        place_topic_on(c.url("k1"), topic)
        both = Both(c.service_url, topic)
        both.go_on()
        lab.cut("k1", "m1")
        wait_for(lambda: owner_of(c.url("k2"), topic) == c.url("k2"), 60, "k2 to own the topic")
        both.go_on()
        lab.heal("k1", "m1")
        both.go_on()
        both.finish("broker cut off from the metastore")
    finally:
        c.stop_all()


class MetadataWriter:
    """Sequential metastore puts (``/partition-test/{i}`` = i) on a thread
    of its own, until stopped; records which were acknowledged."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.acked: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)
        self._thread.start()

    async def _run(self) -> None:
        ms = MetastoreClient(self.address)
        for i in range(100_000):  # bounded
            if self._stop.is_set():
                break
            try:
                await ms.put(f"/partition-test/{i}", str(i).encode())
            except MetastoreError:
                continue  # not acknowledged: it may or may not be there
            self.acked.append(i)
        await ms.close()

    def go_on(self, more: int = 20, timeout_s: float = 60) -> None:
        n = len(self.acked)
        wait_for(lambda: len(self.acked) > n + more, timeout_s, "metadata writes to go on")

    def stop_and_check(self) -> None:
        self._stop.set()
        self._thread.join(60)

        async def check() -> None:
            ms = MetastoreClient(self.address)
            for i in self.acked:
                stat = await ms.get(f"/partition-test/{i}")
                assert stat is not None and stat.value == str(i).encode(), f"write {i} lost"
            await ms.close()

        asyncio.run(check())


def leader_of(c: NetCluster) -> str | None:
    async def ask() -> str | None:
        for m in c.metastores:
            ms = MetastoreClient(f"{c.ip(m)}:2379")
            try:
                if (await ms.status(f"{c.ip(m)}:2379")).is_leader:
                    return m
            except Exception:
                continue
            finally:
                await ms.close()
        return None

    return asyncio.run(ask())


def test_an_isolated_metastore_leader_steps_down_and_no_acknowledged_write_is_lost(
    lab: NetLab, tmp_path: Path
) -> None:
    """The leader is cut off from every other process (the test process
    still reaches it): it steps down for want of a majority, the other two
    elect a leader, metadata writes and traffic go on, and every write the
    old leader acknowledged is still there after the heal."""
    settings = {**FAST, "broker": ["session_ttl_ms=6000"]}
    c = NetCluster(lab, tmp_path, metastores=3, settings=settings).start_all()
    try:
        topic = "persistent://public/default/metastore-minority"
        both = Both(c.service_url, topic)
        writer = MetadataWriter(c.metastore_address)
        both.go_on()
        writer.go_on()
        old = wait_for(lambda: leader_of(c), 30, "a metastore leader")
        others = [h for h in lab.hosts if h != old]
        for h in others:
            lab.cut(old, h)
        wait_for(lambda: leader_of(c) not in (None, old), 60, "the majority to elect a leader")
        writer.go_on()
        both.go_on()
        for h in others:
            lab.heal(old, h)
        writer.go_on()
        both.go_on()
        writer.stop_and_check()
        both.finish("metastore leader isolated")
    finally:
        c.stop_all()


def current_ensembles(c: NetCluster, topics: list[str]) -> dict[str, list[str]]:
    """Each topic's current ledger's last ensemble."""

    async def read() -> dict[str, list[str]]:
        ms = MetastoreClient(c.metastore_address)
        out = {}
        for topic in topics:
            key = metadata_paths.managed_ledger(TopicName.parse(topic))
            stat = await ms.get(key)
            assert stat is not None
            last = json.loads(stat.value)["ledgers"][-1]
            md = await ms.get(metadata_paths.ledger(last))
            assert md is not None
            out[topic] = json.loads(md.value)["ensembles"][-1][1]
        await ms.close()
        return out

    return asyncio.run(read())


def test_a_bookie_cut_off_from_one_broker_is_replaced_there_only(
    lab: NetLab, tmp_path: Path
) -> None:
    """E=2 of 3 bookies: a bookie both topics write to is cut off from k1
    only. k1 replaces it in its ensemble (an ensemble change) and goes on;
    k2 keeps writing to it."""
    c = NetCluster(lab, tmp_path, settings=FAST).start_all()
    try:
        t1, t2 = (f"persistent://public/default/one-way-{k}" for k in ("k1", "k2"))
        place_topic_on(c.url("k1"), t1)
        place_topic_on(c.url("k2"), t2)
        on1, on2 = Both(c.service_url, t1), Both(c.service_url, t2)
        on1.go_on()
        on2.go_on()
        before = current_ensembles(c, [t1, t2])
        shared = sorted(set(before[t1]) & set(before[t2]))[0]  # 2 + 2 > 3: one is shared
        host = next(b for b in c.bookies if c.ready[b]["bookie_id"] == shared)
        lab.cut(host, "k1")
        on1.go_on()
        on2.go_on()
        after = current_ensembles(c, [t1, t2])
        assert shared not in after[t1]
        assert shared in after[t2]
        lab.heal(host, "k1")
        on1.finish("bookie cut off from k1 (k1's traffic)")
        on2.finish("bookie cut off from k1 (k2's traffic)")
    finally:
        c.stop_all()


def stored_values(url: str, topic: str) -> list[bytes]:
    """Every message the topic holds, read from the start."""
    with Client(url) as client:
        reader = client.create_reader(topic, MessageId.earliest)
        out = []
        for _ in range(1_000_000):  # bounded
            try:
                out.append(reader.read_next(timeout_millis=2000).data())
            except Timeout:
                return out
        return out


def test_a_client_cut_off_past_its_keep_alive_reconnects_and_dedup_drops_resends(
    lab: NetLab, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The owning broker's answers to the client are dropped for 8 s, four
    keep-alive intervals of 2 s: the sends still arrive and are stored, their
    receipts are lost. The client's keep-alive gives up on the connection,
    reconnects once the link is back and sends every unconfirmed message
    again; deduplication answers the stored ones (-1:-1) without storing
    them twice."""
    settings = {
        **FAST,
        "broker": [
            *FAST["broker"],
            "keep_alive_interval_seconds=2",
            "broker_deduplication_enabled=true",
        ],
    }
    c = NetCluster(lab, tmp_path, settings=settings).start_all()
    try:
        topic = "persistent://public/default/client-cut"
        place_topic_on(c.url("k1"), topic)
        caplog.set_level(logging.INFO, logger="client")
        both = Both(c.service_url, topic, keep_alive_interval_seconds=2)
        both.go_on()
        lab.drop("k1", "host")
        fault_ends = time.monotonic() + 8
        wait_for(
            lambda: "reconnects" in caplog.text,
            10,
            "the keep-alive to give up on the silent connection",
        )
        while time.monotonic() < fault_ends:  # the fault's own length: 4 keep-alive intervals
            time.sleep(0.1)
        lab.undrop("k1", "host")
        both.go_on()
        resent = both.asyn.positions.count(DUPLICATE_RECEIPT)
        resent += both.sync.positions.count(DUPLICATE_RECEIPT)
        both.finish("client cut off from its broker past the keep-alive")
        assert resent > 0, "no resend was answered as a duplicate"
        stored = stored_values(c.service_url, topic)
        assert len(stored) == len(set(stored)), "a resend was stored twice"
        print(f"client cut off: {resent} resends dropped by deduplication")
    finally:
        c.stop_all()


def test_a_flapping_link_loses_nothing(lab: NetLab, tmp_path: Path) -> None:
    """The owning broker's link goes down and comes back up every second
    for 20 s (half a second each; its clients, its bookies and the
    metastore all lose it each time)."""
    c = NetCluster(lab, tmp_path, settings=FAST).start_all()
    try:
        topic = "persistent://public/default/flapping"
        place_topic_on(c.url("k1"), topic)
        # Keep-alive every 2 s: a client connection the flapping left in TCP's
        # retransmission backoff (tens of seconds after 20 cuts) is found dead
        # and replaced, as with the default 30 s, only sooner than the 60 s
        # this test waits for the sends to go on (a CI run once waited longer).
        both = Both(c.service_url, topic, keep_alive_interval_seconds=2)
        both.go_on()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:  # bounded: 20 s of cut, heal, cut, ...
            lab.isolate("k1")
            time.sleep(0.5)  # the fault's own schedule, not a wait for a condition
            lab.rejoin("k1")
            time.sleep(0.5)
        both.go_on()
        both.finish("flapping link of the owning broker")
    finally:
        c.stop_all()
