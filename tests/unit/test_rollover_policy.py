"""When a managed ledger rolls over: entries, size, minimum and maximum age."""

from __future__ import annotations

import time
from types import SimpleNamespace

from broker.managed_ledger import EntryCache, ManagedLedger, RolloverPolicy
from protos.topic_name import TopicName


def _ml(policy: RolloverPolicy, age_s: float) -> ManagedLedger:
    ml = ManagedLedger(
        TopicName.parse("t"),
        None,  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
        ensemble_size=1,
        write_quorum=1,
        ack_quorum=1,
        cache=EntryCache(1024),
        max_outstanding_adds=10,
        rollover=policy,
    )
    ml._writer_opened = time.monotonic() - age_s
    return ml


def _writer(entries: int, size: int):  # type: ignore[no-untyped-def]
    return SimpleNamespace(lac=entries - 1, length=size)


def test_rollover_rule():
    p = RolloverPolicy(max_entries=10, max_size_bytes=1000, min_time_s=60, max_time_s=3600)
    # Full by entries or by size, and old enough: roll.
    assert _ml(p, 61)._should_roll(_writer(10, 0))
    assert _ml(p, 61)._should_roll(_writer(1, 1000))
    # Full but younger than the minimum rollover time: not yet.
    assert not _ml(p, 10)._should_roll(_writer(10, 5000))
    # Not full: only the maximum rollover time rolls it.
    assert not _ml(p, 3000)._should_roll(_writer(9, 999))
    assert _ml(p, 3601)._should_roll(_writer(1, 1))
    # An empty ledger never rolls.
    assert not _ml(p, 9999)._should_roll(_writer(0, 0))
