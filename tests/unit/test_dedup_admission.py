"""Deduplication's admission rule (broker/dedup.py): refused, duplicate,
in flight or admitted, decided before an entry is stored."""

from __future__ import annotations

from typing import Any

from broker.dedup import DedupState, Outcome, admit
from protos import common_pb2
from protos.entry import encode_entry

A = Outcome.ADMIT
D = Outcome.DUPLICATE
F = Outcome.IN_FLIGHT
R = Outcome.REFUSED
MAX_SIZE = 1000


def _entry(chunk: tuple[int, int] | None = None, size: int = 10) -> bytes:
    meta = common_pb2.MessageMetadata(producer_name="p", sequence_id=0, publish_time=1)
    if chunk is not None:
        meta.chunk_id, meta.num_chunks_from_msg = chunk
    return encode_entry(meta, b"x" * size)


ENTRY = _entry()
INNER_CHUNK = _entry((0, 3))
LAST_CHUNK = _entry((2, 3))
TOO_BIG = _entry(size=MAX_SIZE)
GARBAGE = b"\x00\x00\x00\x09not protobuf"

# Deduplication on. Steps: ("send", producer, first sequence id, messages,
# entry) -> (outcome, tracked); ("stored" | "failed", producer, highest)
# are storage's answers to earlier sends.
STEPS: list[tuple[Any, ...]] = [
    ("send", "p", 0, 1, ENTRY, A, True),
    ("send", "p", 0, 1, ENTRY, F, False),  # pushed, not stored yet: retry later
    ("stored", "p", 0),
    ("send", "p", 0, 1, ENTRY, D, False),  # answered as stored, not written again
    ("send", "p", 1, 5, ENTRY, A, True),  # a batch: highest sequence id 5
    ("failed", "p", 5),  # its write failed: the retry is not a duplicate
    ("send", "p", 1, 5, ENTRY, A, True),
    ("stored", "p", 5),
    ("send", "p", 3, 1, ENTRY, D, False),  # within the stored batch
    ("send", "p", 6, 1, INNER_CHUNK, A, False),  # chunks share an id: only the last counts
    ("send", "p", 6, 1, INNER_CHUNK, A, False),
    ("send", "p", 6, 1, LAST_CHUNK, A, True),
    ("send", "q", 0, 1, ENTRY, A, True),  # producers are tracked apart
    ("send", "q", 9, 1, TOO_BIG, R, False),
    ("send", "q", 9, 1, GARBAGE, R, False),
    ("send", "q", 9, 0, ENTRY, R, False),  # an entry of no messages
    ("send", "q", 9, -3, ENTRY, R, False),
]


def test_admission_steps():
    state = DedupState()
    state.enabled = True
    for step in STEPS:
        if step[0] == "stored":
            state.stored(step[1], step[2])
            continue
        if step[0] == "failed":
            state.failed(step[1])
            continue
        _, producer, seq, messages, entry, outcome, tracked = step
        got = admit(entry, producer, seq, messages, state, MAX_SIZE)
        assert (got.outcome, got.tracked) == (outcome, tracked), step
        if got.outcome is A:
            assert got.highest == seq + messages - 1
        if got.tracked:
            state.pushed_to(producer, got.highest)


def test_refusals_and_retries_say_why():
    state = DedupState()
    state.enabled = True
    too_big = admit(TOO_BIG, "p", 0, 1, state, MAX_SIZE)
    assert too_big.code == common_pb2.MESSAGE_TOO_BIG and "max_message_size" in too_big.message
    garbage = admit(GARBAGE, "p", 0, 1, state, MAX_SIZE)
    assert garbage.code == common_pb2.CORRUPTED_MESSAGE
    empty = admit(ENTRY, "p", 0, 0, state, MAX_SIZE)
    assert empty.code == common_pb2.INVALID_ARGUMENT and "at least one message" in empty.message
    off = DedupState()
    assert admit(ENTRY, "p", 0, 0, off, MAX_SIZE).outcome is R  # with deduplication off too
    state.pushed_to("p", 0)
    in_flight = admit(ENTRY, "p", 0, 1, state, MAX_SIZE)
    assert in_flight.code == common_pb2.SERVICE_NOT_READY and "retry" in in_flight.message


def test_with_deduplication_off_everything_valid_is_stored_untracked():
    state = DedupState()
    state.stored("p", 5)
    for seq in (0, 5, 6):
        got = admit(ENTRY, "p", seq, 1, state, MAX_SIZE)
        assert (got.outcome, got.tracked) == (A, False)
    assert admit(TOO_BIG, "p", 0, 1, state, MAX_SIZE).outcome is R


def test_deduplication_decisions():
    d = DedupState(snapshot_interval=2, max_producers=2)
    assert d.check("p", 0) == A
    d.pushed_to("p", 0)
    assert d.check("p", 0) == F  # pushed, not stored yet
    assert d.stored("p", 0) is False
    assert d.check("p", 0) == D
    d.pushed_to("p", 5)
    d.failed("p")  # the write of 1..5 failed: its retry is new
    assert d.check("p", 5) == A
    assert d.stored("p", 5) is True  # snapshot due every 2 stored entries
    assert d.last_sequence_id("p") == 5 and d.last_sequence_id("q") == -1
    d.stored("q", 1)
    d.stored("r", 1)  # max_producers=2: the oldest name is forgotten
    assert "p" not in d.persisted and d.check("p", 0) == A


def test_snapshots_round_trip_and_replays_count_as_persisted():
    d = DedupState()
    d.stored("p", 4)
    record = d.snapshot_record((3, 7))
    again = DedupState()
    assert again.restore(record) == (3, 7) and again.persisted == {"p": 4}
    stored = [((3, 8), encode_entry(_meta("p", 5, 3), b"")), ((3, 9), b"garbage")]
    assert again.observe(stored, in_flight_too=False) == 1
    again.replayed((3, 7))
    assert again.persisted == {"p": 7} and again.pushed == {"p": 7}
    assert again.check("p", 7) == D and again.covered == (3, 7)


def test_an_inner_chunk_found_stored_does_not_count_its_message_as_stored():
    # A failed ledger's recovery (or a replay) finds the first chunks of a
    # message but not its last: the message is not stored, so its resent
    # last chunk must be admitted, not answered as a duplicate.
    d = DedupState()
    d.enabled = True
    first = common_pb2.MessageMetadata(producer_name="p", sequence_id=3, publish_time=1)
    first.chunk_id, first.num_chunks_from_msg = 0, 2
    assert d.observe([((1, 0), encode_entry(first, b"x"))]) == 0
    assert d.check("p", 3) == A
    last = common_pb2.MessageMetadata(producer_name="p", sequence_id=3, publish_time=1)
    last.chunk_id, last.num_chunks_from_msg = 1, 2
    assert d.observe([((1, 1), encode_entry(last, b"x"))]) == 1
    assert d.check("p", 3) == D


def _meta(producer: str, seq: int, messages: int) -> common_pb2.MessageMetadata:
    meta = common_pb2.MessageMetadata(producer_name=producer, sequence_id=seq, publish_time=1)
    if messages > 1:
        meta.num_messages_in_batch = messages
    return meta
