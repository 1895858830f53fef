"""The admin operations (pulsar-admin's groups: topics, namespaces, bundles,
brokers), independent of any protocol: each answers a JSON-able document
with Pulsar's field names, or raises a typed error.

A call about a bundle another broker owns is done by that broker: unload and
split are forwarded to the owner (:mod:`broker.peer_brokers`) and its answer
is returned as it came.
"""

from __future__ import annotations

from typing import Any

from broker import peer_brokers
from broker.bundle_state import BundleState
from broker.bundles import BundleRange, InvalidBundleError
from broker.errors import BrokerError
from broker.namespaces import Namespaces, parse_namespace
from broker.ownership import Ownership, bundle_key
from broker.stats import key_shared_lookup_of, topic_stats
from broker.topics import TopicRegistry
from protos import common_pb2
from protos.topic_name import TopicName


class Administration:
    def __init__(self, topics: TopicRegistry, namespaces: Namespaces, ownership: Ownership) -> None:
        self.topics = topics
        self.namespaces = namespaces
        self.ownership = ownership

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

    # ------------------------------------------------------------ namespaces

    async def set_deduplication(self, namespace: str, enabled: bool) -> dict[str, Any]:
        policies = await self.namespaces.set_deduplication(namespace, enabled)
        await self.topics.apply_deduplication(namespace, enabled)
        return policies.document()

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
                await peer_brokers.unload(record.broker, ns, b.name)
            unloaded.append(b.name)
        return {"unloaded": unloaded}

    async def split_bundle(self, namespace: str, bundle: str, unload: bool) -> Any:
        """Split a bundle (its owner does it; an unowned bundle is taken first)."""
        ns = parse_namespace(namespace)
        target = await self._bundle(ns, bundle)
        owner = await self.ownership.own(ns, target)
        if owner != self.ownership.address:
            return await peer_brokers.split(owner, ns, bundle, unload)
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
