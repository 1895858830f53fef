"""The bookie's side of packed records: checking a request, cutting it into
runs, and the entry store's runs and single entries (bookie/entry_runs.py)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from bookie.entry_runs import _check_any, _check_ascending, check_records, find_in_run, run_rows
from bookie.storage import KEY, EntryStore, StoreTuning, Write
from protos.digest import RecordError, encode_record, entry_digest, pack_record


def _records(ledger_id: int, ids, tag: bytes = b"p") -> bytes:
    return b"".join(pack_record(ledger_id, e, e - 1, tag + b"%d" % e) for e in ids)


def test_check_records_reads_ids_lacs_and_cuts_runs_at_record_boundaries():
    data = b"".join(pack_record(7, e, e - 1, b"x" * 100) for e in (3, 4, 6, 7, 9))
    size = len(data) // 5  # every record has the same size
    checked = check_records(7, data, 2 * size)
    assert (checked.entries, checked.max_lac) == (5, 8)
    assert (checked.first_entry_id, checked.last_entry_id, checked.ascending) == (3, 9, True)
    assert checked.runs == ((2 * size, 4), (4 * size, 7), (5 * size, 9))
    # a record over the limit makes a run of its own
    assert check_records(7, data, 1).runs == tuple(
        ((i + 1) * size, e) for i, e in enumerate((3, 4, 6, 7, 9))
    )
    assert check_records(7, data, 1 << 20).runs == ((5 * size, 9),)
    resend = check_records(7, _records(7, (5, 4, 8)), 1 << 20)
    assert (resend.first_entry_id, resend.last_entry_id, resend.ascending) == (5, 8, False)
    run = data[: 2 * size]
    assert find_in_run(run, 4) == (entry_digest(7, 4, 3, b"x" * 100), 3, b"x" * 100)
    assert find_in_run(run, 5) is None and find_in_run(run, 99) is None
    assert [row[0] for row in run_rows(data, 4, 7)] == [4, 6, 7]


@pytest.mark.parametrize(
    ("ids", "lacs", "sizes", "max_run_bytes"),
    [
        ((0, 1, 2, 3), (-1, -1, 0, 1), (10, 10, 10, 10), 25),
        ((5, 9, 10, 400), (3, 2, 7, 1), (0, 3000, 1, 70), 65536),
        ((2, 5, 8, 11, 14), (0, 0, 4, 4, 10), (1024,) * 5, 1),
        ((7,), (6,), (1,), 1 << 20),
    ],
)
def test_the_ascending_fast_path_agrees_with_the_general_check(ids, lacs, sizes, max_run_bytes):
    data = b"".join(
        pack_record(3, e, lac, bytes([e % 256]) * size)
        for e, lac, size in zip(ids, lacs, sizes, strict=True)
    )
    fast = _check_ascending(3, data, max_run_bytes)
    assert fast is not None and fast == _check_any(3, data, max_run_bytes)
    assert (fast.first_entry_id, fast.last_entry_id, fast.max_lac) == (ids[0], ids[-1], max(lacs))


@pytest.mark.parametrize(
    "data",
    [
        _records(3, (4, 4)),  # not strictly ascending
        _records(3, (4, 2, 9)),
        pack_record(3, 0, -1, b"ok")[:-1],  # cut short
        pack_record(3, 0, -1, b"ok") + b"\x00" * 5,  # trailing bytes
        encode_record(-1, -1, entry_digest(3, -1, -1, b"x"), b"x"),  # negative id
        pack_record(4, 0, -1, b"ok"),  # another ledger's digest
        b"",
    ],
)
def test_the_fast_path_leaves_anything_else_to_the_general_check(data):
    assert _check_ascending(3, data, 65536) is None


@pytest.mark.parametrize(
    ("data", "digest_error", "message"),
    [
        (pack_record(7, 0, -1, b"ok") + encode_record(1, -1, 12345, b"bad"), True, "digest"),
        (pack_record(7, 0, -1, b"ok")[:-1], False, "claims 2 payload bytes"),
        (pack_record(7, 0, -1, b"ok") + b"\x00" * 5, False, "5 trailing bytes"),
        (encode_record(-1, -1, entry_digest(7, -1, -1, b"x"), b"x"), False, "entry id -1"),
        # a record checked against another ledger's id fails its digest
        (pack_record(8, 0, -1, b"ok"), True, "digest"),
    ],
)
def test_a_bad_record_is_refused(data, digest_error, message):
    with pytest.raises(RecordError, match=message) as info:
        check_records(7, data, 65536)
    assert info.value.digest is digest_error


def _store(path: Path, max_states: int = 10) -> EntryStore:
    return EntryStore(
        path,
        sync=True,
        max_cached_ledger_states=max_states,
        tuning=replace(StoreTuning.from_settings(), direct_io=False),
    )


@pytest.fixture
def store(tmp_path: Path):
    s = _store(tmp_path / "db")
    yield s
    s.close()


def _write(store: EntryStore, ledger_id: int, data: bytes, max_run_bytes: int = 100) -> None:
    store.write_group([Write(check_records(ledger_id, data, max_run_bytes))])


def _keys(store: EntryStore, runs: bool) -> list[tuple[int, int]]:
    cf = store._runs_cf if runs else store.db
    return [KEY.unpack(bytes(k)) for k in cf.keys()]  # type: ignore[arg-type]  # noqa: SIM118


def _payloads(rows) -> dict[int, bytes]:
    return {row[0]: row[-1] for row in rows}


def test_requests_in_entry_order_are_stored_as_runs_and_read_back(store: EntryStore):
    stripe = [e for e in range(60) if e % 3 != 2]  # one bookie's share of E=3, Qw=2
    for start in range(0, len(stripe), 10):
        _write(store, 7, _records(7, stripe[start : start + 10]))
    _write(store, 8, _records(8, range(5)))
    assert _keys(store, runs=False) == []  # not one key per entry
    runs = _keys(store, runs=True)
    assert len(runs) < len(stripe) and (7, 58) in runs and (8, 4) in runs
    for e in range(62):
        got = store.get(7, e)
        if e in stripe:
            assert got == (entry_digest(7, e, e - 1, b"p%d" % e), e - 1, b"p%d" % e), e
        else:
            assert got is None, e
    assert [row[0] for row in store.scan(7, 0, 100, 1000)] == stripe
    assert [row[0] for row in store.scan(7, 5, 20, 1000)] == [e for e in stripe if 5 <= e <= 20]
    assert [row[0] for row in store.scan(7, 5, 100, 4)] == [6, 7, 9, 10]
    assert store.scan(7, 59, 100, 10) == [] and store.scan(9, 0, 10, 10) == []
    many = store.get_many(7, [58, 2, 0, 1, 1000, 30, 59])
    assert [(e, got is not None) for e, got in many] == [
        (58, True),
        (2, False),
        (0, True),
        (1, True),
        (1000, False),
        (30, True),
        (59, False),
    ]
    assert many[2][1] == store.get(7, 0)
    assert (store.last_entry(7), store.last_entry(8), store.last_entry(9)) == (58, 4, -1)
    entries, size = store.size_estimate()
    assert entries == len(stripe) + 5 and size > 0


def test_entries_below_the_highest_stored_are_single_entries_that_win(tmp_path: Path):
    store = _store(tmp_path / "db")
    _write(store, 7, _records(7, range(10)))
    _write(store, 7, _records(7, (4, 5, 6), tag=b"again"))  # a resend: ascending, but not above
    _write(store, 7, _records(7, (12, 11), tag=b"late"))  # out of order
    _write(store, 7, _records(7, range(13, 20)))  # in order again: runs
    assert _keys(store, runs=False) == [(7, 4), (7, 5), (7, 6), (7, 11), (7, 12)]
    assert (7, 19) in _keys(store, runs=True)
    expected = {e: b"p%d" % e for e in range(20) if e not in (10, 11, 12)}
    expected.update({4: b"again4", 5: b"again5", 6: b"again6", 11: b"late11", 12: b"late12"})
    assert _payloads(store.scan(7, 0, 100, 1000)) == expected
    assert list(_payloads(store.scan(7, 0, 100, 1000))) == sorted(expected)
    assert [row[0] for row in store.scan(7, 3, 100, 5)] == [3, 4, 5, 6, 7]
    assert store.get(7, 5)[2] == b"again5" and store.get(7, 10) is None  # type: ignore[index]
    assert _payloads((e, got[2]) for e, got in store.get_many(7, [12, 5, 2]) if got) == {
        12: b"late12",
        5: b"again5",
        2: b"p2",
    }
    # A new store (a restarted bookie) knows the highest entry from disk.
    store.close()
    store = _store(tmp_path / "db", max_states=1)
    _write(store, 8, _records(8, range(3)))  # evicts ledger 7 from what it remembers
    _write(store, 7, _records(7, (19, 20)))
    assert (7, 19) in _keys(store, runs=False) and store.get(7, 20)[2] == b"p20"  # type: ignore[index]
    assert store.delete_ledger(7)
    assert store.get(7, 3) is None and store.scan(7, 0, 100, 10) == []
    assert store.last_entry(7) == -1 and store.get(8, 2) is not None
    store.close()


def test_a_record_with_several_faults_is_named_by_the_first_one_checked():
    """A payload past the end is named before a negative id, and a negative
    id before a bad digest."""
    with pytest.raises(RecordError, match="entry -1 claims 2 payload bytes; 1 remain"):
        check_records(7, encode_record(-1, -1, 0, b"xy")[:-1], 65536)
    with pytest.raises(RecordError, match="entry id -1 < 0") as info:
        check_records(7, encode_record(-1, -1, 0, b"xy"), 65536)
    assert info.value.digest is False
