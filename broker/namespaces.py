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

import asyncio
import json
import logging
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace

from broker.bundles import NamespaceBundles
from broker.errors import BrokerError
from broker.namespace_policies import NamespacePolicies, default_policies, system_policies
from broker.policies import AppliedPolicies, Policies, applied
from broker.policy_cache import PolicyCache
from broker.policy_values import retention_from
from broker.settings import BrokerSettings
from broker.tenants import Tenants, tenant_missing
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
# The max-topics-per-namespace check lists a namespace's topics again when
# its kept count is this old, or the namespace is this close to its limit.
TOPIC_COUNT_MAX_AGE_S = 30.0
TOPIC_COUNT_EXACT_WITHIN = 1000


def applied_policies(
    namespace_name: str,
    topic: Policies | None,
    namespace: Policies | None,
    settings: BrokerSettings,
) -> AppliedPolicies:
    """The policies a topic of ``namespace_name`` applies (topic → namespace
    → broker; ``topic`` None for the namespace's own applied values); the
    system namespace keeps the stats_retention_* settings when neither level
    sets a retention."""
    result = applied(topic, namespace, settings)
    if (
        namespace_name == SYSTEM_NAMESPACE
        and (topic is None or topic.retention is None)
        and (namespace is None or namespace.retention is None)
    ):
        stats = retention_from(
            settings.stats_retention_time_minutes, settings.stats_retention_size_mb
        )
        result = replace(result, retention=stats)
    return result


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


def check_deletable(namespace: str) -> None:
    """``public/default`` and the system namespace are the cluster's own: NOT_ALLOWED."""
    if namespace in (DEFAULT, SYSTEM_NAMESPACE):
        raise BrokerError(
            f"namespace {namespace} is the cluster's own and cannot be deleted",
            common_pb2.NOT_ALLOWED,
        )


def must_list_topics(kept: tuple[int, float] | None, now: float, limit: int) -> bool:
    """Whether the max-topics check lists a namespace's topics again rather
    than trust ``kept`` (count, monotonic time it was listed), at ``now``."""
    if kept is None or now - kept[1] >= TOPIC_COUNT_MAX_AGE_S:
        return True
    count = kept[0]
    return count * 2 >= limit or limit - count <= TOPIC_COUNT_EXACT_WITHIN


def _missing(namespace: str, code: int = common_pb2.TOPIC_NOT_FOUND) -> BrokerError:
    """A namespace that does not exist: TOPIC_NOT_FOUND for a client of one
    of its topics, NOT_FOUND for an administrator."""
    return BrokerError(f"namespace {namespace} does not exist", code)


def being_deleted(namespace: str, code: int = common_pb2.TOPIC_NOT_FOUND) -> BrokerError:
    """No new topic in a namespace marked deleted (NamespacePolicies.deleted)."""
    return BrokerError(f"namespace {namespace} is being deleted", code)


class Namespaces:
    def __init__(self, metastore: MetastoreClient, settings: BrokerSettings) -> None:
        self.metastore = metastore
        self.settings = settings
        self.tenants = Tenants(metastore, settings)
        self.policy_cache = PolicyCache(metastore, settings.max_namespaces_cached)
        # namespace -> (its topic count when last listed, monotonic time listed)
        self._topic_counts: dict[str, tuple[int, float]] = {}

    # ------------------------------------------------------------ policies

    async def read(
        self, namespace: str, cached: bool = False
    ) -> tuple[NamespacePolicies, int] | None:
        """The policies and the version of their record; None if no such
        namespace. ``cached``: from :class:`PolicyCache` (topic loads), else
        from the metastore (changes and administrators)."""
        key = metadata_paths.namespace_policies(namespace)
        stat = await (self.policy_cache.get(key) if cached else self.metastore.get(key))
        if stat is None:
            return None
        return NamespacePolicies.decode(stat.value), stat.version

    async def policies(
        self, namespace: str, code: int = common_pb2.TOPIC_NOT_FOUND
    ) -> NamespacePolicies:
        found = await self.read(namespace)
        if found is None:
            raise _missing(namespace, code)
        return found[0]

    async def exists(self, namespace: str) -> bool:
        return await self.read(namespace) is not None

    async def update(
        self,
        namespace: str,
        change: Callable[[NamespacePolicies], NamespacePolicies],
        code: int = common_pb2.TOPIC_NOT_FOUND,
    ) -> NamespacePolicies:
        """Apply ``change`` by compare-and-set; the policies written."""
        key = metadata_paths.namespace_policies(namespace)
        for _ in range(POLICY_UPDATE_ATTEMPTS):
            found = await self.read(namespace)
            if found is None:
                raise _missing(namespace, code)
            after = change(found[0])
            try:
                await self.metastore.put(key, after.encode(), expected_version=found[1])
                self.policy_cache.changed(key)
                return after
            except MagnetarServerError as exc:
                if exc.code != common_pb2.BAD_VERSION:
                    raise
        raise BrokerError(
            f"the policies of {namespace} kept changing; the change gave up",
            common_pb2.CONFLICT,
        )

    def unchanged(self, namespace: str, version: int) -> Compare:
        """A transaction's condition: the policies are still at ``version``."""
        return Compare(metadata_paths.namespace_policies(namespace), version=version)

    def write(self, namespace: str, policies: NamespacePolicies) -> Op:
        """A transaction's write of the policies (with other records,
        atomically); the caller tells ``policy_cache`` once it committed."""
        return Op(metadata_paths.namespace_policies(namespace), policies.encode())

    async def ensure_default(self) -> None:
        """Create the tenants ``public`` and ``magnetar``, ``public/default``
        (:func:`default_policies`) and the system namespace of the stats
        topic unless they exist."""
        await self.tenants.ensure_default()
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

    # ------------------------------------------------------------ lifecycle

    async def create(
        self, namespace: str, bundles: int | None, clusters: Sequence[str]
    ) -> NamespacePolicies:
        """A new namespace of an existing tenant: ``bundles`` equal bundles
        (default_number_of_namespace_bundles when None), replicated in
        ``clusters`` (this cluster when empty)."""
        ns = parse_namespace(namespace)
        tenant = await self.tenants.get(ns.split("/")[0])
        count = self.settings.default_number_of_namespace_bundles if bundles is None else bundles
        most = self.settings.load_balancer_namespace_maximum_bundles
        if not 1 <= count <= most:
            raise BrokerError(
                f"{count} bundles: a namespace has 1 to {most} "
                "(load_balancer_namespace_maximum_bundles)",
                common_pb2.INVALID_ARGUMENT,
            )
        clusters = tuple(clusters) or (self.settings.cluster_name,)
        not_allowed = [
            c for c in clusters if tenant.allowed_clusters and c not in tenant.allowed_clusters
        ]
        if not_allowed or any(c != self.settings.cluster_name for c in clusters):
            raise BrokerError(
                f"cluster(s) {', '.join(clusters)}: a namespace of {ns.split('/')[0]} may use "
                f"{', '.join(tenant.allowed_clusters) or 'no cluster'}, and this "
                f"cluster is {self.settings.cluster_name!r}",
                common_pb2.PRECONDITION_FAILED,
            )
        policies = NamespacePolicies(NamespaceBundles.equal(count), clusters)
        key = metadata_paths.namespace_policies(ns)
        try:
            await self.metastore.put(key, policies.encode(), expected_version=-1)
            self.policy_cache.changed(key)
        except MagnetarServerError as exc:
            if exc.code != common_pb2.BAD_VERSION:
                raise
            raise BrokerError(f"namespace {ns} already exists", common_pb2.CONFLICT) from None
        return policies

    async def names(self, tenant: str) -> list[str]:
        """The namespaces of an existing tenant, ``tenant/ns``, sorted."""
        if not await self.tenants.exists(tenant):
            raise tenant_missing(tenant)
        return [
            f"{tenant}/{ns}"
            for ns in sorted(await self.metastore.children(metadata_paths.namespaces_of(tenant)))
        ]

    async def delete_record(self, namespace: str) -> None:
        """Remove the policies record, and with it the namespace (the caller
        has removed its topics and bundles)."""
        check_deletable(namespace)
        key = metadata_paths.namespace_policies(namespace)
        deleted = await self.metastore.delete(key)
        self.forget(namespace)
        if not deleted:
            raise _missing(namespace, common_pb2.NOT_FOUND)

    # ------------------------------------------------------------ topic policies

    async def topic_policies(self, name: TopicName) -> tuple[Policies, int] | None:
        """A topic's overrides and the version of their record; None if it has none."""
        stat = await self.metastore.get(metadata_paths.topic_policies(name))
        if stat is None:
            return None
        return Policies.from_document(json.loads(stat.value), topic_level=True), stat.version

    async def update_topic_policies(
        self, name: TopicName, change: Callable[[Policies], Policies]
    ) -> Policies:
        """Apply ``change`` to a topic's overrides by compare-and-set (the
        record goes when nothing is left in it)."""
        key = metadata_paths.topic_policies(name)
        for _ in range(POLICY_UPDATE_ATTEMPTS):
            found = await self.topic_policies(name)
            before, version = found if found is not None else (Policies(), -1)
            after = change(before)
            try:
                if after.is_empty():
                    if version >= 0:
                        await self.metastore.delete(key, expected_version=version)
                else:
                    body = json.dumps(after.into_document({})).encode()
                    await self.metastore.put(key, body, expected_version=version)
                return after
            except MagnetarServerError as exc:
                if exc.code != common_pb2.BAD_VERSION:
                    raise
        raise BrokerError(
            f"the policies of {name} kept changing; the change gave up", common_pb2.CONFLICT
        )

    async def applied_to(
        self, name: TopicName, namespace: NamespacePolicies | None = None
    ) -> AppliedPolicies:
        """What ``name`` applies now (:func:`applied_policies`); its
        namespace's policies are read unless the caller has them."""
        if namespace is None:
            found = await self.read(name.namespace_name)
            namespace = None if found is None else found[0]
        topic = await self.topic_policies(name.partitioned_topic_name)
        return self.applied_with(name, namespace, topic)

    def applied_with(
        self,
        name: TopicName,
        namespace: NamespacePolicies | None,
        topic: tuple[Policies, int] | None,
    ) -> AppliedPolicies:
        """:meth:`applied_to` from policies already read (``topic``: the
        overrides of ``name``'s partitioned topic, or of ``name``)."""
        return applied_policies(
            name.namespace_name,
            None if topic is None else topic[0],
            None if namespace is None else namespace.policies,
            self.settings,
        )

    # ------------------------------------------------------------ partitioned topics

    async def partitions_of(self, name: TopicName) -> int:
        """Partitions of a partitioned topic; 0 for any other name."""
        if name.is_partition:
            return 0
        stat = await self.metastore.get(metadata_paths.partitioned_topic(name))
        return int(json.loads(stat.value)["partitions"]) if stat is not None else 0

    async def partitions_or_create(self, name: TopicName) -> int:
        """:meth:`partitions_of`, creating the partitioned topic first when
        nothing of ``name`` exists and its namespace creates topics on first
        use as partitioned ones (autoTopicCreationOverride)."""
        if name.is_partition or not name.is_persistent or name.is_system:
            return await self.partitions_of(name)
        # The records are independent: read at once (one round trip).
        n, found = await asyncio.gather(
            self.partitions_of(name), self.read(name.namespace_name, cached=True)
        )
        if n or found is None or found[0].deleted:  # (being deleted: its loads refuse)
            return n
        # autoTopicCreationOverride is a namespace policy (no topic overrides
        # it): only a namespace that creates partitioned topics needs to know
        # whether the topic exists unpartitioned.
        auto = self.applied_with(name, found[0], None).auto_topic_creation
        if not (auto.allow and auto.partitioned) or await self.managed_ledger_exists(name):
            return 0
        try:
            await self.create_partitioned_topic(name, auto.default_partitions, False)
        except BrokerError as exc:
            if exc.code != common_pb2.NOT_ALLOWED:  # else created meanwhile
                raise
        return await self.partitions_of(name)

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
        found = await self.read(name.namespace_name)
        if found is None:
            raise _missing(name.namespace_name)
        if found[0].deleted:
            raise being_deleted(name.namespace_name, common_pb2.NOT_ALLOWED)
        if exists_unpartitioned or await self.managed_ledger_exists(name):
            raise BrokerError(
                f"{name} already exists as a non-partitioned topic", common_pb2.NOT_ALLOWED
            )
        # Neither record may exist (a broker with the topic loaded answers
        # "not partitioned" from memory). A load that read no partitioned
        # record just before can still create the ledger list after this.
        key = metadata_paths.partitioned_topic(name)
        created, _ = await self.metastore.txn(
            [Compare(key, version=-1), Compare(metadata_paths.managed_ledger(name), version=-1)],
            [Op(key, json.dumps({"partitions": partitions}).encode())],
        )
        if not created:
            if await self.managed_ledger_exists(name):
                raise BrokerError(
                    f"{name} already exists as a non-partitioned topic", common_pb2.NOT_ALLOWED
                )
            n = await self.partitions_of(name)
            raise BrokerError(
                f"partitioned topic {name} already exists ({n} partitions)",
                common_pb2.NOT_ALLOWED,
            )

    async def partitioned_topics(
        self, namespace: str, domains: Iterable[str] = DOMAINS
    ) -> list[TopicName]:
        """The partitioned topics of ``namespace`` in ``domains`` (their parents)."""
        found = []
        for domain in domains:
            for base in await self.metastore.children(
                metadata_paths.partitioned_topics_of(namespace, domain)
            ):
                found.append(TopicName.parse(f"{domain}://{namespace}/{base}"))
        return found

    async def delete_partitioned_topic(self, name: TopicName) -> None:
        """Remove the partition count (the partitions are deleted already)
        and the topic's policy overrides."""
        await self.metastore.delete(metadata_paths.partitioned_topic(name))
        await self.metastore.delete(metadata_paths.topic_policies(name))

    # ------------------------------------------------------------ topics

    async def check_may_create(self, name: TopicName, policies: AppliedPolicies) -> None:
        """A persistent topic that does not exist yet may be created on first
        use: auto topic creation is on and the namespace is under its topic limit."""
        if not policies.auto_topic_creation.allow:
            raise BrokerError(
                f"topic {name} does not exist and auto topic creation is off in "
                f"{name.namespace_name}",
                common_pb2.TOPIC_NOT_FOUND,
            )
        limit = policies.max_topics_per_namespace
        namespace = name.namespace_name
        count = await self._counted_topics(namespace, limit)
        if count >= limit:
            raise BrokerError(
                f"namespace {namespace} already has {count} topics "
                f"(max topics per namespace = {limit})",
                common_pb2.NOT_ALLOWED,
            )
        kept = self._topic_counts.get(namespace)
        if kept is not None:  # the topic about to be made counts from now
            self._topic_counts[namespace] = (count + 1, kept[1])

    async def _counted_topics(self, namespace: str, limit: int) -> int:
        """The namespace's topic count for the limit check. Listing a
        namespace's topics reads every one of them, so the count is kept
        (this broker's creations added) and listed again only when it is
        TOPIC_COUNT_MAX_AGE_S old, or the namespace is at least half full or
        within TOPIC_COUNT_EXACT_WITHIN topics of its limit
        (:func:`must_list_topics`). Other brokers' creations take a namespace
        past its limit unseen only by making that many topics within that
        time (two brokers creating at once could always pass it by one each)."""
        kept = self._topic_counts.get(namespace)
        now = time.monotonic()
        if kept is not None and not must_list_topics(kept, now, limit):
            return kept[0]
        count = await self.topic_count(namespace)
        self._topic_counts.pop(namespace, None)
        self._topic_counts[namespace] = (count, now)  # the newest last
        if len(self._topic_counts) > self.settings.max_namespaces_cached:
            del self._topic_counts[next(iter(self._topic_counts))]  # the oldest out
        return count

    def forget(self, namespace: str) -> None:
        """A namespace was deleted (here or by another broker)."""
        self.policy_cache.changed(metadata_paths.namespace_policies(namespace))
        self._topic_counts.pop(namespace, None)

    async def topic_count(self, namespace: str) -> int:
        """Persistent topics stored in ``namespace`` (partitions count one each)."""
        return len(
            await self.metastore.children(metadata_paths.managed_ledgers_of(namespace, PERSISTENT))
        )

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
        for parent in await self.partitioned_topics(namespace, wanted):
            n = await self.partitions_of(parent)
            found.update(parent.partition(i).full_name for i in range(n))
        found.update(await self.made_topics(namespace, wanted, active))
        return sorted(found)

    async def made_topics(
        self, namespace: str, domains: Iterable[str], active: Iterable[TopicName]
    ) -> list[str]:
        """Of :meth:`topics_of`, the topics that exist: the persistent ones
        stored, the non-persistent ones of ``active`` (a partition nobody
        has used is left out)."""
        found: list[str] = []
        if PERSISTENT in domains:
            for local in await self.metastore.children(
                metadata_paths.managed_ledgers_of(namespace, PERSISTENT)
            ):
                found.append(f"{PERSISTENT}://{namespace}/{local}")
        if NON_PERSISTENT in domains:
            found += [
                t.full_name for t in active if not t.is_persistent and t.namespace_name == namespace
            ]
        return sorted(found)
