"""Write-set and ack-quorum arithmetic of ledgers (no I/O).

Entry ``e`` of a ledger with ensemble size E and write quorum Qw goes to the
bookies at ensemble indexes ``(e + i) % E`` for ``i < Qw``; it is confirmed
once Qa of them acknowledged it *and* every earlier entry is confirmed
(BookKeeper's in-order completion rule).
"""

from __future__ import annotations

from dataclasses import dataclass, field


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


@dataclass
class AckTracker:
    """Counts acks per entry and releases entries in order once each has Qa."""

    ack_quorum: int
    next_to_confirm: int = 0
    _acks: dict[int, set[int]] = field(default_factory=dict)

    def ack(self, entry_id: int, bookie_index: int) -> list[int]:
        """Record an ack; returns the entry ids that became confirmed, in order."""
        if entry_id < self.next_to_confirm:
            return []
        self._acks.setdefault(entry_id, set()).add(bookie_index)
        confirmed = []
        while len(self._acks.get(self.next_to_confirm, ())) >= self.ack_quorum:
            del self._acks[self.next_to_confirm]
            confirmed.append(self.next_to_confirm)
            self.next_to_confirm += 1
        return confirmed
