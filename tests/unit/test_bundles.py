"""Namespace bundles, the bundle state machine, and the load manager's
placement, shedding and split decisions on simulated load tables."""

from __future__ import annotations

import pytest

from broker.bundle_state import (
    FREE,
    TRANSITIONS,
    BundleRecord,
    BundleState,
    IllegalBundleTransition,
    recover,
    transition,
)
from broker.bundles import HASH_MAX, BundleRange, InvalidBundleError, NamespaceBundles
from broker.load_decisions import (
    BrokerLoad,
    BundleLoad,
    SplitThresholds,
    place,
    shed,
    split_candidates,
)
from protos.hashing import topic_crc32

S = BundleState


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


# (start record, event, broker) -> expected state, or None for illegal.
STATE_STEPS = [
    (FREE, "assign", "b1", S.ASSIGNING),
    (BundleRecord(S.ASSIGNING, "b1"), "own", "", S.OWNED),
    (BundleRecord(S.ASSIGNING, "b1"), "abandon", "", S.FREE),
    (BundleRecord(S.OWNED, "b1"), "release", "", S.RELEASING),
    (BundleRecord(S.OWNED, "b1"), "split", "", S.SPLITTING),
    (BundleRecord(S.RELEASING, "b1"), "free", "", S.FREE),
    (BundleRecord(S.RELEASING, "b1"), "keep", "", S.OWNED),
    (BundleRecord(S.SPLITTING, "b1"), "done", "", S.DELETED),
    (BundleRecord(S.SPLITTING, "b1"), "abort", "", S.OWNED),
    (FREE, "own", "", None),
    (BundleRecord(S.OWNED, "b1"), "assign", "b2", None),
    (BundleRecord(S.DELETED, "b1"), "assign", "b2", None),
    (BundleRecord(S.RELEASING, "b1"), "split", "", None),
]


@pytest.mark.parametrize("start,event,broker,expected", STATE_STEPS)
def test_bundle_state_transitions(start, event, broker, expected):
    if expected is None:
        with pytest.raises(IllegalBundleTransition):
            transition(start, event, broker)
        return
    after = transition(start, event, broker)
    assert after.state == expected
    if event == "assign":
        assert after.broker == broker
    else:
        assert after.broker == start.broker  # free: the last owner, a placement hint
    assert BundleRecord.decode(after.encode()) == after


def test_every_state_but_deleted_can_move_on():
    sources = {s for s, _ in TRANSITIONS}
    assert sources == set(S) - {S.DELETED}


RECOVERY = [
    (BundleRecord(S.ASSIGNING, "dead"), False, "abandon"),
    (BundleRecord(S.ASSIGNING, "live"), False, None),
    (BundleRecord(S.RELEASING, "live"), False, "free"),
    (BundleRecord(S.SPLITTING, "live"), True, "done"),
    (BundleRecord(S.SPLITTING, "dead"), False, "abort"),
    (BundleRecord(S.OWNED, "dead"), False, "release"),
    (BundleRecord(S.OWNED, "live"), False, None),
    (FREE, False, None),
]


@pytest.mark.parametrize("record,children,event", RECOVERY)
def test_interrupted_changes_are_finished_or_rolled_back(record, children, event):
    assert recover(record, {"live"}, children) == event
    if event is not None:
        transition(record, event)  # always a legal step


def _broker(name: str, usage: float, **bundle_rates: float) -> BrokerLoad:
    return BrokerLoad(
        name,
        cpu=usage,
        bundles={b: BundleLoad(msg_rate_in=r) for b, r in bundle_rates.items()},
    )


def test_placement_picks_the_least_loaded_and_counts_pending_assignments():
    brokers = [_broker("b1", 0.5), _broker("b2", 0.2), _broker("b3", 0.2)]
    assert place(brokers) == "b2"  # tie with b3: the name decides
    assert place(brokers, {"b2": 1}) == "b3"
    assert place(brokers, {"b2": 3, "b3": 3}, pending_weight=0.2) == "b1"
    assert place([]) is None


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
