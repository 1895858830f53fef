"""The broker process: it builds the core (namespaces, ownership, the topic
registry, the load manager), puts the gRPC front-ends in front of it, and
keeps a metastore session (its registration and the ownership of its
bundles) for as long as it runs."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

import grpc
from grpc_health.v1.health import HealthServicer

from bookie.ledger_client import LedgerClient, LedgerClientSettings
from broker.access_rules import BrokerGatekeeper
from broker.admin_service import BrokerAdminService
from broker.administration import Administration
from broker.authorizer import BrokerAuthorizer
from broker.broker_addresses import BrokerAddresses
from broker.housekeeping import Housekeeping
from broker.load_manager import LoadManager
from broker.metrics import BrokerMetrics
from broker.metrics_export import MetricsExporter
from broker.namespaces import Namespaces
from broker.ownership import Ownership
from broker.peer_brokers import PeerBrokers
from broker.policy_watch import PolicyWatch
from broker.service import BrokerService
from broker.settings import BrokerSettings
from broker.stats_history import StatsHistory
from broker.system_producer import SystemTopicProducer
from broker.topics import TopicRegistry
from metastore.client import MetastoreClient, Session
from protos import broker_pb2, channel, serving
from protos.access import AccessGuard
from protos.credentials import TokenSupplier
from protos.security_settings import (
    access_guard,
    client_token,
    internal_tls,
    server_tls,
    superusers,
)
from protos.serving import Listeners
from protos.stats_schema import STATS_TOPIC
from protos.tls import TlsClient

log = logging.getLogger("broker")

# Between attempts to register again after the metastore session was lost.
REREGISTER_RETRY_S = 1.0


@dataclass
class Core:
    """The broker's protocol-independent core and what it stands on."""

    settings: BrokerSettings
    metastore: MetastoreClient
    ledgers: LedgerClient
    namespaces: Namespaces
    ownership: Ownership
    topics: TopicRegistry
    load_manager: LoadManager
    metrics: BrokerMetrics
    peers: PeerBrokers
    authorizer: BrokerAuthorizer
    guard: AccessGuard | None  # None: authentication_enabled is off
    token: TokenSupplier | None  # what this broker's own calls carry
    tls: TlsClient | None  # how they speak TLS (None: broker_client_tls_enabled is off)
    listeners: Listeners  # where this broker listens; its name is listeners.identity
    addresses: BrokerAddresses  # where the other brokers listen


def build_core(settings: BrokerSettings, listeners: Listeners) -> Core:
    address = listeners.identity
    token = client_token(settings.broker_client_auth_params)
    tls = internal_tls(settings, settings.broker_client_tls_enabled)
    metastore = MetastoreClient(settings.metastore, token=token, tls=tls)
    ledgers = LedgerClient(
        metastore,
        LedgerClientSettings(
            timeout_s=settings.bookie_timeout_ms / 1000,
            token=token,
            tls=tls,
            ledger_id_block=settings.ledger_id_block_size,
            bookie_list_max_age_s=settings.bookie_list_max_age_ms / 1000,
        ),
    )
    namespaces = Namespaces(metastore, settings)
    ownership = Ownership(metastore, namespaces, address, settings)
    metrics = BrokerMetrics(settings)
    topics = TopicRegistry(settings, metastore, ledgers, namespaces, ownership, metrics)
    addresses = BrokerAddresses(metastore, listeners)
    peers = PeerBrokers(token, tls, addresses)
    load_manager = LoadManager(settings, metastore, ownership, topics, peers, listeners)
    authorizer = BrokerAuthorizer(
        namespaces,
        superusers(settings),
        settings.authorization_cache_max_namespaces,
        enabled=settings.authentication_enabled and settings.authorization_enabled,
    )
    guard = access_guard(settings, BrokerGatekeeper(authorizer))
    return Core(
        settings, metastore, ledgers, namespaces, ownership, topics, load_manager, metrics,
        peers, authorizer, guard, token, tls, listeners, addresses,
    )  # fmt: skip


class Registration:
    """The broker's metastore session: its load report (its registration)
    and its bundles live on it. A lost session is replaced, after every
    topic is closed (their bundle records went with it)."""

    def __init__(self, core: Core, stop: asyncio.Event) -> None:
        self.core = core
        self.stop = stop
        self.session: Session | None = None

    async def register(self) -> None:
        session = await self.core.metastore.create_session(
            self.core.settings.session_ttl_ms, on_lost=self._lost
        )
        self.core.ownership.session = session
        await self.core.load_manager.publish()
        self.session = session

    def _lost(self) -> None:
        if not self.stop.is_set():
            asyncio.get_running_loop().create_task(self._recover())

    async def _recover(self) -> None:
        self.core.ownership.lost()
        await self.core.topics.drop_all("the metastore session expired")
        while not self.stop.is_set():
            try:
                await self.register()
                log.info("broker re-registered with a new metastore session")
                return
            except Exception as exc:
                log.warning("re-registering failed: %s", exc)
                await asyncio.sleep(REREGISTER_RETRY_S)  # bounded by stop; a retry timer

    async def close(self) -> None:
        if self.session is not None:
            await self.session.close()


async def _start_server(
    settings: BrokerSettings, credentials: grpc.ServerCredentials | None
) -> tuple[grpc.aio.Server, HealthServicer, Listeners]:
    server = grpc.aio.server(
        options=[
            *serving.grpc_options(
                max(serving.MAX_GRPC_MESSAGE_BYTES, settings.max_message_size * 2 + 65536)
            ),
            *channel.keep_alive_server_options(settings.keep_alive_interval_seconds),
        ]
    )
    health = serving.add_health(server)
    serving.set_serving(health, False)
    listeners = await serving.bind_listeners(
        server,
        settings.bind_address,
        settings.advertised_address,
        settings.port,
        settings.broker_service_port_tls,
        credentials,
    )
    return server, health, listeners


def _add_services(server: grpc.aio.Server, core: Core) -> None:
    """The client-facing and admin services, behind the access guard when
    authentication is on (docs/security.md)."""
    settings, address = core.settings, core.listeners.identity
    broker_name = f"{settings.cluster_name}-{address.rpartition(':')[2]}"
    services = broker_pb2.DESCRIPTOR.services_by_name
    authorizer = core.authorizer
    service = BrokerService(
        settings,
        core.topics,
        core.namespaces,
        core.ownership,
        broker_name,
        core.addresses,
        authorizer.still_allowed if authorizer.enabled else None,
    )
    serving.add_servicer(
        server,
        service,
        services["Broker"],
        guard=core.guard,
        response_serializers={"Consume": serving.serialized, "ProduceMany": serving.serialized},
    )
    admin = Administration(core.topics, core.namespaces, core.ownership, core.peers)
    serving.add_servicer(
        server, BrokerAdminService(admin), services["BrokerAdmin"], guard=core.guard
    )


def _stats_producer(core: Core) -> SystemTopicProducer:
    """The broker's own producer on the stats topic: through this broker's
    TLS port when its own calls use TLS, else its plaintext one."""
    settings, listeners = core.settings, core.listeners
    # Over TLS, the advertised address: the one the certificate names.
    local = listeners.tls if core.tls is not None else listeners.local_plain
    if not local:
        raise serving.StartRefused(
            "broker_client_tls_enabled needs a TLS port (tls_certificate_file_path, "
            "tls_key_file_path)"
            if core.tls is not None
            else "the broker's own calls need its plaintext port, or broker_client_tls_enabled"
        )
    return SystemTopicProducer(
        local,
        STATS_TOPIC,
        f"stats-{listeners.identity}",
        settings.stats_export_batch_max_records,
        settings.bookie_timeout_ms / 1000,
        core.token,
        core.tls,
    )


async def serve(settings: BrokerSettings, ready_file: str | None = None) -> None:
    serving.setup_logging("broker", settings.log_level)
    serving.check_port_free(settings.bind_address, settings.port, "gRPC")
    if settings.tls_certificate_file_path:
        serving.check_port_free(settings.bind_address, settings.broker_service_port_tls, "gRPC TLS")
    serving.check_port_free(settings.bind_address, settings.metrics_port, "metrics")
    if not serving.tune_malloc(settings.malloc_trim_threshold_mb, settings.malloc_arenas):
        log.warning("mallopt is not available; the C library's malloc defaults stay")
    tls = server_tls(settings)
    server, health, listeners = await _start_server(settings, tls.credentials)
    core = build_core(settings, listeners)
    _add_services(server, core)
    stats_producer = _stats_producer(core)
    exporter = MetricsExporter(
        settings,
        core.topics,
        core.load_manager,
        listeners.identity,
        core.guard.counts if core.guard is not None else None,
    )
    endpoint, metrics_port = await serving.start_http_endpoint(
        settings.bind_address, settings, exporter.render, listeners, tls.metrics, tls.health
    )
    stop = asyncio.Event()
    serving.install_shutdown(asyncio.get_running_loop(), stop.set)
    await server.start()
    serving.tune_gc()
    await core.namespaces.ensure_default()
    registration = Registration(core, stop)
    await registration.register()
    serving.set_serving(health, True)
    serving.write_ready_file(ready_file, _ready(listeners, metrics_port))
    log.info("broker serving as %s (TLS %s, metrics %d)",
             listeners.identity, listeners.tls or "off", metrics_port)  # fmt: skip
    background = _background(core, exporter, stats_producer)
    await stop.wait()
    log.info("broker stopping")
    serving.exit_deadline(settings.shutdown_timeout_s)
    await _stop(core, server, health, registration, background)
    await stats_producer.close()  # after the history task is cancelled
    if endpoint is not None:
        await endpoint.close()


def _ready(listeners: Listeners, metrics_port: int) -> dict[str, object]:
    """What the ready file says: the name of the broker ("grpc"), the
    address this machine reaches it at ("local"), and each port's."""
    return {
        "grpc": listeners.identity,
        "local": listeners.local,
        "grpc_plain": listeners.plain,
        "grpc_tls": listeners.tls,
        "local_tls": listeners.local_tls,
        "metrics": metrics_port,
    }


def _background(
    core: Core, exporter: MetricsExporter, stats_producer: SystemTopicProducer
) -> list[asyncio.Task]:
    history = StatsHistory(
        core.settings,
        core.topics,
        core.ownership,
        core.load_manager,
        core.ledgers,
        stats_producer.send,
    )
    watch = PolicyWatch(core.metastore, core.topics, core.ownership, core.authorizer)
    return [
        *(asyncio.create_task(check) for check in Housekeeping(core.topics).tasks()),
        asyncio.create_task(watch.run_forever()),
        asyncio.create_task(core.load_manager.run_forever()),
        asyncio.create_task(exporter.roll_forever()),
        asyncio.create_task(history.run_forever()),
    ]


async def _stop(
    core: Core,
    server: grpc.aio.Server,
    health: HealthServicer,
    registration: Registration,
    background: list[asyncio.Task],
) -> None:
    """Hand the topics over and leave, within shutdown_timeout_s: closing a
    topic persists its cursors, and unloading first lets clients move to
    other brokers without an error. Whatever of that waits on an unreachable
    metastore or bookie is given up when time runs out; the bundles are
    freed anyway when the broker's session expires."""
    deadline = serving.stop_deadline(core.settings.shutdown_timeout_s)
    for task in background:
        task.cancel()
    serving.set_serving(health, False)

    async def hand_over() -> None:
        await core.topics.unload_all()
        await core.topics.close_all()

    async def stop_server() -> None:
        await server.stop(grace=min(2.0, core.settings.shutdown_timeout_s / 5))

    await serving.bounded_shutdown(hand_over, deadline, log, "unloading and closing topics")
    await serving.bounded_shutdown(stop_server, deadline, log, "stopping the gRPC server")
    await serving.bounded_shutdown(registration.close, deadline, log, "closing the session")
    await serving.bounded_shutdown(core.ledgers.close, deadline, log, "closing ledgers")
    await serving.bounded_shutdown(core.metastore.close, deadline, log, "closing the client")
    log.info("broker stopped")
