"""The broker's admin gRPC service (pulsar-admin's groups): topics,
namespaces, bundles and brokers. Answers are JSON documents with Pulsar's
field names; calls about a bundle another broker owns are forwarded to it."""

from __future__ import annotations

import functools
import json
from collections.abc import Awaitable, Callable
from typing import Any

import grpc

from broker.bundle_state import BundleRecord, BundleState
from broker.bundles import BundleRange, InvalidBundleError
from broker.dispatcher import KeySharedDispatcher
from broker.key_shared import SLOT_MAX, slot_of
from broker.ownership import BROKERS_PREFIX, bundle_key
from broker.service import BrokerService, error_of
from broker.stats import key_shared_lookup, topic_stats
from broker.topic import SUB_TYPE_NAMES, BrokerError, Topic, TopicBase
from protos import broker_pb2, broker_pb2_grpc, common_pb2
from protos.errors import MagnetarServerError
from protos.topic_name import TopicName


def json_rpc(method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """An admin RPC whose body returns a JSON-able document (or an answer
    forwarded from another broker as is); any exception becomes the
    answer's typed error."""

    @functools.wraps(method)
    async def rpc(self: Any, request: Any, context: Any) -> broker_pb2.JsonResponse:
        try:
            doc = await method(self, request, context)
        except Exception as exc:
            return broker_pb2.JsonResponse(error=error_of(exc))
        if isinstance(doc, broker_pb2.JsonResponse):
            return doc
        return broker_pb2.JsonResponse(json=json.dumps(doc))

    return rpc


class BrokerAdminService(broker_pb2_grpc.BrokerAdminServicer):
    def __init__(self, broker: BrokerService) -> None:
        self.broker = broker

    @json_rpc
    async def SetNamespaceDeduplication(self, request, context):  # type: ignore[no-untyped-def]
        tenant, sep, ns = request.namespace.partition("/")
        if not sep or not tenant or not ns or "/" in ns:
            raise BrokerError(
                f"namespace {request.namespace!r} is not tenant/namespace",
                common_pb2.INVALID_ARGUMENT,
            )
        key = f"/admin/policies/{tenant}/{ns}"
        ms = self.broker.metastore
        for _ in range(20):  # compare-and-set; bounded
            stat = await ms.get(key)
            if stat is None:
                raise BrokerError(
                    f"namespace {request.namespace} does not exist", common_pb2.TOPIC_NOT_FOUND
                )
            policy = json.loads(stat.value)
            policy["deduplicationEnabled"] = bool(request.enabled)
            try:
                await ms.put(key, json.dumps(policy).encode(), expected_version=stat.version)
                break
            except MagnetarServerError as exc:
                if exc.code != common_pb2.BAD_VERSION:
                    raise
        for topic in list(self.broker.topics.values()):
            if (topic.name.tenant, topic.name.namespace) != (tenant, ns):
                continue
            if not isinstance(topic, Topic):
                continue
            if request.enabled and not topic.dedup.enabled:
                await self.broker.enable_dedup(topic)
            elif not request.enabled:
                topic.dedup.enabled = False
                topic.ledger.hold_back = None
        return policy

    async def _existing_topic(self, topic_name: str) -> TopicBase:
        name = TopicName.parse(topic_name)
        topic = self.broker.topics.get(name.full_name)
        if topic is None and not name.is_persistent:
            raise BrokerError(f"topic {name} is not active", common_pb2.TOPIC_NOT_FOUND)
        if topic is None:
            key = f"/managed-ledgers/{name.persistence_path}"
            if await self.broker.metastore.get(key) is None:
                raise BrokerError(f"topic {name} does not exist", common_pb2.TOPIC_NOT_FOUND)
            topic = await self.broker.get_topic(name)
        return topic

    @json_rpc
    async def TopicStats(self, request, context):  # type: ignore[no-untyped-def]
        topic = await self._existing_topic(request.topic)
        return topic_stats(topic)

    @json_rpc
    async def CreatePartitionedTopic(self, request, context):  # type: ignore[no-untyped-def]
        broker = self.broker
        name = TopicName.parse(request.topic)
        limit = broker.settings.max_num_partitions_per_partitioned_topic
        if not 1 <= request.partitions <= limit:
            raise BrokerError(
                f"{request.partitions} partitions: a partitioned topic has 1 to {limit} "
                "(max_num_partitions_per_partitioned_topic)",
                common_pb2.INVALID_ARGUMENT,
            )
        if name.is_partition:
            raise BrokerError(
                f"{name} is a partition name; name the partitioned topic itself",
                common_pb2.INVALID_TOPIC_NAME,
            )
        if await broker.metastore.get(f"/admin/policies/{name.tenant}/{name.namespace}") is None:
            raise BrokerError(
                f"namespace {name.namespace_name} does not exist", common_pb2.TOPIC_NOT_FOUND
            )
        exists = name.full_name in broker.topics or (
            name.is_persistent
            and await broker.metastore.get(f"/managed-ledgers/{name.persistence_path}") is not None
        )
        if exists:
            raise BrokerError(
                f"{name} already exists as a non-partitioned topic", common_pb2.NOT_ALLOWED
            )
        body = json.dumps({"partitions": request.partitions}).encode()
        try:
            await broker.metastore.put(broker.partitions_key(name), body, expected_version=-1)
        except MagnetarServerError as exc:
            if exc.code != common_pb2.BAD_VERSION:
                raise
            n = await broker.partitions_of(name)
            raise BrokerError(
                f"partitioned topic {name} already exists ({n} partitions)",
                common_pb2.NOT_ALLOWED,
            ) from None
        return {"topic": name.full_name, "partitions": request.partitions}

    @json_rpc
    async def CreateSubscription(self, request, context):  # type: ignore[no-untyped-def]
        if not request.subscription:
            raise BrokerError("the subscription name is empty", common_pb2.INVALID_ARGUMENT)
        name = TopicName.parse(request.topic)
        topic = await self.broker.get_topic(name)
        if not topic.persistent:
            raise BrokerError(
                f"{name} is non-persistent: its subscriptions live with their consumers",
                common_pb2.NOT_ALLOWED,
            )
        if not await topic.create_subscription(request.subscription, not request.earliest):
            raise BrokerError(
                f"subscription {request.subscription!r} already exists on {name}",
                common_pb2.NOT_ALLOWED,
            )
        return {"topic": name.full_name, "subscription": request.subscription}

    @json_rpc
    async def ListBrokers(self, request, context):  # type: ignore[no-untyped-def]
        records, _ = await self.broker.metastore.list_prefix(BROKERS_PREFIX)
        brokers = sorted(r.key[len(BROKERS_PREFIX) :] for r in records)
        return brokers

    @json_rpc
    async def NamespaceBundles(self, request, context):  # type: ignore[no-untyped-def]
        name = TopicName.parse(f"persistent://{request.namespace}/x")
        bundles = await self.broker.ownership.bundles_of(name, fresh=True)
        out = []
        for b in bundles.bundles:
            stat = await self.broker.metastore.get(bundle_key(name, b))
            record = BundleRecord.decode(stat.value) if stat is not None else None
            out.append(
                {
                    "bundle": b.name,
                    "state": record.state.value if record else "free",
                    "owner": record.broker if record else None,
                }
            )
        return {"namespace": name.namespace_name, "bundles": out}

    @json_rpc
    async def Unload(self, request, context):  # type: ignore[no-untyped-def]
        broker = self.broker
        name = TopicName.parse(f"persistent://{request.namespace}/x")
        bundles = (await broker.ownership.bundles_of(name, fresh=True)).bundles
        if request.bundle:
            bundles = [b for b in bundles if b.name == request.bundle]
            if not bundles:
                raise BrokerError(
                    f"{request.bundle} is not a bundle of {name.namespace_name}",
                    common_pb2.INVALID_ARGUMENT,
                )
        unloaded = []
        for b in bundles:
            key = bundle_key(name, b)
            stat = await broker.metastore.get(key)
            if stat is None:
                continue
            record = BundleRecord.decode(stat.value)
            if record.state != BundleState.OWNED:
                continue
            if record.broker == broker.address:
                await broker.unload_bundle(key)
            else:  # ask the owner
                async with grpc.aio.insecure_channel(record.broker) as ch:
                    resp = await broker_pb2_grpc.BrokerAdminStub(ch).Unload(
                        broker_pb2.UnloadRequest(namespace=request.namespace, bundle=b.name),
                        timeout=30,
                    )
                if resp.error.code:
                    return resp
            unloaded.append(b.name)
        return {"unloaded": unloaded}

    @json_rpc
    async def SplitBundle(self, request, context):  # type: ignore[no-untyped-def]
        broker = self.broker
        name = TopicName.parse(f"persistent://{request.namespace}/x")
        try:
            bundle = BundleRange.parse(request.bundle)
        except InvalidBundleError as exc:
            raise BrokerError(str(exc), common_pb2.INVALID_ARGUMENT) from None
        if bundle not in (await broker.ownership.bundles_of(name, fresh=True)).bundles:
            raise BrokerError(
                f"{request.bundle} is not a bundle of {name.namespace_name}",
                common_pb2.INVALID_ARGUMENT,
            )
        owner = await broker.ownership.own(name, bundle)
        if owner != broker.address:  # the owner splits it
            async with grpc.aio.insecure_channel(owner) as ch:
                return await broker_pb2_grpc.BrokerAdminStub(ch).SplitBundle(request, timeout=60)
        halves = await broker.split_bundle(name, bundle, request.unload)
        return {"bundle": bundle.name, "splitInto": halves}

    @json_rpc
    async def LeaderBroker(self, request, context):  # type: ignore[no-untyped-def]
        leader = await self.broker.ownership.leader()
        if leader is None:
            raise BrokerError("no load manager leader is elected yet", common_pb2.SERVICE_NOT_READY)
        return {"serviceUrl": leader}

    @json_rpc
    async def KeySharedLookup(self, request, context):  # type: ignore[no-untyped-def]
        topic = await self._existing_topic(request.topic)
        sub = topic.subscriptions.get(request.subscription)
        if sub is None:
            raise BrokerError(
                f"subscription {request.subscription!r} does not exist on {topic.name}",
                common_pb2.SUBSCRIPTION_NOT_FOUND,
            )
        if not isinstance(sub.dispatcher, KeySharedDispatcher):
            raise BrokerError(
                f"subscription {sub.name!r} is {SUB_TYPE_NAMES.get(sub.sub_type)}, not Key_Shared",
                common_pb2.NOT_ALLOWED,
            )
        what = request.WhichOneof("what")
        if what is None:
            raise BrokerError("give a key or a hash", common_pb2.INVALID_ARGUMENT)
        slot = slot_of(request.key) if what == "key" else request.hash
        if not 0 <= slot <= SLOT_MAX:
            raise BrokerError(f"hash {slot} is outside 0..{SLOT_MAX}", common_pb2.INVALID_ARGUMENT)
        return key_shared_lookup(sub.dispatcher, slot, request.key if what == "key" else None)
