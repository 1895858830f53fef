"""The topics this broker serves: loading, closing, unloading and splitting
their bundles.

Theory of operation. A topic is served here only while this broker owns its
bundle (:class:`broker.ownership.Ownership`). The first request for a topic
loads it: the namespace must exist, a partitioned topic is served through
its partitions only, a persistent topic opens its managed ledger (which
recovers and fences the previous owner's ledger), turns deduplication on if
the namespace (else the broker) says so, and loads its cursors. Concurrent
requests for one topic share one load. At most ``max_topics`` topics are
served at once. Closing removes a topic from the registry first (so no new
request finds it), then closes it: its clients reconnect through a lookup.
A topic whose ledger another broker fenced is closed at once, and its bundle
forgotten, until a lookup says otherwise. The registry is what the load
manager and the admin service work with; it knows nothing of any client
protocol.
"""

from __future__ import annotations

import asyncio
import logging
import time

from bookie.ledger_client import LedgerClient
from broker import fan_out
from broker.bundles import BundleRange
from broker.compaction import CompactionService
from broker.entry_cache import EntryCache
from broker.errors import BrokerError
from broker.ledger_rules import RolloverPolicy
from broker.managed_ledger import ManagedLedger
from broker.message_counts import TableBudget
from broker.metrics import BrokerMetrics, TopicMetrics
from broker.namespaces import NamespacePolicies, Namespaces, being_deleted
from broker.non_persistent import NonPersistentTopic
from broker.ownership import Ownership, bundle_key
from broker.quota_enforcement import QuotaGuard
from broker.schema_registry import SchemaRegistry
from broker.settings import BrokerSettings
from broker.termination import load_termination
from broker.topic import Topic, TopicBase, apply_to_ledger
from metastore.client import MetastoreClient, Op, Stat
from protos import common_pb2, metadata_paths
from protos.topic_name import TopicName

log = logging.getLogger(__name__)

# A long pass applying policies lets the event loop run other work this often.
REAPPLY_STRIDE = 100

# A deleted topic's metastore records go in transactions of at most this many
# deletes (one fsynced write each rather than one per record).
DELETES_PER_TXN = 128


def rollover_policy(s: BrokerSettings) -> RolloverPolicy:
    return RolloverPolicy(
        max_entries=s.managed_ledger_max_entries_per_ledger,
        max_size_bytes=s.managed_ledger_max_size_per_ledger_mb * 1024 * 1024,
        min_time_s=s.managed_ledger_min_ledger_rollover_time_minutes * 60,
        max_time_s=s.managed_ledger_max_ledger_rollover_time_minutes * 60,
        inactive_rollover_s=s.managed_ledger_inactive_ledger_rollover_seconds,
    )


class TopicRegistry:
    def __init__(
        self,
        settings: BrokerSettings,
        metastore: MetastoreClient,
        ledgers: LedgerClient,
        namespaces: Namespaces,
        ownership: Ownership,
        metrics: BrokerMetrics,
    ) -> None:
        self.settings = settings
        self.metrics = metrics
        self.metastore = metastore
        self.ledgers = ledgers
        self.namespaces = namespaces
        self.ownership = ownership
        self.schemas = SchemaRegistry(metastore, settings.max_schema_versions_per_topic)
        self.compaction = CompactionService(metastore, ledgers, settings)
        self.topics: dict[str, TopicBase] = {}
        self._loading: dict[str, asyncio.Future] = {}
        # Topics whose records are being deleted: loads wait for it.
        self._deleting: dict[str, asyncio.Future] = {}
        # Topics whose policies changed while they were loading (they read
        # theirs before): they apply them again once loaded.
        self._changed_while_loading: set[str] = set()
        # Times a loaded topic failed to apply its policies (the policy watch
        # then trusts no stand-in record until it restarts).
        self.policy_failures = 0
        self.message_budget = TableBudget(settings.managed_ledger_message_counts_max_entries)
        self.cache = EntryCache(
            settings.managed_ledger_cache_size_mb * 1024 * 1024,
            settings.stats_update_frequency_in_secs,
        )
        self.closing = False
        self._background: set[asyncio.Task] = set()

    # ---------------------------------------------------------------- finding topics

    def _check_open(self) -> None:
        if self.closing:
            raise BrokerError("the broker is shutting down", common_pb2.SERVICE_NOT_READY)

    async def get_topic(self, name: TopicName) -> TopicBase:
        """The topic, loaded here if needed (NotOwnerError if another broker owns it)."""
        self._check_open()
        topic = self.topics.get(name.full_name)
        if topic is not None:
            return topic
        await self.ownership.ensure_owner(name)
        await self.deletion_done(name)  # loaded again once its records are gone
        topic = self.topics.get(name.full_name)  # (loaded while this waited)
        if topic is not None:
            return topic
        loading = self._loading.get(name.full_name)
        if loading is not None:
            return await asyncio.shield(loading)  # type: ignore[no-any-return]
        if len(self.topics) >= self.settings.max_topics:
            raise BrokerError(
                f"this broker already serves {len(self.topics)} topics "
                f"(max_topics = {self.settings.max_topics})",
                common_pb2.TOO_MANY_REQUESTS,
            )
        fut: asyncio.Future = asyncio.get_running_loop().create_future()
        self._loading[name.full_name] = fut
        loads = self.metrics.topic_loads
        loads.pending += 1
        started = time.monotonic()
        try:
            topic = await self._load(name)
        except BaseException as exc:
            loads.failures += 1
            self._changed_while_loading.discard(name.full_name)
            fut.set_exception(exc)
            fut.exception()  # retrieved: waiters re-raise it
            raise
        finally:
            loads.pending -= 1
            self._loading.pop(name.full_name, None)
        loads.answers += 1
        loads.latency_ms.record((time.monotonic() - started) * 1000)
        self.topics[name.full_name] = topic
        fut.set_result(topic)
        if name.full_name in self._changed_while_loading:
            self._changed_while_loading.discard(name.full_name)
            try:
                found = await self.namespaces.read(name.namespace_name)
                if found is not None:
                    await self._reapply(topic, found[0], fresh=True)
            except Exception:
                self.policy_failures += 1
                log.exception("applying the policies of %s failed", name)
        return topic

    async def existing_topic(self, name: TopicName) -> TopicBase:
        """A topic that exists (admin calls): a non-persistent one only while
        it is active here, a persistent one if its managed ledger exists."""
        topic = self.topics.get(name.full_name)
        if topic is not None:
            return topic
        if not name.is_persistent:
            raise BrokerError(f"topic {name} is not active", common_pb2.TOPIC_NOT_FOUND)
        await self.deletion_done(name)  # (an admin call does not make it anew)
        if not await self.namespaces.managed_ledger_exists(name):
            raise BrokerError(f"topic {name} does not exist", common_pb2.TOPIC_NOT_FOUND)
        return await self.get_topic(name)

    async def _stored(self, name: TopicName, read: bool, record: Stat | None) -> bool:
        """Whether ``name``'s ledger list exists (``record``, if ``read``)."""
        if read or not name.is_persistent:
            return record is not None
        return await self.namespaces.managed_ledger_exists(name)

    def active_names(self) -> list[TopicName]:
        return [t.name for t in self.topics.values()]

    async def _load(self, name: TopicName) -> TopicBase:
        stored = name.is_persistent and not name.is_system  # the cluster's own are made as needed
        # The records a load needs are independent of each other: one round trip.
        found, partitioned, overrides, record = await asyncio.gather(
            self.namespaces.read(name.namespace_name, cached=True),
            self.namespaces.check_partitioned(name),
            self.namespaces.topic_policies(name.partitioned_topic_name),
            self.metastore.get(metadata_paths.managed_ledger(name)) if stored else _nothing(),
            return_exceptions=True,
        )
        if isinstance(found, BaseException):
            raise found
        if found is None:  # (before any other answer, as when they were read in turn)
            raise BrokerError(
                f"{name}: namespace {name.namespace_name} does not exist",
                common_pb2.TOPIC_NOT_FOUND,
            )
        for failed in (partitioned, overrides, record):
            if isinstance(failed, BaseException):
                raise failed
        assert not isinstance(overrides, BaseException) and not isinstance(record, BaseException)
        if found[0].deleted and not await self._stored(name, stored, record):
            raise being_deleted(name.namespace_name)  # (a stored one loads, so that it can go)
        policies = self.namespaces.applied_with(name, found[0], overrides)
        if not name.is_persistent:
            plain = NonPersistentTopic(name, self.settings, self.metrics.topic(name))
            plain.overrides = overrides
            await plain.apply_policies(policies)
            return plain
        if stored and record is None:
            await self.namespaces.check_may_create(name, policies)
        metrics = self.metrics.topic(name)
        ledger = self._managed_ledger(name, metrics)
        apply_to_ledger(ledger, policies)  # before it opens: its first ledger follows them
        try:
            await ledger.open(read=not stored, record=record)
            topic = Topic(name, ledger, self.settings, self.metastore, metrics)
            topic.overrides = overrides
            ledger.on_fenced = lambda: self.topic_moved(topic, "another broker fenced its ledger")
            topic.gate = QuotaGuard(topic)
            cursors: list[str] = []
            if not (stored and record is None):  # a topic just made has no cursor, no end
                _, cursors = await asyncio.gather(load_termination(topic), ledger.cursor_names())
            await topic.apply_policies(policies)
            await topic.load_cursors(cursors)
        except BaseException:
            ledger.message_counts.release()
            self.metrics.topic_closed(name, None)  # its counters wait for the next load
            raise
        return topic

    def _managed_ledger(self, name: TopicName, metrics: TopicMetrics) -> ManagedLedger:
        s = self.settings
        return ManagedLedger(
            name,
            self.metastore,
            self.ledgers,
            ensemble_size=s.managed_ledger_default_ensemble_size,
            write_quorum=s.managed_ledger_default_write_quorum,
            ack_quorum=s.managed_ledger_default_ack_quorum,
            rollover=rollover_policy(s),
            cache=self.cache,
            max_outstanding_adds=s.managed_ledger_max_outstanding_adds,
            failed_add_hold_s=s.managed_ledger_failed_add_hold_seconds,
            metrics=metrics,
            message_budget=self.message_budget,
        )

    # ---------------------------------------------------------------- policies

    async def reapply_policies(
        self, namespace: str | None = None, topic: TopicName | None = None
    ) -> bool:
        """Policies changed (of ``namespace``, of ``topic`` and its
        partitions, or of anything when both are None): the loaded topics
        they touch apply them again, without reloading. A namespace's change
        alone keeps each topic's overrides as it last read them (a change of
        those comes as its own event): no metastore read per topic, and the
        loop is let go every ``REAPPLY_STRIDE`` topics. False when any
        topic failed to apply them (logged)."""

        def touched(name: TopicName) -> bool:
            if namespace is not None and name.namespace_name != namespace:
                return False
            return topic is None or name.partitioned_topic_name == topic

        fresh = namespace is None or topic is not None  # else the overrides are current
        self._changed_while_loading.update(n for n in self._loading if touched(TopicName.parse(n)))
        namespaces: dict[str, NamespacePolicies | None] = {}  # each read once
        applied, done = True, 0
        for loaded in list(self.topics.values()):
            name = loaded.name
            if not touched(name):
                continue
            done += 1
            try:
                if name.namespace_name not in namespaces:
                    found = await self.namespaces.read(name.namespace_name)
                    namespaces[name.namespace_name] = None if found is None else found[0]
                ns = namespaces[name.namespace_name]
                if ns is not None:  # else deleted: its topics are closing
                    await self._reapply(loaded, ns, fresh)
            except Exception:
                applied = False
                self.policy_failures += 1
                log.exception("applying the policies of %s failed", name)
            if done % REAPPLY_STRIDE == 0:
                await asyncio.sleep(0)  # other work between strides of a long pass
        return applied

    async def _reapply(self, loaded: TopicBase, ns: NamespacePolicies, fresh: bool) -> None:
        """``loaded`` applies ``ns`` with its overrides, read again if
        ``fresh`` or if the last read failed; of reads that overlap, only the
        latest started (which sees the newest record) is applied."""
        name = loaded.name
        if fresh or loaded.overrides_stale:
            loaded.overrides_stale = True  # until a read lands
            loaded.overrides_reads += 1
            mine = loaded.overrides_reads
            found = await self.namespaces.topic_policies(name.partitioned_topic_name)
            if loaded.overrides_reads != mine:
                return  # a later read applies what it found
            loaded.overrides, loaded.overrides_stale = found, False
        await loaded.apply_policies(self.namespaces.applied_with(name, ns, loaded.overrides))

    # ---------------------------------------------------------------- closing

    async def _close(self, topics: list[TopicBase]) -> None:
        """Stop serving these topics (no longer found, then closed,
        ``max_concurrent_topic_closes`` at a time)."""
        for topic in topics:
            if self.topics.get(topic.name.full_name) is topic:
                del self.topics[topic.name.full_name]
            self.compaction.topic_closed(topic.name)
        await fan_out.for_each(topics, self.settings.max_concurrent_topic_closes, self._close_one)

    async def _close_one(self, topic: TopicBase) -> None:
        try:
            await topic.close()
        except Exception:
            log.exception("closing %s", topic.name)
        finally:
            self.metrics.topic_closed(topic.name, set(topic.subscriptions))

    async def delete_topic(self, topic: TopicBase, force: bool) -> None:
        """Delete a topic served here: refused while producers or consumers
        are connected unless ``force`` (they are closed). A persistent
        topic's ledgers, cursors, deduplication snapshot and policy
        overrides go with it; its clients' reconnection finds no topic
        (or, where topics are created on first use, a new empty one)."""
        connected = len(topic.producers) + sum(
            len(sub.consumers) for sub in topic.subscriptions.values()
        )
        if connected and not force:
            raise BrokerError(
                f"{topic.name} has {connected} producer(s) and consumer(s) connected; "
                "close them first or delete with --force",
                common_pb2.PRECONDITION_FAILED,
            )
        # Until its records are gone the topic is not loaded again (a
        # producer reconnecting in between would write to a ledger that the
        # deletion then unlists): a load waits for them to go.
        key = topic.name.full_name
        if key in self._deleting:  # being deleted by another call
            await asyncio.shield(self._deleting[key])
            if topic.name.is_persistent and await self.namespaces.managed_ledger_exists(topic.name):
                raise BrokerError(
                    f"{topic.name}: another deletion of it failed; delete it again",
                    common_pb2.CONFLICT,
                )
            raise BrokerError(f"topic {topic.name} does not exist", common_pb2.TOPIC_NOT_FOUND)
        done = self._deleting[key] = asyncio.get_running_loop().create_future()
        try:
            ledger_ids = await self._delete_records(topic)
        finally:
            del self._deleting[key]
            done.set_result(None)
        # What nothing refers to any more: a failure here leaves space, not a topic.
        for ledger_id in ledger_ids:
            try:
                await self.ledgers.delete_ledger(ledger_id)
            except Exception:
                log.exception("deleting ledger %d of %s", ledger_id, topic.name)
        try:
            await self.compaction.forget(topic.name)
        except Exception:
            log.exception("deleting the compacted ledgers of %s", topic.name)
        log.info("%s deleted", topic.name)

    async def deletion_done(self, name: TopicName) -> None:
        """Return once no deletion of ``name``'s records is under way here."""
        deleting = self._deleting.get(name.full_name)
        if deleting is not None:
            await asyncio.shield(deleting)

    async def _delete_records(self, topic: TopicBase) -> list[int]:
        """Close ``topic`` and delete its records; the ledgers to delete."""
        cursors = list(topic.subscriptions)
        await self._close([topic])
        self.metrics.forget_topic(topic.name)
        if not isinstance(topic, Topic):
            return []
        name = topic.name
        # Cursors and the end mark go before the ledger list: a topic whose list
        # is missing has neither (a load that makes the list reads neither).
        keys = [topic.ledger.cursor_key(cursor) for cursor in cursors]
        keys += [
            metadata_paths.terminated(name),
            metadata_paths.managed_ledger(name),
            metadata_paths.dedup_snapshot(name),
            metadata_paths.topic_policies(name),
        ]
        await self.delete_keys(keys)
        return list(topic.ledger.ledger_ids)

    async def delete_keys(self, keys: list[str]) -> None:
        """Delete ``keys`` in order, in transactions of ``DELETES_PER_TXN``."""
        for start in range(0, len(keys), DELETES_PER_TXN):
            chunk = keys[start : start + DELETES_PER_TXN]
            await self.metastore.txn([], [Op(key) for key in chunk])

    async def purge_leftovers(self, name: TopicName) -> None:
        """Delete the records left under a topic whose ledger list is gone
        (a cursor written after its deletion): the namespace lists it
        while any is there."""
        records, _ = await self.metastore.list_prefix(metadata_paths.managed_ledger(name) + "/")
        await self.delete_keys([r.key for r in records])

    def topic_moved(self, topic: TopicBase, why: str) -> None:
        """Another broker took ``topic`` (its ledger was fenced under us):
        stop serving it and its bundle until a lookup says otherwise."""
        if self.topics.get(topic.name.full_name) is not topic:
            return
        log.warning("%s: %s; closing it here", topic.name, why)
        key = self.ownership.cached_bundle_key(topic.name)
        if key is not None:
            self.ownership.owned.pop(key, None)
        task = asyncio.get_running_loop().create_task(self._close([topic]))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def unload_bundle(self, key: str) -> None:
        """Release an owned bundle: its topics close (clients reconnect
        through a lookup), then the bundle is free for the next lookup."""

        async def close_topics() -> None:
            await self._close(
                [
                    topic
                    for topic in list(self.topics.values())
                    if (await self.ownership.bundle_of(topic.name))[0] == key
                ]
            )

        await self.ownership.release(key, close_topics)

    async def split_bundle(self, namespace: str, bundle: BundleRange, unload: bool) -> list[str]:
        """Split a bundle this broker owns; with ``unload`` both halves are
        released at once so the leader can place them anywhere."""
        halves = await self.ownership.split(namespace, bundle)
        if unload:
            for half in halves:
                await self.unload_bundle(bundle_key(namespace, half))
        return [h.name for h in halves]

    async def close_namespace(self, namespace: str) -> None:
        """The namespace was deleted: stop serving its topics here."""
        await self._close([t for t in self.topics.values() if t.name.namespace_name == namespace])

    async def unload_all(self) -> None:
        """Graceful shutdown: hand every bundle back before stopping."""
        for key in list(self.ownership.owned):
            try:
                await self.unload_bundle(key)
            except Exception:
                log.exception("unloading %s", key)

    async def drop_all(self, why: str) -> None:
        """Close every topic (clients reconnect through a lookup)."""
        if self.topics:
            log.warning("closing %d topics: %s", len(self.topics), why)
        await self._close(list(self.topics.values()))

    async def close_all(self) -> None:
        self.closing = True
        await self._close(list(self.topics.values()))


async def _nothing() -> Stat | None:
    return None
