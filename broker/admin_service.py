"""The gRPC front-end of the admin operations (pulsar-admin's groups): each
call unpacks its request, asks :class:`broker.administration.Administration`
and answers the document as JSON, or the typed error."""

from __future__ import annotations

import json
from collections.abc import Awaitable
from typing import Any

import grpc

from broker.administration import Administration
from broker.errors import BrokerError
from protos import broker_pb2, broker_pb2_grpc, common_pb2
from protos.errors import error_of


async def _json(call: Awaitable[Any]) -> broker_pb2.JsonResponse:
    """The answer to an admin call: its document as JSON, or its typed error."""
    try:
        doc = await call
    except Exception as exc:
        return broker_pb2.JsonResponse(error=error_of(exc))
    return broker_pb2.JsonResponse(json=json.dumps(doc))


class BrokerAdminService(broker_pb2_grpc.BrokerAdminServicer):
    def __init__(self, admin: Administration) -> None:
        self.admin = admin

    async def KeySharedLookup(
        self, request: broker_pb2.KeySharedLookupRequest, context: grpc.aio.ServicerContext
    ) -> broker_pb2.JsonResponse:
        what = request.WhichOneof("what")
        key = request.key if what == "key" else None
        slot = request.hash if what == "hash" else None
        return await _json(
            self.admin.key_shared_lookup(request.topic, request.subscription, key, slot)
        )

    async def CreatePartitionedTopic(
        self,
        request: broker_pb2.CreatePartitionedTopicRequest,
        context: grpc.aio.ServicerContext,
    ) -> broker_pb2.JsonResponse:
        return await _json(self.admin.create_partitioned_topic(request.topic, request.partitions))

    async def CreateSubscription(
        self, request: broker_pb2.CreateSubscriptionRequest, context: grpc.aio.ServicerContext
    ) -> broker_pb2.JsonResponse:
        return await _json(
            self.admin.create_subscription(request.topic, request.subscription, request.earliest)
        )

    async def ListBrokers(
        self, request: broker_pb2.ListBrokersRequest, context: grpc.aio.ServicerContext
    ) -> broker_pb2.JsonResponse:
        return await _json(self.admin.list_brokers())

    async def NamespaceBundles(
        self, request: broker_pb2.NamespaceBundlesRequest, context: grpc.aio.ServicerContext
    ) -> broker_pb2.JsonResponse:
        return await _json(self.admin.namespace_bundles(request.namespace))

    async def Unload(
        self, request: broker_pb2.UnloadRequest, context: grpc.aio.ServicerContext
    ) -> broker_pb2.JsonResponse:
        return await _json(self.admin.unload(request.namespace, request.bundle or None))

    async def SplitBundle(
        self, request: broker_pb2.SplitBundleRequest, context: grpc.aio.ServicerContext
    ) -> broker_pb2.JsonResponse:
        return await _json(
            self.admin.split_bundle(request.namespace, request.bundle, request.unload)
        )

    async def Call(
        self, request: broker_pb2.AdminCallRequest, context: grpc.aio.ServicerContext
    ) -> broker_pb2.JsonResponse:
        return await _json(self._call(request))

    async def _call(self, request: broker_pb2.AdminCallRequest) -> Any:
        try:
            arguments = json.loads(request.arguments or "{}")
        except ValueError:
            arguments = None
        if not isinstance(arguments, dict):
            raise BrokerError(
                f"{request.operation}: the arguments are not a JSON object",
                common_pb2.INVALID_ARGUMENT,
            )
        return await self.admin.call(request.operation, arguments, request.forwarded)

    async def LeaderBroker(
        self, request: broker_pb2.LeaderBrokerRequest, context: grpc.aio.ServicerContext
    ) -> broker_pb2.JsonResponse:
        return await _json(self.admin.leader_broker())
