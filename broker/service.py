"""The broker's client-facing gRPC service: producer and consumer streams.

Each producer stream reads ``SendEntries`` and answers ``SendReceipts`` in
send order; receipts that are ready together travel in one message. Each
consumer stream answers ``Subscribe``, then pushes ``Deliveries`` against the
permits that ``Flow`` grants, and applies ``Ack``. Bad input gets a typed
error and changes nothing; an exception in one stream never reaches another.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import itertools
import json
import logging
from typing import TYPE_CHECKING

from prometheus_client import Counter

from bookie.ledger_client import LedgerClient
from broker.bundles import BundleRange
from broker.dedup import DUPLICATE, IN_FLIGHT
from broker.managed_ledger import (
    EntryCache,
    ManagedLedger,
    ManagedLedgerFencedError,
    RolloverPolicy,
)
from broker.non_persistent import NonPersistentTopic
from broker.ownership import Ownership, bundle_key
from broker.settings import BrokerSettings
from broker.topic import BrokerError, KeySharedPolicy, Topic, TopicBase
from metastore.client import MetastoreClient

if TYPE_CHECKING:
    from broker.load_manager import LoadManager
from protos import broker_pb2, broker_pb2_grpc, common_pb2
from protos.entry import CorruptedEntryError, split_entry
from protos.errors import MagnetarServerError, error
from protos.message_id import id_data, id_fields
from protos.topic_name import TopicName

log = logging.getLogger("broker")

MSGS_IN = Counter("magnetar_rate_in", "Messages published", ["topic"])
BYTES_IN = Counter("magnetar_throughput_in", "Bytes published", ["topic"])
MSGS_OUT = Counter("magnetar_rate_out", "Entries dispatched to consumers", ["topic"])

DEFAULT_NAMESPACE_KEY = "/admin/policies/public/default"


# (sequence id, future of the stored position or the refusal, messages, bytes)
_Send = tuple[int, "asyncio.Future | common_pb2.Error", int, int]


_consumer_names = itertools.count(1)


_FENCED = ("fenced",)
_MOVED = ("moved",)


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
        """Make the producer's stream end with ProducerFenced next (ahead of
        sends still waiting for storage: their outcome no longer matters)."""
        self._items.appendleft(_FENCED)  # type: ignore[arg-type]
        self._changed.set()

    def moved(self) -> None:
        """The topic is closing here: after the sends already taken, end the
        stream with a retryable error (the client looks the topic up again)."""
        self._items.append(_MOVED)  # type: ignore[arg-type]
        self._changed.set()

    def get_ready(self) -> _Send | None:
        """The next send if its answer is already known, else None."""
        if not self._items:
            return None
        head = self._items[0]
        if head is None or head is _FENCED or head is _MOVED:
            return None
        fut = head[1]
        if isinstance(fut, asyncio.Future) and not fut.done():
            return None
        self._items.popleft()
        self._changed.set()
        return head


def _start_mark_delete(
    topic: Topic, mid: common_pb2.MessageIdData, inclusive: bool
) -> tuple[int, int]:
    """The mark-delete position of a reader starting at ``mid``."""
    ledger = topic.ledger
    ledger_id, entry_id, _, batch_index = id_fields(mid)
    if ledger_id < 0:  # MessageId.earliest
        return ledger.before_first()
    if ledger_id >= MAX_INT64:  # MessageId.latest
        last = ledger.last_confirmed
        return ledger.before(last) if inclusive and last[1] >= 0 else last
    pos = (ledger_id, entry_id)
    # A batched start id delivers its whole entry: the client skips the
    # messages before it (and the start itself when not inclusive).
    if inclusive or batch_index >= 0:
        return ledger.before(pos)
    return pos


MAX_INT64 = (1 << 63) - 1


def error_of(exc: BaseException) -> common_pb2.Error:
    if isinstance(exc, MagnetarServerError):
        return exc.to_proto()
    return error(common_pb2.UNKNOWN_ERROR, f"{type(exc).__name__}: {exc}")


class BrokerService(broker_pb2_grpc.BrokerServicer):
    def __init__(
        self,
        settings: BrokerSettings,
        metastore: MetastoreClient,
        ledgers: LedgerClient,
        broker_name: str,
        address: str = "",
    ) -> None:
        self.settings = settings
        self.metastore = metastore
        self.ledgers = ledgers
        self.broker_name = broker_name
        self.address = address
        self.ownership = Ownership(metastore, address, settings)
        self.topics: dict[str, TopicBase] = {}
        self._loading: dict[str, asyncio.Future] = {}
        self.cache = EntryCache(settings.managed_ledger_cache_size_mb * 1024 * 1024)
        self.closing = False
        self._background: set[asyncio.Task] = set()
        self.load_manager: LoadManager | None = None  # set by the server

    # ---------------------------------------------------------------- topics

    def dedup_enabled(self, policies: bytes) -> bool:
        """The namespace's deduplicationEnabled policy, else the broker setting."""
        policy = json.loads(policies).get("deduplicationEnabled")
        if policy is not None:
            return bool(policy)
        return self.settings.broker_deduplication_enabled

    async def enable_dedup(self, topic: Topic) -> None:
        replayed = await topic.dedup.recover(topic.ledger, self.metastore)
        topic.dedup.enabled = True
        log.info("%s: deduplication on (%d entries replayed)", topic.name, replayed)

    async def housekeeping_forever(self) -> None:
        """Roll idle, fully consumed ledgers so trimming can delete them."""
        idle = self.settings.managed_ledger_inactive_ledger_rollover_seconds
        if idle <= 0:
            return
        while True:
            await asyncio.sleep(min(60.0, max(0.5, idle / 4)))
            for topic in list(self.topics.values()):
                if not isinstance(topic, Topic):
                    continue
                try:
                    topic.ledger.idle_check()
                except Exception:
                    log.exception("housekeeping of %s failed", topic.name)

    async def ensure_default_namespace(self) -> None:
        if await self.metastore.get(DEFAULT_NAMESPACE_KEY) is None:
            body = json.dumps({"bundles": 4, "replication_clusters": [self.settings.cluster_name]})
            try:
                await self.metastore.put(DEFAULT_NAMESPACE_KEY, body.encode(), expected_version=-1)
            except MagnetarServerError:
                pass  # another broker created it first

    @staticmethod
    def partitions_key(name: TopicName) -> str:
        return (
            f"/admin/partitioned-topics/{name.tenant}/{name.namespace}/{name.domain}/"
            f"{name.local_name}"
        )

    async def partitions_of(self, name: TopicName) -> int:
        """Partitions of a partitioned topic; 0 for any other name."""
        if name.is_partition:
            return 0
        stat = await self.metastore.get(self.partitions_key(name))
        return int(json.loads(stat.value)["partitions"]) if stat is not None else 0

    async def _check_partitioned(self, name: TopicName) -> None:
        """A partitioned topic is served through its partitions only, and only
        through the partitions it has."""
        if name.is_partition:
            n = await self.partitions_of(name.partitioned_topic_name)
            if n and name.partition_index >= n:
                raise BrokerError(
                    f"{name.partitioned_topic_name} has {n} partitions; there is no partition "
                    f"{name.partition_index}",
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

    async def GetPartitionedTopicMetadata(self, request, context):  # type: ignore[no-untyped-def]
        try:
            name = TopicName.parse(request.topic)
            n = await self.partitions_of(name)
            return broker_pb2.PartitionedTopicMetadata(partitions=n, topic=name.full_name)
        except Exception as exc:
            return broker_pb2.PartitionedTopicMetadata(error=error_of(exc))

    async def topics_of_namespace(self, namespace: str, mode: int) -> list[str]:
        tenant, sep, ns = namespace.partition("/")
        if not sep or not tenant or not ns or "/" in ns:
            raise BrokerError(
                f"namespace {namespace!r} is not tenant/namespace", common_pb2.INVALID_ARGUMENT
            )
        if await self.metastore.get(f"/admin/policies/{tenant}/{ns}") is None:
            raise BrokerError(f"namespace {namespace} does not exist", common_pb2.TOPIC_NOT_FOUND)
        by_mode: dict[int, list[str]] = {
            broker_pb2.PERSISTENT_ONLY: ["persistent"],
            broker_pb2.NON_PERSISTENT_ONLY: ["non-persistent"],
        }
        domains = by_mode.get(mode, ["persistent", "non-persistent"])
        found: set[str] = set()
        for domain in domains:
            for base in await self.metastore.children(
                f"/admin/partitioned-topics/{tenant}/{ns}/{domain}"
            ):
                parent = TopicName.parse(f"{domain}://{tenant}/{ns}/{base}")
                n = await self.partitions_of(parent)
                found.update(parent.partition(i).full_name for i in range(n))
            if domain == "persistent":
                for local in await self.metastore.children(
                    f"/managed-ledgers/{tenant}/{ns}/{domain}"
                ):
                    found.add(f"{domain}://{tenant}/{ns}/{local}")
            else:
                found.update(
                    t.name.full_name
                    for t in self.topics.values()
                    if not t.persistent and t.name.namespace_name == namespace
                )
        return sorted(found)

    async def GetTopicsOfNamespace(self, request, context):  # type: ignore[no-untyped-def]
        try:
            topics = await self.topics_of_namespace(request.namespace, request.mode)
            return broker_pb2.TopicsOfNamespace(topics=topics)
        except Exception as exc:
            return broker_pb2.TopicsOfNamespace(error=error_of(exc))

    async def Lookup(self, request, context):  # type: ignore[no-untyped-def]
        try:
            if self.closing:
                raise BrokerError("the broker is shutting down", common_pb2.SERVICE_NOT_READY)
            name = TopicName.parse(request.topic)
            answer = await self.ownership.lookup(name, request.authoritative)
            return broker_pb2.LookupResponse(
                broker_url=answer.broker,
                redirect=answer.redirect,
                authoritative=answer.authoritative,
            )
        except Exception as exc:
            return broker_pb2.LookupResponse(error=error_of(exc))

    async def unload_bundle(self, key: str) -> None:
        """Release an owned bundle: its topics close (clients reconnect
        through a lookup), then the bundle is free for the next lookup."""

        async def close_topics() -> None:
            await self._close_topics(
                [
                    topic
                    for topic in list(self.topics.values())
                    if (await self.ownership.bundle_of(topic.name))[0] == key
                ]
            )

        await self.ownership.release(key, close_topics)

    async def split_bundle(self, name: TopicName, bundle: BundleRange, unload: bool) -> list[str]:
        """Split a bundle this broker owns; with ``unload`` both halves are
        released at once so the leader can place them anywhere."""
        halves = await self.ownership.split(name, bundle)
        if unload:
            for half in halves:
                await self.unload_bundle(bundle_key(name, half))
        return [h.name for h in halves]

    def topic_moved(self, topic: TopicBase, why: str) -> None:
        """Another broker took ``topic`` (its ledger was fenced under us):
        stop serving it and its bundle until a lookup says otherwise."""
        if self.topics.get(topic.name.full_name) is not topic:
            return
        log.warning("%s: %s; closing it here", topic.name, why)
        key = self.ownership.cached_bundle_key(topic.name)
        if key is not None:
            self.ownership.owned.pop(key, None)
        task = asyncio.get_running_loop().create_task(self._close_topics([topic]))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def unload_all(self) -> None:
        """Graceful shutdown: hand every bundle back before stopping."""
        for key in list(self.ownership.owned):
            try:
                await self.unload_bundle(key)
            except Exception:
                log.exception("unloading %s", key)

    async def drop_all_topics(self, why: str) -> None:
        """Close every topic (clients reconnect through a lookup)."""
        if self.topics:
            log.warning("closing %d topics: %s", len(self.topics), why)
        await self._close_topics(list(self.topics.values()))

    async def _close_topics(self, topics: list[TopicBase]) -> None:
        """Stop serving these topics (no longer found, then closed)."""
        for topic in topics:
            if self.topics.get(topic.name.full_name) is topic:
                del self.topics[topic.name.full_name]
        for topic in topics:
            try:
                await topic.close()
            except Exception:
                log.exception("closing %s", topic.name)

    async def get_topic(self, name: TopicName) -> TopicBase:
        if self.closing:
            raise BrokerError("the broker is shutting down", common_pb2.SERVICE_NOT_READY)
        topic = self.topics.get(name.full_name)
        if topic is not None:
            return topic
        await self.ownership.ensure_owner(name)
        loading = self._loading.get(name.full_name)
        if loading is not None:
            return await asyncio.shield(loading)
        if len(self.topics) >= self.settings.max_topics:
            raise BrokerError(
                f"this broker already serves {len(self.topics)} topics "
                f"(max_topics = {self.settings.max_topics})",
                common_pb2.TOO_MANY_REQUESTS,
            )
        fut: asyncio.Future = asyncio.get_running_loop().create_future()
        self._loading[name.full_name] = fut
        try:
            topic = await self._load_topic(name)
        except BaseException as exc:
            fut.set_exception(exc)
            fut.exception()  # retrieved: waiters re-raise it
            raise
        finally:
            self._loading.pop(name.full_name, None)
        self.topics[name.full_name] = topic
        fut.set_result(topic)
        return topic

    async def _load_topic(self, name: TopicName) -> TopicBase:
        ns_key = f"/admin/policies/{name.tenant}/{name.namespace}"
        ns_policies = await self.metastore.get(ns_key)
        if ns_policies is None:
            raise BrokerError(
                f"{name}: namespace {name.namespace_name} does not exist",
                common_pb2.TOPIC_NOT_FOUND,
            )
        await self._check_partitioned(name)
        if not name.is_persistent:
            return NonPersistentTopic(name, self.settings)
        ml_key = f"/managed-ledgers/{name.persistence_path}"
        if not self.settings.allow_auto_topic_creation and await self.metastore.get(ml_key) is None:
            raise BrokerError(
                f"topic {name} does not exist and allow_auto_topic_creation is off",
                common_pb2.TOPIC_NOT_FOUND,
            )
        s = self.settings
        ledger = ManagedLedger(
            name,
            self.metastore,
            self.ledgers,
            ensemble_size=s.managed_ledger_default_ensemble_size,
            write_quorum=s.managed_ledger_default_write_quorum,
            ack_quorum=s.managed_ledger_default_ack_quorum,
            rollover=RolloverPolicy(
                max_entries=s.managed_ledger_max_entries_per_ledger,
                max_size_bytes=s.managed_ledger_max_size_per_ledger_mb * 1024 * 1024,
                min_time_s=s.managed_ledger_min_ledger_rollover_time_minutes * 60,
                max_time_s=s.managed_ledger_max_ledger_rollover_time_minutes * 60,
                inactive_rollover_s=s.managed_ledger_inactive_ledger_rollover_seconds,
            ),
            cache=self.cache,
            max_outstanding_adds=s.managed_ledger_max_outstanding_adds,
        )
        await ledger.open()
        topic = Topic(name, ledger, s)
        ledger.on_fenced = lambda: self.topic_moved(topic, "another broker fenced its ledger")
        if self.dedup_enabled(ns_policies.value):
            await self.enable_dedup(topic)
        await topic.load_cursors()
        return topic

    async def close_all(self) -> None:
        self.closing = True
        await self._close_topics(list(self.topics.values()))

    # ---------------------------------------------------------------- producers

    async def Produce(self, request_iterator, context):  # type: ignore[no-untyped-def]
        iterator = request_iterator.__aiter__()
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
            name = TopicName.parse(first.create.topic)
            topic = await self.get_topic(name)
            producer = await topic.add_producer(
                first.create.producer_name, self.broker_name, first.create.access_mode
            )
        except Exception as exc:
            yield broker_pb2.ProducerResponse(error=error_of(exc))
            return
        yield broker_pb2.ProducerResponse(
            created=broker_pb2.ProducerCreated(
                producer_name=producer.name,
                last_sequence_id=(
                    topic.dedup.last_sequence_id(producer.name)
                    if topic.dedup.enabled
                    else producer.last_sequence_id
                ),
                max_message_size=self.settings.max_message_size,
                topic=name.full_name,
            )
        )
        pending = _SendQueue(self.settings.max_pending_publish_entries_per_producer)
        producer.on_fenced = pending.fence
        producer.on_topic_closed = pending.moved
        reader = asyncio.create_task(self._read_sends(iterator, topic, producer, pending))
        try:
            while True:
                item = await pending.get()
                if item is None:
                    break
                if item is _MOVED:
                    yield broker_pb2.ProducerResponse(
                        error=error(
                            common_pb2.SERVICE_NOT_READY,
                            f"{topic.name} was unloaded from this broker; look it up again",
                        )
                    )
                    break
                if item is _FENCED:
                    yield broker_pb2.ProducerResponse(
                        error=error(
                            common_pb2.PRODUCER_FENCED,
                            f"producer {producer.name} on {topic.name} was fenced by a newer "
                            "ExclusiveWithFencing producer",
                        )
                    )
                    break
                moved = False
                async for resp in self._answers(item, pending, topic, producer):
                    yield resp
                    moved = resp.WhichOneof("response") == "error"
                if moved:
                    break
        finally:
            reader.cancel()
            topic.remove_producer(producer)

    async def _answers(self, first: _Send, pending: _SendQueue, topic: TopicBase, producer):  # type: ignore[no-untyped-def]
        """Await ``first`` and every already-finished send after it; yield the replies."""
        receipts = broker_pb2.SendReceipts()
        item: _Send | None = first
        while item is not None:
            seq, fut, count, size = item
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
                    MSGS_IN.labels(topic.name.full_name).inc(count)
                    BYTES_IN.labels(topic.name.full_name).inc(size)
                    topic.meter_in.add(count, size)
                    producer.meter.add(count, size)
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

    def _dedup_done(
        self, topic: TopicBase, producer: str, highest: int, fut: asyncio.Future
    ) -> None:
        assert isinstance(topic, Topic), "deduplication is for persistent topics"
        if fut.cancelled() or fut.exception() is not None:
            topic.dedup.failed(producer)
            return
        if topic.dedup.stored(producer, highest):
            task = asyncio.get_running_loop().create_task(
                topic.dedup.snapshot(topic.ledger, self.metastore)
            )
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    async def _read_sends(  # type: ignore[no-untyped-def]
        self, iterator, topic: TopicBase, producer, pending: _SendQueue
    ) -> None:
        max_size = self.settings.max_message_size
        try:
            async for req in iterator:
                kind = req.WhichOneof("request")
                if kind == "close":
                    break
                if kind != "send":
                    await pending.put(
                        (0, error(common_pb2.INVALID_ARGUMENT, f"unexpected {kind!r}"), 0, 0)
                    )
                    continue
                if topic.closing:
                    break  # unloading: what was not taken is sent again elsewhere
                send = req.send
                n = len(send.entries)
                if not (len(send.sequence_ids) == len(send.num_messages) == n):
                    await pending.put(
                        (
                            send.sequence_ids[0] if send.sequence_ids else 0,
                            error(
                                common_pb2.INVALID_ARGUMENT,
                                "sequence_ids, num_messages and entries differ in length",
                            ),
                            0,
                            0,
                        )
                    )
                    continue
                for seq, count, entry in zip(
                    send.sequence_ids, send.num_messages, send.entries, strict=True
                ):
                    if len(entry) > max_size:
                        too_big = error(
                            common_pb2.MESSAGE_TOO_BIG,
                            f"entry of {len(entry)} bytes is over max_message_size "
                            f"({max_size} bytes)",
                        )
                        await pending.put((seq, too_big, 0, 0))
                        continue
                    try:
                        meta, _ = split_entry(entry)
                    except CorruptedEntryError as exc:
                        await pending.put((seq, exc.to_proto(), 0, 0))
                        continue
                    # Chunks share their message's sequence id: only the last
                    # one counts for deduplication.
                    inner_chunk = (
                        meta.num_chunks_from_msg > 1
                        and meta.chunk_id < meta.num_chunks_from_msg - 1
                    )
                    # After any ledger switch (which may recover entries the
                    # dedup state must see) and within the outstanding-add limit.
                    await topic.wait_for_room()
                    highest = seq + count - 1
                    dedup = topic.dedup
                    if dedup.enabled and not inner_chunk:
                        status = dedup.check(producer.name, highest)
                        if status == DUPLICATE:
                            done = asyncio.get_running_loop().create_future()
                            done.set_result((-1, -1))  # Pulsar answers a duplicate with -1:-1
                            await pending.put((seq, done, 0, 0))
                            continue
                        if status == IN_FLIGHT:
                            await pending.put(
                                (
                                    seq,
                                    error(
                                        common_pb2.SERVICE_NOT_READY,
                                        f"sequence id {highest} of {producer.name} is still "
                                        "being stored; retry",
                                    ),
                                    0,
                                    0,
                                )
                            )
                            continue
                    fut = topic.publish(entry)
                    if dedup.enabled and not inner_chunk:
                        dedup.pushed_to(producer.name, highest)
                        fut.add_done_callback(
                            functools.partial(self._dedup_done, topic, producer.name, highest)
                        )
                    producer.last_sequence_id = max(producer.last_sequence_id, highest)
                    await pending.put((seq, fut, count, len(entry)))
        except Exception as exc:
            log.debug("producer stream %s ended: %s", producer.name, exc)
        finally:
            await pending.put(None)

    # ---------------------------------------------------------------- consumers

    async def Consume(self, request_iterator, context):  # type: ignore[no-untyped-def]
        iterator = request_iterator.__aiter__()
        try:
            first = await iterator.__anext__()
        except StopAsyncIteration:
            return
        if first.WhichOneof("request") != "subscribe":
            yield broker_pb2.ConsumerResponse(
                error=error(common_pb2.INVALID_ARGUMENT, "the first message must be 'subscribe'")
            )
            return
        sub_req = first.subscribe
        try:
            name = TopicName.parse(sub_req.topic)
            if not sub_req.subscription:
                raise BrokerError("the subscription name is empty", common_pb2.INVALID_ARGUMENT)
            if sub_req.sub_type not in broker_pb2.SubType.values():
                raise BrokerError(
                    f"unknown subscription type {sub_req.sub_type}", common_pb2.INVALID_ARGUMENT
                )
            topic = await self.get_topic(name)
            mark_delete = None
            if sub_req.HasField("start_message_id") and isinstance(topic, Topic):
                mark_delete = _start_mark_delete(
                    topic, sub_req.start_message_id, sub_req.start_message_id_inclusive
                )
            key_shared = None
            if sub_req.sub_type == broker_pb2.KEY_SHARED:
                key_shared = KeySharedPolicy.from_proto(sub_req.key_shared)
            consumer = await topic.subscribe(
                sub_req.subscription,
                sub_req.sub_type,
                sub_req.initial_position == broker_pb2.LATEST,
                sub_req.durable,
                sub_req.consumer_name or f"{self.broker_name}-c{next(_consumer_names)}",
                sub_req.priority_level,
                mark_delete,
                key_shared,
            )
        except Exception as exc:
            yield broker_pb2.ConsumerResponse(error=error_of(exc))
            return
        sub = consumer.subscription
        yield broker_pb2.ConsumerResponse(
            subscribed=broker_pb2.Subscribed(consumer_name=consumer.name, topic=name.full_name)
        )
        reader = asyncio.create_task(self._read_consumer_requests(iterator, consumer))
        try:
            while True:
                resp = await consumer.outbox.get()
                if resp is None:
                    break
                if resp.HasField("deliveries"):
                    MSGS_OUT.labels(name.full_name).inc(len(resp.deliveries.entry_ids))
                yield resp
        finally:
            reader.cancel()
            sub.remove_consumer(consumer)

    async def _seek(self, sub, seek: broker_pb2.Seek) -> None:  # type: ignore[no-untyped-def]
        if not isinstance(sub.topic, Topic):
            raise BrokerError(
                f"{sub.topic.name} is non-persistent: there is nothing stored to seek to",
                common_pb2.NOT_ALLOWED,
            )
        ledger = sub.topic.ledger
        if seek.WhichOneof("target") == "publish_time_ms":
            pos = await ledger.find_by_publish_time(seek.publish_time_ms)
        elif seek.WhichOneof("target") == "message_id":
            ledger_id, entry_id, _, _ = id_fields(seek.message_id)
            if ledger_id < 0:
                pos = ledger.normalize(ledger.first_position)
            elif ledger_id >= MAX_INT64:
                pos = ledger.next_position(ledger.last_confirmed)
            else:
                pos = (ledger_id, entry_id)
        else:
            raise BrokerError(
                "seek needs a message id or a publish time", common_pb2.INVALID_ARGUMENT
            )
        sub.seek(ledger.before(pos))

    async def _read_consumer_requests(self, iterator, consumer) -> None:  # type: ignore[no-untyped-def]
        sub = consumer.subscription
        try:
            async for req in iterator:
                kind = req.WhichOneof("request")
                if kind == "flow":
                    consumer.add_permits(req.flow.permits)
                elif kind == "ack":
                    ack = req.ack
                    if len(ack.ledger_ids) != len(ack.entry_ids):
                        consumer.deliver(
                            broker_pb2.ConsumerResponse(
                                ack_error=error(
                                    common_pb2.INVALID_ARGUMENT,
                                    "ledger_ids and entry_ids differ in length",
                                )
                            )
                        )
                        continue
                    positions = list(zip(ack.ledger_ids, ack.entry_ids, strict=True))
                    try:
                        if ack.batch_acks:
                            sub.ack_batch_indexes(
                                [
                                    ((b.ledger_id, b.entry_id), b.batch_size, list(b.indexes))
                                    for b in ack.batch_acks
                                ],
                                consumer,
                            )
                        sub.ack(positions, ack.ack_type == broker_pb2.CUMULATIVE, consumer)
                    except BrokerError as exc:
                        consumer.deliver(broker_pb2.ConsumerResponse(ack_error=exc.to_proto()))
                elif kind == "seek":
                    try:
                        await self._seek(sub, req.seek)
                    except Exception as exc:
                        consumer.deliver(broker_pb2.ConsumerResponse(request_error=error_of(exc)))
                        continue
                    consumer.deliver(broker_pb2.ConsumerResponse(seek_done=broker_pb2.SeekDone()))
                elif kind == "get_last_message_id":
                    ledger_id, entry_id = sub.topic.last_position
                    consumer.deliver(
                        broker_pb2.ConsumerResponse(
                            last_message_id=broker_pb2.LastMessageId(
                                message_id=id_data(ledger_id if entry_id >= 0 else -1, entry_id)
                            )
                        )
                    )
                elif kind == "redeliver":
                    r = req.redeliver
                    if len(r.ledger_ids) != len(r.entry_ids):
                        consumer.deliver(
                            broker_pb2.ConsumerResponse(
                                request_error=error(
                                    common_pb2.INVALID_ARGUMENT,
                                    "redeliver: ledger_ids and entry_ids differ in length",
                                )
                            )
                        )
                        continue
                    sub.redeliver_unacked(
                        consumer, list(zip(r.ledger_ids, r.entry_ids, strict=True))
                    )
                elif kind == "unsubscribe":
                    try:
                        await sub.topic.unsubscribe(consumer)
                    except BrokerError as exc:
                        consumer.deliver(broker_pb2.ConsumerResponse(request_error=exc.to_proto()))
                        continue
                    consumer.deliver(
                        broker_pb2.ConsumerResponse(unsubscribed=broker_pb2.Unsubscribed())
                    )
                    break
                elif kind == "close":
                    break
                else:
                    consumer.deliver(
                        broker_pb2.ConsumerResponse(
                            ack_error=error(common_pb2.INVALID_ARGUMENT, f"unexpected {kind!r}")
                        )
                    )
        except Exception as exc:
            log.debug("consumer stream %s ended: %s", consumer.name, exc)
        finally:
            consumer.closed = True
            consumer.outbox.put_nowait(None)
