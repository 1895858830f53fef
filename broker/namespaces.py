"""Namespaces: their typed policies, their partitioned topics and their
topics, read and written here only.

Theory of operation. A namespace exists when its policies record does
(``/admin/policies/{tenant}/{ns}``): one JSON document with Pulsar's field
names, decoded into :class:`NamespacePolicies` and encoded back from it, so
no other module reads a policy field by name. A policy left unset falls back
to the broker setting (``default_number_of_namespace_bundles``,
``broker_deduplication_enabled``) when it is used, not when it is read.
Policies change by compare-and-set (a bounded number of attempts), so two
administrators never lose each other's change. ``public/default`` is
created by the first broker that starts, with the broker's default number of
bundles. A partitioned topic is its partition count at
``/admin/partitioned-topics/...``; it is served through its partitions only.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from broker.bundles import NamespaceBundles
from broker.errors import BrokerError
from broker.ledger_rules import RetentionPolicy
from broker.settings import BrokerSettings
from metastore.client import Compare, MetastoreClient, Op
from protos import common_pb2, metadata_paths
from protos.errors import MagnetarServerError
from protos.topic_name import (
    DEFAULT_NAMESPACE,
    DEFAULT_TENANT,
    DOMAINS,
    NON_PERSISTENT,
    PERSISTENT,
    SYSTEM_NAMESPACE,
    TopicName,
)

log = logging.getLogger(__name__)

DEFAULT = f"{DEFAULT_TENANT}/{DEFAULT_NAMESPACE}"
# Compare-and-set attempts of one policy change before it gives up.
POLICY_UPDATE_ATTEMPTS = 20


@dataclass(frozen=True)
class NamespacePolicies:
    """A namespace's policies (Pulsar's ``Policies`` document)."""

    bundles: NamespaceBundles | None = None  # None: default_number_of_namespace_bundles
    replication_clusters: tuple[str, ...] = ()
    deduplication_enabled: bool | None = None  # None: broker_deduplication_enabled
    retention: RetentionPolicy | None = None  # None: the broker's default (retention_of)
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
        if self.deduplication_enabled is None:
            doc.pop("deduplicationEnabled", None)
        else:
            doc["deduplicationEnabled"] = self.deduplication_enabled
        if self.retention is None:
            doc.pop("retention_policies", None)
        else:
            doc["retention_policies"] = retention_to_policy(self.retention)
        return doc

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
        dedup = doc.get("deduplicationEnabled")
        retention = doc.get("retention_policies")
        return cls(
            bundles=None if bundles is None else NamespaceBundles.from_policy(bundles, 0),
            replication_clusters=tuple(doc.get("replication_clusters", ())),
            deduplication_enabled=None if dedup is None else bool(dedup),
            retention=None if retention is None else retention_from_policy(retention),
            stored=doc,
        )

    def bundles_or_default(self, default_count: int) -> NamespaceBundles:
        return self.bundles if self.bundles is not None else NamespaceBundles.equal(default_count)

    def retention_of(self, namespace: str, settings: BrokerSettings) -> RetentionPolicy:
        """The namespace's retention, else the broker's default for it: the
        stats_retention_* settings for the system namespace (the stats
        topic's), default_retention_* for any other."""
        if self.retention is not None:
            return self.retention
        if namespace == SYSTEM_NAMESPACE:
            return RetentionPolicy(
                settings.stats_retention_time_minutes * 60.0, _mb(settings.stats_retention_size_mb)
            )
        return RetentionPolicy(
            settings.default_retention_time_in_minutes * 60.0,
            _mb(settings.default_retention_size_in_mb),
        )

    def deduplication(self, settings: BrokerSettings) -> bool:
        if self.deduplication_enabled is not None:
            return self.deduplication_enabled
        return settings.broker_deduplication_enabled


def _mb(size_mb: int) -> int:
    return size_mb * 1024 * 1024 if size_mb >= 0 else -1


def retention_to_policy(r: RetentionPolicy) -> dict[str, int]:
    """Pulsar's RetentionPolicies document (minutes and MB; -1 = no limit)."""
    minutes = -1 if r.time_s < 0 else int(r.time_s // 60)
    size_mb = -1 if r.size_bytes < 0 else r.size_bytes // (1024 * 1024)
    return {"retentionTimeInMinutes": minutes, "retentionSizeInMB": size_mb}


def retention_from_policy(doc: Mapping[str, Any]) -> RetentionPolicy:
    minutes = int(doc.get("retentionTimeInMinutes", 0))
    return RetentionPolicy(
        -1.0 if minutes < 0 else minutes * 60.0, _mb(int(doc.get("retentionSizeInMB", 0)))
    )


_NAME_PART = re.compile(r"^[A-Za-z0-9_=:.\-]+$")  # as in topic names (protos.topic_name)


def parse_namespace(text: str) -> str:
    """``tenant/namespace``, each part named as in a topic name; INVALID_ARGUMENT otherwise."""
    tenant, sep, ns = text.partition("/")
    if not sep or not _NAME_PART.match(tenant) or not _NAME_PART.match(ns):
        raise BrokerError(
            f"namespace {text!r} is not tenant/namespace (letters, digits and _ = : . -)",
            common_pb2.INVALID_ARGUMENT,
        )
    return text


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
    so the stats_retention_* settings apply (:meth:`NamespacePolicies.retention_of`)."""
    return NamespacePolicies(
        bundles=NamespaceBundles.equal(1), replication_clusters=(settings.cluster_name,)
    )


def _missing(namespace: str) -> BrokerError:
    return BrokerError(f"namespace {namespace} does not exist", common_pb2.TOPIC_NOT_FOUND)


class Namespaces:
    def __init__(self, metastore: MetastoreClient, settings: BrokerSettings) -> None:
        self.metastore = metastore
        self.settings = settings

    # ------------------------------------------------------------ policies

    async def read(self, namespace: str) -> tuple[NamespacePolicies, int] | None:
        """The policies and the version of their record; None if no such namespace."""
        stat = await self.metastore.get(metadata_paths.namespace_policies(namespace))
        if stat is None:
            return None
        return NamespacePolicies.decode(stat.value), stat.version

    async def policies(self, namespace: str) -> NamespacePolicies:
        found = await self.read(namespace)
        if found is None:
            raise _missing(namespace)
        return found[0]

    async def exists(self, namespace: str) -> bool:
        return await self.read(namespace) is not None

    async def update(
        self, namespace: str, change: Callable[[NamespacePolicies], NamespacePolicies]
    ) -> NamespacePolicies:
        """Apply ``change`` by compare-and-set; the policies written."""
        key = metadata_paths.namespace_policies(namespace)
        for _ in range(POLICY_UPDATE_ATTEMPTS):
            found = await self.read(namespace)
            if found is None:
                raise _missing(namespace)
            after = change(found[0])
            try:
                await self.metastore.put(key, after.encode(), expected_version=found[1])
                return after
            except MagnetarServerError as exc:
                if exc.code != common_pb2.BAD_VERSION:
                    raise
        raise BrokerError(
            f"the policies of {namespace} kept changing; the change gave up",
            common_pb2.SERVICE_NOT_READY,
        )

    def unchanged(self, namespace: str, version: int) -> Compare:
        """A transaction's condition: the policies are still at ``version``."""
        return Compare(metadata_paths.namespace_policies(namespace), version=version)

    def write(self, namespace: str, policies: NamespacePolicies) -> Op:
        """A transaction's write of the policies (with other records, atomically)."""
        return Op(metadata_paths.namespace_policies(namespace), policies.encode())

    async def set_deduplication(self, namespace: str, enabled: bool) -> NamespacePolicies:
        return await self.update(
            parse_namespace(namespace), lambda p: replace(p, deduplication_enabled=enabled)
        )

    async def ensure_default(self) -> None:
        """Create ``public/default`` (:func:`default_policies`) and the system
        namespace of the stats topic unless they exist."""
        await self._ensure(DEFAULT, default_policies(self.settings))
        await self._ensure(SYSTEM_NAMESPACE, system_policies(self.settings))

    async def _ensure(self, namespace: str, policies: NamespacePolicies) -> None:
        key = metadata_paths.namespace_policies(namespace)
        if await self.metastore.get(key) is not None:
            return
        try:
            await self.metastore.put(key, policies.encode(), expected_version=-1)
        except MagnetarServerError as exc:
            if exc.code != common_pb2.BAD_VERSION:
                raise  # else another broker created it first

    # ------------------------------------------------------------ partitioned topics

    async def partitions_of(self, name: TopicName) -> int:
        """Partitions of a partitioned topic; 0 for any other name."""
        if name.is_partition:
            return 0
        stat = await self.metastore.get(metadata_paths.partitioned_topic(name))
        return int(json.loads(stat.value)["partitions"]) if stat is not None else 0

    async def check_partitioned(self, name: TopicName) -> None:
        """A partitioned topic is served through its partitions only, and only
        through the partitions it has."""
        if name.is_partition:
            parent = name.partitioned_topic_name
            n = await self.partitions_of(parent)
            if n and name.partition_index >= n:
                raise BrokerError(
                    f"{parent} has {n} partitions; there is no partition {name.partition_index}",
                    common_pb2.TOPIC_NOT_FOUND,
                )
            return
        n = await self.partitions_of(name)
        if n:
            raise BrokerError(
                f"{name} is a partitioned topic ({n} partitions): use its partitions "
                f"{name.partition(0).local_name} … {name.partition(n - 1).local_name}",
                common_pb2.NOT_ALLOWED,
            )

    async def create_partitioned_topic(
        self, name: TopicName, partitions: int, exists_unpartitioned: bool
    ) -> None:
        """Record ``partitions`` partitions for ``name`` (refused for a
        partition name, a topic that exists unpartitioned, or one already
        partitioned)."""
        limit = self.settings.max_num_partitions_per_partitioned_topic
        if not 1 <= partitions <= limit:
            raise BrokerError(
                f"{partitions} partitions: a partitioned topic has 1 to {limit} "
                "(max_num_partitions_per_partitioned_topic)",
                common_pb2.INVALID_ARGUMENT,
            )
        if name.is_partition:
            raise BrokerError(
                f"{name} is a partition name; name the partitioned topic itself",
                common_pb2.INVALID_TOPIC_NAME,
            )
        if not await self.exists(name.namespace_name):
            raise _missing(name.namespace_name)
        if exists_unpartitioned or await self.managed_ledger_exists(name):
            raise BrokerError(
                f"{name} already exists as a non-partitioned topic", common_pb2.NOT_ALLOWED
            )
        body = json.dumps({"partitions": partitions}).encode()
        try:
            await self.metastore.put(
                metadata_paths.partitioned_topic(name), body, expected_version=-1
            )
        except MagnetarServerError as exc:
            if exc.code != common_pb2.BAD_VERSION:
                raise
            n = await self.partitions_of(name)
            raise BrokerError(
                f"partitioned topic {name} already exists ({n} partitions)",
                common_pb2.NOT_ALLOWED,
            ) from None

    # ------------------------------------------------------------ topics

    async def managed_ledger_exists(self, name: TopicName) -> bool:
        if not name.is_persistent:
            return False
        return await self.metastore.get(metadata_paths.managed_ledger(name)) is not None

    async def topics_of(
        self, namespace: str, domains: Iterable[str], active: Iterable[TopicName]
    ) -> list[str]:
        """Topics of ``namespace`` in ``domains``: every partition of its
        partitioned topics, its persistent topics, and of ``active`` (topics
        loaded here) the non-persistent ones."""
        namespace = parse_namespace(namespace)
        if not await self.exists(namespace):
            raise _missing(namespace)
        wanted = [d for d in DOMAINS if d in set(domains)]
        found: set[str] = set()
        for domain in wanted:
            for base in await self.metastore.children(
                metadata_paths.partitioned_topics_of(namespace, domain)
            ):
                parent = TopicName.parse(f"{domain}://{namespace}/{base}")
                n = await self.partitions_of(parent)
                found.update(parent.partition(i).full_name for i in range(n))
            if domain == PERSISTENT:
                for local in await self.metastore.children(
                    metadata_paths.managed_ledgers_of(namespace, domain)
                ):
                    found.add(f"{domain}://{namespace}/{local}")
        if NON_PERSISTENT in wanted:
            found.update(
                t.full_name for t in active if not t.is_persistent and t.namespace_name == namespace
            )
        return sorted(found)
