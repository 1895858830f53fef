"""What AutoRecovery decides, with no I/O: which replicas of a ledger are
missing, what to do about them now, which bookies count as lost, and whether
an operator may retire a bookie (BookKeeper's auditor and replication worker,
reference §1.9).

Theory of operation. A ledger's segments (``md.ensembles``) are its
*fragments*: segment s holds entries ``first_s .. first_{s+1} - 1``, and the
last one holds entries up to ``last_entry_id`` once the ledger is CLOSED and
is open-ended before. Ensemble index i of a fragment holds the entries whose
write set contains i. A replica needs repair when

- its bookie is *replaced*: gone for longer than
  ``lost_bookie_recovery_delay_s``, or being decommissioned or recovered by
  an operator. The entries go to another bookie, which then takes the
  bookie's place in that fragment's ensemble (compare-and-set);
- or it has *holes*: its bookie is alive but the periodic check found
  entries of that fragment missing on it. The entries are written to the
  same bookie again; the ensemble does not change.

Closed fragments never change (a writer only adds to the last one), so they
are repaired at once. The last fragment of a ledger that is not CLOSED may
still be written: its writer gets ``open_ledger_rereplication_grace_period_ms``
to replace the bookie itself (an ensemble change); after that the ledger is
fenced and closed (open-with-recovery) before the fragment is copied, so no
writer ever adds to a fragment whose ensemble is being changed.

:func:`plan_ledger` gives one step at a time: the worker carries it out and
asks again with fresh metadata, until DONE (or WAIT).
"""

from __future__ import annotations

import random
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum

from bookie.ledger_metadata import CLOSED, LedgerMetadata


class Outcome(StrEnum):
    DONE = "done"  # every replica is where it should be
    COPY = "copy"  # repair the first of ``repairs``
    WAIT = "wait"  # the open last fragment is left to its writer for now
    FENCE = "fence"  # close the ledger by recovery, then plan again


class Retire(StrEnum):
    """Why an operator retires a bookie (``/bookies/retiring/{id}``)."""

    DECOMMISSION = "decommission"  # copy everything off it, then let it go
    RECOVER = "recover"  # its copies are lost: restore them from the others


@dataclass(frozen=True)
class Fragment:
    segment: int  # index in ``md.ensembles``
    first: int
    last: int  # inclusive; below ``first`` when the fragment is empty
    ensemble: tuple[str, ...]
    open: bool  # the last fragment of a ledger that is not CLOSED


@dataclass(frozen=True)
class Repair:
    fragment: Fragment
    index: int  # ensemble index of the replica
    bookie: str  # the bookie at that index now
    replace: bool  # True: copy to another bookie and swap it in; False: fill holes


@dataclass(frozen=True)
class LedgerPlan:
    outcome: Outcome
    repairs: tuple[Repair, ...] = ()

    @property
    def first(self) -> Repair:
        return self.repairs[0]


def fragments(md: LedgerMetadata) -> list[Fragment]:
    out = []
    closed = md.state == CLOSED
    for s, (first, bookies) in enumerate(md.ensembles):
        is_last = s + 1 == len(md.ensembles)
        # An open last fragment has no known end yet.
        last = md.last_entry_id if closed else -1
        if not is_last:
            last = md.ensembles[s + 1][0] - 1
        out.append(Fragment(s, first, last, tuple(bookies), is_last and not closed))
    return out


def entries_held(
    fragment: Fragment, index: int, ensemble_size: int, write_quorum: int
) -> Iterator[int]:
    """The entries of a closed ``fragment`` that ensemble ``index`` holds, in order."""
    for entry_id in range(fragment.first, fragment.last + 1):
        if (index - entry_id) % ensemble_size < write_quorum:
            yield entry_id


def plan_ledger(
    md: LedgerMetadata,
    replaced: Collection[str],
    holes: Collection[tuple[int, str]],
    task_age_ms: int,
    grace_ms: int,
) -> LedgerPlan:
    """The next step for one ledger. ``replaced``: bookies whose replicas move
    elsewhere; ``holes``: (fragment first entry, bookie) pairs to refill."""
    repairs: list[Repair] = []
    tail_needs_work = False
    for fragment in fragments(md):
        for index, bookie in enumerate(fragment.ensemble):
            replace = bookie in replaced
            if not replace and (fragment.first, bookie) not in holes:
                continue
            if fragment.open:
                tail_needs_work = tail_needs_work or replace
                continue
            repairs.append(Repair(fragment, index, bookie, replace))
    if repairs:
        return LedgerPlan(Outcome.COPY, tuple(repairs))
    if tail_needs_work:
        return LedgerPlan(Outcome.WAIT if task_age_ms < grace_ms else Outcome.FENCE)
    return LedgerPlan(Outcome.DONE)


def references(md: LedgerMetadata, bookies: Collection[str]) -> set[str]:
    """Which of ``bookies`` some fragment of ``md`` still lists."""
    return {b for _, ensemble in md.ensembles for b in ensemble if b in bookies}


def pick_target(
    ensemble: Iterable[str],
    writable: Iterable[str],
    excluded: Collection[str],
    local: str,
    rng: random.Random,
) -> str | None:
    """The bookie that takes a replaced replica: a writable one outside the
    ensemble (no bookie holds two copies of an entry) and not itself being
    replaced; the local bookie when it qualifies (BookKeeper's workers copy
    to their own bookie), else one at random; None when none qualifies."""
    members = set(ensemble)
    candidates = sorted(b for b in writable if b not in members and b not in excluded)
    if not candidates:
        return None
    return local if local in candidates else rng.choice(candidates)


def read_sources(write_set: Iterable[str], target: str, replaced: Collection[str]) -> list[str]:
    """Where to read an entry from, best first: its other replicas, ones being
    replaced last (a decommissioned bookie still answers; a lost one will not)."""
    others = [b for b in write_set if b != target]
    return [b for b in others if b not in replaced] + [b for b in others if b in replaced]


class LostBookies:
    """Bookies that are known (a registered cookie) but not available, and
    for how long; a bookie counts as lost once it has been missing for
    ``delay_ms`` (BookKeeper's ``lostBookieRecoveryDelay``) without a break.
    Bounded by the number of known bookies."""

    def __init__(self, delay_ms: int) -> None:
        self.delay_ms = delay_ms
        self.missing_since_ms: dict[str, int] = {}

    def observe(self, known: Collection[str], available: Collection[str], now_ms: int) -> None:
        gone = {b for b in known if b not in available}
        for bookie in list(self.missing_since_ms):
            if bookie not in gone:
                del self.missing_since_ms[bookie]
        for bookie in gone:
            self.missing_since_ms.setdefault(bookie, now_ms)

    def lost(self, now_ms: int) -> frozenset[str]:
        return frozenset(
            b for b, since in self.missing_since_ms.items() if now_ms - since >= self.delay_ms
        )


def retire_refusal(
    action: Retire,
    bookie: str,
    available: Mapping[str, bool],
    needed_ensemble: tuple[int, int],
    force: bool,
) -> str | None:
    """Why retiring ``bookie`` is refused, or None. ``available`` maps each
    registered bookie to whether it is read-only; ``needed_ensemble`` is the
    largest ensemble size among the ledgers the bookie is in (with one such
    ledger id, or -1), since a replacement must come from outside the
    ensemble."""
    if action is Retire.RECOVER and bookie in available and not force:
        return (
            f"bookie {bookie} is available: recover treats its copies as lost and copies "
            "them from the other replicas; pass --force to do that to a live bookie"
        )
    writable = sorted(b for b, read_only in available.items() if not read_only and b != bookie)
    size, ledger_id = needed_ensemble
    if not writable:
        return f"bookie {bookie} is the last writable bookie: its replicas would have nowhere to go"
    if len(writable) < size:
        return (
            f"{action.value} of bookie {bookie} would leave {len(writable)} writable "
            f"bookie(s) ({', '.join(writable)}) to hold its replicas, but ledger {ledger_id} "
            f"on it has an ensemble of {size}: add bookies first"
        )
    return None


def bookie_state(registered: bool, read_only: bool, retiring: Retire | None, ledgers: int) -> str:
    """A bookie's state as ``bookies list`` shows it."""
    if retiring is Retire.DECOMMISSION:
        return "decommissioned" if ledgers == 0 else "decommissioning"
    if retiring is Retire.RECOVER:
        return "recovering"
    if not registered:
        return "lost"
    return "read-only" if read_only else "available"


class Cleanup(StrEnum):
    KEEP = "keep"  # still work to do, or a drained bookie that still runs
    UNMARK = "unmark"  # drop the retiring mark; the bookie stays as it is
    FORGET = "forget"  # drop the mark and the cookie: the id is free again


def retirement_cleanup(action: Retire, registered: bool, ledgers: int) -> Cleanup:
    """What to do with a retiring mark. A drained decommissioned bookie is
    kept marked (read-only) until it stops, then forgotten; a drained
    recovered bookie is forgotten if gone (it may come back with a new disk)
    and unmarked if it still runs (``recover --force``)."""
    if ledgers > 0:
        return Cleanup.KEEP
    if not registered:
        return Cleanup.FORGET
    return Cleanup.KEEP if action is Retire.DECOMMISSION else Cleanup.UNMARK
