"""Write-set and ack-quorum arithmetic of ledgers (no I/O).

Entry ``e`` of a ledger with ensemble size E and write quorum Qw goes to the
bookies at ensemble indexes ``(e + i) % E`` for ``i < Qw``; it is confirmed
once Qa of them acknowledged it *and* every earlier entry is confirmed
(BookKeeper's in-order completion rule).

Reads and recovery use the same sets the other way round: which bookie of an
entry's write set to ask, how many answers decide that an entry is missing,
and whether a write-back reached Qa bookies of every write set.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

T = TypeVar("T")


class QuorumConfigError(ValueError):
    pass


def check_quorums(ensemble_size: int, write_quorum: int, ack_quorum: int) -> None:
    if not ensemble_size >= write_quorum >= ack_quorum >= 1:
        raise QuorumConfigError(
            f"need ensemble size >= write quorum >= ack quorum >= 1, got "
            f"E={ensemble_size}, Qw={write_quorum}, Qa={ack_quorum}"
        )


def write_set(entry_id: int, ensemble_size: int, write_quorum: int) -> list[int]:
    """Ensemble indexes that store ``entry_id``."""
    return [(entry_id + i) % ensemble_size for i in range(write_quorum)]


def entries_by_index(
    entry_ids: Iterable[int], ensemble_size: int, write_quorum: int
) -> dict[int, list[int]]:
    """Each ensemble index's share of ``entry_ids`` (the ids whose write set
    holds it), in the order of ``entry_ids``; indexes in order of first use."""
    shares: dict[int, list[int]] = {}
    for entry_id in entry_ids:
        for idx in write_set(entry_id, ensemble_size, write_quorum):
            shares.setdefault(idx, []).append(entry_id)
    return shares


def first_unconfirmed(
    entry_ids: Iterable[int],
    acked: Container[int],
    ensemble_size: int,
    write_quorum: int,
    ack_quorum: int,
) -> tuple[int, int] | None:
    """The first of ``entry_ids`` whose write set has fewer than Qa of the
    ensemble indexes in ``acked`` (the bookies that stored a whole request),
    with that number; None when every entry reached Qa."""
    for entry_id in entry_ids:
        acks = sum(1 for i in write_set(entry_id, ensemble_size, write_quorum) if i in acked)
        if acks < ack_quorum:
            return entry_id, acks
    return None


def replicas_to_ask(
    attempts: Mapping[int, int], ensemble_size: int, write_quorum: int
) -> tuple[dict[int, list[int]], list[int]]:
    """Read failover: entry ``e`` on its ``attempts[e]``-th try is asked from
    that member of its write set (the first one first). Returns each
    ensemble index's entries for this round, and the entries whose every
    replica has been tried (they cannot be read)."""
    by_index: dict[int, list[int]] = {}
    exhausted: list[int] = []
    for entry_id, attempt in attempts.items():
        replicas = write_set(entry_id, ensemble_size, write_quorum)
        if attempt >= len(replicas):
            exhausted.append(entry_id)
        else:
            by_index.setdefault(replicas[attempt], []).append(entry_id)
    return by_index, exhausted


def stripe_offsets(first: int, ensemble_size: int, write_quorum: int, index: int) -> list[int]:
    """Offsets k in [0, E) such that entries ``first + k``, ``first + k + E``,
    ... of a contiguous run are the ones ensemble index ``index`` stores.

    So a run's records for one bookie are ``records[k::E]`` for each k: list
    slices instead of a write-set test per entry. With Qw == E every offset
    is listed (every bookie stores everything).
    """
    return sorted((index - j - first) % ensemble_size for j in range(write_quorum))


def stripe(
    items: Sequence[T], first: int, ensemble_size: int, write_quorum: int, index: int
) -> list[T]:
    """Ensemble index ``index``'s share of ``items`` (those of the contiguous
    entries ``first``, ``first + 1``, ...), in entry order.

    List slices do the work: in every period of E entries the share holds the
    offsets k0 < k1 < ... (stripe_offsets), so the j-th offset's items land at
    j, j + Qw, j + 2 Qw, ... (A partial last period holds the lowest offsets,
    so the slice lengths always agree.)
    """
    offsets = stripe_offsets(first, ensemble_size, write_quorum, index)
    n = len(items)
    share: list = [None] * sum(len(range(k, n, ensemble_size)) for k in offsets)
    for j, k in enumerate(offsets):
        share[j::write_quorum] = items[k::ensemble_size]
    return share


@dataclass
class AckTracker:
    """Counts acks per entry and releases entries in order once each has Qa.

    Acks of an entry are a bitmask of ensemble indexes, so an ack is one
    integer OR and a bookie's answer for many entries is one tight loop.
    """

    ack_quorum: int
    next_to_confirm: int = 0
    _acks: dict[int, int] = field(default_factory=dict)

    def ack(self, entry_id: int, bookie_index: int) -> list[int]:
        """Record an ack; returns the entry ids that became confirmed, in order."""
        return list(self.ack_many((entry_id,), bookie_index))

    def ack_many(self, entry_ids: Iterable[int], bookie_index: int) -> range:
        """Record acks of one bookie; returns the entry ids that became confirmed."""
        acks = self._acks
        first = nxt = self.next_to_confirm
        bit = 1 << bookie_index
        get = acks.get
        for e in entry_ids:
            if e >= nxt:
                acks[e] = get(e, 0) | bit
        quorum = self.ack_quorum
        while True:
            mask = get(nxt)
            if mask is None or mask.bit_count() < quorum:
                break
            del acks[nxt]
            nxt += 1
        self.next_to_confirm = nxt
        return range(first, nxt)

    def forget(self, bookie_index: int, from_entry: int) -> None:
        """Drop acks of ``bookie_index`` for entries >= ``from_entry`` (its
        bookie was replaced: those copies are not in the new ensemble)."""
        keep = ~(1 << bookie_index)
        for entry_id in list(self._acks):
            if entry_id >= from_entry:
                self._acks[entry_id] &= keep


def fence_quorum(write_quorum: int, ack_quorum: int) -> int:
    """Bookies of a write set that must answer a fence (or a read) so that no
    entry can still reach Qa acks behind our back: Qw - Qa + 1."""
    return write_quorum - ack_quorum + 1


def fence_covers_all_write_sets(
    ensemble_size: int, write_quorum: int, ack_quorum: int, answered: set[int]
) -> bool:
    """True when every write set has at least Qw - Qa + 1 fenced bookies.

    Then no writer can get Qa acks for any new entry, whatever its id.
    """
    need = fence_quorum(write_quorum, ack_quorum)
    for first in range(ensemble_size):
        members = write_set(first, ensemble_size, write_quorum)
        if sum(1 for m in members if m in answered) < need:
            return False
    return True


FOUND, MISSING, UNKNOWN = "FOUND", "MISSING", "UNKNOWN"


def recovery_read_outcome(write_quorum: int, ack_quorum: int, found: int, no_entry: int) -> str:
    """What recovery concludes about one entry from its write set's answers.

    ``found``: bookies that returned it with a good digest. ``no_entry``:
    bookies that explicitly said they do not have it (errors and timeouts do
    not count). An entry any bookie has is recovered (it may have been
    confirmed). An entry that Qw - Qa + 1 bookies explicitly lack can never
    have had Qa acks, so the ledger ends before it. Anything else cannot be
    decided yet and recovery must not close the ledger.
    """
    if found > 0:
        return FOUND
    if no_entry >= fence_quorum(write_quorum, ack_quorum):
        return MISSING
    return UNKNOWN


def recovery_scan(
    entry_ids: Sequence[int],
    found: Container[int],
    no_entry: Mapping[int, int],
    write_quorum: int,
    ack_quorum: int,
) -> tuple[int, str]:
    """How far one round of recovery reads gets through ``entry_ids``
    (consecutive, ascending): the number of leading entries it keeps
    (:func:`recovery_read_outcome` says FOUND for each), and what it says of
    the entry after them: MISSING (the ledger ends before it) or UNKNOWN
    (recovery must stop). FOUND when it keeps them all and reads on.

    ``found``: the ids some bookie returned with a good digest; ``no_entry``:
    per id, the bookies that explicitly said they do not have it.
    """
    for kept, entry_id in enumerate(entry_ids):
        outcome = recovery_read_outcome(
            write_quorum, ack_quorum, 1 if entry_id in found else 0, no_entry.get(entry_id, 0)
        )
        if outcome != FOUND:
            return kept, outcome
    return len(entry_ids), FOUND
