"""AutoRecovery inside a bookie process (BookKeeper's
``autoRecoveryDaemonEnabled``): a replication worker, and the auditor when
this bookie wins the election for ``/underreplication/auditor``.

Both run on one metastore session of their own (not the registration's):
the auditor key and the worker's task locks are ephemeral keys of it, so a
bookie that dies or is cut off gives up the auditor role and its task, and
another bookie takes them over once the session expires.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

import grpc

from bookie.auditor import Auditor, AuditSettings
from bookie.client_context import LedgerClientSettings
from bookie.fragment_copier import CopySettings, FragmentCopier, Throttle
from bookie.ledger_client import LedgerClient
from bookie.ledger_metadata import BKError
from bookie.metrics import RecoveryCounts
from bookie.replication_worker import ReplicationWorker
from bookie.settings import BookieSettings
from metastore.client import BadVersionError, MetastoreClient, MetastoreError, Session
from protos import metadata_paths
from protos.security_settings import client_token, internal_tls

log = logging.getLogger(__name__)

_ADD_REQUEST_BYTES = 4 << 20  # gRPC messages are bounded at 16 MiB
_ERRORS = (MetastoreError, BKError, grpc.aio.AioRpcError)


async def _pause(stop: asyncio.Event, seconds: float) -> None:
    try:
        await asyncio.wait_for(stop.wait(), seconds)
    except TimeoutError:
        pass


class AutoRecovery:
    def __init__(
        self,
        metastore: MetastoreClient,
        settings: BookieSettings,
        local_bookie: str,
        counts: RecoveryCounts,
    ) -> None:
        self.metastore = metastore
        self.settings = settings
        self.local_bookie = local_bookie
        self.counts = counts
        self.client = LedgerClient(
            metastore,
            LedgerClientSettings(
                token=client_token(settings.broker_client_auth_params),
                tls=internal_tls(settings, settings.broker_client_tls_enabled),
            ),
        )
        copier = FragmentCopier(
            self.client,
            CopySettings(
                settings.rereplication_entry_batch_size,
                _ADD_REQUEST_BYTES,
                self.client.settings.timeout_s,
            ),
            Throttle(settings.rereplication_rate_bytes_per_s),
            counts,
        )
        self.worker = ReplicationWorker(
            metastore,
            self.client,
            copier,
            local_bookie,
            settings.open_ledger_rereplication_grace_period_ms,
            counts,
        )
        self.auditor = Auditor(
            metastore,
            self.client,
            AuditSettings(
                settings.lost_bookie_recovery_delay_s * 1000,
                settings.auditor_periodic_bookie_check_interval_s,
                settings.auditor_periodic_check_interval_s,
            ),
            counts,
        )
        self.poll_s = settings.auditor_poll_interval_ms / 1000

    async def run(self, stop: asyncio.Event) -> None:
        """Until ``stop``: on a fresh session whenever the last one is lost."""
        try:
            while not stop.is_set():
                try:
                    session = await self.metastore.create_session(self.settings.session_ttl_ms)
                except MetastoreError as exc:
                    log.warning("auto-recovery: no metastore session yet: %s", exc)
                    await _pause(stop, self.poll_s)
                    continue
                try:
                    await asyncio.gather(
                        self._loop(stop, session, self._audit),
                        self._loop(stop, session, self._work),
                    )
                finally:
                    self.counts.auditor_leader = False
                    if not session.lost:
                        await session.close()
        finally:
            await self.client.close()

    async def _loop(
        self,
        stop: asyncio.Event,
        session: Session,
        step: Callable[[Session], Awaitable[None]],
    ) -> None:
        while not stop.is_set() and not session.lost:
            try:
                await step(session)
            except _ERRORS as exc:
                log.warning("auto-recovery: %s failed, retrying: %s", step.__name__, exc)
            await _pause(stop, self.poll_s)

    async def _audit(self, session: Session) -> None:
        if not self.counts.auditor_leader:
            try:
                await self.metastore.put(
                    metadata_paths.AUDITOR,
                    self.local_bookie.encode(),
                    expected_version=-1,
                    session_id=session.id,
                )
            except BadVersionError:
                return  # another bookie audits
            self.counts.auditor_leader = True
            log.info("auto-recovery: %s is the auditor", self.local_bookie)
        await self.auditor.tick()

    async def _work(self, session: Session) -> None:
        await self.worker.round(session)
