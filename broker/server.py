"""The broker process."""

from __future__ import annotations

import asyncio
import logging

import grpc

from bookie.ledger_client import LedgerClient, LedgerClientSettings
from broker.admin_service import BrokerAdminService
from broker.load_manager import LoadManager
from broker.service import BrokerService
from broker.settings import BrokerSettings
from metastore.client import MetastoreClient
from protos import broker_pb2_grpc, serving

log = logging.getLogger("broker")


async def serve(settings: BrokerSettings, ready_file: str | None = None) -> None:
    serving.setup_logging("broker", settings.log_level)
    if not serving.tune_malloc(settings.malloc_trim_threshold_mb, settings.malloc_arenas):
        log.warning("mallopt is not available; the C library's malloc defaults stay")
    metastore = MetastoreClient(settings.metastore)
    ledgers = LedgerClient(
        metastore, LedgerClientSettings(timeout_s=settings.bookie_timeout_ms / 1000)
    )
    server = grpc.aio.server(
        options=serving.grpc_options(
            max(serving.MAX_GRPC_MESSAGE_BYTES, settings.max_message_size * 2 + 65536)
        )
    )
    health = serving.add_health(server)
    serving.set_serving(health, False)
    port = await serving.bind(server, settings.host, settings.port)
    address = f"{settings.host}:{port}"
    service = BrokerService(
        settings, metastore, ledgers, broker_name=f"{settings.cluster_name}-{port}", address=address
    )
    broker_pb2_grpc.add_BrokerServicer_to_server(service, server)
    broker_pb2_grpc.add_BrokerAdminServicer_to_server(BrokerAdminService(service), server)
    metrics_port = serving.start_metrics(settings.host, settings.metrics_port)
    stop = asyncio.Event()
    serving.install_shutdown(asyncio.get_running_loop(), stop.set)
    await server.start()
    serving.tune_gc()
    await service.ensure_default_namespace()
    load_manager = service.load_manager = LoadManager(service)
    sessions: list = []

    async def register() -> None:
        """A session, and this broker's ephemeral registration (its load report) on it."""
        session = await metastore.create_session(settings.session_ttl_ms, on_lost=session_lost)
        service.ownership.session = session
        await load_manager.publish()
        sessions.append(session)

    async def recover() -> None:
        # Every bundle record went with the session: stop serving, start again.
        service.ownership.lost()
        await service.drop_all_topics("the metastore session expired")
        while not stop.is_set():
            try:
                await register()
                log.info("broker re-registered with a new metastore session")
                return
            except Exception as exc:
                log.warning("re-registering failed: %s", exc)
                await asyncio.sleep(1.0)  # bounded by stop; a retry timer

    def session_lost() -> None:
        if not stop.is_set():
            asyncio.get_running_loop().create_task(recover())

    await register()
    serving.set_serving(health, True)
    serving.write_ready_file(ready_file, {"grpc": address, "metrics": metrics_port})
    log.info("broker serving on %s (metrics %d)", address, metrics_port)
    housekeeping = asyncio.create_task(service.housekeeping_forever())
    balancing = asyncio.create_task(load_manager.run_forever())
    await stop.wait()
    log.info("broker stopping")
    housekeeping.cancel()
    balancing.cancel()
    serving.set_serving(health, False)
    await service.unload_all()  # clients move to other brokers without an error
    await service.close_all()
    await server.stop(grace=2)
    for session in sessions[-1:]:
        await session.close()
    await ledgers.close()
    await metastore.close()
    log.info("broker stopped")
