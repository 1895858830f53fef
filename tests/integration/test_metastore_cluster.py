"""A three-node metastore cluster on real processes: failover, restart, sessions, watches."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from metastore.client import (
    BadVersionError,
    CompactedError,
    Compare,
    InvalidKeyError,
    MetastoreClient,
    MetastoreError,
    MetastoreUnavailableError,
    Op,
    SessionExpiredError,
    ValueTooLargeError,
)
from tests.harness import MetastoreCluster, async_wait_for

FAST = [
    "election_timeout_min_ms=300",
    "election_timeout_max_ms=600",
    "session_check_interval_ms=100",
    "max_watches_per_connection=2",
    "watch_history_events=100",
]


@pytest.fixture
def ms_cluster(tmp_path: Path) -> Iterator[MetastoreCluster]:
    c = MetastoreCluster(tmp_path, 3, [*FAST, "log_compaction_min_entries=200"])
    c.start_all()
    yield c
    c.stop_all()


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


async def leader_of(
    cluster: MetastoreCluster, client: MetastoreClient, timeout_s: float = 20
) -> str:
    async def find() -> str | None:
        for node_id in list(cluster.procs):
            try:
                st = await client.status(cluster.address(node_id))
            except Exception:
                continue
            if st.is_leader:
                return node_id
        return None

    return str(await async_wait_for(find, timeout_s, "a metastore leader"))


def test_cas_writers_lose_nothing_and_never_both_win_when_the_leader_is_killed(ms_cluster):
    async def main() -> None:
        key = "/test/cas"
        acked: list[tuple[str, int]] = []
        stop = asyncio.Event()

        async def writer(name: str) -> None:
            client = MetastoreClient(ms_cluster.addresses, timeout_s=15)
            n = 0
            deadline = time.monotonic() + 60
            while not stop.is_set() and time.monotonic() < deadline:
                try:
                    stat = await client.get(key)
                    version = -1 if stat is None else stat.version
                    old = b"" if stat is None else stat.value
                    token = f"{name}{n}"
                    new_version = await client.put(
                        key, old + token.encode() + b",", expected_version=version
                    )
                    acked.append((token, new_version))
                    n += 1
                except (BadVersionError, MetastoreUnavailableError):
                    continue
            await client.close()

        tasks = [asyncio.create_task(writer(w)) for w in ("a", "b")]
        probe = MetastoreClient(ms_cluster.addresses)
        await async_wait_for(lambda: len(acked) >= 40, 30, "40 acknowledged writes")
        leader = await leader_of(ms_cluster, probe)
        before_kill = len(acked)
        ms_cluster.kill9(leader)
        await async_wait_for(
            lambda: len(acked) >= before_kill + 40, 40, "40 more writes after the leader died"
        )
        stop.set()
        await asyncio.gather(*tasks)

        stat = await probe.get(key)
        assert stat is not None
        stored = stat.value.decode().rstrip(",").split(",")
        assert len(stored) == len(set(stored)), "a write was applied twice"
        missing = [t for t, _ in acked if t not in set(stored)]
        assert not missing, f"acknowledged writes lost: {missing}"
        versions = [v for _, v in acked]
        assert len(versions) == len(set(versions)), "two writers won the same expected version"
        assert stat.version == len(stored) - 1
        await probe.close()

    run(main())


def test_restart_of_all_nodes_keeps_state_and_a_compacted_past_follower_catches_up(ms_cluster):
    async def main() -> None:
        client = MetastoreClient(ms_cluster.addresses)
        for i in range(50):
            await client.put(f"/test/r/{i:03d}", str(i).encode())
        leader = await leader_of(ms_cluster, client)
        follower = next(i for i in ms_cluster.ids if i != leader)
        ms_cluster.stop(follower)
        # Enough writes for the others to compact their logs (log_compaction_min_entries=200).
        for i in range(50, 500):
            await client.put(f"/test/r/{i:03d}", str(i).encode())
        before = (await client.status(ms_cluster.address(leader))).revision
        live_dirs = [ms_cluster.data_dir / f"node{i}" / "data" for i in ms_cluster.procs]
        await async_wait_for(
            lambda: all((d / "raft.dump").exists() for d in live_dirs), 30, "log compaction"
        )
        ms_cluster.start(follower)
        ms_cluster.wait_ready(follower)

        async def caught_up() -> bool:
            try:
                st = await client.status(ms_cluster.address(follower))
            except Exception:
                return False
            return st.revision == before

        await async_wait_for(caught_up, 30, "the follower to catch up from a snapshot")
        await client.close()

        # Stop everything (SIGTERM), then start everything again.
        ms_cluster.stop_all()
        ms_cluster.start_all()
        client = MetastoreClient(ms_cluster.addresses)
        leader = await leader_of(ms_cluster, client)
        st = await client.status(ms_cluster.address(leader))
        assert st.revision == before
        records, revision = await client.list_prefix("/test/r/")
        assert revision == before
        assert [r.value for r in records] == [str(i).encode() for i in range(500)]
        await client.close()

    run(main())


def test_sessions_expire_without_keepalive_and_survive_a_leader_change(ms_cluster):
    async def main() -> None:
        client = MetastoreClient(ms_cluster.addresses)
        healthy = await client.create_session(3000)
        await client.put("/test/s/healthy", b"", session_id=healthy.id)
        leader = await leader_of(ms_cluster, client)
        ms_cluster.kill9(leader)
        await leader_of(ms_cluster, client)
        # Two TTLs after the change, the healthy session and its key are still there.
        t0 = time.monotonic()
        while time.monotonic() - t0 < 6:
            assert await client.get("/test/s/healthy") is not None
            assert not healthy.lost
            await asyncio.sleep(0.5)

        async def terms() -> set[int]:
            return {(await client.status(ms_cluster.address(i))).term for i in ms_cluster.procs}

        dying = await client.create_session(1000)
        await client.put("/test/s/dying", b"", session_id=dying.id)
        assert dying._task is not None
        terms_before = await terms()
        dying._task.cancel()  # stop keeping it alive, as a crashed owner would
        stopped = time.monotonic()

        async def gone() -> bool:
            return await client.get("/test/s/dying") is None

        try:
            await async_wait_for(gone, 10, "the ephemeral key to go")
        except AssertionError as exc:
            logs = {i: ms_cluster.log(i)[-1500:] for i in ms_cluster.procs}
            raise AssertionError(f"{exc}; session {dying.id}; node logs: {logs}") from None
        # TTL (1 s) + one check interval (0.1 s) + the last keep-alive period (TTL/3) + slack;
        # an election meanwhile (a starved node on a loaded machine) grants a
        # fresh TTL after the new leader's no-op (at most 2 s).
        bound = 1.0 + 0.1 + 0.34 + 0.5
        if await terms() != terms_before:
            bound += 2.0 + 1.0
        assert time.monotonic() - stopped < bound
        with pytest.raises(SessionExpiredError):
            await client.put("/test/s/late", b"", session_id=dying.id)
        await healthy.close()
        await client.close()

    run(main())


def test_a_watcher_sees_every_event_once_in_order_across_a_failover(ms_cluster):
    async def main() -> None:
        client = MetastoreClient(ms_cluster.addresses)
        await client.put("/test/w/start", b"")
        watch = client.watch("/test/w/k")
        await watch.started()
        writer = MetastoreClient(ms_cluster.addresses, timeout_s=15)
        written: list[bytes] = []

        async def write(i: int) -> None:
            await writer.put(f"/test/w/k{i % 3}", str(i).encode())
            written.append(str(i).encode())

        for i in range(30):
            await write(i)
        ms_cluster.kill9(await leader_of(ms_cluster, client))
        for i in range(30, 60):
            await write(i)
        await writer.delete("/test/w/k0")

        seen = []
        async with asyncio.timeout(30):
            async for event in watch:
                seen.append(event)
                if event.type == "DELETE":
                    break
        await watch.close()
        puts = [e.value for e in seen if e.type == "PUT"]
        assert puts == written
        revisions = [e.revision for e in seen]
        assert revisions == sorted(set(revisions))
        assert seen[-1].key == "/test/w/k0"
        await writer.close()
        await client.close()

    run(main())


def test_bad_input_gets_typed_errors_and_changes_nothing(ms_cluster):
    async def main() -> None:
        client = MetastoreClient(ms_cluster.addresses)
        await client.put("/test/b/k", b"v")
        leader = await leader_of(ms_cluster, client)
        before = (await client.status(ms_cluster.address(leader))).revision
        for bad_key in ("relative", "/a//b", "/a/../b", "/", ""):
            with pytest.raises(InvalidKeyError):
                await client.put(bad_key, b"")
        with pytest.raises(ValueTooLargeError):
            await client.put("/test/b/big", b"x" * (1024 * 1024 + 1))
        with pytest.raises(BadVersionError):
            await client.put("/test/b/k", b"w", expected_version=7)
        with pytest.raises(BadVersionError):
            await client.delete("/test/b/k", expected_version=7)
        with pytest.raises(SessionExpiredError):
            await client.put("/test/b/e", b"", session_id=424242)
        with pytest.raises(SessionExpiredError):
            await client.txn([], [Op("/test/b/t1", b"1"), Op("/test/b/t2", b"", 424242)])
        ok, _ = await client.txn([Compare("/test/b/k", version=3)], [Op("/test/b/k", b"x")])
        assert not ok
        assert (await client.status(ms_cluster.address(leader))).revision == before
        assert (await client.get("/test/b/k")).value == b"v"  # type: ignore[union-attr]
        assert await client.get("/test/b/t1") is None

        # At most max_watches_per_connection (2 here) watches per connection.
        watches = [client.watch("/test/b/") for _ in range(3)]
        await watches[0].started()
        await watches[1].started()
        with pytest.raises(MetastoreError, match="max_watches_per_connection"):
            await watches[2].started()
        for w in watches:
            await w.close()

        ok, revision = await client.txn(
            [Compare("/test/b/k", value=b"v"), Compare("/test/b/new", version=-1)],
            [Op("/test/b/k", None), Op("/test/b/new", b"n")],
        )
        assert ok and revision == before + 2
        assert await client.get("/test/b/k") is None
        await client.close()

    run(main())


def test_sequential_synchronous_writes_are_each_committed_and_readable(ms_cluster):
    """Each write is answered once committed, so the next one reads it. (Their
    latency, which pysyncobj's defaults would hold to the next 0.1 s append
    period, is measured by benchmarks/metastore_cluster.py, not asserted.)"""

    async def main() -> None:
        client = MetastoreClient(ms_cluster.addresses)
        await client.put("/test/p/warm", b"")
        for i in range(20):
            await client.put(f"/test/p/{i}", str(i).encode())
            stat = await client.get(f"/test/p/{i}")
            assert stat is not None and stat.value == str(i).encode()
        records, _ = await client.list_prefix("/test/p/")
        assert len(records) == 21
        await client.close()

    run(main())


def test_a_watch_resumes_from_a_kept_revision_and_hears_compacted_for_an_older_one(ms_cluster):
    async def main() -> None:
        client = MetastoreClient(ms_cluster.addresses)
        for i in range(150):  # watch_history_events=100: the first 50 are compacted away
            await client.put(f"/test/h/{i % 5}", str(i).encode())
        _, now = await client.list_prefix("/test/h/")
        old = client.watch("/test/h/", from_revision=now - 149)
        with pytest.raises(CompactedError, match="read the current state"):
            await old.__anext__()
        await old.close()
        kept = client.watch("/test/h/", from_revision=now - 9)
        values = []
        async with asyncio.timeout(10):
            async for event in kept:
                values.append(event.value)
                if event.revision == now:
                    break
        await kept.close()
        assert values == [str(i).encode() for i in range(140, 150)]
        await client.close()

    run(main())
