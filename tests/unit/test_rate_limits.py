"""Token buckets (broker/rate_limits.py) as step tables with a clock the
test moves: the rate over a window, debt after an oversized take, stacked
throttles, the subscribe limiter's bound."""

from __future__ import annotations

import pytest

from broker.rate_limits import (
    BATCH_S,
    UNLIMITED,
    SubscribeLimiter,
    Throttle,
    TokenBucket,
    allowance,
    take,
    wait_s,
)

# Steps on a bucket of 10 per 1 s, empty at t=0: (time, action, n, expected)
BUCKET_STEPS = [
    (0.0, "available", 0, 0),  # starts empty: no burst on top of the rate
    (0.0, "wait", 0, pytest.approx(0.1)),
    (0.5, "available", 0, 5),
    (0.5, "take", 5, None),
    (0.5, "available", 0, 0),
    (0.5, "take", 3, None),  # a batch entry taken whole: 3 tokens of debt
    (0.5, "wait", 0, pytest.approx(0.4)),  # pay 3, then one whole token
    (0.8, "available", 0, 0),
    (0.9, "available", 0, 1),
    (10.0, "available", 0, 10),  # never more than one period's worth
]


def test_a_bucket_step_by_step():
    bucket = TokenBucket(10, 1.0, 0.0)
    for now, action, n, expected in BUCKET_STEPS:
        if action == "available":
            assert bucket.available(now) == expected, (now, action)
        elif action == "wait":
            assert bucket.wait_s(now) == expected, (now, action)
        else:
            bucket.take(n, now)


def test_over_a_window_the_rate_holds_whatever_the_entry_sizes():
    """A dispatcher taking entries of 1..7 messages whenever the bucket says
    it may sends within one entry and one batch (BATCH_S of the rate) of
    rate x window."""
    for per_s in (10, 100, 10_000):
        bucket = TokenBucket(per_s, 1.0, 0.0)
        sent, now, sizes = 0, 0.0, [1, 7, 3, 5, 2]
        step = 0
        while now < 5.0:
            if bucket.wait_s(now) == 0:
                n = sizes[step % len(sizes)]
                bucket.take(n, now)
                sent += n
                step += 1
            now = round(now + max(bucket.wait_s(now), 1e-4), 6)
        assert abs(sent - 5 * per_s) <= 7 + per_s * BATCH_S, (per_s, sent)


def test_a_period_longer_than_a_second():
    t = Throttle(100, -1, 10.0, 0.0)  # 100 messages per 10 s
    assert t.allowance(5.0) == (50, UNLIMITED)


def test_stacked_throttles_let_go_the_least_and_wait_the_longest():
    topic = Throttle(100, -1, 1.0, 0.0)
    sub = Throttle(-1, 1000, 1.0, 0.0)
    assert not Throttle(0, -1, 1.0, 0.0).limits
    assert allowance([topic, sub, None], 0.5) == (50, 500)
    take([topic, sub], 50, 900, 0.5)
    assert allowance([topic, sub], 0.5) == (0, 0)
    assert wait_s([topic, sub], 0.5) == pytest.approx(0.41)  # bytes: 400 in debt + 10 ms of rate
    assert wait_s([], 0.5) == 0.0


def test_the_subscribe_limiter_per_name_and_its_bound():
    limiter = SubscribeLimiter(2, 30.0, max_names=2)
    assert [limiter.admit("a", 0.0) for _ in range(3)] == [True, True, False]
    assert limiter.admit("a", 15.0)  # one token back after half the period
    assert limiter.admit("b", 15.0) and limiter.admit("c", 15.0)
    assert len(limiter._buckets) == 2  # "a" was the least recent: forgotten
    assert limiter.admit("a", 15.0)  # a forgotten name starts full again
    # Asking spends nothing; only a subscribe that succeeded spends.
    fresh = SubscribeLimiter(1, 30.0, max_names=10)
    assert fresh.allows("x", 0.0) and fresh.allows("x", 0.0)
    fresh.spend("x", 0.0)
    assert not fresh.allows("x", 0.0)
