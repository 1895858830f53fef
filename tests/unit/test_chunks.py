"""Reassembly of chunked messages (client/chunks.py)."""

from __future__ import annotations

import pytest

from client.chunks import Added, ChunkAssembler, Take, take_chunk

A, B, C, D = (1, 0), (1, 1), (1, 2), (1, 3)


@pytest.mark.parametrize(
    ("held", "chunk_id", "pos", "completed", "take"),
    [
        # Nothing held for the message.
        (None, 0, A, None, Take.START),
        (None, 0, A, [A, B], Take.START),  # a completed message delivered again
        (None, 0, D, [A, B], Take.DUPLICATE),  # sent again after it completed
        (None, 1, B, None, Take.STRAY),  # its start was evicted or never came
        (None, 2, D, [A, B, C], Take.DUPLICATE),  # a copy of a completed message's chunk
        (None, 2, C, [A, B, C], Take.STRAY),  # that message's own chunk, without its start
        # Part of the message held.
        ([A], 1, B, None, Take.APPEND),
        ([A, B], 2, C, None, Take.APPEND),
        ([A, B], 1, B, None, Take.COPY),  # the same entry delivered again
        ([A, B], 0, A, None, Take.COPY),
        ([A, B], 1, C, None, Take.DUPLICATE),  # stored twice
        ([A, B], 0, C, None, Take.DUPLICATE),  # the producer started the message over
        ([A], 2, C, None, Take.GAP),  # chunk 1 is missing
    ],
)
def test_what_a_chunk_means_for_its_message(held, chunk_id, pos, completed, take):
    assert take_chunk(held, chunk_id, pos, completed) is take


def test_interleaved_messages_reassemble_in_order():
    a = ChunkAssembler(max_pending=10, expire_s=60)
    assert a.add(("A", 1), 0, 2, b"a0", (1, 0), 0) == Added(None, [], [])
    assert a.add(("B", 1), 0, 3, b"b0", (1, 1), 0) == Added(None, [], [])
    whole, dropped, acked = a.add(("A", 1), 1, 2, b"a1", (1, 2), 0)
    assert whole is not None and whole.payload == b"a0a1" and whole.positions == [(1, 0), (1, 2)]
    assert dropped == acked == []
    a.add(("B", 1), 1, 3, b"b1", (1, 3), 0)
    whole, _, _ = a.add(("B", 1), 2, 3, b"b2", (1, 4), 0)
    assert whole is not None and whole.payload == b"b0b1b2" and len(a) == 0


def test_a_full_assembler_drops_the_oldest_and_strays_are_dropped():
    a = ChunkAssembler(max_pending=1, expire_s=60)
    a.add(("A", 1), 0, 2, b"a0", (1, 0), 0)
    assert a.add(("B", 1), 0, 2, b"b0", (1, 1), 0) == Added(None, [[(1, 0)]], [])
    assert a.add(("A", 1), 1, 2, b"a1", (1, 2), 0) == Added(
        None, [[(1, 2)]], []
    )  # its start is gone
    whole, _, _ = a.add(("B", 1), 1, 2, b"b1", (1, 3), 0)
    assert whole is not None and whole.payload == b"b0b1"


def test_a_gap_drops_the_message_and_old_partials_expire():
    a = ChunkAssembler(max_pending=10, expire_s=5)
    a.add(("A", 1), 0, 3, b"x", (1, 0), 0)
    assert a.add(("A", 1), 2, 3, b"z", (1, 1), 1) == Added(None, [[(1, 0)], [(1, 1)]], [])
    a.add(("A", 1), 0, 3, b"x", (1, 0), 1)  # redelivered
    a.add(("B", 1), 0, 2, b"b", (1, 2), 4)
    assert a.expire(5.5) == []  # A restarted at 1 s: only 4.5 s old
    assert a.expire(6.0) == [[(1, 0)]]
    assert a.expire(9) == [[(1, 2)]] and len(a) == 0


def test_copies_of_chunks_are_acknowledged_and_the_message_assembled_once():
    """Chunks stored twice (an at-least-once resend): c0 c1 c1' c2 c2'."""
    a = ChunkAssembler(max_pending=10, expire_s=60)
    a.add(("A", 1), 0, 3, b"a0", (1, 0), 0)
    a.add(("A", 1), 1, 3, b"a1", (1, 1), 0)
    assert a.add(("A", 1), 1, 3, b"a1", (1, 2), 0) == Added(None, [], [(1, 2)])
    whole, dropped, acked = a.add(("A", 1), 2, 3, b"a2", (1, 3), 0)
    assert whole is not None and whole.payload == b"a0a1a2" and dropped == acked == []
    assert whole.positions == [(1, 0), (1, 1), (1, 3)]
    assert a.add(("A", 1), 2, 3, b"a2", (1, 4), 0) == Added(
        None, [], [(1, 4)]
    )  # after it completed
    # The whole message delivered again (not acknowledged in time): assembled again.
    for chunk_id, pos in enumerate([(1, 0), (1, 1)]):
        assert (
            a.add(("A", 1), chunk_id, 3, b"a%d" % chunk_id, pos, 1, redelivery_count=1).acked == []
        )
    whole, _, _ = a.add(("A", 1), 2, 3, b"a2", (1, 3), 1, redelivery_count=1)
    assert whole is not None and whole.payload == b"a0a1a2" and whole.redelivery_count == 1


def test_the_same_entry_delivered_again_changes_nothing():
    a = ChunkAssembler(max_pending=10, expire_s=60)
    a.add(("A", 1), 0, 3, b"a0", (1, 0), 0)
    a.add(("A", 1), 1, 3, b"a1", (1, 1), 0)
    assert a.add(("A", 1), 0, 3, b"a0", (1, 0), 1) == Added(None, [], [])  # after a reconnect
    assert a.add(("A", 1), 1, 3, b"a1", (1, 1), 1) == Added(None, [], [])
    whole, _, _ = a.add(("A", 1), 2, 3, b"a2", (1, 2), 1)
    assert whole is not None and whole.payload == b"a0a1a2"


def test_a_message_sent_again_from_its_start_is_assembled_from_either_copy():
    """c0 c1 | c0' c1' c2': the producer resent the message from its start
    (the same bytes): the copies of what is held are acknowledged."""
    a = ChunkAssembler(max_pending=10, expire_s=60)
    a.add(("A", 1), 0, 3, b"a0", (1, 0), 0)
    a.add(("A", 1), 1, 3, b"a1", (1, 1), 0)
    assert a.add(("A", 1), 0, 3, b"a0", (1, 2), 0) == Added(None, [], [(1, 2)])
    assert a.add(("A", 1), 1, 3, b"a1", (1, 3), 0) == Added(None, [], [(1, 3)])
    whole, _, _ = a.add(("A", 1), 2, 3, b"a2", (1, 4), 0)
    assert whole is not None and whole.payload == b"a0a1a2" and len(a) == 0
    assert whole.positions == [(1, 0), (1, 1), (1, 4)]
    # After a reconnect everything unacknowledged comes again: nothing changes.
    for chunk_id, pos in [(0, (1, 0)), (1, (1, 1))]:
        assert a.add(("A", 1), chunk_id, 3, b"x", pos, 1).acked == []


def test_a_resend_that_never_completes_after_its_message_did_is_acknowledged():
    """c0 c1 c2 | c0' c1': deduplication refused the last chunk's copy."""
    a = ChunkAssembler(max_pending=10, expire_s=60)
    for chunk_id in range(3):
        whole, _, _ = a.add(("A", 1), chunk_id, 3, b"a", (1, chunk_id), 0)
    assert whole is not None
    assert a.add(("A", 1), 0, 3, b"a", (1, 3), 0) == Added(None, [], [(1, 3)])
    assert a.add(("A", 1), 1, 3, b"a", (1, 4), 0) == Added(None, [], [(1, 4)])
    assert len(a) == 0  # nothing left to expire and come again


def test_a_new_message_with_a_used_uuid_is_its_own_message():
    """A restarted producer of the same name sends sequence id 0 again: the
    same uuid, another publish time; nothing of it is taken for a copy."""
    a = ChunkAssembler(max_pending=10, expire_s=60)
    a.add(("p-0", 1), 0, 2, b"old", (1, 0), 0)  # the old producer never sent the rest
    for chunk_id in range(2):
        whole, dropped, acked = a.add(("p-0", 2), chunk_id, 2, b"new", (1, 1 + chunk_id), 0)
        assert dropped == acked == []
    assert whole is not None and whole.payload == b"newnew" and len(a) == 1
    assert a.add(("p-0", 2), 1, 2, b"new", (1, 3), 0).acked == [(1, 3)]  # its copy
    assert a.add(("p-0", 3), 1, 2, b"new", (1, 4), 0) == Added(None, [[(1, 4)]], [])


def test_completed_messages_are_remembered_up_to_max_pending():
    a = ChunkAssembler(max_pending=2, expire_s=60)
    for i, uuid in enumerate("ABC"):
        a.add((uuid, 1), 0, 1, b"x", (1, i), 0)  # one-chunk messages, for brevity
    # A was forgotten (two remembered): its stray copy is dropped, B's acknowledged.
    assert a.add(("A", 1), 1, 2, b"x", (2, 0), 0) == Added(None, [[(2, 0)]], [])
    assert a.add(("B", 1), 1, 2, b"x", (2, 1), 0) == Added(None, [], [(2, 1)])


def test_a_whole_message_counts_its_most_redelivered_chunk():
    a = ChunkAssembler(max_pending=10, expire_s=60)
    a.add(("A", 1), 0, 3, b"a0", (1, 0), 0, redelivery_count=1)  # dropped once, come again
    a.add(("A", 1), 1, 3, b"a1", (1, 1), 0, redelivery_count=2)
    whole, _, _ = a.add(("A", 1), 2, 3, b"a2", (1, 2), 0)  # first time for the last chunk
    assert whole is not None and whole.redelivery_count == 2
    whole, _, _ = ChunkAssembler(1, 60).add(("B", 1), 0, 1, b"b", (1, 3), 0)
    assert whole is not None and whole.redelivery_count == 0


def test_without_memory_of_completed_messages_a_late_copy_is_its_own_message():
    """Shared and Key_Shared: the message's own chunks may be with another
    consumer, so nothing is taken for a copy of a completed message."""
    a = ChunkAssembler(max_pending=10, expire_s=60, remember_completed=False)
    for chunk_id in range(2):
        whole, _, _ = a.add(("A", 1), chunk_id, 2, b"a", (1, chunk_id), 0)
    assert whole is not None
    # A resend is assembled again (delivered at least once), not acknowledged.
    assert a.add(("A", 1), 0, 2, b"a", (1, 2), 0) == Added(None, [], [])
    assert a.add(("A", 1), 0, 2, b"a", (1, 3), 0).acked == [(1, 3)]  # a copy of a held chunk
    whole, _, _ = a.add(("A", 1), 1, 2, b"a", (1, 4), 0)
    assert whole is not None and whole.positions == [(1, 2), (1, 4)]
    assert a.add(("A", 1), 1, 2, b"a", (1, 5), 0) == Added(None, [[(1, 5)]], [])


def test_a_restart_forgets_what_is_held_and_after_a_seek_what_completed():
    a = ChunkAssembler(max_pending=10, expire_s=60)
    for chunk_id in range(2):
        a.add(("A", 1), chunk_id, 2, b"a", (1, chunk_id), 0)
    a.add(("B", 1), 0, 2, b"b", (1, 2), 0)
    a.restart()  # a reconnect: B's first chunk comes again
    assert len(a) == 0 and a.expire(100) == []
    assert a.add(("B", 1), 1, 2, b"b", (1, 3), 0) == Added(None, [[(1, 3)]], [])
    assert a.add(("A", 1), 1, 2, b"a", (1, 4), 0).acked == [(1, 4)]  # A still remembered
    a.restart(forget_completed=True)  # a seek: A is read again as asked
    assert a.add(("A", 1), 0, 2, b"a", (1, 5), 0) == Added(None, [], [])
