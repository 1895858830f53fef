"""Which faults ``magnetar verify`` injects, when and on what: a pure
function of a seed, so a run can be repeated (``--seed``).

=================  ==========================  ===========================
kind               target                      what is done for ``hold_s``
=================  ==========================  ===========================
kill9              any process                 SIGKILL, then it is started
                                               again (by local-cluster's
                                               supervisor, or the verifier)
pause              any process                 SIGSTOP ... SIGCONT
restart            any process                 SIGTERM, then started again
broker-metastore   a broker                    cut from every metastore node
isolate-metastore  a metastore node            its link down (leader or not)
bookie-broker      a bookie and a broker       cut between the two only
client-broker      a broker                    its answers to the verifier's
                                               clients dropped (one way)
flap               a broker                    its link down and up every
                                               half second
=================  ==========================  ===========================

The partition kinds need ``--netns`` (the verifier runs the cluster in
network namespaces). Every kind asked for comes once, in a random order,
before any comes again. Faults never overlap: one is undone before the next
starts, ``interval`` seconds after the previous one began.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

PROCESS_KINDS = ("kill9", "pause", "restart")
PARTITION_KINDS = (
    "broker-metastore",
    "isolate-metastore",
    "bookie-broker",
    "client-broker",
    "flap",
)
ALL_KINDS = PROCESS_KINDS + PARTITION_KINDS

# kind -> the roles of its target(s): "any" is every process
TARGET_ROLES: dict[str, tuple[str, ...]] = {
    "kill9": ("any",),
    "pause": ("any",),
    "restart": ("any",),
    "broker-metastore": ("broker",),
    "isolate-metastore": ("metastore",),
    "bookie-broker": ("bookie", "broker"),
    "client-broker": ("broker",),
    "flap": ("broker",),
}


@dataclass(frozen=True)
class Fault:
    at_s: float  # from the start of the run
    kind: str
    targets: tuple[str, ...]
    hold_s: float

    @property
    def label(self) -> str:
        return f"{self.kind} {'|'.join(self.targets)}"


class ScheduleError(ValueError):
    """A schedule that cannot be made (an unknown kind, no target for one)."""


def parse_range(text: str, what: str) -> tuple[float, float]:
    """``"20-60"`` or ``"30"`` -> (low, high), both > 0."""
    low, sep, high = text.partition("-")
    try:
        lo, hi = float(low), float(high if sep else low)
    except ValueError:
        raise ScheduleError(f"{what}: {text!r} is not N or LOW-HIGH (seconds)") from None
    if not 0 < lo <= hi:
        raise ScheduleError(f"{what}: {text!r} needs 0 < LOW <= HIGH")
    return lo, hi


def check_kinds(kinds: list[str], netns: bool) -> None:
    for kind in kinds:
        if kind not in ALL_KINDS:
            raise ScheduleError(f"unknown fault {kind!r} (known: {', '.join(ALL_KINDS)})")
        if kind in PARTITION_KINDS and not netns:
            raise ScheduleError(f"fault {kind!r} is a network partition: it needs --netns")


def schedule(
    seed: int,
    duration_s: float,
    kinds: list[str],
    processes: dict[str, str],
    interval_s: tuple[float, float] = (20, 60),
    hold_s: tuple[float, float] = (3, 15),
    start_s: float = 10,
) -> list[Fault]:
    """Faults from ``start_s`` until ``duration_s``; ``processes`` maps each
    process name to its role ("metastore", "bookie", "broker")."""
    if not kinds:
        return []
    by_role: dict[str, list[str]] = {"any": sorted(processes)}
    for name, role in sorted(processes.items()):
        by_role.setdefault(role, []).append(name)
    for kind in kinds:
        for role in TARGET_ROLES[kind]:
            if not by_role.get(role):
                raise ScheduleError(f"fault {kind!r} needs a {role} process; the cluster has none")
    rng = random.Random(seed)
    out: list[Fault] = []
    at = start_s
    cycle: list[str] = []
    while at < duration_s:
        if not cycle:  # every kind once, in a random order, then again
            cycle = rng.sample(kinds, len(kinds))
        kind = cycle.pop()
        targets = tuple(rng.choice(by_role[role]) for role in TARGET_ROLES[kind])
        hold = round(rng.uniform(*hold_s), 1)
        out.append(Fault(round(at, 1), kind, targets, hold))
        # The next fault starts after this one is undone, at the earliest.
        at += max(rng.uniform(*interval_s), hold + 1)
    return out
