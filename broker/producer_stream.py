"""The gRPC front-end of one producer: the ``Produce`` stream, and the
creation of a producer, which ``ProduceMany`` (broker/producer_mux.py) shares.

The first request creates the producer; then each request goes to the
producer's :class:`~broker.send_pipeline.SendPipeline` (:func:`hand_over`),
which hands the entries to the topic's publish in order and answers them in
send order: receipts that are ready together travel in one
``SendReceipts``; a refused entry gets a ``SendError`` and changes nothing;
the stream's end carries the producer's fatal error, if any
(:func:`response_of`). The requests not yet taken are bounded by the
pipeline's ``max_pending_publish_entries_per_producer``: past it this stream
stops reading requests, which pushes back on the client through gRPC flow
control.

A producer fenced by a newer ExclusiveWithFencing producer gets
``PRODUCER_FENCED`` next, ahead of sends still being stored. A topic that
closes here (unload, shutdown, another broker fenced its ledger) answers the
sends already taken, then ends the stream with a retryable error: the client
looks the topic up again and resends what has no receipt.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

from broker.modes import ProducerAccessMode, mode_of
from broker.producer import client_metadata
from broker.send_pipeline import Answer, Ended, Receipts, SendFailed, SendPipeline
from broker.settings import BrokerSettings
from broker.topic import Producer, TopicBase
from broker.topics import TopicRegistry
from protos import broker_pb2, common_pb2
from protos.access import CALLER_ROLE
from protos.errors import MagnetarServerError, error, error_of
from protos.schema_info import encode_version, from_data
from protos.topic_name import TopicName

log = logging.getLogger(__name__)

# A grant revoked while the producer or consumer was being created
# (broker/authorizer.py judges connected ones again on every grant change).
REVOKED = error(common_pb2.UNAUTHORIZED, "the permission was revoked while connecting")
StillAllowed = Callable[[str, str, str], Awaitable[bool]]  # (role, topic, subscription)


async def _allowed_always(role: str, topic: str, subscription: str) -> bool:
    return True


def hand_over(pipeline: SendPipeline, req: broker_pb2.ProducerRequest) -> bool:
    """Give a request after the create to the producer's pipeline; False
    for a close (the client sends nothing more)."""
    kind = req.WhichOneof("request")
    if kind == "send":
        send = req.send
        pipeline.put_send(send.sequence_ids, send.num_messages, send.entries)
        return True
    if kind == "close":
        pipeline.put_close()
        return False
    pipeline.refuse(error(common_pb2.INVALID_ARGUMENT, f"unexpected {kind!r}"))
    return True


def response_of(answer: Answer) -> broker_pb2.ProducerResponse | None:
    """The answer on the wire (None: an end without an error)."""
    if isinstance(answer, Receipts):
        return broker_pb2.ProducerResponse(
            receipts=broker_pb2.SendReceipts(
                sequence_ids=answer.sequence_ids,
                ledger_ids=answer.ledger_ids,
                entry_ids=answer.entry_ids,
            )
        )
    if isinstance(answer, SendFailed):
        return broker_pb2.ProducerResponse(
            send_error=broker_pb2.SendError(sequence_id=answer.sequence_id, error=answer.error)
        )
    return None if answer.error is None else broker_pb2.ProducerResponse(error=answer.error)


class ProducerStream:
    def __init__(
        self,
        topics: TopicRegistry,
        settings: BrokerSettings,
        broker_name: str,
        still_allowed: StillAllowed | None = None,
    ) -> None:
        # With authorization on: judged again once the producer has its role,
        # so a revocation during its creation is not missed.
        self.still_allowed = still_allowed or _allowed_always
        self.topics = topics
        self.settings = settings
        self.broker_name = broker_name

    async def run(
        self, requests: AsyncIterator[broker_pb2.ProducerRequest]
    ) -> AsyncIterator[broker_pb2.ProducerResponse]:
        """The ``Produce`` RPC."""
        iterator = requests.__aiter__()
        try:
            first = await iterator.__anext__()
        except StopAsyncIteration:
            return
        created, topic, producer = await self.create(first, authorize_first=False)
        if topic is None or producer is None:
            yield created
            return
        limit = self.settings.max_pending_publish_entries_per_producer
        answers: asyncio.Queue[Answer] = asyncio.Queue()
        room = asyncio.Event()
        pipeline = SendPipeline(topic, producer, limit, answers.put_nowait, lambda _: room.set())
        reader: asyncio.Task | None = None
        try:
            yield created
            reader = asyncio.create_task(_read(iterator, pipeline, room, answers, limit))
            while True:
                answer = await answers.get()
                room.set()
                if (response := response_of(answer)) is not None:
                    yield response
                if isinstance(answer, Ended):
                    break
        finally:
            if reader is not None:
                reader.cancel()
            pipeline.abort()

    async def create(
        self, first: broker_pb2.ProducerRequest, authorize_first: bool
    ) -> tuple[broker_pb2.ProducerResponse, TopicBase | None, Producer | None]:
        """The answer to a stream's first request, and the producer it made
        (none when the answer is an error). ``authorize_first``: the
        caller's role is judged before the producer is created (on
        ``ProduceMany``, whose gRPC guard saw only the first stream's create)."""
        if first.WhichOneof("request") != "create":
            refusal = error(common_pb2.INVALID_ARGUMENT, "the first message must be 'create'")
            return broker_pb2.ProducerResponse(error=refusal), None, None
        try:
            if authorize_first:
                await self._authorize(first.create.topic)
            topic, producer = await self._create(first.create)
        except Exception as exc:
            return broker_pb2.ProducerResponse(error=error_of(exc)), None, None
        producer.role = CALLER_ROLE.get()
        denied: common_pb2.Error | None = REVOKED
        try:
            if await self._still_allowed(producer.role, topic.name.full_name, ""):
                denied = None
        except Exception as exc:
            denied = error_of(exc)
        finally:  # (also when cancelled: the call is gone)
            if denied is not None:
                topic.remove_producer(producer)
        if denied is not None:
            return broker_pb2.ProducerResponse(error=denied), None, None
        try:
            created = broker_pb2.ProducerCreated(
                producer_name=producer.name,
                last_sequence_id=topic.last_sequence_id(producer),
                max_message_size=self.settings.max_message_size,
                topic=topic.name.full_name,
                schema_version=encode_version(producer.schema_version),
            )
        except Exception as exc:
            topic.remove_producer(producer)
            return broker_pb2.ProducerResponse(error=error_of(exc)), None, None
        return broker_pb2.ProducerResponse(created=created), topic, producer

    async def _still_allowed(self, role: str | None, topic: str, subscription: str) -> bool:
        return role is None or await self.still_allowed(role, topic, subscription)

    async def _authorize(self, topic: str) -> None:
        role = CALLER_ROLE.get()
        if not await self._still_allowed(role, TopicName.parse(topic).full_name, ""):
            raise MagnetarServerError(
                f"role {role!r} may not produce on {topic}", common_pb2.UNAUTHORIZED
            )

    async def _create(self, create: broker_pb2.CreateProducer) -> tuple[TopicBase, Producer]:
        name = TopicName.parse(create.topic)
        mode = mode_of(ProducerAccessMode, create.access_mode, "producer access mode")
        metadata = client_metadata(create.properties, self.settings.max_client_properties_bytes)
        schema = from_data(create.schema) if create.HasField("schema") else None
        # The schema history is read while the topic loads (a new topic's
        # other reads and its first ledger take a few metastore round trips).
        topic, history = await asyncio.gather(
            self.topics.get_topic(name), self.topics.schemas.history(name)
        )
        version = await self.topics.schemas.admit_producer(name, schema, topic.policies, history)
        producer = await topic.add_producer(create.producer_name, self.broker_name, mode)
        producer.metadata = metadata
        producer.schema_version = version
        return topic, producer


async def _read(
    iterator: AsyncIterator[broker_pb2.ProducerRequest],
    pipeline: SendPipeline,
    room: asyncio.Event,
    answers: asyncio.Queue,
    limit: int,
) -> None:
    """A ``Produce`` stream's requests into its pipeline, not read on while
    the pipeline holds requests it has not taken, or ``limit`` answers wait
    to be sent."""
    try:
        async for req in iterator:
            if not hand_over(pipeline, req):
                return
            while pipeline.waiting_requests or answers.qsize() >= limit:
                room.clear()
                await room.wait()
    except Exception as exc:
        log.debug("producer stream %s ended: %s", pipeline.producer.name, exc)
    finally:
        pipeline.close()
