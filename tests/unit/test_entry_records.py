"""Packed entry records: the writer's hand-serialised add requests, request
cutting, and the store without O_DIRECT. (The bookie's side of records:
tests/unit/test_entry_runs.py.)"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from bookie.bookie_connection import BookieConnection
from bookie.entry_runs import check_records
from bookie.ledger_writer import _runs_under
from bookie.storage import EntryStore, StoreTuning, Write, direct_io_works
from protos import bookie_pb2
from protos.digest import pack_record


def test_hand_serialised_add_request_parses_as_the_message():
    import asyncio

    records = [pack_record(42, e, e - 1, bytes([e]) * (e * 37)) for e in range(5)]
    sent: list[bytes] = []

    async def main() -> None:
        conn = BookieConnection("127.0.0.1:1", 1.0)  # never connects: nothing is sent

        def capture(request_id: int, data: bytes) -> asyncio.Future:
            sent.append(data)
            return asyncio.get_running_loop().create_future()

        conn._send_serialized = capture  # type: ignore[method-assign]
        conn.send_records(42, b"key", records, recovery=True)
        await conn.close()

    asyncio.run(main())
    req = bookie_pb2.AddRequest.FromString(sent[0])
    assert req.ledger_id == 42 and req.master_key == b"key" and req.recovery
    assert req.request_id >= 1
    assert req.entries == b"".join(records)


def test_runs_under_a_byte_limit():
    recs = [b"a" * 10, b"b" * 10, b"c" * 25, b"d" * 5, b"e" * 5]
    assert _runs_under(recs, 20) == [(0, 2), (2, 3), (3, 5)]
    assert _runs_under(recs, 1000) == [(0, 5)]
    assert _runs_under([b"x" * 50], 10) == [(0, 1)]  # a record over the limit goes alone


def test_the_store_uses_direct_io_where_it_works_and_can_do_without(tmp_path: Path):
    s = EntryStore(tmp_path / "db", sync=True, max_cached_ledger_states=1)
    assert s.direct_io == direct_io_works(tmp_path / "db")
    s.close()
    s = EntryStore(
        tmp_path / "db2",
        sync=True,
        max_cached_ledger_states=1,
        tuning=replace(StoreTuning.from_settings(), direct_io=False, recycle_journal_files=0),
    )
    assert not s.direct_io
    s.write_group([Write(check_records(1, pack_record(1, 0, -1, b"x"), 65536))])
    assert s.get(1, 0) is not None
    s.close()
