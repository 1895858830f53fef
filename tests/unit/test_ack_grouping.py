"""Acknowledgement grouping (client/_ack_grouping.py): what a flush sends,
when the flush timer is armed, the bound, and which entry an ack names."""

from __future__ import annotations

import random
from typing import Any

import pytest

from client._ack_grouping import AckGroupingTracker, PendingAcks, ack_target, cumulative_position
from client.message import BatchAckTracker, Message
from protos.message_id import MessageId

GROUP_TIME_S = 0.1
MAX_SIZE = 3

# (now_s, step, argument, expected). An ack step expects the delay of the
# flush timer to arm (None: the armed one fires soon enough); a flush step
# expects what the flush sends.
ACK_GROUPING_STEPS = [
    (0.00, "ack", [(1, 1)], GROUP_TIME_S),  # the first ack of a group arms the timer
    (0.02, "ack", [(1, 2)], None),
    (0.03, "ack_cumulative", (1, 5), None),
    (0.04, "ack_batch_index", ((1, 7), 3, 0), 0.0),  # 3 pending = the max: flush at once
    (0.05, "ack_batch_index", ((1, 7), 3, 2), None),  # already due now
    (
        0.06,
        "flush",
        None,
        PendingAcks([(1, 1), (1, 2)], {(1, 7): (3, {0, 2})}, cumulative=(1, 5)),
    ),
    (0.07, "ack_cumulative", (1, 3), GROUP_TIME_S),  # a new group, a new timer
    (0.08, "ack_cumulative", (1, 2), None),  # lower than (1, 3): kept at (1, 3)
    (0.09, "ack", [(1, 7)], None),
    (0.10, "ack_batch_index", ((1, 7), 3, 1), None),
    # The entry acknowledged whole: its batch-index acks are not sent.
    (0.11, "flush", None, PendingAcks([(1, 7)], {}, cumulative=(1, 3))),
    (0.12, "flush", None, PendingAcks()),  # nothing pending
    (0.13, "ack", [(2, 1), (2, 2), (2, 3)], 0.0),  # a chunked message's chunks at once
]


def _step(tracker: AckGroupingTracker, now_s: float, step: str, arg: Any) -> object:
    if step == "ack":
        return tracker.add_individual(arg, now_s)
    if step == "ack_cumulative":
        return tracker.add_cumulative(arg, now_s)
    if step == "ack_batch_index":
        pos, size, index = arg
        return tracker.add_batch_index(pos, size, index, now_s)
    assert step == "flush", step
    return tracker.take()


def test_ack_grouping_follows_the_step_table():
    tracker = AckGroupingTracker(GROUP_TIME_S, MAX_SIZE)
    for now_s, step, arg, expected in ACK_GROUPING_STEPS:
        assert _step(tracker, now_s, step, arg) == expected, (now_s, step, arg)


def test_an_earlier_deadline_rearms_and_a_later_one_does_not():
    tracker = AckGroupingTracker(group_time_s=1.0, max_size=2)
    assert tracker.add_cumulative((1, 1), now_s=10.0) == 1.0  # due at 11.0
    assert tracker.add_cumulative((1, 2), now_s=10.5) is None
    assert tracker.add_individual([(1, 3)], now_s=10.6) is None  # 1 pending: still at 11.0
    assert tracker.add_individual([(1, 4)], now_s=10.7) == 0.0  # the max: due now, re-armed
    assert tracker.add_individual([(1, 5)], now_s=10.8) is None  # the armed one is due first


def test_a_failed_flush_is_restored_in_front_of_what_came_since():
    tracker = AckGroupingTracker(GROUP_TIME_S, max_size=4)
    tracker.add_individual([(1, 1)], 0.0)
    tracker.add_cumulative((1, 5), 0.0)
    tracker.add_batch_index((1, 7), 3, 0, 0.0)
    failed = tracker.take()
    assert tracker.add_individual([(1, 2)], 0.1) == GROUP_TIME_S
    tracker.add_cumulative((1, 4), 0.1)
    tracker.add_batch_index((1, 7), 3, 1, 0.1)
    tracker.restore(failed)
    assert tracker.pending() == 3
    # Restoring arms nothing: the next ack (or the reconnection) flushes.
    assert tracker.add_individual([(1, 3)], 0.15) == 0.0  # 4 pending: the max
    assert tracker.take() == PendingAcks(
        [(1, 1), (1, 2), (1, 3)], {(1, 7): (3, {0, 1})}, cumulative=(1, 5)
    )


def test_pending_acks_stay_within_the_bound_when_the_timer_fires_as_asked():
    rng = random.Random(18)
    tracker = AckGroupingTracker(GROUP_TIME_S, max_size=10)
    timer_at_s: float | None = None
    highest = 0
    for i in range(5000):
        now_s = i * 0.001
        if timer_at_s is not None and now_s >= timer_at_s:
            tracker.take()  # the caller's timer fired
            timer_at_s = None
        if rng.random() < 0.2:
            delay_s = tracker.add_batch_index((1, rng.randrange(50)), 4, rng.randrange(4), now_s)
        else:
            delay_s = tracker.add_individual([(2, i)], now_s)
        if delay_s is not None:
            timer_at_s = now_s + delay_s  # only ever armed earlier than before
        highest = max(highest, tracker.pending())
    assert highest == 10  # reached, never passed


def test_a_flush_group_is_falsy_only_when_empty():
    assert not PendingAcks()
    assert PendingAcks(cumulative=(0, 0))
    assert PendingAcks(batch_index={(1, 1): (2, {0})})


def test_bad_bounds_are_refused():
    with pytest.raises(AssertionError):
        AckGroupingTracker(GROUP_TIME_S, max_size=0)


def _batch_of(size: int, ledger_id: int = 1, entry_id: int = 5) -> list[Message]:
    tracker = BatchAckTracker(size)
    return [
        Message(
            b"",
            MessageId(ledger_id=ledger_id, entry_id=entry_id, batch_index=i),
            "t",
            {},
            None,
            None,
            0,
            0,
            "p",
            0,
            b"",
            tracker,
        )
        for i in range(size)
    ]


# A batch of 3 at entry (1, 5), acknowledged cumulatively message by message.
CUMULATIVE_STEPS = [
    (0, (1, 4)),  # the batch is not done: only the entries before it
    (1, (1, 4)),
    (2, (1, 5)),  # through its end: the entry itself
    (0, (1, 5)),  # an earlier message after that: the entry (nothing is outstanding)
]


def test_a_cumulative_ack_inside_a_batch_covers_the_entries_before_it():
    batch = _batch_of(3)
    for index, position in CUMULATIVE_STEPS:
        assert cumulative_position(batch[index]) == position, index


def test_ack_targets_are_messages_or_message_ids():
    batch = _batch_of(2)
    assert ack_target(batch[1], "acknowledge") == (batch[1].message_id(), batch[1]._batch)
    assert cumulative_position(MessageId(ledger_id=3, entry_id=9, batch_index=1)) == (3, 9)
    with pytest.raises(TypeError, match="acknowledge takes a Message or MessageId, not str"):
        ack_target("1:2", "acknowledge")  # type: ignore[arg-type]
