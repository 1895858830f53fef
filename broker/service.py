"""The broker's client-facing gRPC servicer: a thin front-end over the core.

Each method translates its requests into calls on the protocol-independent
core (:class:`broker.topics.TopicRegistry`, :class:`broker.namespaces.Namespaces`,
:class:`broker.ownership.Ownership`) and the core's results back into
messages: the producer and consumer streams live in
:mod:`broker.producer_stream` and :mod:`broker.consumer_stream`. A domain
error becomes a typed ``Error`` in the answer; an exception in one stream
never reaches another.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import grpc

from broker.broker_addresses import BrokerAddresses
from broker.consumer_stream import ConsumerStream
from broker.errors import BrokerError
from broker.namespaces import Namespaces
from broker.ownership import Ownership
from broker.producer_mux import ProducerMux
from broker.producer_stream import ProducerStream, StillAllowed
from broker.settings import BrokerSettings
from broker.topics import TopicRegistry
from protos import broker_pb2, broker_pb2_grpc, common_pb2
from protos.errors import error_of
from protos.schema_info import to_data
from protos.topic_name import NON_PERSISTENT, PERSISTENT, TopicName

_DOMAINS_BY_MODE = {
    broker_pb2.PERSISTENT_ONLY: (PERSISTENT,),
    broker_pb2.NON_PERSISTENT_ONLY: (NON_PERSISTENT,),
}


class BrokerService(broker_pb2_grpc.BrokerServicer):
    def __init__(
        self,
        settings: BrokerSettings,
        topics: TopicRegistry,
        namespaces: Namespaces,
        ownership: Ownership,
        broker_name: str,
        addresses: BrokerAddresses,
        still_allowed: StillAllowed | None = None,
    ) -> None:
        self.addresses = addresses
        self.topics = topics
        self.namespaces = namespaces
        self.ownership = ownership
        self.producers = ProducerStream(topics, settings, broker_name, still_allowed)
        self.producer_mux = ProducerMux(
            self.producers,
            settings.max_producer_streams_per_connection,
            settings.max_pending_publish_requests_per_connection,
        )
        self.consumers = ConsumerStream(topics, broker_name, still_allowed)

    async def _attached(self, context: grpc.aio.ServicerContext) -> None:
        """A broker without a metastore session cannot own or look up a
        topic. UNAVAILABLE (not a typed answer, which a client would take
        as final) sends the client to another broker of its service URL."""
        if self.ownership.detached():
            await context.abort(
                grpc.StatusCode.UNAVAILABLE,
                "this broker lost its metastore session; ask another broker",
            )

    async def Produce(
        self,
        request_iterator: AsyncIterator[broker_pb2.ProducerRequest],
        context: grpc.aio.ServicerContext,
    ) -> AsyncIterator[broker_pb2.ProducerResponse]:
        await self._attached(context)
        async for resp in self.producers.run(request_iterator):
            yield resp

    async def ProduceMany(
        self,
        request_iterator: AsyncIterator[broker_pb2.ProducerRequestFrames],
        context: grpc.aio.ServicerContext,
    ) -> AsyncIterator[bytes]:
        """Answers are serialised ``ProducerResponseFrames`` (protos/frames.py)."""
        await self._attached(context)
        async for resp in self.producer_mux.run(request_iterator):
            yield resp

    async def Consume(
        self,
        request_iterator: AsyncIterator[broker_pb2.ConsumerRequest],
        context: grpc.aio.ServicerContext,
    ) -> AsyncIterator[broker_pb2.ConsumerResponse | bytes]:
        await self._attached(context)
        async for resp in self.consumers.run(request_iterator):
            yield resp

    async def Lookup(
        self, request: broker_pb2.LookupRequest, context: grpc.aio.ServicerContext
    ) -> broker_pb2.LookupResponse:
        await self._attached(context)
        stats = self.topics.metrics.lookups
        stats.pending += 1
        started = time.monotonic()
        try:
            if self.topics.closing:
                raise BrokerError("the broker is shutting down", common_pb2.SERVICE_NOT_READY)
            answer = await self.ownership.lookup(
                TopicName.parse(request.topic), request.authoritative
            )
        except Exception as exc:
            stats.failures += 1
            return broker_pb2.LookupResponse(error=error_of(exc))
        finally:
            stats.pending -= 1
            stats.latency_ms.record((time.monotonic() - started) * 1000)
        if answer.redirect:
            stats.redirects += 1
        else:
            stats.answers += 1
        try:
            where = await self.addresses.of(answer.broker)
        except Exception as exc:
            return broker_pb2.LookupResponse(error=error_of(exc))
        return broker_pb2.LookupResponse(
            broker_url=where.plain,
            broker_url_tls=where.tls,
            redirect=answer.redirect,
            authoritative=answer.authoritative,
        )

    async def GetPartitionedTopicMetadata(
        self, request: broker_pb2.PartitionedTopicMetadataRequest, context: grpc.aio.ServicerContext
    ) -> broker_pb2.PartitionedTopicMetadata:
        await self._attached(context)
        try:
            name = TopicName.parse(request.topic)
            if name.is_persistent and name.full_name in self.topics.topics:
                n = 0  # loaded here unpartitioned: it cannot become partitioned while it exists
            else:
                n = await self.namespaces.partitions_or_create(name)
        except Exception as exc:
            return broker_pb2.PartitionedTopicMetadata(error=error_of(exc))
        return broker_pb2.PartitionedTopicMetadata(partitions=n, topic=name.full_name)

    async def GetSchema(
        self, request: broker_pb2.GetSchemaRequest, context: grpc.aio.ServicerContext
    ) -> broker_pb2.GetSchemaResponse:
        await self._attached(context)
        try:
            name = TopicName.parse(request.topic)
            version, info = await self.topics.schemas.get(name, request.version)
        except Exception as exc:
            return broker_pb2.GetSchemaResponse(error=error_of(exc))
        return broker_pb2.GetSchemaResponse(schema=to_data(info), version=version)

    async def GetTopicsOfNamespace(
        self, request: broker_pb2.TopicsOfNamespaceRequest, context: grpc.aio.ServicerContext
    ) -> broker_pb2.TopicsOfNamespace:
        await self._attached(context)
        domains = _DOMAINS_BY_MODE.get(request.mode, (PERSISTENT, NON_PERSISTENT))
        try:
            topics = await self.namespaces.topics_of(
                request.namespace, domains, self.topics.active_names()
            )
        except Exception as exc:
            return broker_pb2.TopicsOfNamespace(error=error_of(exc))
        if not request.include_system_topic:
            topics = [t for t in topics if not TopicName.parse(t).is_system]
        return broker_pb2.TopicsOfNamespace(topics=topics)
