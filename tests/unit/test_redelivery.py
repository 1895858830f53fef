"""Client-side redelivery bookkeeping (client/redelivery.py) and the
backoff tables of the seed."""

from __future__ import annotations

import pytest

from client import InvalidConfiguration, MultiplierRedeliveryBackoff
from client.redelivery import AckTimeoutTracker, NegativeAckTracker

SEED_NACK_TABLE = [(1, 1), (2, 2), (3, 4), (4, 8), (5, 16), (6, 32), (7, 60), (8, 60)]


def test_multiplier_backoff_gives_the_seed_table():
    backoff = MultiplierRedeliveryBackoff(min_delay_ms=1000, max_delay_ms=60000, multiplier=2)
    # Redelivery number k follows a message whose redelivery count is k - 1.
    for redelivery, seconds in SEED_NACK_TABLE:
        assert backoff.next(redelivery - 1) == seconds * 1000
    assert backoff.next(10_000) == 60000  # capped, no overflow


def test_ack_timeout_with_backoff_gives_the_seeds_second_table():
    backoff = MultiplierRedeliveryBackoff(1000, 60000, 2)
    tracker = AckTimeoutTracker(timeout_s=10)
    for redelivery, seconds in SEED_NACK_TABLE:
        pos = (1, redelivery)
        tracker.taken(pos, now_s=0.0, backoff_s=backoff.next(redelivery - 1) / 1000)
        assert tracker.due(10 + seconds - 0.001) == []
        assert tracker.due(10 + seconds) == [pos]


def test_bad_backoffs_are_refused():
    for args in ((-1, 10, 2), (10, 5, 2), (10, 20, 0.5)):
        with pytest.raises(InvalidConfiguration):
            MultiplierRedeliveryBackoff(*args)


def test_negative_acks_are_due_after_their_delay_once():
    t = NegativeAckTracker()
    t.nack((1, 1), now_s=0, delay_s=1)
    t.nack((1, 2), now_s=0.5, delay_s=1)
    assert t.due(0.99) == []
    assert t.due(1.0) == [(1, 1)]
    assert t.due(1.2) == []
    t.acked((1, 2))  # acked after the nack: not redelivered
    assert t.due(5) == [] and len(t) == 0
    t.nack((2, 1), now_s=0, delay_s=1)
    t.nack((2, 1), now_s=0.5, delay_s=1)  # nacked again: the later deadline
    assert t.due(1.0) == [] and t.due(1.5) == [(2, 1)]


def test_ack_timeout_counts_from_the_first_message_of_an_entry_taken():
    t = AckTimeoutTracker(timeout_s=2)
    t.taken((1, 1), now_s=0)
    t.taken((1, 1), now_s=1)  # another message of the same batch entry
    t.taken((1, 2), now_s=1)
    t.acked((1, 2))
    assert t.due(1.99) == [] and t.due(2) == [(1, 1)] and t.due(10) == []
