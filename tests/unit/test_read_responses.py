"""How a bookie cuts a read's rows into response messages
(bookie/read_responses.py): each message within the byte bound, an entry
bigger than the bound alone, every row answered once and in order."""

from __future__ import annotations

import pytest

from bookie.read_responses import cut_points, entries_responses, range_responses
from protos import common_pb2
from protos.digest import entry_digest

# (payload sizes, max bytes) -> where the messages start
CUTS = [
    ([], 10, []),
    ([4], 10, [0]),
    ([4, 6], 10, [0]),  # exactly the bound: one message
    ([4, 7], 10, [0, 1]),  # one byte past: the second starts a message
    ([25], 10, [0]),  # bigger than the bound: alone, still sent
    ([3, 25, 3], 10, [0, 1, 2]),
    ([0, 0, 0], 10, [0]),  # size-only or missing rows take no room
    ([10, 0, 1], 10, [0, 2]),
    ([5, 5, 5, 5, 5], 10, [0, 2, 4]),
]


@pytest.mark.parametrize(("sizes", "max_bytes", "starts"), CUTS)
def test_cut_points(sizes, max_bytes, starts):
    assert cut_points(sizes, max_bytes) == starts


def _got(eid: int, size: int) -> tuple[int, int, bytes]:
    payload = bytes([eid % 256]) * size
    return entry_digest(7, eid, eid - 1, payload), eid - 1, payload


def test_entries_responses_cut_by_bytes_and_keep_every_row():
    rows = [(0, _got(0, 6)), (1, None), (2, _got(2, 6)), (3, _got(3, 30)), (4, _got(4, 1))]
    out = entries_responses(rows, sizes_only=False, max_bytes=10)
    assert [list(r.entry_ids) for r in out] == [[0], [2], [3], [4]]
    assert [list(r.missing_entry_ids) for r in out] == [[1], [], [], []]
    assert [sum(map(len, r.payloads)) for r in out] == [6, 6, 30, 1]
    assert all(len(r.lacs) == len(r.digests) == len(r.entry_ids) for r in out)


def test_entries_responses_sizes_only_fit_one_message():
    rows = [(i, _got(i, 1000)) for i in range(5)]
    (out,) = entries_responses(rows, sizes_only=True, max_bytes=10)
    assert list(out.entry_ids) == [0, 1, 2, 3, 4] and list(out.sizes) == [1000] * 5
    assert not out.payloads


def test_entries_responses_of_nothing_is_one_empty_message():
    (out,) = entries_responses([], sizes_only=False, max_bytes=10)
    assert not out.entry_ids and not out.missing_entry_ids


def _range_rows(ids, size=6):
    return [(eid, *_got(eid, size)) for eid in ids]


# (stored entry ids, first) -> (entry ids per message, next first)
RANGES = [
    ([5, 6, 7], 5, [[5], [6], [7]], 8),
    ([5, 6, 9], 5, [[5], [6]], 7),  # a hole at 7: the next pass starts there
    ([5], 5, [[5]], 6),
]


@pytest.mark.parametrize(("ids", "first", "messages", "next_first"), RANGES)
def test_range_responses(ids, first, messages, next_first):
    out, nxt, corrupt = range_responses(7, first, _range_rows(ids), max_bytes=10)
    assert [list(r.entry_ids) for r in out] == messages
    assert nxt == next_first and not corrupt


def test_range_responses_pack_small_entries_together():
    out, nxt, _ = range_responses(7, 0, _range_rows(range(10), size=2), max_bytes=10)
    assert [list(r.entry_ids) for r in out] == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]
    assert nxt == 10


def test_range_responses_stop_at_a_corrupt_entry():
    rows = _range_rows([0, 1, 2], size=2)
    eid, digest, lac, _ = rows[1]
    rows[1] = (eid, digest, lac, b"xx")  # stored bytes no longer match the digest
    out, _, corrupt = range_responses(7, 0, rows, max_bytes=10)
    assert corrupt
    assert [list(r.entry_ids) for r in out] == [[0], []]
    assert out[-1].error.code == common_pb2.DIGEST_MISMATCH
