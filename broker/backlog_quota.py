"""Backlog quotas: is a topic over its quotas, and what each policy does
about it (Pulsar's ``BacklogQuotaManager``).

Theory of operation. A topic has at most one quota of each type: a
``destination_storage`` quota limits the bytes of its largest durable
subscription backlog (the figure ``backlogSize`` shows); a ``message_age``
quota limits how long ago its oldest unacknowledged message was
published. :func:`judge` compares what the broker measured with the quotas
and says which are exceeded; the policy of each exceeded quota decides:

* ``producer_request_hold`` — publishes wait until the topic is under
  quota again (the client's send timeout ends a wait that lasts too long);
* ``producer_exception`` — publishes fail at once with
  ``ProducerBlockedQuotaExceededException`` and new producers are refused;
* ``consumer_backlog_eviction`` — the broker drops the oldest backlog: each
  subscription over a storage quota has its mark-delete position moved up
  until its backlog fits (:func:`eviction_point`), and for an age quota the
  messages older than the limit are expired.

Refusing wins over holding when two exceeded quotas disagree. Eviction
never deletes anything itself: it acknowledges for the slowest cursors, and
trimming (with retention) does the rest. These are decisions only; the
topic measures and acts (:mod:`broker.quota_enforcement`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from broker.policy_values import BacklogQuota, BacklogQuotaPolicy, BacklogQuotaType

Position = tuple[int, int]


@dataclass(frozen=True)
class Backlog:
    """What the broker measured of a topic's backlog."""

    size_bytes: int = 0  # the largest durable subscription backlog, estimated
    oldest_age_s: float = 0.0  # of the oldest unacknowledged message (0: none)


@dataclass(frozen=True)
class Verdict:
    exceeded: tuple[tuple[BacklogQuotaType, BacklogQuota], ...] = ()

    @property
    def refuse(self) -> bool:
        """Publishes and new producers fail (producer_exception)."""
        return any(q.policy is BacklogQuotaPolicy.PRODUCER_EXCEPTION for _, q in self.exceeded)

    @property
    def hold(self) -> bool:
        """Publishes wait (producer_request_hold), unless they are refused."""
        return not self.refuse and any(
            q.policy is BacklogQuotaPolicy.PRODUCER_REQUEST_HOLD for _, q in self.exceeded
        )

    @property
    def evict(self) -> tuple[tuple[BacklogQuotaType, BacklogQuota], ...]:
        """The exceeded quotas whose policy evicts the oldest backlog."""
        return tuple(
            (kind, q)
            for kind, q in self.exceeded
            if q.policy is BacklogQuotaPolicy.CONSUMER_BACKLOG_EVICTION
        )

    def describe(self, topic: str) -> str:
        parts = []
        for kind, q in self.exceeded:
            if kind is BacklogQuotaType.DESTINATION_STORAGE:
                parts.append(f"backlog over {q.limit_size_bytes} bytes")
            else:
                parts.append(f"oldest unacknowledged message older than {q.limit_time_s} s")
        return f"{topic}: backlog quota exceeded ({'; '.join(parts)})"


UNDER_QUOTA = Verdict()


def judge(quotas: Mapping[BacklogQuotaType, BacklogQuota], backlog: Backlog) -> Verdict:
    """Which quotas ``backlog`` exceeds (a limit of -1 limits nothing)."""
    exceeded = []
    for kind, q in sorted(quotas.items(), key=lambda item: item[0].value):
        if kind is BacklogQuotaType.DESTINATION_STORAGE:
            over = q.limit_size_bytes >= 0 and backlog.size_bytes > q.limit_size_bytes
        else:
            over = q.limit_time_s >= 0 and backlog.oldest_age_s > q.limit_time_s
        if over:
            exceeded.append((kind, q))
    return Verdict(tuple(exceeded)) if exceeded else UNDER_QUOTA


def eviction_point(
    ledgers: Sequence[tuple[int, int]], mark_delete: Position, keep_entries: int
) -> Position | None:
    """The mark-delete position that leaves a subscription at most
    ``keep_entries`` entries of backlog: the newest entries stay. ``ledgers``
    is the topic's ledger list as (ledger id, last entry id) (-1: empty).
    None when the backlog already fits."""
    keep = max(0, keep_entries)
    kept = 0
    for ledger_id, last in reversed(ledgers):
        if last < 0:
            continue
        first = mark_delete[1] + 1 if ledger_id == mark_delete[0] else 0
        if ledger_id < mark_delete[0] or first > last:
            return None  # everything after the mark-delete position fits
        here = last - first + 1
        if kept + here > keep:
            # Keep the newest (keep - kept) entries of this ledger.
            cut = last - (keep - kept)
            return (ledger_id, cut)
        kept += here
    return None
