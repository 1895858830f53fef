import struct

import pytest

from client.message import PendingMessage, build_entry, unpack_entry
from protos import common_pb2
from protos.entry import CorruptedEntryError, encode_entry, num_messages, split_entry


def _pm(data: bytes, seq: int, **kw) -> PendingMessage:
    return PendingMessage(data, seq, lambda e, m: None, **kw)


def test_single_message_entry_is_not_batched():
    entry = build_entry([_pm(b"hi", 7, properties={"a": "b"}, partition_key="k")], "p1", 1234)
    meta, payload = split_entry(entry)
    assert not meta.HasField("num_messages_in_batch")
    assert num_messages(meta) == 1 and bytes(payload) == b"hi"
    [msg] = unpack_entry(entry, 3, 4, -1, "t", 0)
    assert msg.data() == b"hi" and msg.properties() == {"a": "b"}
    assert msg.partition_key() == "k" and msg.publish_timestamp() == 1234
    assert msg.message_id().batch_index() == -1 and msg.producer_name() == "p1"


def test_batch_round_trip_keeps_order_and_per_message_metadata():
    msgs = [
        _pm(b"a", 10),
        _pm(b"", 11, properties={"x": "1"}),
        _pm(b"c" * 1000, 12, ordering_key=b"ok", event_time=99),
    ]
    entry = build_entry(msgs, "p", 5)
    meta, _ = split_entry(entry)
    assert meta.num_messages_in_batch == 3 and meta.sequence_id == 10
    assert meta.highest_sequence_id == 12
    out = unpack_entry(entry, 1, 2, 0, "t", 1)
    assert [m.data() for m in out] == [b"a", b"", b"c" * 1000]
    assert [m.message_id().batch_index() for m in out] == [0, 1, 2]
    assert out[1].properties() == {"x": "1"}
    assert out[2].ordering_key() == "ok" and out[2].event_timestamp() == 99
    assert all(m.redelivery_count() == 1 for m in out)


def test_records_of_reused_metadata_carry_only_their_own_fields():
    """Plain and keyed records reuse one metadata message each: none may
    keep a field of the record before it."""
    msgs = [
        _pm(b"a", 1, partition_key="k1"),
        _pm(b"bb", 2),
        _pm(b"c", 3, partition_key="k2", properties={"p": "v"}),
        _pm(b"", 4, partition_key="k3"),
        _pm(b"e", 5, event_time=7),
        _pm(b"f", 6),
        _pm(b"g", 7, partition_key="k1"),
    ]
    out = unpack_entry(build_entry(msgs, "p", 5), 1, 2, 0, "t", 0)
    assert [(m.data(), m.partition_key(), m.properties(), m.event_timestamp()) for m in out] == [
        (b"a", "k1", {}, 0),
        (b"bb", "", {}, 0),
        (b"c", "k2", {"p": "v"}, 0),
        (b"", "k3", {}, 0),
        (b"e", "", {}, 7),
        (b"f", "", {}, 0),
        (b"g", "k1", {}, 0),
    ]
    assert [m.message_id().batch_index() for m in out] == list(range(7))


@pytest.mark.parametrize(
    "garbage",
    [
        b"",
        b"\x00\x00",
        struct.pack(">I", 100) + b"short",
        struct.pack(">I", 3) + b"\xff\xff\xff",
        encode_entry(common_pb2.MessageMetadata(num_messages_in_batch=0), b""),
    ],
)
def test_garbage_entries_are_refused_with_a_typed_error(garbage):
    with pytest.raises(CorruptedEntryError):
        split_entry(garbage)


def test_truncated_batch_payload_is_refused():
    entry = build_entry([_pm(b"aaaa", 1), _pm(b"bbbb", 2)], "p", 1)
    with pytest.raises(CorruptedEntryError):
        unpack_entry(entry[:-2], 1, 1, -1, "t", 0)


def _record_heads(entry: bytes) -> list[bytes]:
    """The SingleMessageMetadata bytes of each record of a batch entry."""
    _, payload = split_entry(entry)
    data, heads, at = bytes(payload), [], 0
    while at < len(data):
        (size,) = struct.unpack_from(">I", data, at)
        head = data[at + 4 : at + 4 + size]
        heads.append(head)
        at += 4 + size + common_pb2.SingleMessageMetadata.FromString(head).payload_size
    return heads


# (payload sizes, first sequence id) of a batch of plain records, whose
# headers are built from bytes: varint edges of both fields, and runs that
# cross a multiple of 128 (the varint's cached upper part changes there).
PLAIN_BATCHES = [
    ([0, 1, 127], 0),
    ([128, 16_383, 16_384, 1024], 126),
    ([1024] * 5, 16_382),
    ([5, 5, 6, 6], 2**32 - 2),
    ([1024, 1024], 2**63 - 1),
    ([3], 2**64 - 1),
]


@pytest.mark.parametrize(("sizes", "first"), PLAIN_BATCHES)
def test_plain_records_are_what_protobuf_would_write(sizes, first):
    msgs = [_pm(b"x" * size, first + i) for i, size in enumerate(sizes)] + [
        _pm(b"k", 1, partition_key="k")
    ]
    heads = _record_heads(build_entry(msgs, "p", 5))
    assert heads[:-1] == [
        common_pb2.SingleMessageMetadata(
            payload_size=size, sequence_id=first + i
        ).SerializeToString()
        for i, size in enumerate(sizes)
    ]


@pytest.mark.parametrize(
    ("seq", "error"), [(-1, ValueError), (2**64, ValueError), (True, TypeError)]
)
def test_a_record_protobuf_would_refuse_is_refused(seq, error):
    # In the middle: the entry's own metadata holds the first and last ids.
    with pytest.raises(error):
        build_entry([_pm(b"a", 1), _pm(b"b", seq), _pm(b"c", 3)], "p", 5)
