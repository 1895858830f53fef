"""Which broker serves which bundle, and lookups (DESIGN §5).

Theory of operation. A bundle is owned by the broker whose record at
``/namespace/{tenant}/{ns}/{0xLOWER_0xUPPER}`` says ``owned`` by it; every
record this module writes comes from the transition table of
:mod:`broker.bundle_state`, whose docstring says how ephemeral records undo
a move or split cut short by a crash. Owning is the compare-and-set create
of the owned record over a free one, so of two brokers racing for a bundle
exactly one wins.

A lookup of a topic answers the owner of its bundle: a bundle this broker
owns (while its session lives) is answered from memory, any other from its
record. An unowned bundle is
placed by the load manager leader (the broker named at
``/loadbalance/leader``): any other broker redirects the lookup there; the
leader picks the least loaded broker (:func:`broker.load_decisions.place`
over the reports under ``/loadbalance/brokers/``, counting the bundles each
already owns) and either takes the bundle itself or answers a redirect
marked authoritative, so that broker takes it without asking again. With no
leader, the broker asked decides. Lookups of one bundle on one broker are
coalesced. A broker serves a topic only if it owns the topic's bundle;
otherwise it answers ``NOT_OWNER`` with the owner's address.

Splitting. The owner moves the record owned -> splitting, then in one
metastore transaction (which holds only if neither the namespace policy nor
the record changed meanwhile) writes the new boundaries, owns both halves
and leaves the parent as a ``deleted`` tombstone. A broker whose cached
boundaries are older finds the tombstone, or fails the compare on the
policy version when it tries to take a bundle, and reloads them; so no two
brokers ever own overlapping ranges.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from broker.bundle_state import FREE, BundleRecord, BundleState, is_stale, transition
from broker.bundles import BundleRange, NamespaceBundles
from broker.load_decisions import ResourceWeights, broker_load_from_report, place
from broker.namespaces import Namespaces
from metastore.client import Compare, Op
from protos import common_pb2, metadata_paths
from protos.errors import MagnetarServerError
from protos.topic_name import TopicName

if TYPE_CHECKING:
    from broker.settings import BrokerSettings
    from metastore.client import MetastoreClient, Session

log = logging.getLogger(__name__)

# Compare-and-set attempts of one split on the namespace policy.
SPLIT_ATTEMPTS = 10


class NotOwnerError(MagnetarServerError):
    code = common_pb2.NOT_OWNER

    def __init__(self, message: str, owner: str) -> None:
        super().__init__(message)
        self.owner = owner

    def to_proto(self) -> common_pb2.Error:
        err = super().to_proto()
        err.leader = self.owner
        return err


class BundleSplitError(Exception):
    """The bundle was split: the namespace's cached boundaries are stale."""


@dataclass(frozen=True)
class LookupAnswer:
    broker: str
    redirect: bool = False  # ask ``broker`` again
    authoritative: bool = False  # ... and it should take the bundle without asking further


def bundle_key(namespace: str, bundle: BundleRange) -> str:
    return metadata_paths.bundle(namespace, bundle.name)


def resource_weights(settings: BrokerSettings) -> ResourceWeights:
    return ResourceWeights(
        settings.load_balancer_cpu_resource_weight,
        settings.load_balancer_memory_resource_weight,
        settings.load_balancer_bandwidth_in_resource_weight,
        settings.load_balancer_bandwidth_out_resource_weight,
    )


def decode_leader(value: bytes) -> str:
    return str(json.loads(value)["address"])


class Ownership:
    def __init__(
        self,
        metastore: MetastoreClient,
        namespaces: Namespaces,
        address: str,
        settings: BrokerSettings,
    ) -> None:
        self.metastore = metastore
        self.namespaces = namespaces
        self.address = address
        self.settings = settings
        self.session: Session | None = None
        self.owned: dict[str, BundleRange] = {}  # bundle key -> range
        # tenant/ns -> (bundles, version of the policy they were read from)
        self._bundles: dict[str, tuple[NamespaceBundles, int]] = {}
        self._inflight: dict[str, asyncio.Future] = {}

    # ------------------------------------------------------------ boundaries

    async def bundles_of(self, namespace: str, fresh: bool = False) -> NamespaceBundles:
        return (await self._bundles_and_version(namespace, fresh))[0]

    async def _bundles_and_version(self, ns: str, fresh: bool) -> tuple[NamespaceBundles, int]:
        cached = self._bundles.get(ns)
        if cached is not None and not fresh:
            return cached
        found = await self.namespaces.read(ns)
        if found is None:
            raise MagnetarServerError(f"namespace {ns} does not exist", common_pb2.TOPIC_NOT_FOUND)
        policies, version = found
        bundles = policies.bundles_or_default(self.settings.default_number_of_namespace_bundles)
        self._cache_bundles(ns, bundles, version)
        return bundles, version

    def _cache_bundles(self, ns: str, bundles: NamespaceBundles, version: int) -> None:
        if ns in self._bundles or len(self._bundles) < self.settings.max_namespaces_cached:
            self._bundles[ns] = (bundles, version)

    def forget_bundles(self, ns: str) -> None:
        self._bundles.pop(ns, None)

    def forget_owned(self, ns: str) -> None:
        """A deleted namespace: none of its bundles is this broker's any more."""
        prefix = metadata_paths.bundles_of(ns) + "/"
        for key in [k for k in self.owned if k.startswith(prefix)]:
            del self.owned[key]

    async def forget_namespace(self, ns: str) -> None:
        """A deleted namespace: its bundle records (released first) go."""
        self.forget_bundles(ns)
        self.forget_owned(ns)
        for name in await self.metastore.children(metadata_paths.bundles_of(ns)):
            await self.metastore.delete(metadata_paths.bundle(ns, name))

    def cached_bundles(self, ns: str) -> NamespaceBundles | None:
        """A namespace's cached boundaries (None if not cached)."""
        cached = self._bundles.get(ns)
        return None if cached is None else cached[0]

    def cached_bundle_key(self, name: TopicName) -> str | None:
        """The bundle key of a topic from cached boundaries (None if not cached)."""
        boundaries = self.cached_bundles(name.namespace_name)
        if boundaries is None:
            return None
        return bundle_key(name.namespace_name, boundaries.bundle_for_topic(name.full_name))

    async def bundle_of(self, name: TopicName) -> tuple[str, BundleRange]:
        ns = name.namespace_name
        bundle = (await self.bundles_of(ns)).bundle_for_topic(name.full_name)
        return bundle_key(ns, bundle), bundle

    # ------------------------------------------------------------ lookups

    async def lookup(self, name: TopicName, authoritative: bool) -> LookupAnswer:
        # Twice at most: the namespace may have been split since it was cached.
        for _ in range(2):
            key, bundle = await self.bundle_of(name)
            if key in self.owned and not self.detached():
                return LookupAnswer(self.address)  # its record is this broker's own
            try:
                return await self._coalesced(name.namespace_name, key, bundle, authoritative)
            except BundleSplitError:
                self.forget_bundles(name.namespace_name)
        raise MagnetarServerError(
            f"the bundles of {name.namespace_name} are changing; retry the lookup",
            common_pb2.SERVICE_NOT_READY,
        )

    async def _coalesced(
        self, ns: str, key: str, bundle: BundleRange, authoritative: bool
    ) -> LookupAnswer:
        running = self._inflight.get(key)
        if running is not None:
            return await asyncio.shield(running)  # type: ignore[no-any-return]
        fut: asyncio.Future = asyncio.get_running_loop().create_future()
        self._inflight[key] = fut
        try:
            answer = await self._lookup(ns, key, bundle, authoritative)
        except BaseException as exc:
            fut.set_exception(exc)
            fut.exception()  # retrieved: coalesced waiters re-raise it
            raise
        finally:
            self._inflight.pop(key, None)
        fut.set_result(answer)
        return answer

    async def leader(self) -> str | None:
        stat = await self.metastore.get(metadata_paths.LOAD_BALANCE_LEADER)
        if stat is None:
            return None
        try:
            return decode_leader(stat.value)
        except (ValueError, KeyError):
            return None

    async def _lookup(
        self, ns: str, key: str, bundle: BundleRange, authoritative: bool
    ) -> LookupAnswer:
        owner, version, last_owner = await self._read(key)
        if owner is not None:
            if owner == self.address:
                self.owned[key] = bundle
            return LookupAnswer(owner)
        if not authoritative and not self.settings.take_over_stale_bundles:
            leader = await self.leader()
            if leader is not None and leader != self.address:
                return LookupAnswer(leader, redirect=True)  # the leader places it
            candidate = await self.candidate(avoid=last_owner)
            if candidate is not None and candidate != self.address:
                return LookupAnswer(candidate, redirect=True, authoritative=True)
        return LookupAnswer(await self._acquire(ns, key, bundle, version))

    async def _read(self, key: str) -> tuple[str | None, int, str | None]:
        """(owning broker or None, the version a new owner creates against,
        the last owner of a free bundle)."""
        stat = await self.metastore.get(key)
        if stat is None:
            return None, -1, None
        record = BundleRecord.decode(stat.value)
        if record.state == BundleState.FREE:
            return None, stat.version, record.broker
        if record.state == BundleState.DELETED:
            raise BundleSplitError(key)
        mine = self.session.id if self.session is not None else 0
        if is_stale(
            record, stat.session_id, mine, self.address, self.settings.take_over_stale_bundles
        ):
            await self._expire(key, record, stat.version)
            return await self._read(key)
        if record.state != BundleState.OWNED:
            raise MagnetarServerError(
                f"bundle {key} is {record.state.value}; retry the lookup",
                common_pb2.SERVICE_NOT_READY,
            )
        return record.broker, -1, None

    async def _expire(self, key: str, record: BundleRecord, version: int) -> None:
        """Free a record an earlier run of this broker (or of standalone's
        only broker) left behind: that process is gone."""
        try:
            await self.metastore.put(
                key, transition(record, "expire").encode(), expected_version=version
            )
            log.info("%s took over stale bundle record %s of %s", self.address, key, record.broker)
        except MagnetarServerError as exc:
            if exc.code != common_pb2.BAD_VERSION:
                raise

    async def _acquire(self, ns: str, key: str, bundle: BundleRange, expected_version: int) -> str:
        """Create the owned record (over a free one at ``expected_version``),
        provided the namespace's boundaries are still the cached ones."""
        assert self.session is not None, "the broker has no metastore session yet"
        _, policy_version = await self._bundles_and_version(ns, fresh=False)
        owned = transition(FREE, "own", self.address)
        ok, _ = await self.metastore.txn(
            [
                self.namespaces.unchanged(ns, policy_version),
                Compare(key, version=expected_version),
            ],
            [Op(key, owned.encode(), self.session.id)],
        )
        if not ok:
            return await self._lost_race(ns, key, policy_version)
        self.owned[key] = bundle
        log.info("%s now owns bundle %s", self.address, key)
        return self.address

    async def _lost_race(self, ns: str, key: str, policy_version: int) -> str:
        found = await self.namespaces.read(ns)
        if found is None or found[1] != policy_version:
            raise BundleSplitError(key)
        owner, _, _ = await self._read(key)  # another broker won the race
        if owner is None:
            raise MagnetarServerError(
                f"bundle {key} changed hands during the lookup; retry",
                common_pb2.SERVICE_NOT_READY,
            )
        return owner

    async def own(self, namespace: str, bundle: BundleRange) -> str:
        """The owner of ``bundle``, taking it when it is free (admin calls)."""
        key = bundle_key(namespace, bundle)
        owner, version, _ = await self._read(key)
        if owner is not None:
            return owner
        return await self._acquire(namespace, key, bundle, version)

    async def ensure_owner(self, name: TopicName) -> None:
        """Serve ``name`` only if this broker owns its bundle (taking an unowned
        one, as the client was sent here by a lookup); else NotOwnerError."""
        key, _ = await self.bundle_of(name)
        if key in self.owned:
            return
        owner = (await self.lookup(name, authoritative=True)).broker
        if owner != self.address:
            raise NotOwnerError(f"{name} is served by broker {owner}, not {self.address}", owner)

    # ------------------------------------------------------------ splitting

    async def split(self, namespace: str, bundle: BundleRange) -> tuple[BundleRange, BundleRange]:
        """Split a bundle this broker owns into halves it owns (see the module
        docstring); returns the halves."""
        assert self.session is not None
        key = bundle_key(namespace, bundle)
        stat = await self.metastore.get(key)
        record = BundleRecord.decode(stat.value if stat is not None else None)
        if stat is None or record.state != BundleState.OWNED or record.broker != self.address:
            raise MagnetarServerError(
                f"bundle {key} is not owned by {self.address}", common_pb2.NOT_ALLOWED
            )
        splitting = transition(record, "split")
        version = await self.metastore.put(
            key, splitting.encode(), expected_version=stat.version, session_id=self.session.id
        )
        try:
            low, high = await self._split_in_policy(namespace, bundle, splitting, version)
        except BaseException:
            await self.metastore.put(
                key,
                transition(splitting, "abort").encode(),
                expected_version=version,
                session_id=self.session.id,
            )
            raise
        self.owned.pop(key, None)
        self.owned[bundle_key(namespace, low)] = low
        self.owned[bundle_key(namespace, high)] = high
        log.info("%s split bundle %s into %s and %s", self.address, key, low.name, high.name)
        return low, high

    async def _split_in_policy(
        self, ns: str, bundle: BundleRange, splitting: BundleRecord, version: int
    ) -> tuple[BundleRange, BundleRange]:
        """The split transaction, retried while only the policy moved."""
        assert self.session is not None
        key = bundle_key(ns, bundle)
        low, high = bundle.halves()
        owned = transition(FREE, "own", self.address).encode()
        for _ in range(SPLIT_ATTEMPTS):  # compare-and-set on the policy; bounded
            found = await self.namespaces.read(ns)
            if found is None:
                raise MagnetarServerError(f"namespace {ns} does not exist", common_pb2.NOT_ALLOWED)
            policies, policy_version = found
            bundles = policies.bundles_or_default(self.settings.default_number_of_namespace_bundles)
            if bundle not in bundles.bundles:
                raise MagnetarServerError(
                    f"{bundle.name} is no longer a bundle of {ns}", common_pb2.NOT_ALLOWED
                )
            after = bundles.split(bundle)
            ok, _ = await self.metastore.txn(
                [
                    self.namespaces.unchanged(ns, policy_version),
                    Compare(key, version=version),
                    Compare(bundle_key(ns, low), version=-1),
                    Compare(bundle_key(ns, high), version=-1),
                ],
                [
                    self.namespaces.write(ns, replace(policies, bundles=after)),
                    Op(bundle_key(ns, low), owned, self.session.id),
                    Op(bundle_key(ns, high), owned, self.session.id),
                    Op(key, transition(splitting, "done").encode()),  # tombstone
                ],
            )
            if ok:
                self.namespaces.policy_cache.changed(metadata_paths.namespace_policies(ns))
                self._cache_bundles(ns, after, policy_version + 1)
                return low, high
        raise MagnetarServerError(
            f"the policies of {ns} kept changing; the split of {bundle.name} gave up",
            common_pb2.SERVICE_NOT_READY,
        )

    # ------------------------------------------------------------ releasing

    async def release(self, key: str, close_topics: Callable[[], Awaitable[None]]) -> None:
        """Unload a bundle this broker owns: owned -> releasing (its topics
        close, so clients look them up again) -> free, remembering this
        broker as the last owner."""
        assert self.session is not None
        stat = await self.metastore.get(key)
        if stat is None:
            self.owned.pop(key, None)
            return
        record = BundleRecord.decode(stat.value)
        if record.state != BundleState.OWNED or record.broker != self.address:
            if record.broker != self.address:
                self.owned.pop(key, None)  # another broker's: not served here
            raise MagnetarServerError(
                f"bundle {key} is {record.state.value} by {record.broker or 'nobody'}, "
                f"not owned by {self.address}",
                common_pb2.NOT_ALLOWED,
            )
        releasing = transition(record, "release")
        version = await self.metastore.put(
            key, releasing.encode(), expected_version=stat.version, session_id=self.session.id
        )
        self.owned.pop(key, None)
        try:
            await close_topics()
        finally:
            free = transition(releasing, "free")
            await self.metastore.put(key, free.encode(), expected_version=version)
        log.info("%s released bundle %s", self.address, key)

    def detached(self) -> bool:
        """No live metastore session (lost, and no new one yet): this broker
        can neither own a bundle nor trust what it owned."""
        return self.session is None or self.session.lost

    def lost(self) -> None:
        """The session is gone: every ownership record went with it."""
        if self.owned:
            log.warning(
                "%s lost its metastore session and its %d bundles", self.address, len(self.owned)
            )
        self.owned.clear()

    # ------------------------------------------------------------ what admin calls see

    async def record_of(self, namespace: str, bundle: BundleRange) -> BundleRecord:
        stat = await self.metastore.get(bundle_key(namespace, bundle))
        return BundleRecord.decode(stat.value if stat is not None else None)

    async def bundle_records(self, namespace: str) -> list[tuple[BundleRange, BundleRecord]]:
        """Each bundle of ``namespace`` (fresh boundaries) with its record."""
        bundles = (await self.bundles_of(namespace, fresh=True)).bundles
        return [(bundle, await self.record_of(namespace, bundle)) for bundle in bundles]

    async def brokers(self) -> list[str]:
        """The live brokers: their (ephemeral) load reports."""
        records, _ = await self.metastore.list_prefix(metadata_paths.BROKER_LOADS)
        return sorted(r.key[len(metadata_paths.BROKER_LOADS) :] for r in records)

    # ------------------------------------------------------------ placement

    async def candidate(self, avoid: str | None = None) -> str | None:
        """The live broker to place a bundle on (:func:`place`: not
        overloaded, least message rate counting the bundles each owns), not
        ``avoid`` (the broker that just unloaded the bundle) unless it is alone."""
        if self.settings.take_over_stale_bundles:
            return self.address  # standalone: the only broker
        reports, _ = await self.metastore.list_prefix(metadata_paths.BROKER_LOADS)
        records, _ = await self.metastore.list_prefix(metadata_paths.BUNDLES)
        weights = resource_weights(self.settings)
        loads = []
        for r in reports:
            try:
                load = broker_load_from_report(
                    json.loads(r.value), r.key[len(metadata_paths.BROKER_LOADS) :]
                )
            except (ValueError, TypeError, AttributeError):
                continue
            load.smoothed_usage = weights.usage(load)
            loads.append(load)
        others = [b for b in loads if b.broker != avoid]
        return place(
            others or loads,
            _owned_counts(r.value for r in records),
            self.settings.load_balancer_broker_overloaded_threshold_percentage / 100,
        )


def _owned_counts(values: Any) -> dict[str, int]:
    """How many bundles each broker owns, from bundle record values."""
    counts: dict[str, int] = {}
    for value in values:
        try:
            record = BundleRecord.decode(value)
        except (ValueError, KeyError):
            continue
        if record.state == BundleState.OWNED:
            counts[record.broker] = counts.get(record.broker, 0) + 1
    return counts
