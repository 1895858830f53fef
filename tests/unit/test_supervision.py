"""The supervisor's restart decisions (broker/supervision.py) as step
tables: each row is (time, event, expected state, expected restart time or
backoff). Time is passed in; nothing runs."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from broker.supervision import (
    TRANSITIONS,
    ChildLife,
    ChildState,
    Event,
    IllegalTransition,
    RestartPolicy,
    next_event,
    transition,
)

S, R, B, D = ChildState.STARTING, ChildState.RUNNING, ChildState.BACKOFF, ChildState.DOWN
READY, EXITED, TIMEOUT, DUE = Event.READY, Event.EXITED, Event.START_TIMEOUT, Event.DUE
POLICY = RestartPolicy(
    backoff_initial_s=1, backoff_max_s=8, stable_after_s=60, max_quick_restarts=4
)


def run(
    steps: Sequence[tuple[float, Event, ChildState, float]], policy: RestartPolicy = POLICY
) -> None:
    """Rows: (now, event, state after, backoff after)."""
    life = ChildLife.spawned(0.0)
    for i, (now, event, state, backoff) in enumerate(steps):
        life = transition(life, event, now, policy)
        assert (life.state, life.backoff_s) == (state, backoff), f"step {i}: {event} at {now}"
        if state is B:
            assert life.restart_at == now + backoff, f"step {i}"


def test_a_crash_loop_backs_off_doubling_up_to_the_cap_then_is_left_down():
    run(
        [
            (1, READY, R, 0),
            (5, EXITED, B, 1),  # ran 5 s < 60 s: a quick death
            (6, DUE, S, 1),
            (7, EXITED, B, 2),
            (9, DUE, S, 2),
            (10, EXITED, B, 4),
            (14, DUE, S, 4),
            (15, EXITED, B, 8),
            (23, DUE, S, 8),
            (24, EXITED, D, 8),  # the 5th quick death in a row > max_quick_restarts=4
        ]
    )


def test_a_child_that_stayed_up_long_enough_earns_a_fresh_backoff():
    run(
        [
            (1, READY, R, 0),
            (2, EXITED, B, 1),
            (3, DUE, S, 1),
            (4, EXITED, B, 2),
            (6, DUE, S, 2),
            (7, READY, R, 2),
            (66, EXITED, B, 1),  # up 60 s since its start at 6: stable
            (67, DUE, S, 1),
            (68, EXITED, B, 2),
        ]
    )


def test_with_restarts_off_every_death_leaves_the_child_down():
    off = RestartPolicy(restart=False)
    for steps in ([(1, READY, R, 0), (100, EXITED, D, 0)], [(1, EXITED, D, 0)]):
        run(steps, off)
    life = transition(ChildLife.spawned(0), EXITED, 1, off)
    assert "--no-restart" in life.reason


def test_a_start_that_never_becomes_ready_counts_as_a_death():
    policy = RestartPolicy(start_timeout_s=30)
    life = ChildLife.spawned(0)
    assert next_event(life, 29.9, policy) is None
    assert next_event(life, 30, policy) is TIMEOUT
    life = transition(life, TIMEOUT, 30, policy)
    assert (life.state, life.restart_at) == (B, 31)
    assert next_event(life, 30.5, policy) is None
    assert next_event(life, 31, policy) is DUE


@pytest.mark.parametrize("state", list(ChildState))
@pytest.mark.parametrize("event", list(Event))
def test_every_pair_outside_the_table_is_refused(state, event):
    life = ChildLife(state, started_at=0)
    if (state, event) in TRANSITIONS:
        assert transition(life, event, 100, POLICY).state in ChildState
    else:
        with pytest.raises(IllegalTransition):
            transition(life, event, 100, POLICY)


def test_down_is_final_and_running_waits_on_nothing_but_the_process():
    assert next_event(ChildLife(D, started_at=0), 1e9, POLICY) is None
    assert next_event(ChildLife(R, started_at=0), 1e9, POLICY) is None


def test_the_stop_budget_is_shared_by_role_and_a_lower_setting_is_kept(tmp_path):
    from broker.standalone import Standalone

    def sup(config: str | None, total: float) -> Standalone:
        return Standalone(
            tmp_path / "data",
            metastore_port=0,
            raft_port=0,
            bookie_port=0,
            broker_port=0,
            metrics_ports=(-1, -1, -1),
            config_file=config,
            shutdown_timeout_s=total,
        )

    default = sup(None, 10)  # brokers by 6 s, bookies by 8 s, metastores by 10 s; 0.5 s margin
    assert [default.child_timeout_s(r) for r in ("broker", "bookie", "metastore")] == [
        5.5,
        1.5,
        1.5,
    ]
    config = tmp_path / "m.toml"
    config.write_text("[broker]\nshutdown_timeout_s = 3\n[bookie]\nshutdown_timeout_s = 30\n")
    mixed = sup(str(config), 20)
    assert [mixed.child_timeout_s(r) for r in ("broker", "bookie", "metastore")] == [3, 3.5, 3.5]
