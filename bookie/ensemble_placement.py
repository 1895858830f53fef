"""Which bookies a ledger's ensemble takes (no I/O).

BookKeeper's default placement: bookies are chosen at random among the
writable ones, a new ensemble all at once and a replacement (after a bookie
failed during writes or recovery) from those outside the ensemble, so no
bookie holds two copies of an entry. The caller lists the writable bookies
and passes its random generator, which makes the choice reproducible in tests.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence

from bookie.ledger_metadata import NotEnoughBookiesError


def new_ensemble(writable: Sequence[str], ensemble_size: int, rng: random.Random) -> list[str]:
    """``ensemble_size`` distinct bookies of ``writable``; NotEnoughBookiesError
    when there are fewer."""
    if len(writable) < ensemble_size:
        raise NotEnoughBookiesError(
            f"a ledger with ensemble size {ensemble_size} needs {ensemble_size} writable "
            f"bookies; {len(writable)} are available"
        )
    return rng.sample(writable, ensemble_size)


def replace_bookies(
    ensemble: Sequence[str], indexes: Iterable[int], writable: Iterable[str], rng: random.Random
) -> list[str] | None:
    """``ensemble`` with the bookies at ``indexes`` swapped for distinct
    bookies of ``writable`` outside it, lowest index first; None when there
    are fewer such bookies than indexes (nothing is swapped then)."""
    candidates = [b for b in writable if b not in ensemble]
    chosen = sorted(set(indexes))
    if len(candidates) < len(chosen):
        return None
    out = list(ensemble)
    for idx in chosen:
        out[idx] = candidates.pop(rng.randrange(len(candidates)))
    return out
