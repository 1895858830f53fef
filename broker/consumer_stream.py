"""The gRPC front-end of one consumer: the ``Consume`` stream.

The first request subscribes; the stream answers ``Subscribed``, then pushes
the :class:`~broker.consumer.Deliveries` the core hands the consumer's sink
as ``Deliveries`` messages, interleaved in order with the answers to the
consumer's requests (flow, ack, seek, redeliver, last message id,
unsubscribe, close), each of which is one call on the subscription. A
request the core refuses gets a typed error and leaves the consumer
connected; the stream ends when the client closes it, after unsubscribe, or
when the core closes the consumer (its topic moved or closed). What the
stream holds for the client is bounded by the consumer's permits.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

from broker.consumer import Consumer, Deliveries
from broker.errors import BrokerError
from broker.modes import KeySharedMode, SubscriptionType, mode_of
from broker.producer import client_metadata
from broker.producer_stream import REVOKED, StillAllowed
from broker.subscription import KeySharedPolicy, Subscription
from broker.topic import TopicBase
from broker.topics import TopicRegistry
from protos import broker_pb2, common_pb2
from protos.access import CALLER_ROLE
from protos.deliveries import encode_deliveries
from protos.errors import error, error_of
from protos.message_id import MessageId, id_data
from protos.schema_info import encode_version, from_data
from protos.topic_name import TopicName

log = logging.getLogger(__name__)

_consumer_names = itertools.count(1)

Outbox = asyncio.Queue  # of ConsumerResponse (deliveries: its bytes), or None: the stream ends


def key_shared_policy(meta: broker_pb2.KeySharedMeta) -> KeySharedPolicy:
    mode = mode_of(KeySharedMode, meta.mode, "Key_Shared mode")
    if len(meta.range_starts) != len(meta.range_ends):
        raise BrokerError(
            f"{len(meta.range_starts)} range starts but {len(meta.range_ends)} range ends",
            common_pb2.INVALID_ARGUMENT,
        )
    ranges = tuple(zip(meta.range_starts, meta.range_ends, strict=True))
    return KeySharedPolicy(mode, meta.allow_out_of_order_delivery, ranges)


def deliveries_message(d: Deliveries) -> bytes:
    """The serialised ConsumerResponse of ``d`` (``protos.deliveries``)."""
    return encode_deliveries(
        d.ledger_ids, d.entry_ids, d.redelivery_counts, d.entries, d.acked_batch_indexes
    )


def _positions(ledger_ids: list[int], entry_ids: list[int], what: str) -> list[tuple[int, int]]:
    if len(ledger_ids) != len(entry_ids):
        raise BrokerError(
            f"{what}ledger_ids and entry_ids differ in length", common_pb2.INVALID_ARGUMENT
        )
    return list(zip(ledger_ids, entry_ids, strict=True))


class ConsumerStream:
    def __init__(
        self,
        topics: TopicRegistry,
        broker_name: str,
        still_allowed: StillAllowed | None = None,
    ) -> None:
        # With authorization on: judged again once the consumer has its role,
        # so a revocation during its subscription is not missed.
        self.still_allowed = still_allowed
        self.topics = topics
        self.broker_name = broker_name

    async def run(
        self, requests: AsyncIterator[broker_pb2.ConsumerRequest]
    ) -> AsyncIterator[broker_pb2.ConsumerResponse | bytes]:
        iterator = requests.__aiter__()
        try:
            first = await iterator.__anext__()
        except StopAsyncIteration:
            return
        if first.WhichOneof("request") != "subscribe":
            yield broker_pb2.ConsumerResponse(
                error=error(common_pb2.INVALID_ARGUMENT, "the first message must be 'subscribe'")
            )
            return
        outbox: Outbox = asyncio.Queue()

        def sink(d: Deliveries | None) -> None:
            outbox.put_nowait(deliveries_message(d) if d is not None else None)

        try:
            topic, sub, consumer = await self._subscribe(first.subscribe, sink)
        except Exception as exc:
            yield broker_pb2.ConsumerResponse(error=error_of(exc))
            return
        consumer.role = CALLER_ROLE.get()
        if (
            consumer.role is not None
            and self.still_allowed is not None
            and not await self.still_allowed(consumer.role, topic.name.full_name, sub.name)
        ):
            sub.remove_consumer(consumer)
            yield broker_pb2.ConsumerResponse(error=REVOKED)
            return
        yield broker_pb2.ConsumerResponse(
            subscribed=broker_pb2.Subscribed(
                consumer_name=consumer.name,
                topic=topic.name.full_name,
                schema_version=encode_version(consumer.schema_version),
            )
        )
        session = _Session(topic, sub, consumer, outbox)
        reader = asyncio.create_task(session.read(iterator))
        try:
            while True:
                resp = await outbox.get()
                if resp is None:
                    break
                yield resp
        finally:
            reader.cancel()
            sub.remove_consumer(consumer)

    async def _subscribe(
        self, req: broker_pb2.Subscribe, sink: Callable[[Deliveries | None], None]
    ) -> tuple[TopicBase, Subscription, Consumer]:
        name = TopicName.parse(req.topic)
        if not req.subscription:
            raise BrokerError("the subscription name is empty", common_pb2.INVALID_ARGUMENT)
        sub_type = mode_of(SubscriptionType, req.sub_type, "subscription type")
        metadata = client_metadata(req.properties, self.topics.settings.max_client_properties_bytes)
        schema = from_data(req.schema) if req.HasField("schema") else None
        if req.read_compacted and (
            not name.is_persistent
            or sub_type not in (SubscriptionType.EXCLUSIVE, SubscriptionType.FAILOVER)
        ):
            raise BrokerError(
                "Read compacted can only be used with exclusive or failover persistent "
                "subscriptions",
                common_pb2.NOT_ALLOWED,
            )
        topic = await self.topics.get_topic(name)
        version = await self.topics.schemas.admit_consumer(name, schema, topic.policies)
        mark_delete = None
        if req.HasField("start_message_id"):
            start = MessageId.from_data(req.start_message_id)
            mark_delete = topic.start_position(start, req.start_message_id_inclusive)
        key_shared = None
        if sub_type == SubscriptionType.KEY_SHARED:
            key_shared = key_shared_policy(req.key_shared)
        sub, consumer = await topic.subscribe(
            req.subscription,
            sub_type,
            req.initial_position == broker_pb2.LATEST,
            req.durable,
            req.consumer_name or f"{self.broker_name}-c{next(_consumer_names)}",
            sink,
            req.priority_level,
            mark_delete,
            key_shared,
        )
        consumer.metadata = metadata
        consumer.schema_version = version
        if req.read_compacted:
            compaction = self.topics.compaction
            consumer.read_compacted = True
            sub.compacted = lambda: compaction.view(name)
            sub.on_view_failed = lambda: compaction.forget_view(name)
            sub.dispatcher.trigger()
        return topic, sub, consumer


class _Session:
    """One consumer's requests, each turned into one call on the core."""

    def __init__(
        self, topic: TopicBase, sub: Subscription, consumer: Consumer, outbox: Outbox
    ) -> None:
        self.topic = topic
        self.sub = sub
        self.consumer = consumer
        self.outbox = outbox
        self._handlers: dict[str, Callable[[broker_pb2.ConsumerRequest], Awaitable[bool]]] = {
            "flow": self._flow,
            "ack": self._ack,
            "seek": self._seek,
            "get_last_message_id": self._last_message_id,
            "redeliver": self._redeliver,
            "unsubscribe": self._unsubscribe,
        }

    def _answer(self, resp: broker_pb2.ConsumerResponse) -> None:
        self.outbox.put_nowait(resp)

    async def read(self, iterator: AsyncIterator[broker_pb2.ConsumerRequest]) -> None:
        try:
            async for req in iterator:
                kind = req.WhichOneof("request")
                if kind == "close":
                    break
                handler = self._handlers.get(kind or "")
                if handler is None:
                    self._answer(
                        broker_pb2.ConsumerResponse(
                            ack_error=error(common_pb2.INVALID_ARGUMENT, f"unexpected {kind!r}")
                        )
                    )
                elif not await handler(req):
                    break
        except Exception as exc:
            log.debug("consumer stream %s ended: %s", self.consumer.name, exc)
        finally:
            self.consumer.detach()
            self.outbox.put_nowait(None)

    async def _flow(self, req: broker_pb2.ConsumerRequest) -> bool:
        self.sub.grant_permits(self.consumer, req.flow.permits)
        return True

    async def _ack(self, req: broker_pb2.ConsumerRequest) -> bool:
        ack = req.ack
        try:
            positions = _positions(list(ack.ledger_ids), list(ack.entry_ids), "")
            if ack.batch_acks:
                self.sub.ack_batch_indexes(
                    [
                        ((b.ledger_id, b.entry_id), b.batch_size, list(b.indexes))
                        for b in ack.batch_acks
                    ],
                    self.consumer,
                )
            self.sub.ack(positions, ack.ack_type == broker_pb2.CUMULATIVE, self.consumer)
        except BrokerError as exc:
            self._answer(broker_pb2.ConsumerResponse(ack_error=exc.to_proto()))
        return True

    async def _seek(self, req: broker_pb2.ConsumerRequest) -> bool:
        seek = req.seek
        which = seek.WhichOneof("target")
        target: MessageId | int | None = None
        if which == "publish_time_ms":
            target = seek.publish_time_ms
        elif which == "message_id":
            target = MessageId.from_data(seek.message_id)
        try:
            inclusive = seek.inclusive if which == "message_id" else True
            self.sub.seek(await self.topic.seek_position(target, inclusive))
        except Exception as exc:
            self._answer(broker_pb2.ConsumerResponse(request_error=error_of(exc)))
            return True
        self._answer(broker_pb2.ConsumerResponse(seek_done=broker_pb2.SeekDone()))
        return True

    async def _last_message_id(self, req: broker_pb2.ConsumerRequest) -> bool:
        ledger_id, entry_id = self.topic.last_position
        last = id_data(ledger_id if entry_id >= 0 else -1, entry_id)
        answer = broker_pb2.LastMessageId(
            message_id=last, terminated=self.topic.terminated_at is not None
        )
        self._answer(broker_pb2.ConsumerResponse(last_message_id=answer))
        return True

    async def _redeliver(self, req: broker_pb2.ConsumerRequest) -> bool:
        r = req.redeliver
        try:
            positions = _positions(list(r.ledger_ids), list(r.entry_ids), "redeliver: ")
        except BrokerError as exc:
            self._answer(broker_pb2.ConsumerResponse(request_error=exc.to_proto()))
            return True
        self.sub.redeliver_unacked(self.consumer, positions)
        return True

    async def _unsubscribe(self, req: broker_pb2.ConsumerRequest) -> bool:
        try:
            await self.topic.unsubscribe(self.sub, self.consumer)
        except BrokerError as exc:
            self._answer(broker_pb2.ConsumerResponse(request_error=exc.to_proto()))
            return True
        self._answer(broker_pb2.ConsumerResponse(unsubscribed=broker_pb2.Unsubscribed()))
        return False
