"""The delayed-delivery tracker (broker/delayed_delivery.py)."""

from __future__ import annotations

from broker.delayed_delivery import DelayedDeliveryTracker


def test_not_strict_may_deliver_one_tick_early_strict_never():
    loose = DelayedDeliveryTracker(tick_ms=1000, strict=False, max_tracked=10)
    strict = DelayedDeliveryTracker(tick_ms=1000, strict=True, max_tracked=10)
    for t in (loose, strict):
        assert not t.is_delayed(0, now_ms=5000)  # no deliver-at: at once
        assert not t.is_delayed(4000, now_ms=5000)  # in the past
    assert not loose.is_delayed(5900, now_ms=5000)  # within a tick: now
    assert strict.is_delayed(5900, now_ms=5000)
    for t in (loose, strict):
        t.add((1, 2), 9000, "b")
        t.add((1, 1), 8000, "a")
        t.add((1, 1), 8000, "a")  # read again: tracked once
        assert len(t) == 2
    assert loose.next_wakeup_ms() == 7000 and strict.next_wakeup_ms() == 8000
    assert loose.due(6999) == [] and loose.due(7000) == [((1, 1), "a")]
    assert strict.due(7999) == [] and strict.due(9000) == [((1, 1), "a"), ((1, 2), "b")]
    assert strict.next_wakeup_ms() is None


def test_the_tracker_says_when_it_is_full():
    t = DelayedDeliveryTracker(tick_ms=10, strict=True, max_tracked=2)
    t.add((1, 1), 100)
    assert not t.full
    t.add((1, 2), 100)
    assert t.full
    t.due(100)
    assert not t.full and len(t) == 0


def test_the_tracker_counts_the_messages_it_holds():
    t = DelayedDeliveryTracker(tick_ms=10, strict=True, max_tracked=10)
    t.add((1, 1), 100, "a", messages=5)
    t.add((1, 1), 100, "a", messages=5)  # read again: counted once
    t.add((1, 2), 200, "b", messages=3)
    assert t.messages == 8
    assert t.due(150) == [((1, 1), "a")] and t.messages == 3
    t.clear()
    assert t.messages == 0 and len(t) == 0
