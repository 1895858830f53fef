"""ServiceBrokers (client/_service_brokers.py): which listed broker a call
that any broker can answer asks next. Time is passed in; the random start is
the caller's draw, given here."""

from __future__ import annotations

import random

import grpc
import pytest

from client._service_brokers import (
    DOWN_MS_FIRST,
    DOWN_MS_MAX,
    ServiceBrokers,
    try_next,
)

A, B, C = "a:6650", "b:6650", "c:6650"

# (now_ms, action, broker, order to try afterwards, current afterwards)
STEPS: list[tuple[int, str | None, str, list[str], str]] = [
    (0, None, "", [A, B, C], A),
    # A fails: down until 1000, and the next broker is asked first.
    (0, "down", A, [B, C, A], B),
    # B fails too: down until 1500; A comes back first, so it is tried before B.
    (500, "down", B, [C, A, B], C),
    (999, None, "", [C, A, B], C),
    # A's backoff is over: it is up again, after the current one.
    (1000, None, "", [C, A, B], C),
    (1000, "up", C, [C, A, B], C),
    # A fails a second time in a row: twice the backoff (until 3200).
    (1200, "down", A, [C, B, A], C),
    (1600, None, "", [C, B, A], C),
    # B is back (1500); C fails: B first, then the down ones, the soonest back first.
    (1600, "down", C, [B, C, A], A),
    # B fails again (until 3600): everything down, all still tried, soonest back first.
    (1600, "down", B, [C, A, B], A),
    # A answers: up, asked first, its count reset; the others stay down.
    (1700, "up", A, [A, C, B], A),
    (1700, "down", A, [C, A, B], B),
]


def test_steps_rotate_past_down_brokers_and_try_the_soonest_back_first():
    brokers = ServiceBrokers([A, B, C], start=0)
    for now_ms, action, broker, order, current in STEPS:
        if action == "down":
            brokers.mark_down(broker, now_ms)
        elif action == "up":
            brokers.mark_up(broker)
        assert brokers.order(now_ms) == order, (now_ms, action, broker)
        assert brokers.current == current, (now_ms, action, broker)
    # The last step: A failed once since its answer, so one first backoff.
    assert brokers.down_until_ms(A) == 1700 + DOWN_MS_FIRST


def test_the_next_round_waits_for_the_soonest_broker_back():
    brokers = ServiceBrokers([A, B], start=0)
    assert brokers.wait_ms(0) == 0
    brokers.mark_down(A, 0)  # until 1000
    assert brokers.wait_ms(100) == 0  # B is up
    brokers.mark_down(B, 100)  # until 1100
    assert brokers.pick(100, tried=[A, B]) is None  # the round is over
    assert brokers.wait_ms(100) == 900
    assert brokers.wait_ms(1000) == 0
    assert brokers.pick(1000) == A


@pytest.mark.parametrize(
    ("failures", "down_ms"),
    [(1, 1000), (2, 2000), (3, 4000), (4, 8000), (5, 16000), (6, 30000), (7, 30000), (80, 30000)],
)
def test_backoff_doubles_per_failure_in_a_row_up_to_the_max(failures, down_ms):
    assert (DOWN_MS_FIRST, DOWN_MS_MAX) == (1000, 30000)
    brokers = ServiceBrokers([A, B], start=0)
    for _ in range(failures):
        until = brokers.mark_down(A, 10_000)
    assert until == 10_000 + down_ms
    assert brokers.is_down(A, 10_000 + down_ms - 1)
    assert not brokers.is_down(A, 10_000 + down_ms)


@pytest.mark.parametrize(("start", "order"), [(0, [A, B, C]), (1, [B, C, A]), (2, [C, A, B])])
def test_a_client_starts_at_the_broker_drawn(start, order):
    assert ServiceBrokers([A, B, C], start=start).order(0) == order


def test_a_dead_first_entry_marked_down_is_skipped_by_later_calls():
    brokers = ServiceBrokers([A, B, C], start=0)
    assert brokers.pick(0) == A
    brokers.mark_down(A, 0)  # refused
    assert brokers.pick(0, tried=[A]) == B  # the same call goes on
    brokers.mark_up(B)
    for now_ms in (1, 500, 999, 5000):  # later calls start at B, before and after A's backoff
        assert brokers.pick(now_ms) == B


def test_a_call_tries_each_broker_once_then_gives_up():
    brokers = ServiceBrokers([A, B, C], start=1)
    tried: list[str] = []
    while (address := brokers.pick(0, tried)) is not None:
        tried.append(address)
        brokers.mark_down(address, 0)
    assert tried == [B, C, A]


@pytest.mark.parametrize("seed", range(5))
def test_random_failures_and_answers_keep_every_call_a_permutation(seed):
    rng = random.Random(seed)
    addresses = [f"broker-{i}:6650" for i in range(rng.randint(1, 5))]
    brokers = ServiceBrokers(addresses, start=rng.randrange(len(addresses)))
    now_ms = 0
    for _ in range(300):
        now_ms += rng.choice([0, 10, 700, 5000])
        order = brokers.order(now_ms)
        assert sorted(order) == sorted(addresses)
        down = [a for a in order if brokers.is_down(a, now_ms)]
        assert order[len(order) - len(down) :] == down  # up ones first
        ends = [brokers.down_until_ms(a) for a in down]
        assert ends == sorted(ends)
        address = rng.choice(addresses)
        if rng.random() < 0.5:
            until = brokers.mark_down(address, now_ms)
            assert now_ms + DOWN_MS_FIRST <= until <= now_ms + DOWN_MS_MAX
        else:
            brokers.mark_up(address)
            assert brokers.pick(now_ms) == address


@pytest.mark.parametrize(
    ("code", "next_one"),
    [
        (grpc.StatusCode.UNAVAILABLE, True),
        (grpc.StatusCode.DEADLINE_EXCEEDED, False),
        (grpc.StatusCode.INTERNAL, False),
        (grpc.StatusCode.UNIMPLEMENTED, False),
        (None, False),
    ],
)
def test_only_unavailable_means_try_the_next_broker(code, next_one):
    assert try_next(code) is next_one


@pytest.mark.parametrize(
    ("addresses", "start", "message"),
    [
        ([], 0, "at least one"),
        ([A, A], 0, "each broker once"),
        ([A, B], 2, "not an index"),
        ([A, B], -1, "not an index"),
    ],
)
def test_bad_lists_are_refused(addresses, start, message):
    with pytest.raises(ValueError, match=message):
        ServiceBrokers(addresses, start)
