"""The load manager (DESIGN §5): load reports, the leader, shedding and
automatic bundle splits.

Theory of operation. Every ``load_balancer_report_interval_ms`` each broker
publishes its load report at ``/loadbalance/brokers/{address}`` (ephemeral
on its metastore session: the key is also its registration) and checks
``/loadbalance/leader``; when that key is missing it tries to create it,
ephemeral and with compare-and-set, so exactly one broker leads and a new
one takes over when the leader's session ends. The leader places unowned
bundles at lookup time (``ownership.py``), and every
``load_balancer_shedding_interval_minutes`` it:

* smooths each broker's usage (:class:`broker.load_decisions.UsageHistory`)
  and asks :func:`broker.load_decisions.shed` which bundles to unload from
  brokers above the average; the owner unloads them, and their next lookup
  is placed away from it. When a bundle was last moved is kept at
  ``/loadbalance/bundle-data/{tenant}/{ns}/{bundle}``, so a new leader honours
  the grace period too;
* asks :func:`broker.load_decisions.split_candidates` which bundles are over
  a split threshold; their owners split them (and unload the halves when
  another broker could take them: :func:`broker.load_decisions.unload_split_halves`).

Reports carry fractions (CPU of this process over all cores, resident memory
over the host's, message bytes over the NIC speed setting) and the load of
the busiest bundles (``load_balancer_max_number_of_bundles_in_bundle_load_report``). CPU and memory come from
psutil (the usual library for process figures).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time

import grpc
import psutil

from broker.bundles import BundleRange, NamespaceBundles
from broker.load_decisions import (
    BrokerLoad,
    BundleLoad,
    SplitThresholds,
    UsageHistory,
    broker_load_from_report,
    bundle_load_to_json,
    shed,
    split_candidates,
    unload_split_halves,
)
from broker.ownership import Ownership, bundle_key, resource_weights
from broker.pacing import Pacer
from broker.peer_brokers import PeerBrokers
from broker.settings import BrokerSettings
from broker.topics import TopicRegistry
from metastore.client import MetastoreClient
from protos import common_pb2, metadata_paths
from protos.errors import MagnetarServerError
from protos.serving import Listeners

log = logging.getLogger(__name__)

# The shortest interval a CPU figure is measured over.
CPU_SAMPLE_MIN_S = 1.0
# How long the leader waits for an owner to unload or split a bundle.
ADMIN_CALL_TIMEOUT_S = 60.0


class LoadManager:
    def __init__(
        self,
        settings: BrokerSettings,
        metastore: MetastoreClient,
        ownership: Ownership,
        topics: TopicRegistry,
        peers: PeerBrokers,
        listeners: Listeners | None = None,
    ) -> None:
        self.listeners = listeners or Listeners(plain=ownership.address)
        self.metastore = metastore
        self.peers = peers
        self.ownership = ownership
        self.topics = topics
        s = settings
        self.settings = s
        self.address = ownership.address
        self.is_leader = False
        self.history = UsageHistory(
            s.load_balancer_history_resource_percentage, resource_weights(s)
        )
        self.thresholds = SplitThresholds(
            max_topics=s.load_balancer_namespace_bundle_max_topics,
            max_sessions=s.load_balancer_namespace_bundle_max_sessions,
            max_msg_rate=s.load_balancer_namespace_bundle_max_msg_rate,
            max_bandwidth_bytes=s.load_balancer_namespace_bundle_max_bandwidth_mbytes * 1024 * 1024,
            max_bundles_per_namespace=s.load_balancer_namespace_maximum_bundles,
        )
        self._process = psutil.Process()
        self._process.cpu_percent(None)  # the first call only starts the measurement
        self._cores = psutil.cpu_count() or 1
        self._cpu = 0.0  # the last figure measured over at least CPU_SAMPLE_MIN_S
        self._cpu_since = time.monotonic()
        self._memory_total = psutil.virtual_memory().total
        self._nic_bytes_per_s = s.load_balancer_override_broker_nic_speed_gbps * 1e9 / 8
        self._last_round = time.monotonic()
        self.shed_rounds = 0
        self.last_report: dict | None = None  # what the pulsar_lb_* series show

    # ---------------------------------------------------------------- the report

    async def report(self) -> dict:
        """This broker's load report (the document under /loadbalance/brokers/).
        Its pass over the topics is paced (:mod:`broker.pacing`; with 10,000
        topics it is ~100 ms of work, which held the loop in one piece
        before the sixth session of issue 26)."""
        ownership = self.ownership
        bundles: dict[str, BundleLoad] = {
            metadata_paths.bundle_path(key): BundleLoad() for key in ownership.owned
        }
        (rate_in, rate_out, bytes_in, bytes_out), loads = await self._tally()
        bundles.update(loads)
        busiest = sorted(bundles.items(), key=lambda kv: (-kv[1].msg_rate, kv[0]))
        limit = self.settings.load_balancer_max_number_of_bundles_in_bundle_load_report
        return {
            "address": self.address,
            # Its ports (broker/broker_addresses.py): the TLS one, and whether
            # the name above is a plaintext port.
            "address_tls": self.listeners.tls,
            "plaintext": bool(self.listeners.plain),
            "cluster": self.settings.cluster_name,
            "cpu": self._cpu_usage(),
            "memory": self._process.memory_info().rss / self._memory_total,
            "bandwidthIn": bytes_in / self._nic_bytes_per_s,
            "bandwidthOut": bytes_out / self._nic_bytes_per_s,
            "msgRateIn": rate_in,
            "msgRateOut": rate_out,
            "msgThroughputIn": bytes_in,
            "msgThroughputOut": bytes_out,
            "numTopics": len(self.topics.topics),
            "numBundles": len(ownership.owned),
            "bundles": {name: bundle_load_to_json(load) for name, load in busiest[:limit]},
            "timestampMs": int(time.time() * 1000),
        }

    async def _tally(self) -> tuple[tuple[float, float, float, float], dict[str, BundleLoad]]:
        """The broker's rates in and out (messages, bytes), and the load of
        each bundle its topics are in, by bundle path; a topic of a namespace
        whose boundaries are not cached counts in the rates only. Per topic:
        its meters, a hash and a bisection; names are built per bundle, not
        per topic."""
        ownership = self.ownership
        tally: dict[tuple[str, int], BundleLoad] = {}  # (namespace, bundle index)
        known: dict[str, NamespaceBundles | None] = {}  # each looked up once
        rate_in = rate_out = bytes_in = bytes_out = 0.0
        pacer = Pacer()
        for topic in list(self.topics.topics.values()):
            await pacer.step()
            m_in, b_in = topic.meter_in.rates()
            m_out, b_out = topic.meter_out.rates()
            rate_in, rate_out = rate_in + m_in, rate_out + m_out
            bytes_in, bytes_out = bytes_in + b_in, bytes_out + b_out
            name = topic.name
            ns = name.namespace_name
            if ns not in known:
                known[ns] = ownership.cached_bundles(ns)
            boundaries = known[ns]
            if boundaries is None:
                continue
            at = (ns, boundaries.index_for_topic(name.full_name))
            load = tally.get(at)
            if load is None:
                load = tally[at] = BundleLoad()
            load.topics += 1
            load.sessions += len(topic.producers)
            if topic.subscriptions:
                load.sessions += sum(len(sub.consumers) for sub in topic.subscriptions.values())
            load.msg_rate_in += m_in
            load.msg_rate_out += m_out
            load.throughput_in += b_in
            load.throughput_out += b_out
        loads = {}
        for (ns, index), load in tally.items():
            boundaries = known[ns]
            assert boundaries is not None
            key = bundle_key(ns, boundaries.bundle_at(index))
            loads[metadata_paths.bundle_path(key)] = load
        return (rate_in, rate_out, bytes_in, bytes_out), loads

    def _cpu_usage(self) -> float:
        """This process's CPU over all cores since the last sample. A sample
        over a few milliseconds (the report at registration, right after
        start-up work) says nothing and would mark the broker overloaded:
        until CPU_SAMPLE_MIN_S has passed, the last figure stands."""
        now = time.monotonic()
        if now - self._cpu_since >= CPU_SAMPLE_MIN_S:
            self._cpu = self._process.cpu_percent(None) / 100 / self._cores
            self._cpu_since = now
        return self._cpu

    async def publish(self) -> None:
        session = self.ownership.session
        if session is None or session.lost:
            return
        report = await self.report()
        await self.metastore.put(
            metadata_paths.broker_load(self.address),
            json.dumps(report).encode(),
            session_id=session.id,
        )
        self.last_report = report

    # ---------------------------------------------------------------- leadership

    async def check_leader(self) -> None:
        session = self.ownership.session
        if session is None or session.lost:
            self.is_leader = False
            return
        stat = await self.metastore.get(metadata_paths.LOAD_BALANCE_LEADER)
        if stat is None:
            body = json.dumps({"address": self.address}).encode()
            try:
                await self.metastore.put(
                    metadata_paths.LOAD_BALANCE_LEADER,
                    body,
                    expected_version=-1,
                    session_id=session.id,
                )
            except MagnetarServerError as exc:
                if exc.code != common_pb2.BAD_VERSION:
                    raise
                stat = await self.metastore.get(metadata_paths.LOAD_BALANCE_LEADER)
            else:
                log.info("%s is now the load manager leader", self.address)
                self.is_leader = True
                self._last_round = time.monotonic()
                return
        leading = stat is not None and stat.session_id == session.id
        if self.is_leader and not leading:
            log.info("%s is no longer the load manager leader", self.address)
        self.is_leader = leading

    # ---------------------------------------------------------------- the loop

    async def run_forever(self) -> None:
        if not self.settings.load_balancer_enabled:
            return
        interval_s = self.settings.load_balancer_report_interval_ms / 1000
        round_s = self.settings.load_balancer_shedding_interval_minutes * 60
        while True:
            try:
                await self.publish()
                await self.check_leader()
                if self.is_leader and time.monotonic() - self._last_round >= round_s:
                    self._last_round = time.monotonic()
                    await self.leader_round()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("load manager tick failed: %s", exc)
            await asyncio.sleep(interval_s)  # the report period

    async def leader_round(self) -> None:
        """One round of the leader's decisions: shed, then split."""
        brokers = await self._broker_loads()
        self.history.smooth(brokers)
        self.shed_rounds += 1
        if self.settings.load_balancer_shedding_enabled:
            await self._shed(brokers)
        if self.settings.load_balancer_auto_bundle_split_enabled:
            await self._split(brokers)

    async def _broker_loads(self) -> list[BrokerLoad]:
        records, _ = await self.metastore.list_prefix(metadata_paths.BROKER_LOADS)
        brokers = []
        for r in records:
            try:
                brokers.append(
                    broker_load_from_report(
                        json.loads(r.value), r.key[len(metadata_paths.BROKER_LOADS) :]
                    )
                )
            except (ValueError, TypeError, AttributeError):
                continue
        return brokers

    async def _shed(self, brokers: list[BrokerLoad]) -> None:
        s = self.settings
        decisions = shed(
            brokers,
            s.load_balancer_broker_threshold_shedder_percentage / 100,
            await self._moved_at(),
            time.time(),
            s.load_balancer_shedding_grace_period_minutes * 60,
        )
        metrics = self.topics.metrics
        metrics.broker_unloads += len({owner for _, owner in decisions})
        for bundle, owner in decisions:
            metrics.bundles_unloaded += 1
            log.info("load manager: unloading %s from %s (overloaded)", bundle, owner)
            await self._record_move(bundle)
            await self._ask(owner, bundle, split=False)

    async def _split(self, brokers: list[BrokerLoad]) -> None:
        loads: dict[str, BundleLoad] = {}
        owners: dict[str, str] = {}
        for b in brokers:
            for name, load in b.bundles.items():
                loads[name], owners[name] = load, b.broker
        namespace_of = {name: name.rsplit("/", 1)[0] for name in loads}
        counts: dict[str, int] = {}
        for ns in set(namespace_of.values()):
            counts[ns] = len((await self.ownership.bundles_of(ns, fresh=True)).bundles)
        unload = unload_split_halves(
            self.settings.load_balancer_auto_unload_split_bundles_enabled, len(brokers)
        )
        for bundle in split_candidates(loads, namespace_of, counts, self.thresholds):
            self.topics.metrics.bundles_split += 1
            log.info("load manager: splitting %s on %s (over a threshold)", bundle, owners[bundle])
            await self._ask(owners[bundle], bundle, split=True, unload_halves=unload)

    async def _moved_at(self) -> dict[str, float]:
        records, _ = await self.metastore.list_prefix(metadata_paths.BUNDLE_DATA)
        out = {}
        for r in records:
            try:
                out[r.key[len(metadata_paths.BUNDLE_DATA) :]] = (
                    json.loads(r.value)["lastMovedMs"] / 1000
                )
            except (ValueError, KeyError, TypeError):
                continue
        return out

    async def _record_move(self, bundle: str) -> None:
        body = json.dumps({"lastMovedMs": int(time.time() * 1000)}).encode()
        await self.metastore.put(metadata_paths.bundle_data(bundle), body)

    async def _ask(self, owner: str, bundle: str, split: bool, unload_halves: bool = False) -> None:
        """Have ``owner`` unload or split ``bundle`` (``tenant/ns/0x.._0x..``;
        ``unload_halves``: a split's)."""
        ns, _, name = bundle.rpartition("/")
        try:
            if owner != self.address:
                if split:
                    await self.peers.split(owner, ns, name, unload_halves, ADMIN_CALL_TIMEOUT_S)
                else:
                    await self.peers.unload(owner, ns, name, ADMIN_CALL_TIMEOUT_S)
            elif split:
                await self.topics.split_bundle(ns, BundleRange.parse(name), unload_halves)
            else:
                await self.topics.unload_bundle(metadata_paths.bundle(ns, name))
        except (grpc.RpcError, MagnetarServerError, ValueError) as exc:
            log.warning(
                "load manager: %s of %s failed: %s", "split" if split else "unload", bundle, exc
            )
