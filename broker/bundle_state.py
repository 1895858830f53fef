"""Bundle ownership states and their transitions (DESIGN §5, "Bundle state").

Theory of operation. Every bundle has at most one record in the metastore:
its state, the broker it concerns and a version for compare-and-set. No
record means free. Brokers write a record only as the result of
:func:`transition`, which checks the table below, so a record never jumps
to a state it cannot reach; the compare-and-set on every write makes two
brokers racing for one bundle see exactly one winner.

    free ──own──▶ owned ──release──▶ releasing ──free──▶ free
                    │
                    └──split──▶ splitting ──done──▶ deleted
                                     └──abort──▶ owned

    owned, releasing, splitting ──expire──▶ free

Owning is one atomic step: the owned record is created over a free (or
missing) one. The owned, releasing and splitting records are *ephemeral*:
bound to the owner's metastore session, so they vanish when the owner dies.
That is what undoes a move or a split interrupted by a crash: the record
goes with the session (the ``expire`` event, done by the metastore itself),
the bundle is free again, and the next lookup places it. A split changes
the namespace's boundaries, owns both halves and writes the parent's
``deleted`` tombstone in one transaction, so a crash leaves either nothing
of the split or all of it. Free and deleted records are persistent: a free
one remembers the last owner (placement avoids handing an unloaded bundle
straight back to it); a deleted one tells a broker with stale boundaries to
reload them. A broker also applies ``expire`` itself to a record an earlier
run of it left behind (:func:`is_stale`): that process is gone, but its
session may not have expired yet.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass


class BundleState(enum.Enum):
    FREE = "free"
    OWNED = "owned"
    RELEASING = "releasing"
    SPLITTING = "splitting"
    DELETED = "deleted"


S = BundleState

EVENTS = ("own", "release", "free", "split", "done", "abort", "expire")

# (from state, event) -> to state; anything else is illegal.
TRANSITIONS: dict[tuple[BundleState, str], BundleState] = {
    (S.FREE, "own"): S.OWNED,
    (S.OWNED, "release"): S.RELEASING,
    (S.RELEASING, "free"): S.FREE,
    (S.OWNED, "split"): S.SPLITTING,
    (S.SPLITTING, "done"): S.DELETED,
    (S.SPLITTING, "abort"): S.OWNED,
    (S.OWNED, "expire"): S.FREE,
    (S.RELEASING, "expire"): S.FREE,
    (S.SPLITTING, "expire"): S.FREE,
}

# The states whose records are ephemeral on the owner's session.
EPHEMERAL = frozenset({S.OWNED, S.RELEASING, S.SPLITTING})


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
    def decode(cls, data: bytes | None) -> BundleRecord:
        """A stored record; no record at all is a free bundle."""
        if data is None:
            return FREE
        d = json.loads(data)
        return cls(BundleState(d["state"]), d.get("broker", ""))

    @property
    def ephemeral(self) -> bool:
        return self.state in EPHEMERAL


FREE = BundleRecord(S.FREE)


def transition(record: BundleRecord, event: str, broker: str = "") -> BundleRecord:
    """The record after ``event``; IllegalBundleTransition if the table forbids it.

    ``own`` names the new owner; ``expire`` forgets the broker (its session
    is gone); every other event keeps the record's broker, so a freed record
    remembers its last owner."""
    to = TRANSITIONS.get((record.state, event))
    if to is None:
        raise IllegalBundleTransition(record.state, event)
    if event == "own":
        if not broker:
            raise ValueError("'own' needs the broker that takes the bundle")
        return BundleRecord(to, broker)
    if event == "expire":
        return BundleRecord(to)
    return BundleRecord(to, record.broker)


def is_stale(
    record: BundleRecord,
    record_session: int,
    my_session: int,
    my_address: str,
    take_over_stale: bool,
) -> bool:
    """Is ``record`` (ephemeral on ``record_session``) left over by a broker
    process that is gone? Yes when it is not this process's own session and
    names this broker's address (an earlier run of it), or when this is the
    only broker (standalone's ``take_over_stale_bundles``)."""
    return (
        record.ephemeral
        and record_session != my_session
        and (record.broker == my_address or take_over_stale)
    )
