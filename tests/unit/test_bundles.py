"""Namespace bundles, and the load manager's placement, shedding and split
decisions on simulated load tables (the bundle state machine:
test_bundle_state.py)."""

from __future__ import annotations

import itertools
import math

import pytest

from broker.bundles import HASH_MAX, BundleRange, InvalidBundleError, NamespaceBundles
from broker.load_decisions import (
    BrokerLoad,
    BundleLoad,
    ResourceWeights,
    SplitThresholds,
    UsageHistory,
    broker_load_from_report,
    bundle_load_to_json,
    place,
    shed,
    split_candidates,
    unload_split_halves,
)
from protos.hashing import topic_crc32


def test_four_equal_bundles_named_like_pulsar():
    nb = NamespaceBundles.equal(4)
    assert [b.name for b in nb.bundles] == [
        "0x00000000_0x40000000",
        "0x40000000_0x80000000",
        "0x80000000_0xc0000000",
        "0xc0000000_0xffffffff",
    ]
    assert nb.bundle_for_hash(0).name == "0x00000000_0x40000000"
    assert nb.bundle_for_hash(0x3FFFFFFF).lower == 0
    assert nb.bundle_for_hash(0x40000000).lower == 0x40000000
    assert nb.bundle_for_hash(HASH_MAX).name == "0xc0000000_0xffffffff"


def test_topics_land_by_crc32_of_the_full_name_and_partitions_hash_apart():
    nb = NamespaceBundles.equal(4)
    for name in ("persistent://public/default/t", "persistent://public/default/t-partition-3"):
        assert nb.bundle_for_topic(name).contains(topic_crc32(name))


def test_split_halves_a_bundle_and_round_trips_through_the_policy():
    nb = NamespaceBundles.equal(2)
    first = nb.bundles[0]
    after = nb.split(first)
    assert [b.name for b in after.bundles] == [
        "0x00000000_0x40000000",
        "0x40000000_0x80000000",
        "0x80000000_0xffffffff",
    ]
    again = NamespaceBundles.from_policy(after.to_policy(), 4)
    assert again.boundaries == after.boundaries
    assert NamespaceBundles.from_policy(None, 4).boundaries == NamespaceBundles.equal(4).boundaries
    assert NamespaceBundles.from_policy(4, 16).boundaries == NamespaceBundles.equal(4).boundaries
    assert BundleRange.parse("0x40000000_0x80000000") == after.bundles[1]


@pytest.mark.parametrize(
    "bad", ["0x4_0x8", "0x80000000_0x40000000", "40000000_80000000", "0x40000000-0x80000000"]
)
def test_bad_bundle_names_are_refused(bad):
    with pytest.raises(InvalidBundleError):
        BundleRange.parse(bad)


def test_bad_boundaries_and_unknown_bundles_are_refused():
    for boundaries in ([0], [1, HASH_MAX], [0, 5, 5, HASH_MAX], [0, 10]):
        with pytest.raises(InvalidBundleError):
            NamespaceBundles(boundaries)
    with pytest.raises(InvalidBundleError):
        NamespaceBundles.equal(2).split(BundleRange(0, 5))
    with pytest.raises(InvalidBundleError):
        BundleRange(7, 8).halves()


def _broker(name: str, usage: float, **bundle_rates: float) -> BrokerLoad:
    return BrokerLoad(
        name,
        cpu=usage,
        bundles={b: BundleLoad(msg_rate_in=r) for b, r in bundle_rates.items()},
    )


def test_placement_picks_the_least_message_rate_counting_bundles_held():
    brokers = [_broker("b1", 0.5, a=300), _broker("b2", 0.2, b=100), _broker("b3", 0.2, c=100)]
    assert place(brokers) == "b2"  # tie with b3: the name decides
    assert place(brokers, {"b2": 1}) == "b3"  # a held bundle adds the average (166 msg/s)
    assert place(brokers, {"b2": 2, "b3": 2}) == "b1"
    assert place([]) is None


def test_placement_leaves_out_overloaded_brokers_unless_all_are():
    brokers = [_broker("b1", 0.9), _broker("b2", 0.5, b=5000)]
    assert place(brokers) == "b2"  # b1 is idle but over 85 % CPU
    assert place(brokers, overloaded=0.95) == "b1"
    assert place([_broker("b1", 0.9, a=10), _broker("b2", 0.95)]) == "b2"


def test_shedding_unloads_the_busiest_bundles_of_an_overloaded_broker_once_per_grace():
    hot = _broker("b1", 0.9, a=5000, b=3000, c=1000, d=1000)
    cool = [_broker("b2", 0.2, e=100), _broker("b3", 0.1, f=100)]
    moves = shed([hot, *cool], threshold=0.1, moved_at={}, now_s=1000, grace_s=1800)
    # Average usage 0.4, excess 0.5: give up 10,000 msg/s * 0.5/0.9 = 5,556 msg/s,
    # busiest first, until that is reached: a (5,000), then b.
    assert moves == [("a", "b1"), ("b", "b1")]
    later = shed([hot, *cool], threshold=0.1, moved_at={"a": 900}, now_s=1000, grace_s=1800)
    # a moved 100 s ago: not again; b, c, d reach only 5,000 and one bundle stays.
    assert later == [("b", "b1"), ("c", "b1"), ("d", "b1")]
    assert shed([hot, *cool], 0.1, {"a": 900}, now_s=900 + 1800, grace_s=1800)[0] == ("a", "b1")


def test_no_shedding_within_the_threshold_or_of_a_last_bundle():
    even = [_broker("b1", 0.5, a=10, b=10), _broker("b2", 0.45, c=10)]
    assert shed(even, threshold=0.1, moved_at={}, now_s=0, grace_s=0) == []
    lone = [_broker("b1", 0.95, a=1000), _broker("b2", 0.05)]
    assert shed(lone, threshold=0.1, moved_at={}, now_s=0, grace_s=0) == []


def test_split_candidates_over_any_threshold_within_the_namespace_limit():
    limits = SplitThresholds(
        max_topics=10, max_sessions=10, max_msg_rate=100, max_bundles_per_namespace=5
    )
    loads = {
        "t": BundleLoad(topics=11),
        "s": BundleLoad(sessions=11),
        "r": BundleLoad(msg_rate_in=60, msg_rate_out=60),
        "w": BundleLoad(throughput_in=200 * 1024 * 1024),
        "ok": BundleLoad(topics=10, sessions=10, msg_rate_in=100),
        "full": BundleLoad(topics=99),
    }
    ns = {k: "a/x" for k in loads} | {"full": "a/full"}
    picked = split_candidates(loads, ns, {"a/x": 2, "a/full": 5}, limits)
    assert picked[0] == "r" and set(picked) == {"t", "s", "r"}  # w would make a/x 6 > 5
    assert "full" not in picked and "ok" not in picked


@pytest.mark.parametrize(
    ("enabled", "brokers", "unload"),
    [
        (True, 2, True),  # another broker may take a half
        (True, 5, True),
        (True, 1, False),  # alone: unloading only makes the topics unavailable
        (True, 0, False),  # no report read yet
        (False, 3, False),  # load_balancer_auto_unload_split_bundles_enabled=false
        (False, 1, False),
    ],
)
def test_split_halves_are_unloaded_only_when_another_broker_could_take_them(
    enabled, brokers, unload
):
    assert unload_split_halves(enabled, brokers) is unload


def test_usage_is_the_largest_weighted_resource():
    b = BrokerLoad("b1", cpu=0.9, memory=0.3, bandwidth_in=0.5, bandwidth_out=0.1)
    assert ResourceWeights().usage(b) == 0.9
    assert ResourceWeights(cpu=0.0).usage(b) == 0.5
    assert ResourceWeights(cpu=0.0, bandwidth_in=0.0).usage(b) == 0.3
    assert ResourceWeights(0.0, 0.0, 0.0, 0.0).usage(b) == 0.0


def test_usage_history_smooths_and_forgets_brokers_that_left():
    history = UsageHistory(0.9, ResourceWeights())
    first = history.smooth([BrokerLoad("b1", cpu=0.1), BrokerLoad("b2", cpu=0.5)])
    assert [b.usage for b in first] == [0.1, 0.5]  # a first report is taken as is
    spike = history.smooth([BrokerLoad("b1", cpu=1.0)])
    assert spike[0].usage == pytest.approx(0.9 * 0.1 + 0.1 * 1.0)  # one spike moves it a little
    back = history.smooth([BrokerLoad("b2", cpu=0.0)])
    assert back[0].usage == 0.0  # b2 missed a round: it starts afresh
    assert UsageHistory(0.0, ResourceWeights()).smooth([BrokerLoad("b", cpu=0.7)])[0].usage == 0.7
    with pytest.raises(ValueError):
        UsageHistory(1.0, ResourceWeights())


def test_a_report_round_trips_into_the_load_the_decisions_use():
    load = BundleLoad(topics=3, sessions=7, msg_rate_in=10, msg_rate_out=5, throughput_in=100)
    report = {
        "cpu": 0.25,
        "bandwidthIn": 0.5,
        "bundles": {"t/n/0x0_0x1": bundle_load_to_json(load)},
    }
    parsed = broker_load_from_report(report, "b1")
    assert parsed.broker == "b1" and parsed.cpu == 0.25 and parsed.memory == 0.0
    assert parsed.usage == 0.5
    assert parsed.bundles == {"t/n/0x0_0x1": load}
    assert broker_load_from_report({}, "b2").bundles == {}


@pytest.mark.parametrize("grace_s", [1800.0, 600.0])
def test_simulated_shedding_moves_no_bundle_twice_within_the_grace_period(grace_s):
    # 3 brokers; b1 starts with every bundle. Bundle rates swing with time,
    # so a shedder without a grace period moves some bundles back and forth
    # (checked: with grace 0, 5 of the 12 move twice within 30 minutes). Each
    # round the leader sheds, and every shed bundle goes to the least loaded
    # other broker. Usage = message rate over a capacity of 20,000 msg/s.
    base = {f"bundle-{i}": 1000.0 * (i % 5 + 1) for i in range(12)}
    rates = dict(base)
    owner = {name: "b1" for name in base}
    moved_at: dict[str, float] = {}
    moves: list[tuple[float, str]] = []

    def loads() -> list[BrokerLoad]:
        out = {b: BrokerLoad(b) for b in ("b1", "b2", "b3")}
        for name, broker in owner.items():
            out[broker].bundles[name] = BundleLoad(msg_rate_in=rates[name])
        for b in out.values():
            b.cpu = b.msg_rate / 20000
        return list(out.values())

    for round_no in range(60):  # one round a minute, for an hour
        now = round_no * 60.0
        for i, name in enumerate(base):
            rates[name] = base[name] * (1 + 0.8 * math.sin(round_no / 3 + i))
        for name, source in shed(loads(), 0.1, moved_at, now, grace_s):
            owner[name] = place([b for b in loads() if b.broker != source]) or source
            moved_at[name] = now
            moves.append((now, name))
    assert moves, "nothing was shed"
    for name in base:
        times = [t for t, n in moves if n == name]
        assert all(b - a >= grace_s for a, b in itertools.pairwise(times)), (name, times)
    # Bounded: no bundle moves more often than once per grace period.
    assert len(moves) <= len(base) * (60 * 60 / grace_s + 1)


def test_placement_spreads_over_idle_brokers_whatever_their_cpu_noise():
    brokers = [_broker("b1", 0.04), _broker("b2", 0.31), _broker("b3", 0.07)]
    held: dict[str, int] = {}
    for _ in range(9):
        chosen = place(brokers, held)
        assert chosen is not None
        held[chosen] = held.get(chosen, 0) + 1
    assert held == {"b1": 3, "b2": 3, "b3": 3}


def test_a_bundle_index_names_the_same_bundle_as_the_lookup():
    nb = NamespaceBundles.equal(4).split(BundleRange(0x40000000, 0x80000000))
    for h in (0, 0x3FFFFFFF, 0x40000000, 0x5FFFFFFF, 0x60000000, 0xBFFFFFFF, HASH_MAX):
        assert nb.bundle_at(nb.index_for_hash(h)) == nb.bundle_for_hash(h)
    name = "persistent://public/default/t"
    assert nb.bundle_at(nb.index_for_topic(name)) == nb.bundle_for_topic(name)
    with pytest.raises(InvalidBundleError):
        nb.index_for_hash(HASH_MAX + 1)
