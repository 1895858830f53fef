"""Which broker serves which bundle, and lookups (DESIGN §5).

Theory of operation. A bundle is owned by the broker whose record at
``/namespace/{tenant}/{ns}/{0xLOWER_0xUPPER}`` says ``owned`` by it. The
record is ephemeral on that broker's metastore session, so it vanishes when
the broker dies; it is created with compare-and-set (version -1), so of two
brokers racing for a bundle exactly one wins (the record goes from free to
owned in one atomic step: the assignment is the create itself).

A lookup of a topic answers the owner of its bundle. For an unowned bundle,
the broker asked picks the least loaded broker (:func:`broker.load_decisions.place`
over the reports under ``/loadbalance/brokers/``, counting the bundles each
already owns): itself, and it takes the bundle at once; or another, and it
answers a redirect marked authoritative, so that broker takes it without
asking again. Lookups of one bundle on one broker are coalesced. A broker
serves a topic only if it owns the topic's bundle; otherwise it answers
``NOT_OWNER`` with the owner's address.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from broker.bundle_state import BundleRecord, BundleState, transition
from broker.bundles import BundleRange, NamespaceBundles
from broker.load_decisions import BrokerLoad, place
from protos import common_pb2
from protos.errors import MagnetarServerError
from protos.topic_name import TopicName

if TYPE_CHECKING:
    from broker.settings import BrokerSettings
    from metastore.client import MetastoreClient, Session

log = logging.getLogger(__name__)

BROKERS_PREFIX = "/loadbalance/brokers/"
# How much one owned bundle weighs against a broker's usage when placing.
BUNDLE_WEIGHT = 0.01


class NotOwnerError(MagnetarServerError):
    code = common_pb2.NOT_OWNER

    def __init__(self, message: str, owner: str) -> None:
        super().__init__(message)
        self.owner = owner

    def to_proto(self) -> common_pb2.Error:
        err = super().to_proto()
        err.leader = self.owner
        return err


def bundle_key(name: TopicName, bundle: BundleRange) -> str:
    return f"/namespace/{name.tenant}/{name.namespace}/{bundle.name}"


class Ownership:
    def __init__(self, metastore: MetastoreClient, address: str, settings: BrokerSettings) -> None:
        self.metastore = metastore
        self.address = address
        self.settings = settings
        self.session: Session | None = None
        self.owned: dict[str, BundleRange] = {}  # bundle key -> range
        self._bundles: dict[str, NamespaceBundles] = {}  # tenant/ns -> bundles
        self._inflight: dict[str, asyncio.Future] = {}

    async def bundles_of(self, name: TopicName) -> NamespaceBundles:
        ns = name.namespace_name
        cached = self._bundles.get(ns)
        if cached is not None:
            return cached
        stat = await self.metastore.get(f"/admin/policies/{ns}")
        if stat is None:
            raise MagnetarServerError(f"namespace {ns} does not exist", common_pb2.TOPIC_NOT_FOUND)
        policy = json.loads(stat.value).get("bundles")
        bundles = NamespaceBundles.from_policy(
            policy, self.settings.default_number_of_namespace_bundles
        )
        if len(self._bundles) < self.settings.max_namespaces_cached:
            self._bundles[ns] = bundles
        return bundles

    async def bundle_of(self, name: TopicName) -> tuple[str, BundleRange]:
        bundle = (await self.bundles_of(name)).bundle_for_topic(name.full_name)
        return bundle_key(name, bundle), bundle

    async def lookup(self, name: TopicName, authoritative: bool) -> tuple[str, bool]:
        """(broker address, is it a redirect to a broker that should take it)."""
        key, bundle = await self.bundle_of(name)
        running = self._inflight.get(key)
        if running is not None:
            return await asyncio.shield(running)  # type: ignore[no-any-return]
        fut: asyncio.Future = asyncio.get_running_loop().create_future()
        self._inflight[key] = fut
        try:
            answer = await self._lookup(key, bundle, authoritative)
        except BaseException as exc:
            fut.set_exception(exc)
            fut.exception()  # retrieved: coalesced waiters re-raise it
            raise
        finally:
            self._inflight.pop(key, None)
        fut.set_result(answer)
        return answer

    async def _lookup(self, key: str, bundle: BundleRange, authoritative: bool) -> tuple[str, bool]:
        owner, version, last_owner = await self._read(key)
        if owner is not None:
            if owner == self.address:
                self.owned[key] = bundle
            return owner, False
        if not authoritative:
            candidate = await self.candidate(avoid=last_owner)
            if candidate is not None and candidate != self.address:
                return candidate, True
        return await self._acquire(key, bundle, version), False

    async def _read(self, key: str) -> tuple[str | None, int, str | None]:
        """(owning broker or None, the version a new owner creates against,
        the last owner of a free bundle)."""
        stat = await self.metastore.get(key)
        if stat is None:
            return None, -1, None
        record = BundleRecord.decode(stat.value)
        if record.state == BundleState.FREE:
            return None, stat.version, record.broker
        mine = self.session.id if self.session is not None else 0
        if stat.session_id != mine and (
            record.broker == self.address or self.settings.take_over_stale_bundles
        ):
            # An earlier run of this broker (same address: that process is
            # gone), or standalone's only broker: the record is stale.
            try:
                await self.metastore.delete(key, expected_version=stat.version)
                log.info(
                    "%s took over stale bundle record %s of %s", self.address, key, record.broker
                )
            except MagnetarServerError as exc:
                if exc.code != common_pb2.BAD_VERSION:
                    raise
            return await self._read(key)
        if record.state != BundleState.OWNED:
            raise MagnetarServerError(
                f"bundle {key} is {record.state.value}; retry the lookup",
                common_pb2.SERVICE_NOT_READY,
            )
        return record.broker, -1, None

    async def _acquire(self, key: str, bundle: BundleRange, expected_version: int) -> str:
        """Create the owned record (over a free one at ``expected_version``)."""
        assert self.session is not None, "the broker has no metastore session yet"
        record = BundleRecord(BundleState.OWNED, self.address)
        try:
            await self.metastore.put(
                key, record.encode(), expected_version=expected_version, session_id=self.session.id
            )
        except MagnetarServerError as exc:
            if exc.code != common_pb2.BAD_VERSION:
                raise
            owner, _, _ = await self._read(key)  # another broker won the race
            if owner is None:
                raise MagnetarServerError(
                    f"bundle {key} changed hands during the lookup; retry",
                    common_pb2.SERVICE_NOT_READY,
                ) from None
            return owner
        self.owned[key] = bundle
        log.info("%s now owns bundle %s", self.address, key)
        return self.address

    async def candidate(self, avoid: str | None = None) -> str | None:
        """The least loaded live broker (bundles owned count a little), not
        ``avoid`` (the broker that just unloaded the bundle) unless it is alone."""
        if self.settings.take_over_stale_bundles:
            return self.address  # standalone: the only broker
        reports, _ = await self.metastore.list_prefix(BROKERS_PREFIX)
        owned, _ = await self.metastore.list_prefix("/namespace/")
        counts: dict[str, int] = {}
        for r in owned:
            try:
                holder = BundleRecord.decode(r.value).broker
            except (ValueError, KeyError):
                continue
            counts[holder] = counts.get(holder, 0) + 1
        loads = []
        for r in reports:
            try:
                report = json.loads(r.value)
            except ValueError:
                continue
            loads.append(
                BrokerLoad(
                    str(report.get("address", r.key[len(BROKERS_PREFIX) :])),
                    cpu=float(report.get("cpu", 0.0)),
                    memory=float(report.get("memory", 0.0)),
                )
            )
        others = [b for b in loads if b.broker != avoid]
        return place(others or loads, counts, BUNDLE_WEIGHT)

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

    async def ensure_owner(self, name: TopicName) -> None:
        """Serve ``name`` only if this broker owns its bundle (taking an unowned
        one, as the client was sent here by a lookup); else NotOwnerError."""
        key, _ = await self.bundle_of(name)
        if key in self.owned:
            return
        owner, _ = await self.lookup(name, authoritative=True)
        if owner != self.address:
            raise NotOwnerError(f"{name} is served by broker {owner}, not {self.address}", owner)

    def lost(self) -> None:
        """The session is gone: every ownership record went with it."""
        if self.owned:
            log.warning(
                "%s lost its metastore session and its %d bundles", self.address, len(self.owned)
            )
        self.owned.clear()
