"""Policy changes reach the topics: every broker watches the policy records
and its loaded topics apply what changed, without reloading.

Theory of operation. One metastore watch covers ``/admin/`` (namespace
policies and topic overrides). Whenever the watch (re)starts, every loaded
topic applies its policies again, which covers any change made while there
was no watch; after that each event re-applies the policies of the topics
it touches: a namespace's record touches its loaded topics, a topic's
override touches the topic and its partitions. A deleted namespace record
closes the namespace's topics here; any change of a namespace record makes
the broker read its bundle boundaries again (their cache carries the
record's version, which guards bundle acquisition against splits). A topic
loaded later reads its policies when it loads, so nothing is missed in
between. A failing watch is opened again after a bounded backoff. While the
watch runs, the namespace records topic loads read are kept in memory
(:mod:`broker.policy_cache`): its events drop the changed ones.

A namespace record also holds the namespace's bundle boundaries, which every
bundle split rewrites. An event whose record differs from the namespace's
previous event only in its boundaries, or in the mark a namespace's deletion
sets first (:func:`only_bundles_changed`), changes no policy and no grant:
the loaded topics are left as they are (applying
again would rebuild the policies of every loaded topic of the namespace:
ten thousand for a split of a crowded namespace). Applying a namespace's
change reads no topic's overrides: each loaded topic keeps those it read
(:meth:`broker.topics.TopicRegistry.reapply_policies`). The previous
records are those of this watch's events (the watch's start applies
everything), at most ``max_namespaces_cached`` of them. A namespace with
none kept compares with the copy in the policy cache, which is the record
its loaded topics applied when it is older than the event (it was read
after the record's previous event was handled, and any later change's event
would have dropped it): so the first split after a broker loaded a crowded
namespace applies nothing either. A namespace some topic failed to apply
applies again at its next event.

The same events keep authorization current: a changed namespace or tenant
record is forgotten by the authorizer, and the producers and consumers of
its topics are judged again (a revoked grant closes them).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections import OrderedDict

from broker.authorizer import BrokerAuthorizer
from broker.namespaces import NamespacePolicies
from broker.ownership import Ownership
from broker.topics import TopicRegistry
from metastore.client import MetastoreClient, WatchEvent
from protos import metadata_paths

log = logging.getLogger(__name__)

WATCH_PREFIX = "/admin/"
RETRY_S_MIN = 0.1
RETRY_S_MAX = 5.0


class PolicyWatch:
    def __init__(
        self,
        metastore: MetastoreClient,
        topics: TopicRegistry,
        ownership: Ownership,
        authorizer: BrokerAuthorizer,
    ) -> None:
        self.authorizer = authorizer
        self.metastore = metastore
        self.topics = topics
        self.ownership = ownership
        self.policy_cache = ownership.namespaces.policy_cache
        self.events = 0  # applied, for tests and logs
        self.records = NamespaceRecords(ownership.namespaces.settings.max_namespaces_cached)
        self._failures_seen = 0  # of topics.policy_failures

    async def run_forever(self) -> None:
        delay = RETRY_S_MIN
        while True:
            watch = self.metastore.watch(WATCH_PREFIX)
            try:
                await watch.started()
                self.records.clear()
                self._failures_seen = self.topics.policy_failures
                self.policy_cache.start()
                self.authorizer.forget()
                await self.authorizer.recheck(self.topics.topics.values())
                if not await self.topics.reapply_policies():
                    self.records.no_stand_ins()
                delay = RETRY_S_MIN
                async for event in watch:
                    await self.changed(event)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.policy_cache.stop()  # no watch: nothing kept can be trusted
                log.warning("the policy watch failed (%s); opening it again", exc)
                await asyncio.sleep(delay)  # a retry backoff, bounded by RETRY_S_MAX
                delay = min(delay * 2, RETRY_S_MAX)
            finally:
                self.policy_cache.stop()
                await watch.close()

    async def changed(self, event: WatchEvent) -> None:
        key = event.key
        if key.startswith(metadata_paths.POLICIES + "/"):
            # What the loaded topics applied, if this event is newer (a copy
            # read after the previous event of the record was handled: that
            # event would have dropped it).
            cached = self.policy_cache.peek(key)
            applied = cached.value if cached and cached.mod_revision < event.revision else None
            if self.topics.policy_failures != self._failures_seen:
                # Some topic failed to apply its policies (after its load,
                # or at a topic's own event): neither a copy nor a kept
                # event is what it applied.
                self._failures_seen = self.topics.policy_failures
                self.records.no_stand_ins()
            self.policy_cache.changed(key)
            namespace = key.removeprefix(metadata_paths.POLICIES + "/")
            # The cached boundaries carry the record's version, which
            # guards bundle acquisition against splits: read them again.
            self.ownership.forget_bundles(namespace)
            if self.records.only_bundles(namespace, event.type, event.value, applied):
                self.events += 1
                return
            self.authorizer.forget(namespace=namespace)
            await self.authorizer.recheck(self.topics.topics.values(), namespace=namespace)
            if event.type == "DELETE":
                self.ownership.namespaces.forget(namespace)
                self.ownership.forget_owned(namespace)
                await self.topics.close_namespace(namespace)
            elif not await self.topics.reapply_policies(namespace=namespace):
                # Not applied everywhere: the next event, bundles only or
                # not, applies the namespace again.
                self.records.forget(namespace)
            self.events += 1
        elif key.startswith(metadata_paths.TENANTS + "/"):
            tenant = key.removeprefix(metadata_paths.TENANTS + "/")
            self.authorizer.forget(tenant=tenant)
            await self.authorizer.recheck(self.topics.topics.values(), tenant=tenant)
            self.events += 1
        elif key.startswith(metadata_paths.TOPIC_POLICIES + "/"):
            name = metadata_paths.topic_of_policies_key(key)
            if name is not None:
                await self.topics.reapply_policies(topic=name)
                self.events += 1


class NamespaceRecords:
    """The record of each namespace's last watch event (at most ``max_entries``,
    oldest out first), to tell an event that changed only bundle boundaries.

    With no event of the namespace kept, the record the loaded topics
    applied stands in for it when the caller knows one (``applied``: the
    policy cache's copy, read after the namespace's previous event was
    handled; see :meth:`PolicyWatch.changed`). Never after some topic failed
    to apply a change: a namespace whose event was not applied everywhere
    keeps a mark until its next event, and if the bound pushes a mark out,
    or a topic failed to apply its policies anywhere else (the watch's
    start, a topic's own event, the second apply after a topic loaded), no
    namespace uses the stand-in until the watch starts again, and the
    events kept so far are forgotten (that topic may belong to any of
    them)."""

    def __init__(self, max_entries: int) -> None:
        self.max_entries = max_entries
        self._records: OrderedDict[str, bytes | None] = OrderedDict()  # None: not applied
        self._stand_ins = True

    def only_bundles(
        self, namespace: str, kind: str, value: bytes, applied: bytes | None = None
    ) -> bool:
        """Whether this event (``kind`` PUT or DELETE) changed only the
        namespace's bundles since its last one (or since ``applied``, see
        above); remembers it for the next."""
        kept = namespace in self._records
        before = self._records.pop(namespace, None)
        if kind == "DELETE":
            return False
        self._remember(namespace, value)
        if not kept and self._stand_ins:
            before = applied
        return before is not None and only_bundles_changed(before, value)

    def forget(self, namespace: str) -> None:
        """The namespace's last event was not applied everywhere: its next applies."""
        self._records.pop(namespace, None)
        self._remember(namespace, None)

    def no_stand_ins(self) -> None:
        """Some topic failed to apply the watch's start, or its policies
        elsewhere: every namespace's next event applies (until :meth:`clear`),
        whatever event of it was kept."""
        self._records.clear()
        self._stand_ins = False

    def clear(self) -> None:
        """The watch (re)started and applied everything."""
        self._records.clear()
        self._stand_ins = True

    def _remember(self, namespace: str, value: bytes | None) -> None:
        self._records[namespace] = value
        while len(self._records) > self.max_entries:
            _, pushed_out = self._records.popitem(last=False)
            if pushed_out is None:
                self._stand_ins = False


def only_bundles_changed(before: bytes, after: bytes) -> bool:
    """Whether two namespace records differ in their bundle boundaries or
    their deletion mark at most (same policies, grants and clusters); False
    for one that does not decode."""
    try:
        old, new = NamespacePolicies.decode(before), NamespacePolicies.decode(after)
    except Exception:  # not a record this broker reads: apply again, as for any change
        return False
    return dataclasses.replace(old, bundles=None, deleted=False) == dataclasses.replace(
        new, bundles=None, deleted=False
    )
