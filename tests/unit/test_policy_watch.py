import json

import pytest

from broker.policy_watch import NamespaceRecords, only_bundles_changed

_FOUR = {
    "boundaries": ["0x00000000", "0x40000000", "0x80000000", "0xc0000000", "0xffffffff"],
    "numBundles": 4,
}
_FIVE = {
    "boundaries": [
        "0x00000000",
        "0x20000000",
        "0x40000000",
        "0x80000000",
        "0xc0000000",
        "0xffffffff",
    ],
    "numBundles": 5,
}
_BASE = {
    "bundles": _FOUR,
    "retention_policies": {"retentionTimeInMinutes": 5, "retentionSizeInMB": 10},
    "auth_policies": {"namespace_auth": {"app": ["produce"]}},
}


def _with(**changes):
    doc = json.loads(json.dumps(_BASE))
    for k, v in changes.items():
        if v is None:
            doc.pop(k, None)
        else:
            doc[k] = v
    return json.dumps(doc).encode()


@pytest.mark.parametrize(
    ("after", "only_bundles"),
    [
        (_with(), True),  # the same record
        (_with(bundles=_FIVE), True),  # a split
        (_with(bundles=None), True),  # back to the default count
        (_with(bundles=_FIVE, message_ttl_in_seconds=60), False),  # a split and a policy
        (_with(retention_policies={"retentionTimeInMinutes": 6, "retentionSizeInMB": 10}), False),
        (_with(auth_policies={"namespace_auth": {"app": ["consume"]}}), False),  # a grant
        (_with(replication_clusters=["east"]), False),
        (b"not json", False),  # not a record this broker reads: apply again
    ],
)
def test_only_a_change_of_the_bundle_boundaries_leaves_the_loaded_topics_alone(after, only_bundles):
    assert only_bundles_changed(_with(), after) is only_bundles


def test_the_first_event_of_a_namespace_applies_and_the_next_split_does_not():
    records = NamespaceRecords(max_entries=10)
    assert not records.only_bundles("t/a", "PUT", _with())  # nothing to compare with
    assert records.only_bundles("t/a", "PUT", _with(bundles=_FIVE))  # a split
    assert not records.only_bundles("t/a", "PUT", _with(bundles=_FIVE, message_ttl_in_seconds=9))
    assert records.only_bundles("t/a", "PUT", _with(bundles=_FOUR, message_ttl_in_seconds=9))


def test_a_namespace_not_applied_everywhere_applies_at_its_next_event():
    records = NamespaceRecords(max_entries=10)
    records.only_bundles("t/a", "PUT", _with())
    records.forget("t/a")  # some topic failed to apply it
    assert not records.only_bundles("t/a", "PUT", _with(bundles=_FIVE))


def test_a_deletion_a_restart_of_the_watch_and_the_bound_all_forget():
    records = NamespaceRecords(max_entries=2)
    records.only_bundles("t/a", "PUT", _with())
    assert not records.only_bundles("t/a", "DELETE", b"")
    assert not records.only_bundles("t/a", "PUT", _with(bundles=_FIVE))  # made again
    records.clear()  # the watch (re)started
    assert not records.only_bundles("t/a", "PUT", _with(bundles=_FIVE))
    records.only_bundles("t/b", "PUT", _with())
    records.only_bundles("t/c", "PUT", _with())  # pushes out t/a, the oldest
    assert not records.only_bundles("t/a", "PUT", _with(bundles=_FIVE))
    assert records.only_bundles("t/c", "PUT", _with(bundles=_FIVE))


# (kept events, stand-in given, marks) -> the event's verdict. The stand-in
# is the policy cache's copy of the record, which the loaded topics applied.
@pytest.mark.parametrize(
    ("setup", "applied", "only_bundles"),
    [
        ([], _with(), True),  # first split after topics loaded: nothing to apply
        ([], _with(message_ttl_in_seconds=9), False),  # a policy changed too
        ([], None, False),  # nothing cached: apply
        (["failed"], _with(), False),  # a topic failed to apply its last event
        (["start failed"], _with(), False),  # the watch's start failed somewhere
        (["start failed", "restart"], _with(), True),  # the restart applied everything
        (["failed b", "failed c", "failed d"], _with(), False),  # a mark was pushed out
        (["kept"], _with(message_ttl_in_seconds=9), True),  # its own last event decides
    ],
)
def test_with_no_event_kept_the_record_the_topics_applied_stands_in(setup, applied, only_bundles):
    records = NamespaceRecords(max_entries=2)
    for step in setup:
        if step == "failed":
            records.forget("t/a")
        elif step == "start failed":
            records.no_stand_ins()
        elif step == "restart":
            records.clear()
        elif step == "kept":
            records.only_bundles("t/a", "PUT", _with())
        else:  # "failed X": another namespace's mark
            records.forget("t/" + step.split()[1])
    assert records.only_bundles("t/a", "PUT", _with(bundles=_FIVE), applied) is only_bundles
