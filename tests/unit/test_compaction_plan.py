"""Topic compaction's decisions (broker/compaction_plan.py) and the cursor's
range acknowledgements a compacted read relies on (broker/cursor.py)."""

from __future__ import annotations

import pytest

from broker.compaction_plan import (
    CompactedEntry,
    CompactionError,
    KeyTable,
    MessageFacts,
    messages_of,
    skipped_spans,
)
from broker.cursor import CursorState, PositionRangeSet
from protos import common_pb2
from protos.compression import compress, decompress
from protos.entry import encode_batch_record, encode_entry


def one(key: str | None, null: bool = False) -> list[MessageFacts]:
    return [MessageFacts(-1, key, null)]


def batch(*items: tuple[str | None, bool]) -> list[MessageFacts]:
    return [MessageFacts(i, key, null) for i, (key, null) in enumerate(items)]


# The seed's example and the edge cases, as (entry position, its messages),
# then what phase two keeps of each entry.
TOPIC = [
    ((1, 0), one("a")),  # a=1, overwritten at (1, 2)
    ((1, 1), one("b")),  # b=1, deleted by the tombstone at (1, 3)
    ((1, 2), one("a")),  # a=2: kept
    ((1, 3), one("b", null=True)),  # tombstone: b gone, the tombstone itself not kept
    ((1, 4), one(None)),  # no key: never in the view
    (
        (2, 0),
        batch(("c", False), ("a", False), ("d", False)),
    ),  # c kept, a=3 kept (latest), d overwritten
    ((2, 1), batch(("d", False), ("b", False))),  # d=2 kept, b comes back after its tombstone
    ((2, 2), batch(("e", False), ("e", True))),  # e written and deleted in one batch
]
KEPT = {
    (1, 0): [],
    (1, 1): [],
    (1, 2): [],  # a's latest is at (2, 0) index 1
    (1, 3): [],
    (1, 4): [],
    (2, 0): [0, 1],
    (2, 1): [0, 1],
    (2, 2): [],
}


def test_phase_two_keeps_each_keys_latest_message_only():
    table = KeyTable(max_keys=100)
    for pos, messages in TOPIC:
        table.add(pos, messages)
    assert len(table) == 4  # a, c, d, b (e was deleted)
    assert table.messages == 12 and table.tombstones == 2
    assert {pos: table.kept(pos, messages) for pos, messages in TOPIC} == KEPT


def test_a_single_message_entry_is_kept_as_minus_one():
    table = KeyTable(max_keys=10)
    table.add((3, 0), one("k"))
    assert table.kept((3, 0), one("k")) == [-1]


def test_more_keys_than_the_bound_fail_the_run():
    table = KeyTable(max_keys=2)
    table.add((1, 0), one("a"))
    table.add((1, 1), one("b"))
    table.add((1, 2), one("a"))  # an old key: still two
    with pytest.raises(CompactionError, match="compaction_max_keys"):
        table.add((1, 3), one("c"))


@pytest.mark.parametrize(
    "entry",
    [
        CompactedEntry((7, 3), (-1,), b"plain entry"),
        CompactedEntry((7, 4), (0, 2, 5), b"batch entry"),
        CompactedEntry((1 << 40, 0), (1,), b""),
    ],
)
def test_a_compacted_entry_round_trips(entry):
    assert CompactedEntry.decode(entry.encode()) == entry


@pytest.mark.parametrize(
    "data", [b"", b"\x00" * 19, CompactedEntry((1, 1), (0, 1), b"x").encode()[:22]]
)
def test_a_garbled_compacted_entry_is_a_typed_error(data):
    with pytest.raises(CompactionError):
        CompactedEntry.decode(data)


def test_left_out_indexes_become_the_acknowledged_mask():
    assert CompactedEntry((1, 1), (-1,), b"").skipped_mask(1) == 0
    assert CompactedEntry((1, 1), (0, 2), b"").skipped_mask(4) == 0b1010
    assert CompactedEntry((1, 1), (0, 1, 2), b"").skipped_mask(3) == 0


def _batch_entry(keys: list[str | None], nulls: list[bool], compression: int) -> bytes:
    """A batch entry of one-byte values ("v") with these keys and null flags."""
    records = []
    for key, null in zip(keys, nulls, strict=True):
        smm = common_pb2.SingleMessageMetadata(payload_size=1)
        if key is not None:
            smm.partition_key = key
        if null:
            smm.null_value = True
        records.append(encode_batch_record(smm.SerializeToString(), b"v"))
    plain = b"".join(records)
    meta = common_pb2.MessageMetadata(
        producer_name="p", sequence_id=0, publish_time=1, num_messages_in_batch=len(keys)
    )
    meta.uncompressed_size = len(plain)
    if compression != common_pb2.NONE:
        meta.compression = compression  # type: ignore[assignment]
    return encode_entry(meta, compress(compression, plain))


@pytest.mark.parametrize("compression", [common_pb2.NONE, common_pb2.LZ4, common_pb2.ZSTD])
def test_the_keys_of_a_batch_are_read_compressed_or_not(compression):
    entry = _batch_entry(["a", None, "b"], [False, False, True], compression)
    assert messages_of(entry, decompress, 1 << 20) == [
        MessageFacts(0, "a", False),
        MessageFacts(1, None, False),
        MessageFacts(2, "b", True),
    ]


def test_a_plain_message_a_chunk_and_an_empty_value():
    meta = common_pb2.MessageMetadata(producer_name="p", sequence_id=0, publish_time=1)
    meta.partition_key = "k"
    assert messages_of(encode_entry(meta, b"x"), decompress, 100) == [MessageFacts(-1, "k", False)]
    # An empty value is a tombstone too (Pulsar's compactor).
    assert messages_of(encode_entry(meta, b""), decompress, 100) == [MessageFacts(-1, "k", True)]
    meta.num_chunks_from_msg = 3
    assert messages_of(encode_entry(meta, b"x"), decompress, 100) == [MessageFacts(-1, None, False)]


def test_an_entry_that_does_not_decode_is_one_message_without_a_key():
    keyless = [MessageFacts(-1, None, False)]
    assert messages_of(b"\xff\xff", decompress, 100) == keyless
    broken = bytearray(_batch_entry(["a"], [False], common_pb2.LZ4))
    broken[-3:] = b"zzz"  # the compressed payload no longer decodes
    assert messages_of(bytes(broken), decompress, 1 << 20) == keyless
    # A batch that claims more than the bound uncompressed is not decompressed.
    big = _batch_entry(["a", "b"], [False, False], common_pb2.ZSTD)
    assert messages_of(big, decompress, 10) == keyless


# (after, before, the topic's ledgers with their last entry ids, the spans between)
SPANS = [
    ((1, 2), (1, 6), {1: 9}, [((1, 3), (1, 5))]),
    ((1, 2), (1, 3), {1: 9}, []),  # adjacent: nothing between
    ((1, 8), (3, 1), {1: 9, 2: 4, 3: 9}, [((1, 9), (1, 9)), ((2, 0), (2, 4)), ((3, 0), (3, 0))]),
    ((1, 8), (3, 0), {2: 4, 3: 9}, [((2, 0), (2, 4))]),  # ledger 1 trimmed already
    ((1, -1), (1, 2), {1: 9}, [((1, 0), (1, 1))]),  # from before the first entry
]


@pytest.mark.parametrize("after, before, ledgers, spans", SPANS)
def test_the_positions_a_compacted_read_skips(after, before, ledgers, spans):
    assert skipped_spans(after, before, sorted(ledgers), ledgers.__getitem__) == spans


def test_a_range_merges_with_what_it_touches():
    rs = PositionRangeSet()
    rs.add((1, 2))
    rs.add((1, 9))
    rs.add_range((1, 3), (1, 5))  # touches (1, 2)
    assert list(rs) == [((1, 2), (1, 5)), ((1, 9), (1, 9))]
    rs.add_range((1, 6), (1, 8))  # bridges both
    assert list(rs) == [((1, 2), (1, 9))]
    rs.add_range((2, 0), (2, 3))
    assert list(rs) == [((1, 2), (1, 9)), ((2, 0), (2, 3))]


def test_spans_acknowledged_move_mark_delete_over_them():
    ledgers = {1: 9, 2: 4}

    def nxt(pos: tuple[int, int]) -> tuple[int, int]:
        if pos[1] < ledgers.get(pos[0], -1):
            return pos[0], pos[1] + 1
        later = [lid for lid in sorted(ledgers) if lid > pos[0]]
        return (later[0], 0) if later else (pos[0], pos[1] + 1)

    state = CursorState((1, -1))
    assert state.ack_spans([((1, 0), (1, 3))], nxt)
    assert state.mark_delete_position == (1, 3)
    state.ack_spans([((1, 5), (1, 9)), ((2, 0), (2, 1))], nxt)  # an island above (1, 4)
    assert state.mark_delete_position == (1, 3)
    state.ack_individual((1, 4), nxt)
    assert state.mark_delete_position == (2, 1)
    assert not state.ack_spans([((1, 0), (1, 9))], nxt)  # all acknowledged already
    state.ack_spans([((2, 0), (2, 3))], nxt)  # overlaps mark-delete: clipped
    assert state.mark_delete_position == (2, 3)
