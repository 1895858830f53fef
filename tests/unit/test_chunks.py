"""Reassembly of chunked messages (client/chunks.py)."""

from __future__ import annotations

from client.chunks import ChunkAssembler


def test_interleaved_messages_reassemble_in_order():
    a = ChunkAssembler(max_pending=10, expire_s=60)
    assert a.add("A", 0, 2, b"a0", (1, 0), 0) == (None, [])
    assert a.add("B", 0, 3, b"b0", (1, 1), 0) == (None, [])
    whole, dropped = a.add("A", 1, 2, b"a1", (1, 2), 0)
    assert whole is not None and whole.payload == b"a0a1" and whole.positions == [(1, 0), (1, 2)]
    assert dropped == []
    a.add("B", 1, 3, b"b1", (1, 3), 0)
    whole, _ = a.add("B", 2, 3, b"b2", (1, 4), 0)
    assert whole is not None and whole.payload == b"b0b1b2" and len(a) == 0


def test_a_full_assembler_drops_the_oldest_and_strays_are_dropped():
    a = ChunkAssembler(max_pending=1, expire_s=60)
    a.add("A", 0, 2, b"a0", (1, 0), 0)
    whole, dropped = a.add("B", 0, 2, b"b0", (1, 1), 0)
    assert whole is None and dropped == [[(1, 0)]]
    whole, dropped = a.add("A", 1, 2, b"a1", (1, 2), 0)  # its start is gone
    assert whole is None and dropped == [[(1, 2)]]
    whole, _ = a.add("B", 1, 2, b"b1", (1, 3), 0)
    assert whole is not None and whole.payload == b"b0b1"


def test_out_of_sequence_restarts_and_old_partials_expire():
    a = ChunkAssembler(max_pending=10, expire_s=5)
    a.add("A", 0, 3, b"x", (1, 0), 0)
    whole, dropped = a.add("A", 0, 3, b"y", (1, 1), 1)  # resent from the start
    assert whole is None and dropped == [[(1, 0)]]
    a.add("B", 0, 2, b"b", (1, 2), 4)
    assert a.expire(5.5) == []  # A restarted at 1 s: only 4.5 s old
    assert a.expire(6.0) == [[(1, 1)]]
    assert a.expire(9) == [[(1, 2)]] and len(a) == 0


def test_a_whole_message_counts_its_most_redelivered_chunk():
    a = ChunkAssembler(max_pending=10, expire_s=60)
    a.add("A", 0, 3, b"a0", (1, 0), 0, redelivery_count=1)  # dropped once, come again
    a.add("A", 1, 3, b"a1", (1, 1), 0, redelivery_count=2)
    whole, _ = a.add("A", 2, 3, b"a2", (1, 2), 0)  # first time for the last chunk
    assert whole is not None and whole.redelivery_count == 2
    whole, _ = ChunkAssembler(1, 60).add("B", 0, 1, b"b", (1, 3), 0)
    assert whole is not None and whole.redelivery_count == 0
