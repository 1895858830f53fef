import json

import pytest

from broker.policy_watch import only_bundles_changed

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
