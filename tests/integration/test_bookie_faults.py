"""Bookie faults seen through the SDK: a disk that fills up and empties
again, a bookie lost for good under an idle topic (AutoRecovery fences
the topic's ledger; the topic carries on on a new one), and a topic's only
bookie lost under its sends (the broker holds them for its next ledger)."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from bookie.ledger_client import LedgerClient
from bookie.ledger_metadata import OPEN
from bookie.replication_tasks import all_ledgers
from client import Client, InitialPosition, MessageId, Producer, Result
from client.admin import Admin
from metastore.client import MetastoreClient
from tests.harness import BookieCluster, wait_for

FAST = [
    "session_ttl_ms=2000",
    "auditor_poll_interval_ms=200",
    "disk_check_interval_ms=200",
    "open_ledger_rereplication_grace_period_ms=3000",
]
TOPICS = [f"persistent://public/default/disk-{i}" for i in range(6)]
# The broker's stats topic is written once a wall-clock minute: its ledger,
# made at a minute that falls inside a test, would sit idle on the bookie
# the test fills or kills and count as one of the test's open ledgers there
# (test_a_full_disk_… failed once on such a ledger). Off where that matters.
NO_STATS = ["stats_export_interval_s=0"]


def open_ledgers_on(cluster: BookieCluster, bookie: str) -> list[int]:
    """Open ledgers whose current ensemble holds ``bookie``."""

    async def main() -> list[int]:
        ms = MetastoreClient(cluster.metastore_address)
        out = [
            md.ledger_id
            async for md in all_ledgers(ms)
            if md.state == OPEN and bookie in md.ensembles[-1][1]
        ]
        await ms.close()
        return out

    return asyncio.run(main())


def producers_on(client: Client, cluster: BookieCluster, bookie: str) -> dict:
    """A producer per topic, each having sent "<topic> 0"; some topic's
    ledger is on ``bookie`` (E=2 of 3 bookies, six topics)."""
    producers = {t: client.create_producer(t, batching_enabled=False) for t in TOPICS}
    for t, p in producers.items():
        p.send(f"{t} 0".encode())
    assert open_ledgers_on(cluster, bookie), f"no topic's ledger uses {bookie}"
    return producers


def readonly(admin: Admin, bookie: str) -> bool:
    row = next(r for r in admin.bookies.list()["bookies"] if r["bookie"] == bookie)
    return bool(row["readOnly"])


def consume_all(url: str, topic: str, n: int) -> list[bytes]:
    with Client(url) as client:
        consumer = client.subscribe(topic, "check", initial_position=InitialPosition.Earliest)
        got = []
        for _ in range(n):
            msg = consumer.receive(timeout_millis=30000)
            got.append(msg.data())
            consumer.acknowledge(msg)
        return got


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 256 MiB tmpfs for bookie 0's data dir: a disk we can fill."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("filling a disk needs root to mount a tmpfs")
    mount = tmp_path / "bookie0" / "data"
    mount.mkdir(parents=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256m", "tmpfs", str(mount)])
    if done.returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(mount: Path, percent: float) -> Path:
    usage = shutil.disk_usage(mount)
    filler = mount / "filler"
    with open(filler, "wb") as f:
        f.truncate(0)
        need = int(usage.total * percent / 100) - usage.used
        chunk = b"\0" * (1 << 20)
        for _ in range(need // len(chunk) + 1):
            f.write(chunk)
    return filler


def fill_up(mount: Path) -> Path:
    """Fill the file system to the last byte."""
    filler = mount / "filler"
    chunk = b"\0" * (1 << 20)
    with open(filler, "wb") as f:
        try:
            for _ in range(1 << 16):  # bounded: the tmpfs is 256 MiB
                f.write(chunk)
                f.flush()
        except OSError:
            pass
    return filler


def test_a_full_disk_turns_its_bookie_read_only_without_failing_a_send(tmp_path, small_disk):
    settings = [*FAST, "read_only_disk_usage_percent=85"]
    cluster = BookieCluster(
        tmp_path, 3, broker_settings=NO_STATS, bookie_settings=settings
    ).start_all()
    try:
        url = cluster.start_broker()
        admin = Admin(url)
        full = cluster.info[0]["bookie_id"]
        with Client(url) as client:
            producers = producers_on(client, cluster, full)

            filler = fill(small_disk, 92)
            wait_for(lambda: readonly(admin, full), 30, "the bookie to register read-only")
            for i in range(1, 21):  # every send succeeds: the writers replace the full bookie
                for t, p in producers.items():
                    p.send(f"{t} {i}".encode())
            assert open_ledgers_on(cluster, full) == []

            filler.unlink()
            wait_for(lambda: not readonly(admin, full), 30, "the bookie to be writable again")
            for t, p in producers.items():
                p.send(f"{t} 21".encode())
        for t in TOPICS:
            assert consume_all(url, t, 22) == [f"{t} {i}".encode() for i in range(22)]
        admin.close()
    finally:
        cluster.stop_all()


def test_an_idle_topic_whose_bookie_is_lost_carries_on(tmp_path):
    """Its open ledger names the lost bookie: after the grace period the
    ledger is fenced and re-replicated, and the topic moves to a new ledger;
    the same producer then sends again and nothing is lost."""
    settings = [*FAST, "lost_bookie_recovery_delay_s=1"]
    cluster = BookieCluster(
        tmp_path, 3, broker_settings=NO_STATS, bookie_settings=settings
    ).start_all()
    try:
        url = cluster.start_broker()
        admin = Admin(url)
        topic = "persistent://public/default/idle"
        with Client(url) as client:
            producer = client.create_producer(topic, batching_enabled=False)
            for i in range(10):
                producer.send(f"m{i}".encode())
            ledger = open_ledgers_on(cluster, cluster.info[0]["bookie_id"])
            victim = 0 if ledger else 1  # E=2 of 3 bookies: one of the first two holds it
            lost = cluster.info[victim]["bookie_id"]
            assert open_ledgers_on(cluster, lost)
            cluster.kill9(victim)

            def repaired() -> bool:
                rows = {r["bookie"]: r for r in admin.bookies.list()["bookies"]}
                return rows[lost]["ledgers"] == 0 and admin.bookies.under_replicated()["count"] == 0

            wait_for(repaired, 90, "the lost bookie's ledgers to be re-replicated")
            for i in range(10, 20):
                producer.send(f"m{i}".encode())

        async def readable() -> None:  # the fenced ledger reads back from its new replicas
            # (before a subscription consumes them, after which they may be trimmed)
            ms = MetastoreClient(cluster.metastore_address)
            client = LedgerClient(ms)
            async for md in all_ledgers(ms):
                if md.last_entry_id >= 0:
                    assert len(await client.read(md, 0, md.last_entry_id)) == md.last_entry_id + 1
            await client.close()
            await ms.close()

        asyncio.run(readable())
        assert consume_all(url, topic, 20) == [f"m{i}".encode() for i in range(20)]

        admin.close()
    finally:
        cluster.stop_all()


def test_a_disk_that_fails_a_write_turns_its_bookie_read_only_until_restarted(tmp_path, small_disk):
    """The disk fills up, and usage alone never turns the bookie read-only
    (threshold 100.1 %): its writes fail, the writers move on without
    failing a send, and the bookie registers read-only until it is restarted
    with room again."""
    settings = [*FAST, "read_only_disk_usage_percent=100.1", "journal_max_size_mb=1"]
    cluster = BookieCluster(
        tmp_path, 3, broker_settings=NO_STATS, bookie_settings=settings
    ).start_all()
    try:
        url = cluster.start_broker()
        admin = Admin(url)
        full = cluster.info[0]["bookie_id"]
        with Client(url) as client:
            producers = producers_on(client, cluster, full)
            filler = fill_up(small_disk)
            big = b"x" * 200_000
            i = 0
            while not readonly(admin, full):  # bounded: the journal rolls every 1 MiB
                i += 1
                assert i <= 200, "the bookie never noticed its failed writes"
                for t, p in producers.items():
                    p.send(f"{t} {i} ".encode() + big)
            filler.unlink()
            assert readonly(admin, full)
            cluster.stop(0)
            cluster.start(0)
            cluster.wait_ready(0)
            wait_for(lambda: not readonly(admin, full), 30, "the restarted bookie to be writable")
            for t, p in producers.items():
                p.send(f"{t} last".encode())
        for t in TOPICS:
            got = consume_all(url, t, i + 2)
            assert got[0] == f"{t} 0".encode() and got[-1] == f"{t} last".encode()
            middle = [g.split(b" ")[1] for g in got[1:-1]]
            assert middle == [str(k).encode() for k in range(1, i + 1)]
        admin.close()
    finally:
        cluster.stop_all()


def on_bookies(
    tmp_path: Path, n: int, hold_s: float, dedup: bool = False
) -> tuple[BookieCluster, str]:
    """``n`` bookies, topics on all of them (n/n/n), and a broker."""
    settings = [f"managed_ledger_default_{q}={n}" for q in ("ensemble_size", "write_quorum")]
    settings += [f"managed_ledger_default_ack_quorum={n}", f"broker_deduplication_enabled={dedup}"]
    settings += [f"managed_ledger_failed_add_hold_seconds={hold_s}"]
    cluster = BookieCluster(tmp_path, n, broker_settings=settings).start_all()
    try:
        return cluster, cluster.start_broker()
    except BaseException:
        cluster.stop_all()
        raise


def broker_logged(cluster: BookieCluster, text: str) -> bool:
    return text in (cluster.data_dir / "broker" / "broker.log").read_text()


Held = tuple[Producer, int, list, list[bool | Exception]]


def sends_held(
    cluster: BookieCluster, client: Client, admin: Admin, topic: str, sent: list[bytes], victim: int
) -> Held:
    """A producer sends ``sent[:10]``; bookie ``victim`` is killed and the
    rest are sent without waiting. Returns the producer, the victim's port,
    the results so far and whether the first held send's position was
    readable when its receipt came; once the broker's ledger has failed."""
    producer = client.create_producer(topic, batching_enabled=False, send_timeout_millis=300_000)
    for data in sent[:10]:
        producer.send(data)
    port = int(cluster.info[victim]["grpc"].rsplit(":", 1)[1])
    cluster.kill9(victim)
    results: list = []
    readable: list[bool | Exception] = []

    def answered(res: Result, msg_id: MessageId | None) -> None:
        if msg_id is not None and Result.Ok not in results:
            # The first receipt of a held send: its position is readable by
            # now (the broker recorded the failed ledger's close before it).
            try:
                last = admin.topics.stats_internal(topic)["lastConfirmedEntry"]
                readable.append(msg_id.position <= tuple(int(p) for p in last.split(":")))
            except Exception as exc:  # shown by the assertion on ``readable``
                readable.append(exc)
        results.append(res)

    for data in sent[10:]:
        producer.send_async(data, answered)
    # The broker's writer failed and it is trying to recover the ledger.
    wait_for(lambda: broker_logged(cluster, "replacing failed ledger"), 30, "the ledger to fail")
    return producer, port, results, readable


def back_and_stored(
    cluster: BookieCluster, admin: Admin, topic: str, held: Held, victim: int
) -> list[dict]:
    """Bookie ``victim`` back on its port: every send held since
    ``sends_held`` succeeds. The topic's ledgers (stats-internal rows, read
    before a subscription consumes them: then they may go)."""
    producer, port, results, readable = held
    cluster.start(victim, port=port)
    cluster.wait_ready(victim)
    producer.flush()
    assert results and results == [Result.Ok] * len(results)
    assert readable == [True]
    return list(admin.topics.stats_internal(topic)["ledgers"])


@pytest.mark.parametrize("dedup", [False, True], ids=["plain", "dedup"])
@pytest.mark.parametrize("bookies", [1, 2], ids=["1-1-1", "2-2-2"])
def test_sends_that_meet_a_lost_bookie_are_stored_in_a_new_ledger_when_it_is_back(
    tmp_path, bookies, dedup
):
    """A bookie of a topic's ensemble is killed with none to replace it; the
    sends made meanwhile fail in that ledger, and the broker holds them while
    it retries to recover it. The bookie comes back on its port: the ledger
    is closed, a new one opened, and the held sends stored there: every
    send succeeds, in order, none twice. With 2/2/2 the other bookie had
    stored some of them (past the LAC): recovery keeps those in the failed
    ledger, and they are answered from there, not stored again."""
    cluster, url = on_bookies(tmp_path, bookies, hold_s=60, dedup=dedup)
    try:
        topic = "persistent://public/default/lost-bookie"
        sent = [f"m{i}".encode() for i in range(300)]
        with Client(url) as client, Admin(url) as admin:
            victim = bookies - 1
            held = sends_held(cluster, client, admin, topic, sent, victim)
            assert held[2] == []  # held, not failed
            ledgers = back_and_stored(cluster, admin, topic, held, victim)
            assert len(held[2]) == 290
        assert len(ledgers) == 2 and sum(row["entries"] for row in ledgers) == 300
        if bookies == 2:
            assert ledgers[0]["entries"] > 10  # some held sends were in the failed ledger
        assert consume_all(url, topic, 300) == sent
    finally:
        cluster.stop_all()


@pytest.mark.parametrize(
    ("ending", "dedup"),
    [("hold", False), ("hold", True), ("unload", False)],
    ids=["past-the-hold", "past-the-hold-dedup", "unloaded"],
)
def test_held_sends_failed_back_to_the_producer_are_resent_until_stored(tmp_path, ending, dedup):
    """Held sends fail back to the producer, ending its stream: past
    managed_ledger_failed_add_hold_seconds with PersistenceError, or, when
    the topic is unloaded meanwhile, with a retryable error (not
    PersistenceError). Either way the producer reconnects and resends what
    has no receipt, as Pulsar's clients do, until a ledger takes it once the
    bookie is back: in order, once."""
    cluster, url = on_bookies(tmp_path, 1, hold_s=1 if ending == "hold" else 60, dedup=dedup)
    try:
        topic = f"persistent://public/default/held-then-{ending}"
        sent = [f"m{i}".encode() for i in range(60)]
        with Client(url) as client, Admin(url) as admin:
            held = sends_held(cluster, client, admin, topic, sent, 0)
            if ending == "hold":
                wait_for(lambda: broker_logged(cluster, "adds held for"), 30, "the hold to run out")
            else:
                admin.namespaces.unload("public/default")
            assert held[2] == []  # resent by the producer, not failed to the application
            ledgers = back_and_stored(cluster, admin, topic, held, 0)
            assert len(held[2]) == 50
        assert sum(row["entries"] for row in ledgers) == 60
        assert consume_all(url, topic, 60) == sent
    finally:
        cluster.stop_all()
