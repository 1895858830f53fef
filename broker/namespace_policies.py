"""A namespace's policies record (Pulsar's ``Policies`` document), typed.

Theory of operation. One JSON document with Pulsar's field names per
namespace (``/admin/policies/{tenant}/{ns}``), decoded into
:class:`NamespacePolicies` and encoded back from it, so no other module reads
a field by name; writing back keeps what this class does not know. Besides
the policies proper it holds the bundle boundaries, the replication
clusters, the grants, and ``deleted``: set by a namespace's deletion before
it deletes the topics, so that no new topic is made in the namespace while
they go (a producer reconnecting in between made its topic again).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from broker.bundles import NamespaceBundles
from broker.permissions import AuthPolicies
from broker.policies import Policies
from broker.settings import BrokerSettings


@dataclass(frozen=True)
class NamespacePolicies:
    """A namespace's policies (Pulsar's ``Policies`` document)."""

    bundles: NamespaceBundles | None = None  # None: default_number_of_namespace_bundles
    replication_clusters: tuple[str, ...] = ()
    policies: Policies = field(
        default_factory=Policies
    )  # what the namespace sets (broker.policies)
    auth: AuthPolicies = field(default_factory=AuthPolicies)  # grants (broker.permissions)
    deleted: bool = False  # being deleted: no new topic is made in it (Pulsar's "deleted")
    # The document as stored. Writing back keeps what this class does not
    # know (a newer broker's policies) and the stored form of an unchanged
    # field (an older document's bundle count stays a count).
    stored: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def document(self) -> dict[str, Any]:
        """The JSON document to store: Pulsar's field names, unset policies left out."""
        doc = dict(self.stored)
        if self.replication_clusters or "replication_clusters" in doc:
            doc["replication_clusters"] = list(self.replication_clusters)
        if self.bundles is None:
            doc.pop("bundles", None)
        elif not self._stored_bundles_are(self.bundles):
            doc["bundles"] = self.bundles.to_policy()
        if not self.auth.is_empty() or "auth_policies" in doc:
            doc["auth_policies"] = self.auth.document()
        if self.deleted or "deleted" in doc:
            doc["deleted"] = self.deleted
        return self.policies.into_document(doc)

    def _stored_bundles_are(self, bundles: NamespaceBundles) -> bool:
        stored = self.stored.get("bundles")
        if stored is None:
            return False
        return NamespaceBundles.from_policy(stored, 0).boundaries == bundles.boundaries

    def encode(self) -> bytes:
        return json.dumps(self.document()).encode()

    @classmethod
    def decode(cls, data: bytes) -> NamespacePolicies:
        """From the stored document; an older document's bundle count reads
        as that many equal bundles."""
        doc = json.loads(data)
        bundles = doc.get("bundles")
        return cls(
            bundles=None if bundles is None else NamespaceBundles.from_policy(bundles, 0),
            replication_clusters=tuple(doc.get("replication_clusters", ())),
            policies=Policies.from_document(doc),
            auth=AuthPolicies.from_document(doc.get("auth_policies")),
            deleted=doc.get("deleted") is True,
            stored=doc,
        )

    def bundles_or_default(self, default_count: int) -> NamespaceBundles:
        return self.bundles if self.bundles is not None else NamespaceBundles.equal(default_count)

    def with_policy(self, attr: str, value: Any) -> NamespacePolicies:
        return replace(self, policies=self.policies.with_value(attr, value))


def default_policies(settings: BrokerSettings) -> NamespacePolicies:
    """``public/default`` as the first broker creates it: the broker's default
    number of bundles, replicated in its cluster."""
    return NamespacePolicies(
        bundles=NamespaceBundles.equal(settings.default_number_of_namespace_bundles),
        replication_clusters=(settings.cluster_name,),
    )


def system_policies(settings: BrokerSettings) -> NamespacePolicies:
    """``magnetar/system`` (the stats topic's namespace): one bundle (it
    holds one topic), in the broker's cluster. Its retention is left unset,
    so the stats_retention_* settings apply (:func:`broker.namespaces.applied_policies`)."""
    return NamespacePolicies(
        bundles=NamespaceBundles.equal(1), replication_clusters=(settings.cluster_name,)
    )
