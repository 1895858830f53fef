"""What ``magnetar verify`` concludes from a history: a pure function of
the recorded events, with no clock, network or randomness.

A history is a list of events (dicts, as the verifier writes them to
``history.jsonl``), in the order they were recorded (``n``):

========  ==============================================================
``send``  a producer ``p`` handed message ``s`` (key ``key``) to the SDK
``sent``  its receipt: ``id`` [ledger, entry, batch], or ``err``
``recv``  consumer ``c`` of subscription ``sub`` (type ``type``) got
          message ``p``/``s`` (key ``key``) at ``id``
``ack``   that consumer acknowledged ``id``
``subscribe``  subscription ``sub`` of type ``type`` was made (before
          any send: it must deliver every acknowledged one)
``fault`` a fault began (``t``) and ended (``end``): context only
========  ==============================================================

What each subscription type guarantees, and so what is checked
(docs/reliability.md, "magnetar verify"):

==============  =============  ======================================
type            delivery       order of first deliveries
==============  =============  ======================================
Exclusive       at least once  per producer (sequence order)
Failover        at least once  per producer (sequence order)
Key_Shared      at least once  per key (storage order)
Shared          at least once  none
==============  =============  ======================================

Anomalies:

* ``LOST``: an acknowledged send never delivered on a subscription;
* ``DUPLICATE``: one send stored at two positions (deduplication is on for
  every producer, so a resend must never be stored again); redelivery of
  the same position is at-least-once delivery and is only counted;
* ``PRODUCER_ORDER`` / ``KEY_ORDER``: a first delivery out of the order
  above;
* ``ACK_ORDER``: a producer's acknowledged positions do not rise with its
  sequence (two writers, or a receipt for the wrong message);
* ``PHANTOM``: a delivery of a message that was never sent.

A send whose receipt was an error or never came is indeterminate: it may
be delivered (once) or not. A receipt of ``[-1, -1, -1]`` is a resend that
deduplication answered: the message was stored before, so it must be
delivered like any acknowledged one.
"""

from __future__ import annotations

import enum
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

DEDUP_RECEIPT = (-1, -1, -1)

# subscription type -> what its first deliveries are ordered by (None: nothing)
ORDER_BY_TYPE: dict[str, str | None] = {
    "Exclusive": "producer",
    "Failover": "producer",
    "Key_Shared": "key",
    "Shared": None,
}

# Anomalies of one kind listed in the verdict before the rest are counted.
MAX_LISTED = 20


class Kind(enum.Enum):
    LOST = "LOST"
    DUPLICATE = "DUPLICATE"
    PRODUCER_ORDER = "PRODUCER_ORDER"
    KEY_ORDER = "KEY_ORDER"
    ACK_ORDER = "ACK_ORDER"
    PHANTOM = "PHANTOM"


@dataclass(frozen=True)
class Anomaly:
    kind: Kind
    subscription: str | None
    detail: str


@dataclass
class Verdict:
    anomalies: list[Anomaly] = field(default_factory=list)
    counts: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.anomalies

    def by_kind(self) -> dict[str, int]:
        out: dict[str, int] = defaultdict(int)
        for a in self.anomalies:
            out[a.kind.value] += 1
        return dict(out)

    def to_json(self) -> dict[str, Any]:
        listed: dict[Kind, int] = defaultdict(int)
        shown = []
        for a in self.anomalies:
            listed[a.kind] += 1
            if listed[a.kind] <= MAX_LISTED:
                shown.append(
                    {"kind": a.kind.value, "subscription": a.subscription, "detail": a.detail}
                )
        return {
            "verdict": "PASS" if self.ok else "FAIL",
            "anomalies": self.by_kind(),
            "examples": shown,
            "counts": self.counts,
        }


Msg = tuple[str, int]  # (producer, sequence)
Pos = tuple[int, int, int]  # (ledger, entry, batch)


@dataclass
class _Sub:
    type: str
    deliveries: int = 0
    # per message: the positions it was delivered at, in order
    positions: dict[Msg, list[Pos]] = field(default_factory=lambda: defaultdict(list))
    firsts: list[tuple[Msg, str, Pos]] = field(default_factory=list)  # (msg, key, pos)


def check(events: Iterable[dict[str, Any]]) -> Verdict:
    """The verdict on one history (events in recorded order)."""
    sent: dict[Msg, str] = {}  # msg -> key
    receipts: dict[Msg, Pos | None] = {}  # msg -> position, None: an error
    subs: dict[str, _Sub] = {}
    for e in sorted(events, key=lambda e: e.get("n", 0)):
        kind = e["k"]
        if kind == "send":
            sent[(e["p"], e["s"])] = e.get("key", "")
        elif kind == "sent":
            receipts[(e["p"], e["s"])] = None if e.get("err") else _pos(e["id"])
        elif kind == "subscribe":
            subs.setdefault(e["sub"], _Sub(e["type"]))
        elif kind == "recv":
            sub = subs.setdefault(e["sub"], _Sub(e["type"]))
            msg, pos = (e["p"], e["s"]), _pos(e["id"])
            sub.deliveries += 1
            if msg not in sub.positions:
                sub.firsts.append((msg, e.get("key", ""), pos))
            sub.positions[msg].append(pos)
    verdict = Verdict()
    acked = {m for m, pos in receipts.items() if pos is not None}
    verdict.anomalies += _ack_order(receipts)
    for name in sorted(subs):
        sub = subs[name]
        verdict.anomalies += _delivery(name, sub, acked, sent)
        order = ORDER_BY_TYPE.get(sub.type)
        if order == "producer":
            verdict.anomalies += _producer_order(name, sub)
        elif order == "key":
            verdict.anomalies += _key_order(name, sub)
    verdict.counts = _counts(sent, receipts, subs)
    return verdict


def _pos(raw: Any) -> Pos:
    ledger, entry, *rest = raw
    return (int(ledger), int(entry), int(rest[0]) if rest else -1)


def _ack_order(receipts: dict[Msg, Pos | None]) -> list[Anomaly]:
    """Per producer, in sequence order, stored positions strictly rise."""
    out = []
    by_producer: dict[str, list[tuple[int, Pos]]] = defaultdict(list)
    for (p, s), pos in receipts.items():
        if pos is not None and pos != DEDUP_RECEIPT:
            by_producer[p].append((s, pos))
    for p in sorted(by_producer):
        last: tuple[int, Pos] | None = None
        for s, pos in sorted(by_producer[p]):
            if last is not None and pos <= last[1]:
                out.append(
                    Anomaly(
                        Kind.ACK_ORDER, None, f"{p}: #{s} stored at {pos}, #{last[0]} at {last[1]}"
                    )
                )
            last = (s, pos)
    return out


def _delivery(name: str, sub: _Sub, acked: set[Msg], sent: dict[Msg, str]) -> list[Anomaly]:
    out = []
    for msg in sorted(acked - sub.positions.keys()):
        out.append(Anomaly(Kind.LOST, name, f"{msg[0]} #{msg[1]} acknowledged, never delivered"))
    for msg, positions in sorted(sub.positions.items()):
        if msg not in sent:
            out.append(Anomaly(Kind.PHANTOM, name, f"{msg[0]} #{msg[1]} delivered, never sent"))
        distinct = sorted(set(positions))
        if len(distinct) > 1:
            out.append(Anomaly(Kind.DUPLICATE, name, f"{msg[0]} #{msg[1]} stored at {distinct}"))
    return out


def _producer_order(name: str, sub: _Sub) -> list[Anomaly]:
    out = []
    last: dict[str, int] = {}
    for (p, s), _, _ in sub.firsts:
        if p in last and s < last[p]:
            out.append(
                Anomaly(Kind.PRODUCER_ORDER, name, f"{p}: #{s} first delivered after #{last[p]}")
            )
        last[p] = max(s, last.get(p, s))
    return out


def _key_order(name: str, sub: _Sub) -> list[Anomaly]:
    out = []
    last: dict[str, tuple[Pos, Msg]] = {}
    for msg, key, pos in sub.firsts:
        before = last.get(key)
        if before is not None and pos < before[0]:
            out.append(
                Anomaly(
                    Kind.KEY_ORDER,
                    name,
                    f"key {key!r}: {msg[0]} #{msg[1]} at {pos} first delivered after "
                    f"{before[1][0]} #{before[1][1]} at {before[0]}",
                )
            )
        if before is None or pos > before[0]:
            last[key] = (pos, msg)
    return out


def _counts(
    sent: dict[Msg, str], receipts: dict[Msg, Pos | None], subs: dict[str, _Sub]
) -> dict[str, Any]:
    return {
        "sends": len(sent),
        "acknowledged": sum(1 for pos in receipts.values() if pos is not None),
        "failed": sum(1 for pos in receipts.values() if pos is None),
        "no_receipt": len(sent.keys() - receipts.keys()),
        "dedup_receipts": sum(1 for pos in receipts.values() if pos == DEDUP_RECEIPT),
        "subscriptions": {
            name: {
                "type": sub.type,
                "delivered": len(sub.positions),
                "deliveries": sub.deliveries,
                "redelivered": sub.deliveries - len(sub.positions),
            }
            for name, sub in sorted(subs.items())
        },
    }
