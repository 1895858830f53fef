"""The bookie's journal (bookie/journal.py): writes survive a crash that
loses RocksDB's memtables, replay stops at a torn or stale frame, state
never goes back, and checkpoints release old files."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from bookie.entry_runs import check_records
from bookie.journal import _IOV_MAX, DELETE, ENTRIES, STATE, Journal, frame, read_frames
from bookie.storage import EntryStore, LedgerState, StoreTuning, Write
from protos.digest import pack_record
from tests.harness import ROOT, wait_for


def _tuning(**changes) -> StoreTuning:
    return replace(StoreTuning.from_settings(), direct_io=False, **changes)


def _records(ledger_id: int, ids, tag: bytes = b"p") -> Write:
    data = b"".join(pack_record(ledger_id, e, e - 1, tag + b"%d" % e) for e in ids)
    return Write(check_records(ledger_id, data, 100))


# Writes ledger 7's entries 0..N-1 in groups of 10 (its first group with a
# state), fences ledger 8, deletes ledger 9 after writing it, then dies
# without closing: RocksDB, its log off, has only memtables to lose.
_CRASH = """
import os, sys
from dataclasses import replace
from pathlib import Path
sys.path.insert(0, {root!r})
from bookie.entry_runs import check_records
from bookie.storage import EntryStore, LedgerState, StoreTuning, Write
from protos.digest import pack_record
n, max_file = int(sys.argv[2]), int(sys.argv[3])
tuning = replace(StoreTuning.from_settings(), direct_io=False, journal_max_bytes=max_file,
                 recycle_journal_files=1)
store = EntryStore(Path(sys.argv[1]), sync=True, max_cached_ledger_states=10, tuning=tuning)
def records(lid, ids):
    data = b"".join(pack_record(lid, e, e - 1, b"p%d" % e) for e in ids)
    return check_records(lid, data, 100)
key = LedgerState(master_key=b"k").encode()
store.write_group([Write(records(9, range(3)), (9, key))])
for start in range(0, n, 10):
    state = (7, key) if start == 0 else None
    store.write_group([Write(records(7, range(start, min(n, start + 10))), state)])
store.write_group([Write(state=(8, LedgerState(fenced=True, master_key=b"k").encode()))])
store.delete_ledger(9)
os._exit(0)
"""


def _crash(path: Path, n: int, max_file_bytes: int = 64 << 20) -> None:
    code = _CRASH.format(root=str(ROOT))
    subprocess.run([sys.executable, "-c", code, str(path), str(n), str(max_file_bytes)], check=True)


def _journal_files(path: Path) -> list[Path]:
    return sorted((path.parent / "journal").glob("*.jnl"))


@pytest.mark.parametrize("max_file_bytes", [64 << 20, 4096])
def test_acknowledged_writes_survive_a_crash_that_loses_the_memtables(
    tmp_path: Path, max_file_bytes: int
):
    path = tmp_path / "entries"
    _crash(path, 200, max_file_bytes)
    assert _journal_files(path)  # the crash left journal to replay
    store = EntryStore(path, sync=True, max_cached_ledger_states=10, tuning=_tuning())
    try:
        for e in range(200):
            assert store.get(7, e) is not None, e
        assert store.last_entry(7) == 199
        assert store.ledger_state(7).master_key == b"k"
        assert store.ledger_state(8).fenced
        assert store.last_entry(9) == -1 and store.get(9, 0) is None
        assert _journal_files(path) == []  # replayed, flushed, released
    finally:
        store.close()


def test_replay_stops_at_a_torn_frame(tmp_path: Path):
    path = tmp_path / "entries"
    _crash(path, 30)
    last = _journal_files(path)[-1]
    number = int(last.stem, 16)
    good = b"".join(
        frame(
            number, ENTRIES, 7, b"".join(pack_record(7, e, e - 1, b"late%d" % e) for e in (30, 31))
        )
    )
    torn = b"".join(frame(number, ENTRIES, 7, pack_record(7, 32, 31, b"torn")))[:-3]
    after = b"".join(frame(number, ENTRIES, 7, pack_record(7, 33, 32, b"never")))
    with last.open("ab") as f:
        f.write(good + torn + after)
    store = EntryStore(path, sync=True, max_cached_ledger_states=10, tuning=_tuning())
    try:
        assert store.get(7, 29) is not None and store.get(7, 31)[2] == b"late31"  # type: ignore[index]
        assert store.get(7, 32) is None and store.get(7, 33) is None
    finally:
        store.close()


def test_frames_of_another_file_or_with_a_bad_crc_end_a_file():
    body = pack_record(7, 0, -1, b"x")
    ok = b"".join(frame(5, ENTRIES, 7, body))
    state = b"".join(frame(5, STATE, 7, b'{"fenced": true}'))
    assert [k for k, _, _ in read_frames(ok + state, 5)] == [ENTRIES, STATE]
    assert list(read_frames(ok, 4)) == []  # a stale frame of a recycled file
    bad_state = state[:-1] + b"]"  # the CRC of a STATE frame covers its body
    assert [k for k, _, _ in read_frames(ok + bad_state + ok, 5)] == [ENTRIES]
    bad_header = bytearray(ok)
    bad_header[9] ^= 1  # the ledger id
    assert list(read_frames(bytes(bad_header), 5)) == []
    assert [k for k, _, _ in read_frames(b"".join(frame(5, DELETE, 7, b"")), 5)] == [DELETE]


def test_replaying_an_old_state_never_unfences_a_ledger(tmp_path: Path):
    store = EntryStore(tmp_path / "e", sync=True, max_cached_ledger_states=10, tuning=_tuning())
    try:
        store.write_group([Write(state=(7, LedgerState(fenced=True, master_key=b"k").encode()))])
        assert store._replay(STATE, 7, LedgerState(master_key=b"other").encode())
        store.flush_memtables()
        raw = store._ledgers_cf.get((7).to_bytes(8, "big"))
        state = LedgerState.decode(raw)  # type: ignore[arg-type]
        assert state.fenced and state.master_key == b"k"
    finally:
        store.close()


def test_checkpoints_release_journal_files_and_recycle_some(tmp_path: Path):
    path = tmp_path / "entries"
    tuning = _tuning(journal_max_bytes=4096, recycle_journal_files=2)
    store = EntryStore(path, sync=True, max_cached_ledger_states=10, tuning=tuning)
    try:
        for start in range(0, 2000, 10):
            store.write_group([_records(7, range(start, start + 10))])
        journal = path.parent / "journal"
        # every file but the current one is checkpointed and released, and
        # no more than 2 are kept for reuse
        wait_for(lambda: len(list(journal.glob("*.jnl"))) == 1, 10, "checkpoints")
        assert 1 <= len(list(journal.glob("*.free"))) <= 2
        assert store.journal.file_number > 10  # it moved on many times
        assert [store.get(7, e) is not None for e in (0, 1000, 1999)] == [True] * 3
    finally:
        store.close()
    store = EntryStore(path, sync=True, max_cached_ledger_states=10, tuning=tuning)
    try:
        assert store.last_entry(7) == 1999 and store.get(7, 0) is not None
    finally:
        store.close()


def test_a_restarted_journal_never_reuses_a_file_number(tmp_path: Path):
    """After a clean stop every file is free; the next file must get a new
    number, or the stale frames past its new end would pass for its own."""
    path = tmp_path / "entries"
    store = EntryStore(path, sync=True, max_cached_ledger_states=10, tuning=_tuning())
    store.write_group([_records(7, range(10))])
    used = store.journal.file_number
    store.close()
    store = EntryStore(path, sync=True, max_cached_ledger_states=10, tuning=_tuning())
    try:
        store.write_group([_records(7, range(10, 12))])
        assert store.journal.file_number > used
    finally:
        store.close()


def test_a_group_of_more_buffers_than_one_gathered_write_takes_is_journaled_whole(
    tmp_path: Path,
):
    journal = Journal(tmp_path, max_file_bytes=64 << 20, recycle_files=0, sync=True)
    # three buffers per frame: this group needs several pwritev calls
    ops = [(STATE, i, b"state %d" % i) for i in range(_IOV_MAX)]
    journal.append(ops)
    journal.append([(DELETE, 7, b"")])
    journal.close()
    data = journal.file_path(journal.file_number).read_bytes()
    assert list(read_frames(data, journal.file_number)) == [*ops, (DELETE, 7, b"")]
