"""Replicated ledgers on real processes: one metastore, 3-4 bookies."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bookie.entry_runs import find_in_run
from bookie.ledger_client import LedgerClient
from bookie.ledger_metadata import CLOSED, BKError, LedgerFencedError, LedgerMetadata
from bookie.quorum import write_set
from bookie.storage import RUNS_CF, entry_key
from metastore.client import MetastoreClient
from protos.digest import RECORD_HEADER
from tests.harness import ROOT, BookieCluster


@pytest.fixture
def bookies4(tmp_path: Path) -> Iterator[BookieCluster]:
    c = BookieCluster(tmp_path, 4).start_all()
    yield c
    c.stop_all()


@pytest.fixture
def bookies3(tmp_path: Path) -> Iterator[BookieCluster]:
    c = BookieCluster(tmp_path, 3).start_all()
    yield c
    c.stop_all()


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


def payload(i: int) -> bytes:
    return f"entry-{i}".encode() * 8


async def write_all(writer, n: int, window: int = 200, on_confirmed=None) -> list[int]:  # type: ignore[no-untyped-def]
    confirmed: list[int] = []
    inflight: set[asyncio.Future] = set()
    for i in range(n):
        inflight.add(writer.add(payload(i)))
        if len(inflight) >= window:
            done, inflight = await asyncio.wait(inflight, return_when=asyncio.FIRST_COMPLETED)
            for f in done:
                confirmed.append(f.result())
                if on_confirmed is not None:
                    on_confirmed(len(confirmed))
    for f in asyncio.as_completed(list(inflight)):
        confirmed.append(await f)
    return confirmed


def start_writer(
    cluster: BookieCluster, n: int, last: int | None = None
) -> tuple[subprocess.Popen, int, list[int]]:
    """A 3/2/2 writer process (tests/ledger_writer.py) and its first ``n``
    confirmed ids; with ``last``, entries 0..``last`` only: its ``n`` = ``last
    + 1`` confirmed ids, once it said ``done`` (it adds nothing more)."""
    args = [cluster.metastore_address, "3", "2", "2", *([] if last is None else [str(last)])]
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.ledger_writer", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    ledger_id = int(proc.stdout.readline().split()[1])
    confirmed: list[int] = []
    while len(confirmed) < n:  # bounded: the writer confirms continuously
        line = proc.stdout.readline()
        assert line, "the writer exited early"
        confirmed.append(int(line.split()[1]))
    if last is not None:
        assert proc.stdout.readline().strip() == "done"
    return proc, ledger_id, confirmed


def test_a_bookie_killed_during_10000_adds_is_replaced_and_nothing_is_lost(bookies4):
    async def main() -> None:
        ms = MetastoreClient(bookies4.metastore_address)
        client = LedgerClient(ms)
        writer = await client.create_ledger(3, 2, 2)
        victim = bookies4.index_of(writer.ensemble[1])
        killed: list[int] = []

        def maybe_kill(n: int) -> None:
            if n >= 3000 and not killed:
                killed.append(n)
                bookies4.kill9(victim)

        confirmed = await write_all(writer, 10_000, on_confirmed=maybe_kill)
        assert killed, "the bookie was never killed"
        assert sorted(confirmed) == list(range(10_000))
        assert writer.ensemble_changes >= 1
        assert bookies4.info[victim]["bookie_id"] not in writer.ensemble
        await writer.close()

        reader = LedgerClient(ms)
        md = await reader.metadata(writer.ledger_id)
        assert md.state == CLOSED and md.last_entry_id == 9999
        assert len(md.ensembles) >= 2
        rows = await reader.read(md, 0, 9999)
        assert [e for e, _ in rows] == list(range(10_000))
        assert all(p == payload(e) for e, p in rows)
        await reader.close()
        await client.close()
        await ms.close()

    run(main())


def test_a_killed_writer_is_recovered_with_every_confirmed_entry_and_fenced(bookies3):
    proc, ledger_id, confirmed = start_writer(bookies3, 1000)
    proc.kill()
    proc.wait(timeout=10)
    assert proc.stdout is not None
    confirmed += [int(line.split()[1]) for line in proc.stdout.read().splitlines()]

    async def main() -> None:
        ms = MetastoreClient(bookies3.metastore_address)
        client = LedgerClient(ms)
        md = await client.open_with_recovery(ledger_id)
        assert md.state == CLOSED
        assert md.last_entry_id >= max(confirmed)
        rows = dict(await client.read(md, 0, md.last_entry_id))
        assert list(rows) == list(range(md.last_entry_id + 1))
        missing = [e for e in confirmed if e not in rows]
        assert not missing, f"confirmed entries lost: {missing[:10]}"
        assert all(rows[e] == f"entry-{e}".encode() for e in rows)
        assert md.length == sum(len(p) for p in rows.values())  # from sizes, not payloads
        # Recovering again changes nothing.
        again = await client.open_with_recovery(ledger_id)
        assert again.last_entry_id == md.last_entry_id
        await client.close()
        await ms.close()

    run(main())


def test_a_live_writer_gets_ledger_fenced_after_another_client_recovers(bookies3):
    async def main() -> None:
        ms = MetastoreClient(bookies3.metastore_address)
        owner = LedgerClient(ms)
        writer = await owner.create_ledger(3, 2, 2)
        await write_all(writer, 50)
        thief = LedgerClient(ms)
        md = await thief.open_with_recovery(writer.ledger_id)
        assert md.state == CLOSED and md.last_entry_id == 49
        with pytest.raises(LedgerFencedError):
            await writer.add(b"too late")
        rows = await thief.read(md, 0, 49)
        assert [p for _, p in rows] == [payload(i) for i in range(50)]
        await thief.close()
        await owner.close()
        await ms.close()

    run(main())


def test_a_corrupt_replica_is_detected_and_read_from_another(bookies3, caplog):
    async def write() -> LedgerMetadata:
        ms = MetastoreClient(bookies3.metastore_address)
        client = LedgerClient(ms)
        writer = await client.create_ledger(2, 2, 2)
        await write_all(writer, 20)
        await writer.close()
        md = await client.metadata(writer.ledger_id)
        await client.close()
        await ms.close()
        return md

    md = run(write())
    # Entry 5 is asked from the first bookie of its write set first: corrupt it there.
    first = md.ensembles[0][1][(5 % 2)]
    i = bookies3.index_of(first)
    bookies3.stop(i)
    from rocksdict import Options, Rdict

    path = str(bookies3.bookie_dir(i) / "data" / "entries")
    families = {"ledgers": Options(raw_mode=True), RUNS_CF: Options(raw_mode=True)}
    db = Rdict(path, Options(raw_mode=True), column_families=families)
    runs = db.get_column_family(RUNS_CF)
    # The writer sent the entries in order, so entry 5 is in a run: the first
    # run of the ledger whose key (its last entry) is at or above 5.
    key, value = next(iter(runs.items(from_key=entry_key(md.ledger_id, 5))))
    stored = bytes(value)  # type: ignore[arg-type]
    digest, lac, good = find_in_run(stored, 5)  # type: ignore[misc]
    record = RECORD_HEADER.pack(5, len(good), digest, lac) + good
    at = stored.find(record)
    assert at >= 0
    bad = record[: RECORD_HEADER.size] + b"X" + good[1:]  # same digest, different bytes
    runs[key] = stored[:at] + bad + stored[at + len(record) :]
    del runs
    db.close()
    bookies3.start(i)
    bookies3.wait_ready(i)

    async def read() -> list[tuple[int, bytes]]:
        ms = MetastoreClient(bookies3.metastore_address)
        client = LedgerClient(ms)
        rows = await client.read(await client.metadata(md.ledger_id), 0, 19)
        await client.close()
        await ms.close()
        return rows

    with caplog.at_level(logging.WARNING, logger="bookie.ledger_client"):
        rows = run(read())
    assert [p for _, p in rows] == [payload(e) for e in range(20)]
    assert any("entry 5" in r.message and "digest" in r.message for r in caplog.records)


def test_bookies_killed_and_restarted_lose_nothing_they_acknowledged(bookies3):
    async def write() -> tuple[int, list[int]]:
        ms = MetastoreClient(bookies3.metastore_address)
        client = LedgerClient(ms)
        writer = await client.create_ledger(3, 2, 2)
        confirmed = await write_all(writer, 3000)
        await client.close()
        await ms.close()
        return writer.ledger_id, confirmed

    ledger_id, confirmed = run(write())
    for i in range(3):
        bookies3.kill9(i)
    for i in range(3):
        bookies3.start(i)
    for i in range(3):
        bookies3.wait_ready(i)

    async def recover_and_read() -> list[tuple[int, bytes]]:
        ms = MetastoreClient(bookies3.metastore_address)
        client = LedgerClient(ms)
        md = await client.open_with_recovery(ledger_id)
        rows = await client.read(md, 0, md.last_entry_id)
        await client.close()
        await ms.close()
        return rows

    rows = run(recover_and_read())
    assert sorted(confirmed) == list(range(3000))
    assert [e for e, _ in rows] == list(range(3000))
    assert all(p == payload(e) for e, p in rows)


def test_bad_requests_to_a_bookie_change_nothing(bookies3):
    async def main() -> None:
        ms = MetastoreClient(bookies3.metastore_address)
        client = LedgerClient(ms)
        writer = await client.create_ledger(1, 1, 1, password=b"right")
        await write_all(writer, 5)
        await writer.close()
        md = await client.metadata(writer.ledger_id)
        conn = client.connection(md.ensembles[0][1][0])
        with pytest.raises(BKError, match="wrong master key"):
            await conn.delete_ledger(md.ledger_id, b"wrong key")
        rows, missing = await conn.read_entries(md.ledger_id, [0, 4, 99])
        assert [r[0] for r in rows] == [0, 4] and missing == [99]
        stats = await conn.stats()
        assert stats.ledgers >= 1 and stats.disk_free_bytes > 0 and not stats.read_only
        await client.delete_ledger(md.ledger_id)
        rows, missing = await conn.read_entries(md.ledger_id, [0, 4])
        assert rows == [] and missing == [0, 4]
        with pytest.raises(BKError, match="does not exist"):
            await client.metadata(md.ledger_id)
        await client.close()
        await ms.close()

    run(main())


def test_a_bookie_over_its_disk_threshold_turns_read_only_and_says_so(tmp_path):
    cluster = BookieCluster(
        tmp_path, 1, ["read_only_disk_usage_percent=0", "disk_check_interval_ms=100"]
    ).start_all()
    try:

        async def main() -> None:
            ms = MetastoreClient(cluster.metastore_address)
            client = LedgerClient(ms)
            assert await client.writable_bookies() == []
            with pytest.raises(BKError, match="writable"):
                await client.create_ledger(1, 1, 1)
            await client.close()
            await ms.close()

        run(main())
    finally:
        cluster.stop_all()


def test_a_broker_killed_while_producing_loses_no_acknowledged_message(bookies3):
    from client import Client, InitialPosition, MagnetarError, Timeout

    url = bookies3.start_broker("broker-a")  # ledgers 2/2/2 (the cluster default)
    acked: list[bytes] = []
    with Client(url, operation_timeout_seconds=5) as c:
        p = c.create_producer("persistent://public/default/killed-broker", send_timeout_millis=3000)
        for i in range(300):
            p.send(f"m{i}".encode())
            acked.append(f"m{i}".encode())
        bookies3.kill9_broker("broker-a")
        with pytest.raises(MagnetarError):
            for i in range(300, 400):  # bounded: the broker is gone
                p.send(f"m{i}".encode())
                acked.append(f"m{i}".encode())
    url = bookies3.start_broker("broker-b")
    with Client(url) as c:
        sub = c.subscribe(
            "persistent://public/default/killed-broker",
            "audit",
            initial_position=InitialPosition.Earliest,
        )
        got: list[bytes] = []
        while len(got) < 1000:
            try:
                got.append(sub.receive(timeout_millis=3000).data())
            except Timeout:
                break
    assert got[: len(acked)] == acked


def test_a_bookie_id_with_a_registered_cookie_and_an_empty_data_dir_is_refused(bookies3):
    bookie_id = bookies3.info[0]["bookie_id"]
    bookies3.stop(0)
    empty = bookies3.data_dir / "replaced-disk"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "broker.cli",
            "bookie",
            "--metastore",
            bookies3.metastore_address,
            "--data-dir",
            str(empty),
            "--port",
            "0",
            "--metrics-port",
            "-1",
            "--set",
            f"bookie_id={bookie_id}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode != 0
    assert "is not that bookie's" in proc.stderr + proc.stdout
    # Its own data dir still starts.
    bookies3.start(0)
    bookies3.wait_ready(0)


def test_re_adding_an_identical_entry_is_idempotent(bookies3):
    from bookie.ledger_metadata import master_key
    from protos import bookie_pb2
    from protos.digest import encode_record, entry_digest

    async def main() -> None:
        ms = MetastoreClient(bookies3.metastore_address)
        client = LedgerClient(ms)
        writer = await client.create_ledger(1, 1, 1, password=b"k")
        await write_all(writer, 3)
        conn = client.connection(writer.ensemble[0])
        before, _ = await conn.read_entries(writer.ledger_id, [0, 1, 2])
        eid, lac, digest, data = before[1]
        assert digest == entry_digest(writer.ledger_id, eid, lac, data)
        req = bookie_pb2.AddRequest(
            ledger_id=writer.ledger_id,
            master_key=master_key(b"k"),
            entries=encode_record(eid, lac, digest, data),
        )
        for _ in range(2):
            resp = await conn.send_add(req)
            assert resp.error.code == 0
        after, missing = await conn.read_entries(writer.ledger_id, [0, 1, 2])
        assert after == before and not missing
        await client.close()
        await ms.close()

    run(main())


def test_a_hung_bookie_is_replaced_after_the_add_timeout(bookies4):
    import os
    import signal

    from bookie.ledger_client import LedgerClientSettings

    async def main() -> None:
        ms = MetastoreClient(bookies4.metastore_address)
        client = LedgerClient(ms, LedgerClientSettings(timeout_s=1.0))
        writer = await client.create_ledger(3, 2, 2)
        victim = bookies4.index_of(writer.ensemble[0])
        pid = bookies4.procs[victim].pid
        stopped: list[int] = []

        def maybe_stop(n: int) -> None:
            if n >= 500 and not stopped:
                stopped.append(n)
                os.kill(pid, signal.SIGSTOP)  # hangs: the stream stays open

        try:
            confirmed = await write_all(writer, 2000, on_confirmed=maybe_stop)
        finally:
            os.kill(pid, signal.SIGCONT)
        assert stopped
        assert sorted(confirmed) == list(range(2000))
        assert bookies4.info[victim]["bookie_id"] not in writer.ensemble
        await writer.close()
        md = await client.metadata(writer.ledger_id)
        rows = await client.read(md, 0, 1999)
        assert [p for _, p in rows] == [payload(e) for e in range(2000)]
        await client.close()
        await ms.close()

    run(main())


def test_recovery_replaces_a_bookie_that_died_with_the_writer(bookies4):
    # The writer adds entries 0..599 and nothing more: the LAC travels with the
    # adds, so no bookie's LAC reaches 599, and recovery writes 599 back to its
    # write set (quorum.write_set: indexes 599 % 3 and 600 % 3), which holds
    # the bookie that dies.
    last = 599
    proc, ledger_id, confirmed = start_writer(bookies4, last + 1, last=last)
    assert confirmed == list(range(last + 1))

    async def ensemble() -> list[str]:
        ms = MetastoreClient(bookies4.metastore_address)
        md = await LedgerClient(ms).metadata(ledger_id)
        await ms.close()
        return md.ensembles[-1][1]

    members = run(ensemble())
    dead = members[write_set(last, 3, 2)[0]]
    proc.kill()
    bookies4.kill9(bookies4.index_of(dead))  # dies with the writer
    proc.wait(timeout=10)

    async def main() -> None:
        ms = MetastoreClient(bookies4.metastore_address)
        client = LedgerClient(ms)
        md = await client.open_with_recovery(ledger_id)
        assert md.state == CLOSED and md.last_entry_id == last
        rows = dict(await client.read(md, 0, md.last_entry_id))
        assert rows == {e: f"entry-{e}".encode() for e in confirmed}
        # Entry 599 was past the LAC: written back, to a replacement of the dead bookie.
        assert len(md.ensembles) > 1 and dead not in md.ensembles[-1][1]
        await client.close()
        await ms.close()

    run(main())


def test_a_busy_writer_sends_what_piles_up_as_one_request_and_cuts_big_ones(bookies3):
    """Adds made while every bookie has max_add_requests_in_flight requests
    unanswered wait, and go as one request when an answer comes; requests
    stay under max_add_request_bytes."""
    import os
    import signal

    from bookie.ledger_client import LedgerClientSettings

    async def main() -> None:
        ms = MetastoreClient(bookies3.metastore_address)
        settings = LedgerClientSettings(max_add_requests_in_flight=2)
        client = LedgerClient(ms, settings)
        writer = await client.create_ledger(1, 1, 1)
        conn = client.connection(writer.ensemble[0])
        sizes: list[int] = []
        send = conn.send_records

        def observed(ledger_id, key, records, recovery=False):  # type: ignore[no-untyped-def]
            sizes.append(len(records))
            return send(ledger_id, key, records, recovery)

        conn.send_records = observed  # type: ignore[method-assign]
        pid = bookies3.procs[bookies3.index_of(writer.ensemble[0])].pid
        os.kill(pid, signal.SIGSTOP)  # no answers until SIGCONT
        try:
            futs = []
            for i in range(50):
                futs.append(writer.add(payload(i)))
                await asyncio.sleep(0)  # one event-loop turn per add: each could flush
            assert sizes == [1, 1], sizes  # two in flight, the other 48 wait
        finally:
            os.kill(pid, signal.SIGCONT)
        assert await asyncio.gather(*futs) == list(range(50))
        assert sizes[:3] == [1, 1, 48], sizes
        settings.max_add_request_bytes = 4000
        big = [b"b" * 1500] * 7  # records of 1524 bytes: two fit in 4000
        assert await writer.add_many(big) == 56
        assert sizes[3:] == [2, 2, 2, 1], sizes
        await writer.close()
        md = await client.metadata(writer.ledger_id)
        rows = await client.read(md, 0, 56)
        assert [p for _, p in rows] == [payload(i) for i in range(50)] + big
        await client.close()
        await ms.close()

    run(main())


def test_a_deleted_ledger_stays_fenced_against_a_writer_that_missed_it(bookies3):
    """A broker cut off while its topic moved, its ledger was recovered,
    closed, consumed and deleted, may still send adds: the bookies refuse
    them (the delete keeps the fence), so nothing is acknowledged into a
    ledger that no longer exists (found by the flapping-link test)."""

    async def main() -> None:
        ms = MetastoreClient(bookies3.metastore_address)
        client = LedgerClient(ms)
        writer = await client.create_ledger(2, 2, 2)
        await write_all(writer, 5)
        other = LedgerClient(ms)
        await other.open_with_recovery(writer.ledger_id)
        await other.delete_ledger(writer.ledger_id)
        with pytest.raises(LedgerFencedError):
            await writer.add(payload(5))
        await other.close()
        await client.close()
        await ms.close()

    run(main())
