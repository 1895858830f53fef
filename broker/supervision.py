"""When a supervisor restarts a child process, and when it gives up.

Theory of operation. ``magnetar standalone`` and ``magnetar local-cluster``
run each server as a child process. Once the whole set has started, a
child that dies is reported and restarted after a backoff while the others
keep serving (a local cluster exists to show failover). Each child's life
is one small state machine, decided here without I/O; the supervisor
(``broker/standalone.py``) feeds it events with the time and does what the
new state says (spawn when STARTING is entered, nothing else)::

    STARTING --ready--> RUNNING --exited--> BACKOFF --due--> STARTING
        |                                      ^
        +--exited / start_timeout--------------+   (or DOWN, see below)

A death counts as *quick* when the child ran less than
``stable_after_s`` since it was started; a child that stayed up that long
earns a fresh backoff. The backoff doubles with each quick death, from
``backoff_initial_s`` up to ``backoff_max_s``, and after
``max_quick_restarts`` quick deaths in a row the child is left DOWN (a
crash loop: a bad setting, a full disk) and the supervisor says so. With
``restart=False`` (``--no-restart``) every death leaves the child DOWN.
DOWN is final for this supervisor run.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace


class ChildState(enum.Enum):
    STARTING = "starting"
    RUNNING = "running"
    BACKOFF = "backoff"
    DOWN = "down"


class Event(enum.Enum):
    READY = "ready"  # ready file written and health SERVING
    EXITED = "exited"  # the process ended, whatever the code
    START_TIMEOUT = "start_timeout"  # not ready within start_timeout_s (it is killed)
    DUE = "due"  # the backoff is over


class IllegalTransition(RuntimeError):
    pass


@dataclass(frozen=True)
class RestartPolicy:
    restart: bool = True
    backoff_initial_s: float = 1.0
    backoff_max_s: float = 30.0
    stable_after_s: float = 60.0
    max_quick_restarts: int = 10
    start_timeout_s: float = 60.0

    def __post_init__(self) -> None:
        assert 0 < self.backoff_initial_s <= self.backoff_max_s
        assert self.max_quick_restarts >= 0 and self.start_timeout_s > 0


@dataclass(frozen=True)
class ChildLife:
    state: ChildState
    started_at: float  # when the current (or last) process was spawned
    restart_at: float = 0.0  # BACKOFF: when it is due
    backoff_s: float = 0.0  # the last backoff waited (0 = none yet)
    quick_deaths: int = 0  # quick deaths in a row
    reason: str = ""  # DOWN: why it stays down

    @classmethod
    def spawned(cls, now: float) -> ChildLife:
        return cls(ChildState.STARTING, started_at=now)


def _died(life: ChildLife, now: float, policy: RestartPolicy) -> ChildLife:
    if not policy.restart:
        return replace(life, state=ChildState.DOWN, reason="restarts are off (--no-restart)")
    if now - life.started_at >= policy.stable_after_s:
        quick, backoff = 0, policy.backoff_initial_s
    else:
        quick = life.quick_deaths + 1
        backoff = min(max(life.backoff_s * 2, policy.backoff_initial_s), policy.backoff_max_s)
    if quick > policy.max_quick_restarts:
        return replace(
            life,
            state=ChildState.DOWN,
            quick_deaths=quick,
            reason=f"it died {quick} times in a row within {policy.stable_after_s:g} s of "
            "starting; left down",
        )
    return replace(
        life,
        state=ChildState.BACKOFF,
        restart_at=now + backoff,
        backoff_s=backoff,
        quick_deaths=quick,
    )


def _ready(life: ChildLife, now: float, policy: RestartPolicy) -> ChildLife:
    return replace(life, state=ChildState.RUNNING)


def _due(life: ChildLife, now: float, policy: RestartPolicy) -> ChildLife:
    assert now >= life.restart_at, "a backoff ended early"
    return replace(life, state=ChildState.STARTING, started_at=now)


TRANSITIONS = {
    (ChildState.STARTING, Event.READY): _ready,
    (ChildState.STARTING, Event.EXITED): _died,
    (ChildState.STARTING, Event.START_TIMEOUT): _died,
    (ChildState.RUNNING, Event.EXITED): _died,
    (ChildState.BACKOFF, Event.DUE): _due,
}


def transition(life: ChildLife, event: Event, now: float, policy: RestartPolicy) -> ChildLife:
    step = TRANSITIONS.get((life.state, event))
    if step is None:
        raise IllegalTransition(f"{event.value} in state {life.state.value}")
    return step(life, now, policy)


def next_event(life: ChildLife, now: float, policy: RestartPolicy) -> Event | None:
    """The event time alone brings about now (the process ones, READY and
    EXITED, the supervisor observes)."""
    if life.state is ChildState.BACKOFF and now >= life.restart_at:
        return Event.DUE
    if life.state is ChildState.STARTING and now - life.started_at >= policy.start_timeout_s:
        return Event.START_TIMEOUT
    return None
