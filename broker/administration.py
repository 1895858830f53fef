"""The admin operations (pulsar-admin's groups: tenants, namespaces,
topics, bundles, brokers, bookies), independent of any protocol: each answers a
JSON-able document with Pulsar's field names, or raises a typed error.

Besides the typed calls of the older RPCs, every operation is reachable by
name through :meth:`Administration.call` (``OPERATIONS``: ``group.verb``
with JSON arguments), which the ``Call`` RPC serves. A call about a bundle
or topic another broker owns is done by that broker: unload and split are
forwarded to the owner (:mod:`broker.peer_brokers`), and an operation that
meets ``NOT_OWNER`` is forwarded once to the owner it names; the answer is
returned as it came.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from bookie.ledger_client import LedgerClient
from broker import fan_out
from broker.bookie_admin import BookieAdministration
from broker.bundle_state import BundleState
from broker.bundles import BundleRange, InvalidBundleError
from broker.errors import BrokerError
from broker.expiry import expire_subscription
from broker.namespace_policies import NamespacePolicies
from broker.namespaces import Namespaces, parse_namespace
from broker.namespaces import check_deletable as check_namespace_deletable
from broker.ownership import NotOwnerError, Ownership, bundle_key
from broker.peer_brokers import PeerBrokers
from broker.permission_admin import PermissionAdministration
from broker.policy_admin import PolicyAdministration
from broker.policy_values import read_bool
from broker.schema_admin import SchemaAdministration
from broker.stats import key_shared_lookup_of, sum_stats, topic_stats
from broker.tenants import check_deletable as check_tenant_deletable
from broker.tenants import parse_tenant
from broker.termination import terminate
from broker.topic import TopicBase
from broker.topic_admin import TopicAdministration, persistent, subscription_of
from broker.topics import TopicRegistry
from protos import common_pb2
from protos.errors import MagnetarServerError
from protos.topic_name import DOMAINS, TopicName

log = logging.getLogger(__name__)

Operation = Callable[..., Awaitable[Any]]
# A namespace's deletion lists and deletes its topics at most this many times
# (a topic made by a broker that had yet to see the deletion's mark is found
# by the next listing).
DELETE_PASSES = 3


def _seconds(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise BrokerError(
            f"expire time {value!r} is not a number of seconds >= 0", common_pb2.INVALID_ARGUMENT
        )
    return float(value)


class Administration:
    def __init__(
        self,
        topics: TopicRegistry,
        namespaces: Namespaces,
        ownership: Ownership,
        peers: PeerBrokers,
        ledgers: LedgerClient | None = None,
    ) -> None:
        self.peers = peers
        self.topics = topics
        self.namespaces = namespaces
        self.ownership = ownership
        self.policies = PolicyAdministration(namespaces, ledgers or topics.ledgers)
        p = self.policies
        cursors = TopicAdministration(topics)
        grants = PermissionAdministration(namespaces)
        bookies = BookieAdministration(namespaces.metastore)
        schemas = SchemaAdministration(topics.schemas, namespaces)
        self.operations: dict[str, Operation] = {
            "tenants.list": p.tenants_list,
            "tenants.get": p.tenants_get,
            "tenants.create": p.tenants_create,
            "tenants.update": p.tenants_update,
            "tenants.delete": self.tenants_delete,
            "namespaces.list": p.namespaces_list,
            "namespaces.create": p.namespaces_create,
            "namespaces.policies": p.namespaces_policies,
            "namespaces.topics": self.namespaces_topics,
            "namespaces.delete": self.namespaces_delete,
            "namespaces.clear-backlog": self.namespaces_clear_backlog,
            "namespaces.unsubscribe": self.namespaces_unsubscribe,
            "namespaces.permissions": grants.namespace_permissions,
            "namespaces.grant-permission": grants.grant_namespace,
            "namespaces.revoke-permission": grants.revoke_namespace,
            "namespaces.grant-subscription-permission": grants.grant_subscription,
            "namespaces.revoke-subscription-permission": grants.revoke_subscription,
            "policies.get": p.get_policy,
            "policies.set": p.set_policy,
            "policies.remove": p.remove_policy,
            "topics.delete": self.topics_delete,
            "topics.permissions": grants.topic_permissions,
            "topics.grant-permission": grants.grant_topic,
            "topics.revoke-permission": grants.revoke_topic,
            "topics.unsubscribe": self.topics_unsubscribe,
            "topics.clear-backlog": self.topics_clear_backlog,
            "topics.stats": self.topic_stats,
            "topics.peek-messages": cursors.peek_messages,
            "topics.skip": cursors.skip,
            "topics.stats-internal": cursors.stats_internal,
            "topics.reset-cursor": self.topics_reset_cursor,
            "topics.reset-cursor-here": cursors.reset_cursor,
            "topics.partitioned-stats": self.topics_partitioned_stats,
            "topics.last-message-id": self.topics_last_message_id,
            "topics.terminate": self.topics_terminate,
            "topics.compact": self.topics_compact,
            "topics.compaction-status": self.topics_compaction_status,
            "topics.expire-messages": self.topics_expire_messages,
            "topics.expire-messages-all-subscriptions": (
                self.topics_expire_messages_all_subscriptions
            ),
            "schemas.get": schemas.get,
            "schemas.upload": schemas.upload,
            "schemas.delete": schemas.delete,
            "bookies.list": bookies.list,
            "bookies.decommission": bookies.decommission,
            "bookies.recover": bookies.recover,
            "bookies.under-replicated": bookies.under_replicated,
        }

    async def call(self, operation: str, arguments: dict[str, Any], forwarded: bool) -> Any:
        """Run one operation by name; NOT_OWNER is forwarded once to the owner."""
        op = self.operations.get(operation)
        if op is None:
            raise BrokerError(
                f"there is no admin operation {operation!r}; operations: "
                f"{', '.join(sorted(self.operations))}",
                common_pb2.INVALID_ARGUMENT,
            )
        try:
            inspect.signature(op).bind(**arguments)
        except TypeError as exc:
            raise BrokerError(f"{operation}: {exc}", common_pb2.INVALID_ARGUMENT) from None
        try:
            return await op(**arguments)
        except NotOwnerError as exc:
            if forwarded or not exc.owner:
                raise
            return await self.peers.call(exc.owner, operation, arguments)

    # ------------------------------------------------------------ topics

    async def topic_stats(self, topic: str) -> dict[str, Any]:
        return topic_stats(await self.topics.existing_topic(TopicName.parse(topic)))

    async def key_shared_lookup(
        self, topic: str, subscription: str, key: str | None, slot: int | None
    ) -> dict[str, Any]:
        found = await self.topics.existing_topic(TopicName.parse(topic))
        return key_shared_lookup_of(found, subscription, key, slot)

    async def create_partitioned_topic(self, topic: str, partitions: int) -> dict[str, Any]:
        name = TopicName.parse(topic)
        active = name.full_name in self.topics.topics
        await self.namespaces.create_partitioned_topic(name, partitions, active)
        return {"topic": name.full_name, "partitions": partitions}

    async def create_subscription(
        self, topic: str, subscription: str, earliest: bool
    ) -> dict[str, Any]:
        if not subscription:
            raise BrokerError("the subscription name is empty", common_pb2.INVALID_ARGUMENT)
        name = TopicName.parse(topic)
        found = await self.topics.get_topic(name)
        if not found.persistent:
            raise BrokerError(
                f"{name} is non-persistent: its subscriptions live with their consumers",
                common_pb2.NOT_ALLOWED,
            )
        if not await found.create_subscription(subscription, not earliest):
            raise BrokerError(
                f"subscription {subscription!r} already exists on {name}",
                common_pb2.NOT_ALLOWED,
            )
        return {"topic": name.full_name, "subscription": subscription}

    async def _each_topic(self, operation: str, topic: str, arguments: dict[str, Any]) -> Any:
        """``operation`` on ``topic``, on whichever broker owns it."""
        return await self.call(operation, {"topic": topic, **arguments}, False)

    async def _delete_forced(self, topic: str) -> None:
        """Delete ``topic`` for its namespace's deletion: one with nothing
        stored (gone already, or a partition nobody has used) is fine."""
        try:
            await self._each_topic("topics.delete", topic, {"force": True})
        except MagnetarServerError as exc:
            if exc.code != common_pb2.TOPIC_NOT_FOUND:
                raise
            name = TopicName.parse(topic)
            if name.is_persistent:
                if await self.namespaces.managed_ledger_exists(name):
                    raise
                await self.topics.purge_leftovers(name)

    async def topics_delete(self, topic: str, force: Any = False) -> dict[str, Any]:
        """Delete a topic (a partitioned one: every partition, then its metadata)."""
        name = TopicName.parse(topic)
        force = read_bool(force, "force")
        partitions = await self.namespaces.partitions_of(name)
        if partitions:
            for i in range(partitions):
                try:
                    await self._each_topic(
                        "topics.delete", name.partition(i).full_name, {"force": force}
                    )
                except MagnetarServerError as exc:
                    if exc.code != common_pb2.TOPIC_NOT_FOUND:
                        raise  # else a partition nobody has used: nothing is stored
            await self.namespaces.delete_partitioned_topic(name)
            return {"deleted": name.full_name, "partitions": partitions}
        found = await self.topics.existing_topic(name)
        await self.topics.delete_topic(found, force)
        return {"deleted": name.full_name}

    async def topics_reset_cursor(self, topic: str, subscription: str, **how: Any) -> Any:
        """reset-cursor on the topic's owner; by time on a partitioned topic,
        on every partition."""
        name = TopicName.parse(topic)
        partitions = await self.namespaces.partitions_of(name)
        args = {"subscription": subscription, **how}
        if not partitions:
            return await self._each_topic("topics.reset-cursor-here", topic, args)
        if how.get("message_id") is not None:
            raise BrokerError(
                f"{name} is partitioned: reset a partition to a message id", common_pb2.NOT_ALLOWED
            )
        return [
            await self._each_topic("topics.reset-cursor-here", name.partition(i).full_name, args)
            for i in range(partitions)
        ]

    async def topics_terminate(self, topic: str) -> dict[str, Any]:
        """Seal a topic; the id of its last message (a partitioned topic:
        every partition, by partition index)."""
        name = TopicName.parse(topic)
        partitions = await self.namespaces.partitions_of(name)
        if partitions:
            return {
                str(i): await self._each_topic("topics.terminate", name.partition(i).full_name, {})
                for i in range(partitions)
            }
        ledger_id, entry_id = await terminate(persistent(await self.topics.existing_topic(name)))
        return {"ledgerId": ledger_id, "entryId": entry_id, "partitionIndex": name.partition_index}

    async def topics_compact(self, topic: str) -> dict[str, Any]:
        """Start compacting a topic (a partitioned one: every partition); the
        run goes on in the background (``compaction-status``)."""
        name = TopicName.parse(topic)
        if not name.is_persistent:
            raise BrokerError(
                f"{name} is non-persistent: only persistent topics are compacted",
                common_pb2.NOT_ALLOWED,
            )
        partitions = await self.namespaces.partitions_of(name)
        if partitions:
            return {
                str(i): await self._each_topic("topics.compact", name.partition(i).full_name, {})
                for i in range(partitions)
            }
        self.topics.compaction.trigger(persistent(await self.topics.existing_topic(name)))
        return {"status": "RUNNING"}

    async def topics_compaction_status(self, topic: str) -> dict[str, Any]:
        """Pulsar's ``{"status": NOT_RUN|RUNNING|SUCCESS|ERROR, "lastError"}``
        (a partitioned topic: by partition index)."""
        name = TopicName.parse(topic)
        partitions = await self.namespaces.partitions_of(name)
        if partitions:
            return {
                str(i): await self._each_topic(
                    "topics.compaction-status", name.partition(i).full_name, {}
                )
                for i in range(partitions)
            }
        persistent(await self.topics.existing_topic(name))  # served here (else forwarded)
        return await self.topics.compaction.status(name)

    async def topics_last_message_id(self, topic: str) -> dict[str, Any]:
        """The id of the last stored message (``entryId`` -1: nothing stored yet)."""
        name = TopicName.parse(topic)
        found = await self.topics.existing_topic(name)
        ledger_id, entry_id = found.last_position
        return {
            "ledgerId": ledger_id,
            "entryId": entry_id,
            "partitionIndex": name.partition_index,
            "batchIndex": -1,
        }

    async def topics_partitioned_stats(
        self, topic: str, per_partition: Any = False
    ) -> dict[str, Any]:
        """The stats of every partition summed (:func:`broker.stats.sum_stats`),
        with ``metadata.partitions`` and, asked for, each partition's own."""
        name = TopicName.parse(topic)
        partitions = await self.namespaces.partitions_of(name)
        if not partitions:
            raise BrokerError(f"{name} is not a partitioned topic", common_pb2.NOT_FOUND)
        each = {}
        for i in range(partitions):
            part = name.partition(i).full_name
            try:
                each[part] = await self._each_topic("topics.stats", part, {})
            except MagnetarServerError as exc:
                if exc.code != common_pb2.TOPIC_NOT_FOUND:
                    raise  # else a partition nobody has used yet: it adds nothing
        total = sum_stats(list(each.values()))
        total["metadata"] = {"partitions": partitions}
        if read_bool(per_partition, "per_partition"):
            total["partitions"] = each
        return total

    async def _subscription(self, topic: str, subscription: str) -> tuple[TopicBase, Any]:
        found = await self.topics.existing_topic(TopicName.parse(topic))
        return found, subscription_of(found, subscription)

    async def topics_unsubscribe(
        self, topic: str, subscription: str, force: Any = False
    ) -> dict[str, Any]:
        """Delete a subscription; with consumers connected only when forced
        (they are disconnected)."""
        found, sub = await self._subscription(topic, subscription)
        await found.delete_subscription(sub, read_bool(force, "force"))
        return {"topic": found.name.full_name, "unsubscribed": subscription}

    async def topics_clear_backlog(self, topic: str, subscription: str) -> dict[str, Any]:
        """Acknowledge everything of ``subscription`` (pulsar-admin's skip-all)."""
        found, sub = await self._subscription(topic, subscription)
        sub.expire_through(found.last_position)
        return {"topic": found.name.full_name, "subscription": subscription, "cleared": True}

    async def topics_expire_messages(
        self, topic: str, subscription: str, expire_time_s: Any
    ) -> dict[str, Any]:
        """Acknowledge the messages of ``subscription`` published more than
        ``expire_time_s`` seconds ago (of every partition of a partitioned topic)."""
        age = _seconds(expire_time_s)
        name = TopicName.parse(topic)
        partitions = await self.namespaces.partitions_of(name)
        if partitions:
            expired = 0
            for i in range(partitions):
                done = await self._each_topic(
                    "topics.expire-messages",
                    name.partition(i).full_name,
                    {"subscription": subscription, "expire_time_s": age},
                )
                expired += done["expired"]
            return {"topic": name.full_name, "subscription": subscription, "expired": expired}
        found, sub = await self._subscription(topic, subscription)
        expired = await expire_subscription(persistent(found), sub, age)
        return {"topic": found.name.full_name, "subscription": subscription, "expired": expired}

    async def topics_expire_messages_all_subscriptions(
        self, topic: str, expire_time_s: Any
    ) -> dict[str, Any]:
        age = _seconds(expire_time_s)
        name = TopicName.parse(topic)
        partitions = await self.namespaces.partitions_of(name)
        names = [name.partition(i).full_name for i in range(partitions)] if partitions else [topic]
        expired: dict[str, int] = {}
        for t in names:
            stats = await self._each_topic("topics.stats", t, {})
            for sub in stats["subscriptions"]:
                done = await self._each_topic(
                    "topics.expire-messages", t, {"subscription": sub, "expire_time_s": age}
                )
                expired[sub] = expired.get(sub, 0) + done["expired"]
        return {"topic": name.full_name, "expired": expired}

    # ------------------------------------------------------------ namespaces

    async def _namespace_topics(self, namespace: str) -> list[str]:
        ns = parse_namespace(namespace)
        await self.namespaces.policies(ns, common_pb2.NOT_FOUND)
        return await self.namespaces.topics_of(ns, DOMAINS, self.topics.active_names())

    async def namespaces_topics(self, namespace: str) -> list[str]:
        return await self._namespace_topics(namespace)

    async def namespaces_clear_backlog(
        self, namespace: str, subscription: str = ""
    ) -> dict[str, Any]:
        """Clear ``subscription`` (or every subscription) on every topic of the namespace."""
        cleared = []
        for topic in await self._namespace_topics(namespace):
            stats = await self._each_topic("topics.stats", topic, {})
            for sub in stats["subscriptions"]:
                if subscription and sub != subscription:
                    continue
                await self._each_topic("topics.clear-backlog", topic, {"subscription": sub})
                cleared.append(f"{topic}:{sub}")
        return {"namespace": namespace, "cleared": cleared}

    async def namespaces_unsubscribe(self, namespace: str, subscription: str) -> dict[str, Any]:
        """Delete ``subscription`` from every topic of the namespace that has it."""
        if not subscription:
            raise BrokerError("the subscription name is empty", common_pb2.INVALID_ARGUMENT)
        done = []
        for topic in await self._namespace_topics(namespace):
            stats = await self._each_topic("topics.stats", topic, {})
            if subscription in stats["subscriptions"]:
                await self._each_topic("topics.unsubscribe", topic, {"subscription": subscription})
                done.append(topic)
        return {"namespace": namespace, "subscription": subscription, "topics": done}

    async def namespaces_delete(self, namespace: str, force: Any = False) -> dict[str, Any]:
        deleted = await self.delete_namespace(namespace, read_bool(force, "force"))
        return {"deleted": namespace, "topics": deleted}

    async def delete_namespace(self, namespace: str, force: bool) -> list[str]:
        """Delete a namespace with no topics; forced, its topics are deleted
        first (their clients closed). The namespace is marked deleted before
        any topic goes, so that no new one is made in it meanwhile (a
        producer reconnecting between two deletions made its topic again);
        one made by a broker yet to see the mark is found by listing again.
        Its bundles are released and their records removed, then its
        policies record."""
        check_namespace_deletable(namespace)
        topics = await self._namespace_topics(namespace)
        partitioned = await self.namespaces.partitioned_topics(namespace)
        if (topics or partitioned) and not force:
            raise _not_empty(namespace, topics)
        marked_before = await self._mark_deleted(namespace, True)
        try:
            deleted = await self._delete_all_topics(namespace, topics, force)
            partitioned = await self.namespaces.partitioned_topics(namespace)
            if partitioned and not force:  # made between the check and the mark
                raise _not_empty(namespace, [p.full_name for p in partitioned])
            for name in partitioned:
                await self.namespaces.delete_partitioned_topic(name)
            await self.unload(namespace, None)
            await self.namespaces.delete_record(namespace)
        except BaseException:
            # A deletion not forced leaves the namespace as it found it; a
            # forced one leaves the mark, to be run again.
            if not force and not marked_before:
                await self._unmark(namespace)
            raise
        await self.ownership.forget_namespace(namespace)
        return deleted

    async def _mark_deleted(self, namespace: str, deleted: bool) -> bool:
        """Set the namespace's deletion mark; whether it was set before."""
        before: list[bool] = []

        def change(policies: NamespacePolicies) -> NamespacePolicies:
            before.append(policies.deleted)  # (of the attempt that is written)
            return replace(policies, deleted=deleted)

        await self.namespaces.update(namespace, change, common_pb2.NOT_FOUND)
        self.ownership.forget_bundles(namespace)  # (kept with the record's version)
        return before[-1]

    async def _unmark(self, namespace: str) -> None:
        try:
            await self._mark_deleted(namespace, False)
        except Exception:  # (the deletion's own failure is what its caller gets)
            log.exception("removing the deletion mark of %s", namespace)

    async def _delete_all_topics(self, namespace: str, topics: list[str], force: bool) -> list[str]:
        """Delete ``topics`` (forced), ``max_concurrent_topic_closes`` at a
        time, then those the namespace still has (made by a broker that had
        yet to see the mark), listing it up to ``DELETE_PASSES`` times. Not
        forced, a topic listed after the mark refuses the deletion."""
        deleted: list[str] = []
        limit = self.topics.settings.max_concurrent_topic_closes
        for _ in range(DELETE_PASSES):
            await fan_out.for_each(topics, limit, self._delete_forced)
            deleted += [t for t in topics if t not in deleted]
            topics = await self.namespaces.made_topics(
                namespace, DOMAINS, self.topics.active_names()
            )
            if not topics:
                return deleted
            if not force:
                raise _not_empty(namespace, topics)
        raise BrokerError(
            f"topics of {namespace} were still being made after {DELETE_PASSES} passes "
            f"({', '.join(topics[:5])}); delete the namespace again",
            common_pb2.CONFLICT,
        )

    async def tenants_delete(self, tenant: str, force: Any = False) -> dict[str, Any]:
        """Delete a tenant with no namespaces; forced, its namespaces (and
        their topics) go first."""
        check_tenant_deletable(tenant)
        namespaces = await self.namespaces.names(parse_tenant(tenant))
        if namespaces and not read_bool(force, "force"):
            raise BrokerError(
                f"tenant {tenant} still has {len(namespaces)} namespace(s) "
                f"({', '.join(namespaces[:5])}); delete them first or use --force",
                common_pb2.PRECONDITION_FAILED,
            )
        for ns in namespaces:
            await self.delete_namespace(ns, True)
        await self.namespaces.tenants.delete(tenant)
        return {"deleted": tenant, "namespaces": namespaces}

    async def namespace_bundles(self, namespace: str) -> dict[str, Any]:
        ns = parse_namespace(namespace)
        records = await self.ownership.bundle_records(ns)
        return {
            "namespace": ns,
            "bundles": [
                {"bundle": b.name, "state": r.state.value, "owner": r.broker or None}
                for b, r in records
            ],
        }

    async def _bundle(self, ns: str, name: str) -> BundleRange:
        """A bundle of ``ns`` by name (fresh boundaries); INVALID_ARGUMENT if it is not one."""
        try:
            bundle = BundleRange.parse(name)
        except InvalidBundleError as exc:
            raise BrokerError(str(exc), common_pb2.INVALID_ARGUMENT) from None
        if bundle not in (await self.ownership.bundles_of(ns, fresh=True)).bundles:
            raise BrokerError(f"{name} is not a bundle of {ns}", common_pb2.INVALID_ARGUMENT)
        return bundle

    async def unload(self, namespace: str, bundle: str | None) -> dict[str, Any]:
        """Release ``bundle`` (or every bundle) of ``namespace`` from its owner."""
        ns = parse_namespace(namespace)
        bundles = (await self.ownership.bundles_of(ns, fresh=True)).bundles
        if bundle:
            bundles = [b for b in bundles if b.name == bundle]
            if not bundles:
                raise BrokerError(f"{bundle} is not a bundle of {ns}", common_pb2.INVALID_ARGUMENT)
        unloaded = []
        for b in bundles:
            record = await self.ownership.record_of(ns, b)
            if record.state != BundleState.OWNED:
                continue
            if record.broker == self.ownership.address:
                await self.topics.unload_bundle(bundle_key(ns, b))
            else:
                await self.peers.unload(record.broker, ns, b.name)
            unloaded.append(b.name)
        return {"unloaded": unloaded}

    async def split_bundle(self, namespace: str, bundle: str, unload: bool) -> Any:
        """Split a bundle (its owner does it; an unowned bundle is taken first)."""
        ns = parse_namespace(namespace)
        target = await self._bundle(ns, bundle)
        owner = await self.ownership.own(ns, target)
        if owner != self.ownership.address:
            return await self.peers.split(owner, ns, bundle, unload)
        halves = await self.topics.split_bundle(ns, target, unload)
        return {"bundle": target.name, "splitInto": halves}

    # ------------------------------------------------------------ brokers

    async def list_brokers(self) -> list[str]:
        return await self.ownership.brokers()

    async def leader_broker(self) -> dict[str, Any]:
        leader = await self.ownership.leader()
        if leader is None:
            raise BrokerError("no load manager leader is elected yet", common_pb2.SERVICE_NOT_READY)
        return {"serviceUrl": leader}


def _not_empty(namespace: str, topics: list[str]) -> BrokerError:
    return BrokerError(
        f"namespace {namespace} still has {len(topics)} topic(s) "
        f"({', '.join(topics[:5])}); delete them first or use --force",
        common_pb2.PRECONDITION_FAILED,
    )
