"""AutoRecovery on real processes: a metastore and five bookies, each
running the replication worker and competing for the auditor role."""

from __future__ import annotations

import asyncio
import shutil
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from bookie.ledger_client import LedgerClient
from bookie.ledger_metadata import CLOSED, BKError, LedgerMetadata, master_key
from bookie.replication_rules import entries_held, fragments
from bookie.replication_tasks import tasks
from client.admin import Admin
from client.exceptions import NotFound, PreconditionFailed
from metastore.client import MetastoreClient
from protos import metadata_paths
from tests.harness import BookieCluster, wait_for

FAST = [
    "session_ttl_ms=2000",
    "lost_bookie_recovery_delay_s=1",
    "auditor_poll_interval_ms=200",
    "open_ledger_rereplication_grace_period_ms=3000",
    "disk_check_interval_ms=300",
]


@pytest.fixture
def bookies5(tmp_path: Path) -> Iterator[BookieCluster]:
    c = BookieCluster(tmp_path, 5, bookie_settings=FAST).start_all()
    yield c
    c.stop_all()


def payload(ledger_id: int, i: int) -> bytes:
    return f"{ledger_id}:{i}:".encode() * 20


async def until(predicate, timeout_s: float, what: str):  # type: ignore[no-untyped-def]
    """Await ``predicate()`` until it is truthy; fail after the deadline."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = await predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")
        await asyncio.sleep(0.1)


async def write_ledger(client: LedgerClient, n: int, close: bool = True, quorums=(3, 2, 2)):  # type: ignore[no-untyped-def]
    writer = await client.create_ledger(*quorums)
    ids = await asyncio.gather(*(writer.add(payload(writer.ledger_id, i)) for i in range(n)))
    assert sorted(ids) == list(range(n))
    if close:
        await writer.close()
    return writer


async def missing_replicas(client: LedgerClient, md: LedgerMetadata) -> list[tuple[int, str, int]]:
    """(fragment first, bookie, entries it lacks) for every closed fragment."""
    out = []
    for fragment in fragments(md):
        if fragment.open:
            continue
        await client.resolve(list(fragment.ensemble))
        for index, bookie in enumerate(fragment.ensemble):
            ids = list(entries_held(fragment, index, md.ensemble_size, md.write_quorum))
            if not ids:
                continue
            try:
                sizes = await client.connection(bookie).entry_sizes(md.ledger_id, ids)
            except Exception:  # a dead bookie lacks them all
                sizes = {}
            if len(sizes) < len(ids):
                out.append((fragment.first, bookie, len(ids) - len(sizes)))
    return out


async def auditor(ms: MetastoreClient) -> str | None:
    stat = await ms.get(metadata_paths.AUDITOR)
    return stat.value.decode() if stat is not None else None


async def ledgers_on(client: LedgerClient, bookie: str):  # type: ignore[no-untyped-def]
    """An open writer and three closed ledgers whose ensembles hold ``bookie``."""
    ledgers: list[int] = []
    open_writer = None
    for _ in range(30):  # E=3 of 5 bookies: each ledger holds it with p = 0.6
        writer = await write_ledger(client, 300, close=open_writer is not None)
        if bookie not in writer.ensemble:
            if open_writer is None:
                await writer.close()
            continue
        if open_writer is None:
            open_writer = writer
        else:
            ledgers.append(writer.ledger_id)
        if len(ledgers) == 3:
            break
    return open_writer, ledgers


def test_a_lost_bookie_is_re_replicated_so_a_second_loss_loses_nothing(bookies5):
    """The victim is the auditor itself: another bookie is elected, finds the
    loss, and the workers copy every replica the victim held (an idle open
    ledger is fenced after the grace period first); then a second bookie
    dies and every entry is still read."""

    async def main() -> None:
        ms = MetastoreClient(bookies5.metastore_address)
        client = LedgerClient(ms)
        victim = await until(lambda: auditor(ms), 30, "an auditor to be elected")
        open_writer, ledgers = await ledgers_on(client, victim)
        assert open_writer is not None and len(ledgers) == 3
        all_ids = [*ledgers, open_writer.ledger_id]

        bookies5.kill9(bookies5.index_of(victim))
        new_auditor = await until(
            lambda: _other_auditor(ms, victim), 30, "another bookie to become the auditor"
        )
        assert new_auditor != victim

        async def drained() -> bool:
            if await tasks(ms):
                return False
            mds = [await client.metadata(x) for x in all_ids]
            return all(victim not in {b for _, e in md.ensembles for b in e} for md in mds)

        await until(drained, 90, "every replica on the lost bookie to be copied")
        fenced = await client.metadata(open_writer.ledger_id)
        assert fenced.state == CLOSED and fenced.last_entry_id == 299
        with pytest.raises(BKError):
            await open_writer.add(b"after the fence")
        for ledger_id in all_ids:
            md = await client.metadata(ledger_id)
            assert await missing_replicas(client, md) == [], ledger_id

        # A second loss: the bookie that took the first ledger's first replica.
        md = await client.metadata(ledgers[0])
        second = md.ensembles[0][1][0]
        bookies5.kill9(bookies5.index_of(second))
        reader = LedgerClient(ms)
        for ledger_id in all_ids:
            md = await reader.metadata(ledger_id)
            rows = await reader.read(md, 0, md.last_entry_id)
            assert [e for e, _ in rows] == list(range(300))
            assert all(p == payload(ledger_id, e) for e, p in rows)
        await reader.close()
        await client.close()
        await ms.close()

    asyncio.run(main())


async def _other_auditor(ms: MetastoreClient, victim: str) -> str | None:
    who = await auditor(ms)
    return who if who not in (None, victim) else None


def scrape(cluster: BookieCluster, i: int) -> dict[str, float]:
    """Unlabelled samples of bookie ``i``'s /metrics."""
    port = cluster.info[i]["metrics"]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#") and "{" not in line:
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


# A lost bookie is left alone for 10 minutes: what happens is the operator's doing.
ADMIN_SETTINGS = [*FAST, "lost_bookie_recovery_delay_s=600", "metrics_port=0"]


@pytest.fixture
def admin_cluster(tmp_path: Path) -> Iterator[tuple[BookieCluster, Admin]]:
    c = BookieCluster(tmp_path, 5, bookie_settings=ADMIN_SETTINGS).start_all()
    admin = Admin(c.start_broker())
    yield c, admin
    admin.close()
    c.stop_all()


async def write_ledgers(cluster: BookieCluster, n: int) -> list[int]:
    ms = MetastoreClient(cluster.metastore_address)
    client = LedgerClient(ms)
    ids = [(await write_ledger(client, 200)).ledger_id for _ in range(n)]
    await client.close()
    await ms.close()
    return ids


async def check_ledgers(
    cluster: BookieCluster, ids: list[int], gone: str, entries: int = 200
) -> None:
    """No ledger names ``gone``; every replica is in place and every entry reads back."""
    ms = MetastoreClient(cluster.metastore_address)
    client = LedgerClient(ms)
    for ledger_id in ids:
        md = await client.metadata(ledger_id)
        assert gone not in {b for _, e in md.ensembles for b in e}
        assert await missing_replicas(client, md) == []
        rows = await client.read(md, 0, md.last_entry_id)
        assert [p for _, p in rows] == [payload(ledger_id, e) for e in range(entries)]
    await client.close()
    await ms.close()


def bookie_state(admin: Admin, bookie: str) -> str | None:
    rows = {r["bookie"]: r for r in admin.bookies.list()["bookies"]}
    return rows[bookie]["state"] if bookie in rows else None


def test_decommission_and_recover_through_the_admin(admin_cluster):
    """Decommission drains a live bookie, which is forgotten once stopped; a
    bookie whose disk was wiped is refused by its cookie, `recover` restores
    its replicas, and then its id starts again on the empty disk."""
    cluster, admin = admin_cluster

    ids = asyncio.run(write_ledgers(cluster, 6))
    listed = admin.bookies.list()["bookies"]
    assert len(listed) == 5 and {r["state"] for r in listed} == {"available"}
    busiest = max(listed, key=lambda r: r["ledgers"])
    victim, victim_ledgers = busiest["bookie"], busiest["ledgers"]
    assert victim_ledgers > 0

    answer = admin.bookies.decommission(victim)
    assert answer == {"bookie": victim, "action": "decommission", "ledgers": victim_ledgers}
    # The last swap makes it "decommissioned"; its task is deleted just after.
    wait_for(
        lambda: (
            bookie_state(admin, victim) == "decommissioned"
            and admin.bookies.under_replicated() == {"count": 0, "ledgers": []}
        ),
        90,
        f"{victim} to be drained",
    )
    asyncio.run(check_ledgers(cluster, ids, victim))
    vi = cluster.index_of(victim)
    row = next(r for r in admin.bookies.list()["bookies"] if r["bookie"] == victim)
    assert row["readOnly"] and row["ledgers"] == 0  # it took no new ledger meanwhile
    cluster.stop(vi)
    wait_for(
        lambda: bookie_state(admin, victim) is None, 30, f"{victim} to be forgotten once stopped"
    )

    written = sum(
        scrape(cluster, i).get("replication_worker_NUM_ENTRIES_WRITTEN", 0) for i in cluster.procs
    )
    assert written >= 200
    leaders = [scrape(cluster, i)["magnetar_auditor_leader"] for i in cluster.procs]
    assert sorted(leaders) == [0, 0, 0, 1]

    wipe_and_recover(cluster, admin, ids)


def wipe_and_recover(cluster: BookieCluster, admin: Admin, ids: list[int]) -> None:
    """A wiped disk: the id is refused by its cookie until `recover` has
    restored its replicas; then it starts again on the empty disk."""
    listed = {r["bookie"]: r["ledgers"] for r in admin.bookies.list()["bookies"]}
    wiped = max(listed, key=lambda b: listed[b])
    wi = cluster.index_of(wiped)
    cluster.stop(wi)
    shutil.rmtree(cluster.bookie_dir(wi) / "data")
    cluster.bookie_settings = [*ADMIN_SETTINGS, f"bookie_id={wiped}"]
    cluster.start(wi)
    assert cluster.procs[wi].wait(timeout=60) != 0
    assert "not that bookie's" in cluster.log(wi)
    cluster.procs.pop(wi)
    with pytest.raises(PreconditionFailed, match=r"would leave 2 writable bookie\(s\)"):
        admin.bookies.decommission(next(b for b in listed if b != wiped))  # 3 writable left
    answer = admin.bookies.recover(wiped)
    assert answer["action"] == "recover" and answer["ledgers"] == listed[wiped]
    wait_for(lambda: bookie_state(admin, wiped) is None, 90, f"{wiped}'s replicas to be restored")
    asyncio.run(check_ledgers(cluster, ids, wiped))
    cluster.start(wi)
    cluster.wait_ready(wi)
    assert cluster.info[wi]["bookie_id"] == wiped
    wait_for(lambda: bookie_state(admin, wiped) == "available", 30, f"{wiped} to serve again")


def test_retiring_is_refused_when_it_would_strand_replicas(admin_cluster):
    cluster, admin = admin_cluster
    with pytest.raises(NotFound, match="there is no bookie 'bookie-nope'"):
        admin.bookies.decommission("bookie-nope")
    live = admin.bookies.list()["bookies"][0]["bookie"]
    with pytest.raises(PreconditionFailed, match="--force"):
        admin.bookies.recover(live)

    async def five_wide() -> None:
        ms = MetastoreClient(cluster.metastore_address)
        client = LedgerClient(ms)
        writer = await client.create_ledger(5, 2, 2)
        await writer.add(b"x")
        await writer.close()
        await client.close()
        await ms.close()

    asyncio.run(five_wide())
    with pytest.raises(PreconditionFailed, match=r"would leave 4 writable bookie\(s\)"):
        admin.bookies.decommission(live)
    assert admin.bookies.list()["bookies"][0]["state"] == "available"  # nothing changed
    with pytest.raises(PreconditionFailed, match="would leave 4"):
        admin.bookies.recover(live, force=True)


def test_a_worker_killed_mid_copy_leaves_its_task_to_another(tmp_path: Path):
    """E=3, Qw=3: whichever bookie works on the task when it is killed, one
    full replica is left to copy from."""
    slow = [
        *ADMIN_SETTINGS,
        "rereplication_rate_bytes_per_s=20000",
        "rereplication_entry_batch_size=20",
    ]
    cluster = BookieCluster(tmp_path, 5, bookie_settings=slow).start_all()
    admin = Admin(cluster.start_broker())
    try:

        async def one_ledger() -> tuple[int, list[str]]:
            ms = MetastoreClient(cluster.metastore_address)
            client = LedgerClient(ms)
            writer = await write_ledger(client, 1000, quorums=(3, 3, 2))
            await client.close()
            await ms.close()
            return writer.ledger_id, writer.ensemble

        ledger_id, ensemble = asyncio.run(one_ledger())
        lost = ensemble[0]
        cluster.stop(cluster.index_of(lost))
        admin.bookies.recover(lost)

        def copying() -> str:
            rows = admin.bookies.under_replicated()["ledgers"]
            worker = rows[0]["worker"] if rows else ""
            if worker and scrape(cluster, cluster.index_of(worker)).get(
                "replication_worker_NUM_ENTRIES_WRITTEN", 0
            ):
                return str(worker)
            return ""

        first = wait_for(copying, 60, "a worker to be copying")
        cluster.kill9(cluster.index_of(first))
        if first in ensemble:  # it held a replica too: that one goes as well
            admin.bookies.recover(first, force=True)  # its registration outlives it by a TTL
        workers = {first}

        def finished() -> bool:
            rows = admin.bookies.under_replicated()["ledgers"]
            workers.update(r["worker"] for r in rows if r["worker"])
            return not rows

        wait_for(finished, 120, "another worker to finish the task")
        assert len(workers) >= 2, workers
        asyncio.run(check_ledgers(cluster, [ledger_id], lost, entries=1000))
        asyncio.run(check_ledgers(cluster, [ledger_id], first, entries=1000))
    finally:
        admin.close()
        cluster.stop_all()


def test_the_periodic_check_refills_a_replica_a_live_bookie_lost(tmp_path: Path):
    settings = [*ADMIN_SETTINGS, "auditor_periodic_check_interval_s=2"]
    cluster = BookieCluster(tmp_path, 3, bookie_settings=settings).start_all()
    try:

        async def main() -> None:
            ms = MetastoreClient(cluster.metastore_address)
            client = LedgerClient(ms)
            writer = await write_ledger(client, 200)
            md = await client.metadata(writer.ledger_id)
            holder = md.ensembles[0][1][1]
            assert await client.connection(holder).delete_ledger(md.ledger_id, master_key(b""))
            assert await missing_replicas(client, md) != []

            async def refilled() -> bool:
                return await missing_replicas(client, md) == [] and not await tasks(ms)

            await until(refilled, 60, "the auditor to find the hole and a worker to fill it")
            after = await client.metadata(writer.ledger_id)
            assert after.ensembles == md.ensembles  # filled in place: no bookie was replaced
            await client.close()
            await ms.close()

        asyncio.run(main())
        asyncio.run(check_ledgers(cluster, [], "none"))
    finally:
        cluster.stop_all()
