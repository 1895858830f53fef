"""magnetar verify's fault schedule (client/verify_schedule.py)."""

from __future__ import annotations

import itertools

import pytest

from client.verify_schedule import ScheduleError, check_kinds, parse_range, schedule

PROCS = {
    "metastore-0": "metastore",
    "bookie-0": "bookie",
    "bookie-1": "bookie",
    "broker-0": "broker",
}


def test_a_seed_gives_the_same_schedule_and_faults_never_overlap():
    a = schedule(7, 600, ["kill9", "pause", "restart"], PROCS, (20, 60), (3, 15))
    assert a == schedule(7, 600, ["kill9", "pause", "restart"], PROCS, (20, 60), (3, 15))
    assert a != schedule(8, 600, ["kill9", "pause", "restart"], PROCS, (20, 60), (3, 15))
    assert a[0].at_s == 10 and all(f.at_s < 600 for f in a)
    for f, g in itertools.pairwise(a):
        assert 20 <= g.at_s - f.at_s <= 60.1
        assert f.at_s + f.hold_s < g.at_s
    assert {f.kind for f in a} == {"kill9", "pause", "restart"}
    assert all(3 <= f.hold_s <= 15 for f in a)


def test_every_kind_comes_once_before_any_comes_again():
    kinds = ["kill9", "pause", "restart"]
    a = schedule(5, 1000, kinds, PROCS, (10, 10), (1, 1))
    for i in range(0, len(a) - 2, 3):
        assert sorted(f.kind for f in a[i : i + 3]) == kinds


def test_a_hold_longer_than_the_interval_pushes_the_next_fault_back():
    a = schedule(1, 200, ["pause"], PROCS, (2, 2), (30, 30))
    assert [f.at_s for f in a[:3]] == [10, 41, 72]


@pytest.mark.parametrize(
    ("kind", "roles"),
    [
        ("broker-metastore", [{"broker"}]),
        ("isolate-metastore", [{"metastore"}]),
        ("bookie-broker", [{"bookie"}, {"broker"}]),
        ("kill9", [set(PROCS.values())]),
    ],
)
def test_each_kind_gets_targets_of_its_roles(kind, roles):
    for f in schedule(3, 2000, [kind], PROCS):
        assert [{PROCS[t]} for t in f.targets] == [
            r & {PROCS[t]} for r, t in zip(roles, f.targets, strict=True)
        ]


@pytest.mark.parametrize(
    ("kinds", "netns", "message"),
    [
        (["nope"], True, "unknown fault 'nope'"),
        (["flap"], False, "needs --netns"),
    ],
)
def test_bad_kinds_are_refused(kinds, netns, message):
    with pytest.raises(ScheduleError, match=message):
        check_kinds(kinds, netns)


def test_a_kind_without_a_target_is_refused():
    with pytest.raises(ScheduleError, match="needs a bookie process"):
        schedule(1, 100, ["bookie-broker"], {"broker-0": "broker"})


@pytest.mark.parametrize(
    ("text", "expected"), [("20-60", (20, 60)), ("30", (30, 30)), ("0.5-1", (0.5, 1))]
)
def test_ranges(text, expected):
    assert parse_range(text, "x") == expected


@pytest.mark.parametrize("text", ["", "a-b", "60-20", "0", "-5"])
def test_bad_ranges_are_refused(text):
    with pytest.raises(ScheduleError):
        parse_range(text, "--fault-interval")


@pytest.mark.parametrize(
    ("kind", "targets", "owner", "expected"),
    [
        ("flap", ("k2",), "k1", ("k1",)),
        ("bookie-broker", ("b1", "k2"), "k1", ("b1", "k1")),  # the bookie stays
        ("kill9", ("k2",), "k1", ("k1",)),  # any process, drawn a broker: the owner
        ("pause", ("b1",), "k1", ("b1",)),  # any process, drawn a bookie: as drawn
        ("isolate-metastore", ("m1",), "k1", ("m1",)),
        ("flap", ("k2",), None, ("k2",)),  # owner unknown: as drawn
    ],
)
def test_broker_faults_are_aimed_at_the_owner_of_the_topic(kind, targets, owner, expected):
    from client.verify_faults import aim_at_owner
    from client.verify_schedule import Fault

    roles = {"k1": "broker", "k2": "broker", "b1": "bookie", "m1": "metastore"}
    assert aim_at_owner(Fault(10, kind, targets, 3), owner, roles).targets == expected
