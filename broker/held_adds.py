"""Adds whose ledger failed, held for the topic's next ledger.

Theory of operation. A ledger's writer fails when a bookie of its ensemble
is lost and no other bookie can take its place; every add it had not
confirmed fails with it. Pulsar's managed ledger then closes that ledger and
resubmits its pending adds to a new one, and so does ours: the failed adds
are held, in order, while the managed ledger recovers the failed ledger
(fences and closes it) and opens the next one, for at most the broker's
``managed_ledger_failed_add_hold_seconds``.

Recovery may find that the bookies stored some of the held entries (past
the writer's LAC: no producer heard of them yet). Those are settled as
stored, at their place in the failed ledger, so nothing is stored twice;
they are taken out of the hold once recovery has closed the failed ledger
(the hold's end no longer fails them), and answered once the managed ledger
has recorded that close and opened the next ledger, so the position a
producer is told is readable at once. (If opening the next ledger fails,
they are answered all the same: stored is stored; their positions become
readable when a retry opens it.)
The rest go to the new ledger in their order, before any later add (later
adds wait while the ledger is replaced:
:meth:`~broker.managed_ledger.ManagedLedger.wait_for_room`). An add that
reached the writer after it had failed never got an entry id there: it
cannot be in the failed ledger, and it came after the others.

When the hold runs out, or the topic closes, or another broker takes the
topic first, whatever is still held fails as it would have at once (the
producer is told; a later failure of that writer's adds is not held).

:func:`split_held` is the decision; the managed ledger does the I/O.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

log = logging.getLogger(__name__)

# Told whether an entry was stored (True) or its write failed (False).
Stored = Callable[[bool], None]


@dataclass(slots=True)
class PendingAdd:
    """One add of an entry to the topic's current ledger (Pulsar's
    OpAddEntry): ``entry_id`` is its id in that ledger (None: the writer had
    failed or closed before it came)."""

    entry_id: int | None
    data: bytes
    messages: int
    started: float
    out: asyncio.Future
    stored: Stored | None


def split_held(
    held: Iterable[PendingAdd], last_entry_id: int
) -> tuple[list[PendingAdd], list[PendingAdd]]:
    """(stored, to add again) once recovery closed the failed ledger at
    ``last_entry_id``: the adds with an id up to it are in that ledger; the
    others go to the next one by entry id, those with no id last, in the
    order they came."""
    stored: list[PendingAdd] = []
    again: list[PendingAdd] = []
    for add in held:
        in_ledger = add.entry_id is not None and add.entry_id <= last_entry_id
        (stored if in_ledger else again).append(add)
    again.sort(key=lambda a: (a.entry_id is None, a.entry_id or 0))  # stable: arrival order kept
    return stored, again


class HeldAdds:
    """The adds held for one failed writer (of topic ``topic``), failed with
    ``expired()`` once ``hold_s`` has passed unless taken before."""

    def __init__(self, hold_s: float, expired: Callable[[], BaseException], topic: str) -> None:
        self.adds: list[PendingAdd] = []
        self.open = True
        self.hold_s, self.topic = hold_s, topic
        self._expired = expired
        self._timer = asyncio.get_running_loop().call_later(hold_s, self._expire)

    def _expire(self) -> None:
        msg = "%s: %d adds held for %g s failed: no new ledger took them yet"
        log.warning(msg, self.topic, len(self.adds), self.hold_s)
        self.fail(self._expired)

    def take(self) -> list[PendingAdd]:
        """Everything held; nothing more is held."""
        self.open = False
        self._timer.cancel()
        adds, self.adds = self.adds, []
        return adds

    def take_stored(self, last_entry_id: int) -> list[PendingAdd]:
        """The adds recovery found stored in the failed ledger (closed at
        ``last_entry_id``), taken out unanswered (:func:`answer_stored`):
        the hold's end no longer fails them. The others stay held."""
        stored, self.adds = split_held(self.adds, last_entry_id)
        return stored

    def fail(self, error: Callable[[], BaseException]) -> None:
        """Fail everything held, each with its own ``error()`` (every future
        first: a callback that raises leaves none waiting)."""
        adds = self.take()
        for add in adds:
            if not add.out.done():
                add.out.set_exception(error())
        for add in adds:
            if add.stored is not None:
                add.stored(False)


def answer_stored(ledger_id: int, stored: list[PendingAdd]) -> None:
    """Answer adds found stored in ledger ``ledger_id`` with their place
    there (every future first: a callback that raises leaves none waiting)."""
    for add in stored:
        if not add.out.done():
            add.out.set_result((ledger_id, add.entry_id))
    for add in stored:
        if add.stored is not None:
            add.stored(True)
