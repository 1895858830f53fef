"""The gRPC front-end of one producer: the ``Produce`` stream.

The first request creates the producer; then each ``SendEntries`` carries
entries the stream hands, one by one and in order, to the topic's
:meth:`~broker.topic.TopicBase.publish`, which decides and stores them. The
answers go back in send order: receipts that are ready together travel in
one ``SendReceipts``; a refused entry gets a ``SendError`` and changes
nothing. The sends awaiting their answer are bounded
(``max_pending_publish_entries_per_producer``): past it the stream stops
reading requests, which pushes back on the client through gRPC flow control.

A producer fenced by a newer ExclusiveWithFencing producer gets
``PRODUCER_FENCED`` next, ahead of sends still being stored. A topic that
closes here (unload, shutdown, another broker fenced its ledger) answers the
sends already taken, then ends the stream with a retryable error: the client
looks the topic up again and resends what has no receipt.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

from broker.managed_ledger import ManagedLedgerFencedError
from broker.modes import ProducerAccessMode, mode_of
from broker.producer import client_metadata
from broker.settings import BrokerSettings
from broker.topic import Producer, TopicBase
from broker.topics import TopicRegistry
from protos import broker_pb2, common_pb2
from protos.access import CALLER_ROLE
from protos.errors import MagnetarServerError, error, error_of
from protos.schema_info import encode_version, from_data
from protos.topic_name import TopicName

log = logging.getLogger(__name__)

# (sequence id, future of the stored position, or the refusal)
_Send = tuple[int, "asyncio.Future | common_pb2.Error"]
# Markers in the queue of answers: the producer was fenced; the topic moved.
_FENCED = (-1, error(common_pb2.PRODUCER_FENCED, "fenced"))
_MOVED = (-1, error(common_pb2.SERVICE_NOT_READY, "moved"))


class _SendQueue:
    """Sends of one producer awaiting their answer, in order; bounded."""

    def __init__(self, max_items: int) -> None:
        self._items: collections.deque[_Send | None] = collections.deque()
        self._max = max_items
        self._changed = asyncio.Event()

    async def put(self, item: _Send | None) -> None:
        while item is not None and len(self._items) >= self._max:
            self._changed.clear()
            await self._changed.wait()
        self._items.append(item)
        self._changed.set()

    async def get(self) -> _Send | None:
        while not self._items:
            self._changed.clear()
            await self._changed.wait()
        item = self._items.popleft()
        self._changed.set()
        return item

    def fence(self) -> None:
        """End the stream with ProducerFenced next (ahead of sends still
        waiting for storage: their outcome no longer matters)."""
        self._items.appendleft(_FENCED)
        self._changed.set()

    def moved(self) -> None:
        """The topic is closing here: after the sends already taken, end the
        stream with a retryable error (the client looks the topic up again)."""
        self._items.append(_MOVED)
        self._changed.set()

    def get_ready(self) -> _Send | None:
        """The next send if its answer is already known, else None."""
        if not self._items:
            return None
        head = self._items[0]
        if head is None or head is _FENCED or head is _MOVED:
            return None
        if isinstance(head[1], asyncio.Future) and not head[1].done():
            return None
        self._items.popleft()
        self._changed.set()
        return head


# A grant revoked while the producer or consumer was being created
# (broker/authorizer.py judges connected ones again on every grant change).
REVOKED = error(common_pb2.UNAUTHORIZED, "the permission was revoked while connecting")
StillAllowed = Callable[[str, str, str], Awaitable[bool]]  # (role, topic, subscription)


async def _allowed_always(role: str, topic: str, subscription: str) -> bool:
    return True


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
        self, requests: AsyncIterator[broker_pb2.ProducerRequest], authorize_first: bool = False
    ) -> AsyncIterator[broker_pb2.ProducerResponse]:
        """``authorize_first``: the caller's role is judged before the producer
        is created (on ``ProduceMany``, whose gRPC guard saw only the first
        stream's create)."""
        iterator = requests.__aiter__()
        try:
            first = await iterator.__anext__()
        except StopAsyncIteration:
            return
        if first.WhichOneof("request") != "create":
            yield broker_pb2.ProducerResponse(
                error=error(common_pb2.INVALID_ARGUMENT, "the first message must be 'create'")
            )
            return
        try:
            if authorize_first:
                await self._authorize(first.create.topic)
            topic, producer = await self._create(first.create)
        except Exception as exc:
            yield broker_pb2.ProducerResponse(error=error_of(exc))
            return
        producer.role = CALLER_ROLE.get()
        if not await self._still_allowed(producer.role, topic.name.full_name, ""):
            topic.remove_producer(producer)
            yield broker_pb2.ProducerResponse(error=REVOKED)
            return
        yield broker_pb2.ProducerResponse(
            created=broker_pb2.ProducerCreated(
                producer_name=producer.name,
                last_sequence_id=topic.last_sequence_id(producer),
                max_message_size=self.settings.max_message_size,
                topic=topic.name.full_name,
                schema_version=encode_version(producer.schema_version),
            )
        )
        async for resp in self._serve(iterator, topic, producer):
            yield resp

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

    async def _serve(
        self,
        iterator: AsyncIterator[broker_pb2.ProducerRequest],
        topic: TopicBase,
        producer: Producer,
    ) -> AsyncIterator[broker_pb2.ProducerResponse]:
        pending = _SendQueue(self.settings.max_pending_publish_entries_per_producer)
        producer.on_fenced = pending.fence
        producer.on_topic_closed = pending.moved
        reader = asyncio.create_task(self._read_sends(iterator, topic, producer, pending))
        try:
            while True:
                item = await pending.get()
                if item is None:
                    break
                if item is _MOVED or item is _FENCED:
                    yield broker_pb2.ProducerResponse(error=_ending(item, topic, producer))
                    break
                ended = False
                async for resp in self._answers(item, pending):
                    yield resp
                    ended = resp.WhichOneof("response") == "error"
                if ended:
                    break
        finally:
            reader.cancel()
            topic.remove_producer(producer)

    async def _answers(
        self, first: _Send, pending: _SendQueue
    ) -> AsyncIterator[broker_pb2.ProducerResponse]:
        """Await ``first`` and every already-finished send after it; yield the replies."""
        receipts = broker_pb2.SendReceipts()
        item: _Send | None = first
        while item is not None:
            seq, fut = item
            failure: common_pb2.Error | None = None
            if isinstance(fut, common_pb2.Error):
                failure = fut
            else:
                try:
                    ledger_id, entry_id = await fut
                except ManagedLedgerFencedError as exc:
                    # The topic moved: what has no receipt yet is resent to
                    # the new owner after the producer looks it up again.
                    if receipts.sequence_ids:
                        yield broker_pb2.ProducerResponse(receipts=receipts)
                    yield broker_pb2.ProducerResponse(error=exc.to_proto())
                    return
                except Exception as exc:
                    failure = error_of(exc)
                else:
                    receipts.sequence_ids.append(seq)
                    receipts.ledger_ids.append(ledger_id)
                    receipts.entry_ids.append(entry_id)
            if failure is not None:
                if receipts.sequence_ids:
                    yield broker_pb2.ProducerResponse(receipts=receipts)
                    receipts = broker_pb2.SendReceipts()
                yield broker_pb2.ProducerResponse(
                    send_error=broker_pb2.SendError(sequence_id=seq, error=failure)
                )
            item = pending.get_ready()
        if receipts.sequence_ids:
            yield broker_pb2.ProducerResponse(receipts=receipts)

    async def _read_sends(
        self,
        iterator: AsyncIterator[broker_pb2.ProducerRequest],
        topic: TopicBase,
        producer: Producer,
        pending: _SendQueue,
    ) -> None:
        try:
            async for req in iterator:
                kind = req.WhichOneof("request")
                if kind == "close":
                    break
                if kind != "send":
                    await pending.put(
                        (0, error(common_pb2.INVALID_ARGUMENT, f"unexpected {kind!r}"))
                    )
                    continue
                if topic.closing:
                    break  # unloading: what was not taken is sent again elsewhere
                await self._take(req.send, topic, producer, pending)
        except Exception as exc:
            log.debug("producer stream %s ended: %s", producer.name, exc)
        finally:
            await pending.put(None)

    async def _take(
        self,
        send: broker_pb2.SendEntries,
        topic: TopicBase,
        producer: Producer,
        pending: _SendQueue,
    ) -> None:
        """Hand one request's entries to the topic, in order."""
        if not (len(send.sequence_ids) == len(send.num_messages) == len(send.entries)):
            refusal = error(
                common_pb2.INVALID_ARGUMENT,
                "sequence_ids, num_messages and entries differ in length",
            )
            await pending.put((send.sequence_ids[0] if send.sequence_ids else 0, refusal))
            return
        for seq, count, entry in zip(
            send.sequence_ids, send.num_messages, send.entries, strict=True
        ):
            try:
                stored = await topic.publish(producer, seq, count, entry)
            except MagnetarServerError as exc:
                await pending.put((seq, exc.to_proto()))
                continue
            await pending.put((seq, stored))


def _ending(marker: _Send, topic: TopicBase, producer: Producer) -> common_pb2.Error:
    if marker is _MOVED:
        return error(
            common_pb2.SERVICE_NOT_READY,
            f"{topic.name} was unloaded from this broker; look it up again",
        )
    return error(
        common_pb2.PRODUCER_FENCED,
        f"producer {producer.name} on {topic.name} was fenced by a newer "
        "ExclusiveWithFencing producer",
    )
