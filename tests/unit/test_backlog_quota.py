"""Backlog quota decisions (broker/backlog_quota.py) as tables: which
quotas a backlog exceeds, what the policies then do, and where eviction
moves a subscription's mark-delete position."""

from __future__ import annotations

from broker.backlog_quota import Backlog, eviction_point, judge
from broker.policy_values import BacklogQuota, BacklogQuotaPolicy, BacklogQuotaType

STORAGE, AGE = BacklogQuotaType.DESTINATION_STORAGE, BacklogQuotaType.MESSAGE_AGE
HOLD = BacklogQuotaPolicy.PRODUCER_REQUEST_HOLD
EXC = BacklogQuotaPolicy.PRODUCER_EXCEPTION
EVICT = BacklogQuotaPolicy.CONSUMER_BACKLOG_EVICTION


def size(limit: int, policy: BacklogQuotaPolicy) -> dict:
    return {STORAGE: BacklogQuota(limit_size_bytes=limit, policy=policy)}


def age(limit: int, policy: BacklogQuotaPolicy) -> dict:
    return {AGE: BacklogQuota(limit_time_s=limit, policy=policy)}


# (quotas, measured backlog) -> (exceeded types, refuse, hold, evicting types)
JUDGEMENTS = [
    ({}, Backlog(10**9, 10**6), ((), False, False, ())),
    (size(1000, HOLD), Backlog(1000, 0), ((), False, False, ())),  # at the limit is not over
    (size(1000, HOLD), Backlog(1001, 0), ((STORAGE,), False, True, ())),
    (size(1000, EXC), Backlog(1001, 0), ((STORAGE,), True, False, ())),
    (size(1000, EVICT), Backlog(5000, 0), ((STORAGE,), False, False, (STORAGE,))),
    (size(-1, EXC), Backlog(10**12, 0), ((), False, False, ())),  # -1 limits nothing
    (age(60, HOLD), Backlog(0, 61.0), ((AGE,), False, True, ())),
    (age(60, HOLD), Backlog(0, 59.0), ((), False, False, ())),
    # Two exceeded quotas that disagree: refusing wins over holding.
    ({**size(10, HOLD), **age(1, EXC)}, Backlog(11, 2.0), ((STORAGE, AGE), True, False, ())),
    ({**size(10, EVICT), **age(1, HOLD)}, Backlog(11, 2.0), ((STORAGE, AGE), False, True, (STORAGE,))),
]  # fmt: skip


def test_judgements():
    for quotas, backlog, (exceeded, refuse, hold, evict) in JUDGEMENTS:
        v = judge(quotas, backlog)
        got = (tuple(k for k, _ in v.exceeded), v.refuse, v.hold, tuple(k for k, _ in v.evict))
        assert got == (exceeded, refuse, hold, evict), (quotas, backlog)


def test_the_verdict_names_what_was_exceeded():
    v = judge({**size(100, EXC), **age(30, EXC)}, Backlog(200, 40.0))
    text = v.describe("persistent://t/ns/x")
    assert "persistent://t/ns/x: backlog quota exceeded" in text
    assert "over 100 bytes" in text and "older than 30 s" in text


# (ledgers as (id, last entry), mark-delete, entries to keep) -> new mark-delete or None
EVICTIONS = [
    ([(1, 9)], (1, -1), 10, None),  # 10 entries of backlog fit in 10
    ([(1, 9)], (1, -1), 4, (1, 5)),  # keep entries 6..9
    ([(1, 9), (2, 9)], (1, -1), 4, (2, 5)),  # the newest ledger keeps them all
    ([(1, 9), (2, 2)], (1, -1), 5, (1, 7)),  # 3 of ledger 2 and 8, 9 of ledger 1
    ([(1, 9), (2, 9)], (1, 4), 12, (1, 7)),  # 15 after the mark: keep 12
    ([(1, 9), (2, 9)], (2, 3), 12, None),  # 6 after the mark: fits
    ([(1, 9), (2, -1)], (1, -1), 2, (1, 7)),  # an empty current ledger holds nothing
    ([(3, 4)], (1, 9), 2, (3, 2)),  # the mark is in a trimmed ledger
    ([(1, 9)], (1, -1), 0, (1, 9)),  # keep nothing: everything is acknowledged
]


def test_eviction_keeps_the_newest_entries():
    for ledgers, mark, keep, expected in EVICTIONS:
        assert eviction_point(ledgers, mark, keep) == expected, (ledgers, mark, keep)
