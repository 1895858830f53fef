import asyncio
import json
from types import SimpleNamespace

import pytest

from broker.policy_cache import PolicyCache
from broker.policy_watch import NamespaceRecords, PolicyWatch, only_bundles_changed
from metastore.client import Stat, WatchEvent

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
        (_with(deleted=True), True),  # the namespace's deletion begins: its topics go
        (_with(deleted=True, message_ttl_in_seconds=60), False),
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
        (["kept", "start failed"], _with(), False),  # a failure: nor is a kept event trusted
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


class _Topics:
    """What the watch asks of the topic registry: no topics, the namespaces
    it was told to apply again, and the count of failed applies."""

    def __init__(self) -> None:
        self.topics: dict = {}
        self.reapplied: list[str | None] = []
        self.policy_failures = 0

    async def reapply_policies(self, namespace=None, topic=None) -> bool:
        self.reapplied.append(namespace)
        return True


class _Store:
    def __init__(self, value: bytes, revision: int) -> None:
        self.stat = Stat(value, 1, revision, 0)

    async def get(self, key: str) -> Stat:
        return self.stat


def _watch(cached: bytes, cached_revision: int) -> tuple[PolicyWatch, _Topics]:
    cache = PolicyCache(_Store(cached, cached_revision), 10)  # type: ignore[arg-type]
    cache.start()
    asyncio.run(cache.get("/admin/policies/t/a"))
    ownership = SimpleNamespace(
        namespaces=SimpleNamespace(
            policy_cache=cache, settings=SimpleNamespace(max_namespaces_cached=10)
        ),
        forget_bundles=lambda ns: None,
    )

    async def recheck(*args, **kwargs) -> None:
        return None

    authorizer = SimpleNamespace(forget=lambda **kw: None, recheck=recheck)
    topics = _Topics()
    return PolicyWatch(None, topics, ownership, authorizer), topics  # type: ignore[arg-type]


# (cached record, its revision, a failed apply since) -> applied again?
@pytest.mark.parametrize(
    ("cached", "cached_revision", "failed", "applied"),
    [
        (_with(), 5, False, False),  # the first split after the topics loaded
        (_with(message_ttl_in_seconds=9), 5, False, True),  # a policy changed too
        (_with(bundles=_FIVE), 7, False, True),  # the copy is the event's own record
        (_with(), 5, True, True),  # a topic failed to apply its policies meanwhile
    ],
)
def test_a_namespace_event_compares_with_what_the_loaded_topics_applied(
    cached, cached_revision, failed, applied
):
    watch, topics = _watch(cached, cached_revision)
    if failed:
        topics.policy_failures += 1
    event = WatchEvent("PUT", "/admin/policies/t/a", _with(bundles=_FIVE), 2, 7, 0)
    asyncio.run(watch.changed(event))
    assert topics.reapplied == (["t/a"] if applied else [])
    assert watch.events == 1


def test_a_failed_apply_anywhere_distrusts_the_kept_events_too():
    watch, topics = _watch(_with(), 5)
    key = "/admin/policies/t/a"
    asyncio.run(watch.changed(WatchEvent("PUT", key, _with(bundles=_FIVE), 2, 7, 0)))
    assert topics.reapplied == []  # a split: the copy stood in
    topics.policy_failures += 1  # say a topic loading meanwhile failed its second apply
    asyncio.run(watch.changed(WatchEvent("PUT", key, _with(), 3, 9, 0)))  # a split again
    assert topics.reapplied == ["t/a"]
