"""Bundle ownership states and their transitions (DESIGN §5, "Bundle state").

Theory of operation. Every bundle has one record in the metastore: its
state, the broker it concerns and a version for compare-and-set. Brokers
change it only through :func:`transition`, which checks the table below, so
a record never jumps to a state it cannot reach; the compare-and-set makes
two brokers racing for one bundle see exactly one winner.

    free ──assign──▶ assigning ──own──▶ owned ──release──▶ releasing ──free──▶ free
                         │                │                    │
                         └──abandon──▶ free  └──split──▶ splitting ──done──▶ deleted
                                                                └──abort──▶ owned

A move or split interrupted by a crash leaves a record in ``assigning``,
``releasing`` or ``splitting``; :func:`recover` says what whoever comes next
does with it, given which brokers are alive.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass


class BundleState(enum.Enum):
    FREE = "free"
    ASSIGNING = "assigning"
    OWNED = "owned"
    RELEASING = "releasing"
    SPLITTING = "splitting"
    DELETED = "deleted"


S = BundleState

# (from state, event) -> to state; anything else is illegal.
TRANSITIONS: dict[tuple[BundleState, str], BundleState] = {
    (S.FREE, "assign"): S.ASSIGNING,
    (S.ASSIGNING, "own"): S.OWNED,
    (S.ASSIGNING, "abandon"): S.FREE,
    (S.OWNED, "release"): S.RELEASING,
    (S.OWNED, "split"): S.SPLITTING,
    (S.RELEASING, "free"): S.FREE,
    (S.RELEASING, "keep"): S.OWNED,
    (S.SPLITTING, "done"): S.DELETED,
    (S.SPLITTING, "abort"): S.OWNED,
}

# Events that name a (new) broker; the others keep the record's broker.
_SETS_BROKER = {"assign"}


class IllegalBundleTransition(Exception):
    def __init__(self, state: BundleState, event: str) -> None:
        allowed = sorted(e for (s, e) in TRANSITIONS if s == state)
        super().__init__(
            f"bundle in state {state.value!r} cannot {event!r}; allowed: {', '.join(allowed) or 'none'}"
        )
        self.state = state
        self.event = event


@dataclass(frozen=True)
class BundleRecord:
    state: BundleState
    broker: str = ""

    def encode(self) -> bytes:
        return json.dumps({"state": self.state.value, "broker": self.broker}).encode()

    @classmethod
    def decode(cls, data: bytes) -> BundleRecord:
        d = json.loads(data)
        return cls(BundleState(d["state"]), d.get("broker", ""))


FREE = BundleRecord(S.FREE)


def transition(record: BundleRecord, event: str, broker: str = "") -> BundleRecord:
    """The record after ``event``; IllegalBundleTransition if the table forbids it."""
    to = TRANSITIONS.get((record.state, event))
    if to is None:
        raise IllegalBundleTransition(record.state, event)
    if event in _SETS_BROKER:
        if not broker:
            raise ValueError(f"{event!r} needs the broker it assigns the bundle to")
        return BundleRecord(to, broker)
    # A free record keeps its last broker: placement avoids handing an
    # unloaded bundle straight back to it.
    return BundleRecord(to, record.broker)


def recover(record: BundleRecord, live_brokers: set[str], split_children_exist: bool) -> str | None:
    """The event that finishes or rolls back an interrupted change, or None.

    * assigning to a broker that is gone: abandon (free);
    * releasing: free (the releasing owner is done with it or dead);
    * splitting: done if both halves were recorded, else abort (and owned by
      a live broker; a dead owner's bundle is then released and freed);
    * owned by a broker that is gone: release, then free.
    """
    alive = record.broker in live_brokers
    if record.state == S.ASSIGNING and not alive:
        return "abandon"
    if record.state == S.RELEASING:
        return "free"
    if record.state == S.SPLITTING:
        return "done" if split_children_exist else "abort"
    if record.state == S.OWNED and not alive:
        return "release"
    return None
