"""The pysyncobj journal corrections: every change is flushed before it is used."""

from __future__ import annotations

from pathlib import Path

from metastore.raft_node import DurableFileJournal


def test_appends_truncations_and_term_votes_are_flushed(tmp_path: Path, monkeypatch) -> None:
    flushes: list[str] = []
    fsynced: list[str] = []
    journal = DurableFileJournal(str(tmp_path / "j"), str(tmp_path / "dump"))
    monkeypatch.setattr(journal, "flush", lambda: flushes.append("flush"))
    import metastore.raft_node as rn

    real = rn._fsync_path

    def recording_fsync(path, directory=False):  # type: ignore[no-untyped-def]
        fsynced.append(str(path))
        real(path, directory)

    monkeypatch.setattr(rn, "_fsync_path", recording_fsync)
    journal.add(b"cmd1", 1, 1)
    journal.add(b"cmd2", 2, 1)
    assert journal.dirty and flushes == []  # appends are flushed once per tick
    assert journal.flush_if_dirty() and flushes == ["flush"]
    assert not journal.flush_if_dirty() and flushes == ["flush"]
    journal.deleteEntriesFrom(1)
    assert len(flushes) == 2 and len(journal) == 1
    journal.setCurrentTerm(5, "node2")
    assert str(tmp_path / "j.meta") in fsynced
    (tmp_path / "dump").write_bytes(b"snapshot")
    journal.add(b"cmd3", 3, 1)
    journal.deleteEntriesTo(1)  # compaction: the dump is synced before the log shrinks
    assert str(tmp_path / "dump") in fsynced
    assert [journal[i][0] for i in range(len(journal))] == [b"cmd3"]


def test_a_reopened_journal_has_the_entries(tmp_path: Path) -> None:
    journal = DurableFileJournal(str(tmp_path / "j"), str(tmp_path / "dump"))
    for i in range(1, 101):
        journal.add(f"cmd{i}".encode(), i, 1)
    journal.deleteEntriesTo(50)
    journal.setCurrentTerm(3, "n1")
    journal._destroy()
    again = DurableFileJournal(str(tmp_path / "j"), str(tmp_path / "dump"))
    assert len(again) == 50 and again[0][1] == 51 and again.getCurrentTerm() == 3


def test_snapshots_are_gzip_at_the_fast_level_and_old_ones_still_read(tmp_path: Path) -> None:
    import gzip
    import pickle

    from pysyncobj.serializer import Serializer

    import metastore.raft_node as rn

    dump = str(tmp_path / "raft.dump")
    state: tuple = ({"key": b"v" * 1000}, (b"e", 2, 1), (b"d", 1, 1), set())
    serializer = Serializer(dump, 1024, False, None, None, None)
    serializer.serialize(state, 2)
    raw = Path(dump).read_bytes()
    # A gzip header's XFL byte: 4 for the fastest level, 2 for pysyncobj's own 9.
    assert rn.SNAPSHOT_GZIP_LEVEL == 1 and raw[:2] == b"\x1f\x8b" and raw[8] == 4
    assert serializer.deserialize() == state
    with gzip.open(dump, "wb", compresslevel=9) as old:  # a dump written before
        pickle.dump(state, old)
    assert Path(dump).read_bytes()[8] == 2 and serializer.deserialize() == state
