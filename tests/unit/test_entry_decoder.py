"""From delivered entries to queued messages (client/_entry_decoder.py):
batch-index masks, chunks, the dead letter threshold, a start id inside a
batch, and whether a reader has anything left."""

from __future__ import annotations

from client._entry_decoder import (
    DecodedEntry,
    DeliveredEntry,
    EntryDecoder,
    StartMessageSkip,
    unread_stored,
)
from client.chunks import ChunkAssembler
from client.exceptions import InvalidMessage
from client.message import Message, PendingMessage, build_chunk_entries, build_entry
from protos import common_pb2
from protos.entry import encode_entry
from protos.message_id import MessageId

TOPIC = "persistent://public/default/t"


def _pending(payload: bytes, seq: int = 0) -> PendingMessage:
    return PendingMessage(payload, seq, lambda exc, mid: None)


def _batch_entry(n: int) -> bytes:
    return build_entry([_pending(f"m{i}".encode(), i) for i in range(n)], "p", 1)


PLAIN = build_entry([_pending(b"solo")], "p", 1)
BATCH = _batch_entry(4)


def _decoder(max_redeliver_count: int | None = None, max_pending: int = 10) -> EntryDecoder:
    return EntryDecoder(3, ChunkAssembler(max_pending, expire_s=60), max_redeliver_count)


def _indexes(decoded: DecodedEntry) -> list[int]:
    return [m.message_id().batch_index() for m in decoded.messages]


# (entry, redelivery count, acked batch index mask, max_redeliver_count)
#   -> (batch indexes queued or dead-lettered, freed permits, dead letter)
DECODE_TABLE = [
    ((PLAIN, 0, b"", None), ([-1], 0, False)),
    ((BATCH, 0, b"", None), ([0, 1, 2, 3], 0, False)),
    ((BATCH, 1, bytes([0b0101]), None), ([1, 3], 2, False)),  # 0 and 2 acked before
    ((BATCH, 1, bytes([0b1111]), 0), ([], 4, False)),  # all acked: nothing to dead-letter
    ((BATCH, 2, b"", 2), ([0, 1, 2, 3], 0, False)),  # at the limit: delivered
    ((BATCH, 3, bytes([0b0001]), 2), ([1, 2, 3], 1, True)),  # past it: dead letter
    ((PLAIN, 3, b"", 2), ([-1], 0, True)),
]


def test_entries_decode_as_the_table_says():
    for (entry, redelivery, mask, limit), expected in DECODE_TABLE:
        decoded = _decoder(limit).decode(DeliveredEntry(7, 9, redelivery, entry, mask), TOPIC, 0)
        got = (_indexes(decoded), decoded.freed_permits, decoded.dead_letter)
        assert got == expected, (redelivery, mask, limit)
        assert decoded.error is None and decoded.position == (7, 9)
        assert all(m.message_id().partition() == 3 for m in decoded.messages)
        assert all(m.redelivery_count() == redelivery for m in decoded.messages)


def test_skipped_batch_indexes_count_as_acknowledged_for_the_rest():
    decoded = _decoder().decode(DeliveredEntry(7, 9, 1, BATCH, bytes([0b0111])), TOPIC, 0)
    (last,) = decoded.messages
    assert last._batch is not None and last._batch.ack(3)  # completes the entry


def test_a_payload_that_does_not_decode_is_reported_not_raised():
    meta = common_pb2.MessageMetadata(
        producer_name="p", sequence_id=0, publish_time=1, uncompressed_size=100
    )
    meta.compression = common_pb2.LZ4
    entry = encode_entry(meta, b"not lz4 at all")
    decoded = _decoder().decode(DeliveredEntry(7, 9, 0, entry), TOPIC, 0)
    assert isinstance(decoded.error, InvalidMessage)
    assert decoded.messages == [] and decoded.freed_permits == 0


def _chunks(payload: bytes, seq: int, size: int) -> list[bytes]:
    return build_chunk_entries(_pending(payload, seq), "p", 1, common_pb2.NONE, size)


def test_chunks_are_held_until_their_message_is_whole():
    entries = _chunks(b"x" * 600, 1, 300)
    assert len(entries) == 3
    decoder = _decoder()
    steps = [decoder.decode(DeliveredEntry(1, i, i, e), TOPIC, 0) for i, e in enumerate(entries)]
    for held in steps[:2]:
        assert (held.held_chunk, held.freed_permits, held.messages) == (True, 1, [])
    whole = steps[2]
    assert not whole.held_chunk and whole.freed_permits == 0
    assert whole.chunk_positions == [(1, 0), (1, 1), (1, 2)]
    (msg,) = whole.messages
    assert msg.data() == b"x" * 600 and msg._chunks == whole.chunk_positions
    assert msg.message_id().position == (1, 2)  # a chunked message's id is its last chunk's
    assert msg.redelivery_count() == 2  # its most redelivered chunk


def test_a_chunked_message_past_the_limit_goes_to_the_dead_letter_topic_whole():
    first, second = _chunks(b"y" * 400, 2, 300)
    decoder = _decoder(max_redeliver_count=1)
    decoder.decode(DeliveredEntry(1, 0, 2, first), TOPIC, 0)
    whole = decoder.decode(DeliveredEntry(1, 1, 0, second), TOPIC, 0)
    assert whole.dead_letter and len(whole.messages) == 1


def test_chunks_given_up_are_handed_back():
    a0, _ = _chunks(b"a" * 400, 1, 300)
    b0, _ = _chunks(b"b" * 400, 2, 300)
    decoder = _decoder(max_pending=1)
    assert decoder.decode(DeliveredEntry(1, 0, 0, a0), TOPIC, 0).dropped_chunks == []
    second = decoder.decode(DeliveredEntry(1, 1, 0, b0), TOPIC, 0)
    assert second.dropped_chunks == [[(1, 0)]] and second.held_chunk


def _delivery(entry_id: int, indexes: range) -> list[Message]:
    entry = _batch_entry(max(indexes) + 1)
    decoded = _decoder().decode(DeliveredEntry(1, entry_id, 0, entry), TOPIC, 0)
    return [m for m in decoded.messages if m.message_id().batch_index() in indexes]


def _ids(messages: list[Message]) -> list[tuple[int, int]]:
    return [(m.message_id().entry_id(), m.message_id().batch_index()) for m in messages]


# A reader starting at 1:5, batch index 1 (exclusive): its whole entry is
# delivered and the messages up to the start are skipped.
# (entry delivered, batch indexes in it) -> (entry, batch index) kept
START_SKIP_STEPS = [
    ((5, range(4)), [(5, 2), (5, 3)]),
    ((5, range(4)), [(5, 2), (5, 3)]),  # the start entry again (a redelivery): still skipped
    ((6, range(2)), [(6, 0), (6, 1)]),  # past the start entry: the skip ends
    ((5, range(4)), [(5, 0), (5, 1), (5, 2), (5, 3)]),  # ...for good
]


def test_a_start_inside_a_batch_skips_its_entry_up_to_it():
    skip = StartMessageSkip(MessageId(ledger_id=1, entry_id=5, batch_index=1), inclusive=False)
    for (entry_id, indexes), kept in START_SKIP_STEPS:
        assert _ids(skip.filter(_delivery(entry_id, indexes))) == kept, entry_id


def test_inclusive_starts_seeks_and_entry_starts():
    inclusive = StartMessageSkip(MessageId(ledger_id=1, entry_id=5, batch_index=1), inclusive=True)
    assert _ids(inclusive.filter(_delivery(5, range(3)))) == [(5, 1), (5, 2)]
    whole_entry = StartMessageSkip(
        MessageId(ledger_id=1, entry_id=5), inclusive=False
    )  # not in a batch
    assert _ids(whole_entry.filter(_delivery(5, range(2)))) == [(5, 0), (5, 1)]
    earliest = StartMessageSkip(MessageId.earliest, inclusive=False)
    assert _ids(earliest.filter(_delivery(5, range(2)))) == [(5, 0), (5, 1)]
    seek = StartMessageSkip(None, inclusive=False)
    seek.skip_to(
        MessageId(ledger_id=1, entry_id=5, batch_index=2), inclusive=True
    )  # a seek: the target is next
    assert _ids(seek.filter(_delivery(5, range(4)))) == [(5, 2), (5, 3)]


# (last stored, last read, start, inclusive) -> something left to read
UNREAD_TABLE = [
    (
        MessageId(ledger_id=-1, entry_id=-1),
        None,
        MessageId.earliest,
        False,
        False,
    ),  # an empty topic
    (MessageId(ledger_id=1, entry_id=4), None, None, False, True),  # from the beginning
    (MessageId(ledger_id=1, entry_id=4), None, MessageId.earliest, False, True),
    (MessageId(ledger_id=1, entry_id=4), None, MessageId.latest, False, False),
    (
        MessageId(ledger_id=1, entry_id=4),
        None,
        MessageId.latest,
        True,
        True,
    ),  # latest, inclusive: the last one
    (MessageId(ledger_id=1, entry_id=4), None, MessageId(ledger_id=1, entry_id=4), False, False),
    (MessageId(ledger_id=1, entry_id=4), None, MessageId(ledger_id=1, entry_id=4), True, True),
    (
        MessageId(ledger_id=1, entry_id=4),
        None,
        MessageId(ledger_id=1, entry_id=4, batch_index=2),
        False,
        True,
    ),  # inside a batch: its rest
    (MessageId(ledger_id=1, entry_id=4), None, MessageId(ledger_id=1, entry_id=3), False, True),
    (
        MessageId(ledger_id=1, entry_id=4),
        MessageId(ledger_id=1, entry_id=4, batch_index=0),
        MessageId(ledger_id=1, entry_id=3),
        False,
        False,
    ),  # read it
    (
        MessageId(ledger_id=1, entry_id=4),
        MessageId(ledger_id=1, entry_id=3),
        MessageId(ledger_id=1, entry_id=4),
        True,
        True,
    ),
]


def test_unread_stored_follows_the_table():
    for last, read, start, inclusive, expected in UNREAD_TABLE:
        assert unread_stored(last, read, start, inclusive) is expected, (last, read, start)


def test_a_stored_copy_of_a_chunk_is_handed_back_to_acknowledge():
    first, second = _chunks(b"z" * 400, 3, 300)
    decoder = _decoder()
    decoder.decode(DeliveredEntry(1, 0, 0, first), TOPIC, 0)
    copy = decoder.decode(DeliveredEntry(1, 1, 0, first), TOPIC, 0)
    assert copy.acked_chunks == [(1, 1)] and (copy.held_chunk, copy.freed_permits) == (True, 1)
    # The same uuid published at another time is another message, not a copy.
    other = build_chunk_entries(_pending(b"w" * 400, 3), "p", 2, common_pb2.NONE, 300)
    assert decoder.decode(DeliveredEntry(1, 2, 0, other[0]), TOPIC, 0).acked_chunks == []
    (msg,) = decoder.decode(DeliveredEntry(1, 3, 0, second), TOPIC, 0).messages
    assert msg.data() == b"z" * 400 and msg._chunks == [(1, 0), (1, 3)]
