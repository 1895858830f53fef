"""Who holds which unacknowledged entry (broker/pending_acks.py), as step
tables: join / deliver / ack / nack / leave / seek -> expected state."""

from __future__ import annotations

from typing import Any

import pytest

from broker.pending_acks import UNLIMITED, PendingAcks


def P(entry: int) -> tuple[int, int]:  # a position of ledger 1, as in the tables
    return (1, entry)


# (action, consumer, argument) -> what each consumer then holds, as
# {consumer: ([pending positions], unacked messages)}, and the redelivery
# counts. "ack"/"ack_cumulative" also acknowledge on the cursor; "nack" and
# "leave" give entries back (counting a redelivery unless the cursor acked
# them); an individual ack clears only what the acking consumer holds.
STEPS: list[tuple[Any, ...]] = [
    ("join", "c1", None, {"c1": ([], 0)}, {}),
    ("join", "c2", None, {"c1": ([], 0), "c2": ([], 0)}, {}),
    (
        "deliver",
        "c1",
        [(P(0), 1), (P(1), 10)],  # 1:1 is a batch of 10 messages
        {"c1": ([P(0), P(1)], 11), "c2": ([], 0)},
        {},
    ),
    ("deliver", "c2", [(P(2), 1)], {"c1": ([P(0), P(1)], 11), "c2": ([P(2)], 1)}, {}),
    ("ack", "c1", [P(0)], {"c1": ([P(1)], 10), "c2": ([P(2)], 1)}, {}),
    ("ack", "c2", [P(1)], {"c1": ([P(1)], 10), "c2": ([P(2)], 1)}, {}),  # c2 does not hold it
    ("nack", "c1", [P(1)], {"c1": ([], 0), "c2": ([P(2)], 1)}, {}),  # acked meanwhile: no count
    ("deliver", "c1", [(P(3), 1)], {"c1": ([P(3)], 1), "c2": ([P(2)], 1)}, {}),
    ("nack", "c1", [P(3), P(9)], {"c1": ([], 0), "c2": ([P(2)], 1)}, {P(3): 1}),  # 1:9 not held
    ("deliver", "c2", [(P(3), 1)], {"c1": ([], 0), "c2": ([P(2), P(3)], 2)}, {P(3): 1}),
    ("leave", "c2", None, {"c1": ([], 0)}, {P(2): 1, P(3): 2}),
    ("deliver", "c1", [(P(2), 1), (P(3), 1), (P(4), 1)], {"c1": ([P(2), P(3), P(4)], 3)}, None),
    ("ack_cumulative", None, [P(3)], {"c1": ([P(4)], 1)}, {}),  # every holder, counts too
    ("deliver", "c1", [(P(5), 2)], {"c1": ([P(4), P(5)], 3)}, {}),
    ("seek", None, None, {"c1": ([], 0)}, {}),
]


def test_pending_acks_steps():
    pending: PendingAcks[str] = PendingAcks(0, 0)
    acked: set[tuple[int, int]] = set()
    for action, consumer, arg, expected, counts in STEPS:
        _apply(pending, acked, action, consumer, arg)
        held = {c: (sorted(pending.pending(c)), pending.unacked(c)) for c in expected}
        assert held == expected, (action, consumer, arg)
        assert pending.total_unacked == sum(n for _, n in expected.values())
        assert len(pending) == sum(len(p) for p, _ in expected.values())
        if counts is not None:
            assert {p: pending.redelivery_count(p) for p in pending._counts} == counts, action


def _apply(
    pending: PendingAcks[str], acked: set[tuple[int, int]], action: str, consumer: Any, arg: Any
) -> None:
    if action == "join":
        pending.add_consumer(consumer)
    elif action == "deliver":
        pending.delivered(consumer, arg)
    elif action == "ack":
        acked.update(arg)
        pending.acked(arg, False, consumer)
    elif action == "ack_cumulative":
        acked.update(p for p in [P(i) for i in range(arg[0][1] + 1)])
        pending.acked(arg, True, consumer)
    elif action == "nack":
        pending.give_back(consumer, arg, acked.__contains__)
    elif action == "leave":
        pending.remove_consumer(consumer, acked.__contains__)
    elif action == "seek":
        pending.clear()
    else:
        raise AssertionError(action)


def test_a_position_is_pending_at_one_consumer_at_most():
    pending: PendingAcks[str] = PendingAcks(0, 0)
    pending.delivered("c1", [(P(0), 1)])
    with pytest.raises(AssertionError, match="pending at two consumers"):
        pending.delivered("c2", [(P(0), 1)])
    pending.delivered("c1", [(P(0), 1)])  # the same holder again (a rewind): counted once
    assert pending.unacked("c1") == 1 and pending.holder(P(0)) == "c1"
    pending.give_back("c1", [P(0)], lambda p: False)
    pending.delivered("c2", [(P(0), 1)])  # given back: it may go elsewhere now
    assert pending.holder(P(0)) == "c2" and pending.redelivered("c2") == 1


# Limits of 10 per consumer and 15 per subscription, with hysteresis: blocked
# at the limit until the unacked count falls to half of it.
# (action, consumer, entries, messages per entry) -> (c1 may take, c2 may
# take, subscription blocked, allowance of c1, allowance of the subscription);
# "ack" acknowledges that many of the consumer's oldest entries.
LIMIT_STEPS = [
    ("deliver", "c1", 6, 1, True, True, False, 4, 9),
    ("deliver", "c1", 4, 1, False, True, False, 0, 5),
    ("ack", "c1", 4, 1, False, True, False, 4, 9),  # 6 unacked: still over half the limit
    ("ack", "c1", 1, 1, True, True, False, 5, 10),  # 5: unblocked
    ("deliver", "c2", 1, 12, True, False, True, 0, 0),  # one batch overshoots both limits
    ("ack", "c1", 2, 1, True, False, True, 0, 0),  # 15 in the subscription: still blocked
    ("ack", "c2", 1, 12, True, True, False, 7, 12),  # 3 <= 15 // 2: unblocked
]


def test_unacked_limits_block_and_unblock_at_half():
    pending: PendingAcks[str] = PendingAcks(10, 15)
    held: dict[str, list[tuple[int, int]]] = {"c1": [], "c2": []}
    entry = iter(range(1000))
    for action, consumer, entries, per_entry, c1, c2, blocked, room_c1, room_sub in LIMIT_STEPS:
        if action == "deliver":
            positions = [P(next(entry)) for _ in range(entries)]
            pending.delivered(consumer, [(p, per_entry) for p in positions])
            held[consumer] += positions
        else:
            done, held[consumer] = held[consumer][:entries], held[consumer][entries:]
            pending.acked(done, False, consumer)
        step = (action, consumer, entries)
        assert pending.can_take("c1") is c1, step
        assert pending.can_take("c2") is c2, step
        assert pending.check_subscription_blocked() is blocked, step
        assert (pending.allowance("c1"), pending.allowance()) == (room_c1, room_sub), step


def test_no_limit_means_no_block():
    pending: PendingAcks[str] = PendingAcks(0, 0)
    pending.delivered("c", [(P(i), 1000) for i in range(100)])
    assert pending.can_take("c") and not pending.check_subscription_blocked()
    assert pending.allowance("c") == pending.allowance() == UNLIMITED
