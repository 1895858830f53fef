"""AutoRecovery's auditor: finds the ledgers that lack replicas and files a
task for each (BookKeeper's Auditor). One bookie runs it at a time, elected
through the ephemeral key ``/underreplication/auditor``
(:mod:`bookie.auto_recovery`).

Every ``auditor_poll_interval_ms`` it compares the bookies that have a
cookie with those registered: one missing for ``lost_bookie_recovery_delay_s``
is lost (:class:`~bookie.replication_rules.LostBookies`), and so is one an
operator retires (decommission, recover) at once. When that set changes --
and every ``auditor_periodic_bookie_check_interval_s``, and while tasks
finish or retiring bookies come and go -- it reads every ledger's metadata and files a task for each ledger
a lost or retiring bookie is in, then drops the retiring marks of bookies
that no ledger names any more. Every ``auditor_periodic_check_interval_s``
it also asks each live bookie whether it holds every entry of the closed
fragments it is in (sizes only) and files the holes it finds; a bookie that
does not answer is not taken to lack anything.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import grpc

from bookie.ledger_client import LedgerClient
from bookie.ledger_metadata import BKError, LedgerMetadata
from bookie.metrics import RecoveryCounts
from bookie.replication_rules import (
    Cleanup,
    LostBookies,
    entries_held,
    fragments,
    references,
    retirement_cleanup,
)
from bookie.replication_tasks import (
    BookieView,
    all_ledgers,
    bookie_view,
    mark_under_replicated,
    now_ms,
    unmark_retiring,
)
from metastore.client import MetastoreClient
from protos import metadata_paths

log = logging.getLogger(__name__)

# Entry ids per sizes-only request of the periodic check.
_CHECK_REQUEST_ENTRIES = 10000


@dataclass(frozen=True)
class AuditSettings:
    lost_bookie_recovery_delay_ms: int
    bookie_check_interval_s: float
    ledger_check_interval_s: float  # 0 = never


class Auditor:
    def __init__(
        self,
        metastore: MetastoreClient,
        client: LedgerClient,
        settings: AuditSettings,
        counts: RecoveryCounts,
    ) -> None:
        self.metastore = metastore
        self.client = client
        self.settings = settings
        self.counts = counts
        self.lost = LostBookies(settings.lost_bookie_recovery_delay_ms)
        self._replaced: frozenset[str] | None = None
        self._available: frozenset[str] = frozenset()
        self._scanned_at = time.monotonic()
        self._checked_at = time.monotonic()
        self._task_count = -1
        self._ledgers_per_bookie: dict[str, int] = {}

    async def tick(self) -> None:
        view = await bookie_view(self.metastore)
        now = now_ms()
        self.lost.observe(view.known, view.available, now)
        replaced = self.lost.lost(now) | frozenset(view.retiring)
        task_count = len(await self.metastore.children(metadata_paths.UNDER_REPLICATED))
        stuck = task_count == 0 and any(self._ledgers_per_bookie.get(b) for b in replaced)
        available = frozenset(view.available)
        if (
            replaced != self._replaced
            or (view.retiring and available != self._available)
            or stuck
            or (replaced and task_count != self._task_count)
            or time.monotonic() - self._scanned_at >= self.settings.bookie_check_interval_s
        ):
            await self.scan(replaced, view)
            task_count = len(await self.metastore.children(metadata_paths.UNDER_REPLICATED))
        self._task_count = task_count
        self._available = available
        interval = self.settings.ledger_check_interval_s
        if interval > 0 and time.monotonic() - self._checked_at >= interval:
            await self.check_replicas(replaced, view)

    async def scan(self, replaced: frozenset[str], view: BookieView) -> int:
        """File a task for every ledger a replaced bookie is in; the number filed."""
        self._scanned_at = time.monotonic()
        per_bookie: dict[str, int] = {}
        filed, size = 0, 0
        async for md in all_ledgers(self.metastore):
            self.counts.ledgers_checked += 1
            for bookie in {b for _, ensemble in md.ensembles for b in ensemble}:
                per_bookie[bookie] = per_bookie.get(bookie, 0) + 1
            hit = references(md, replaced)
            if hit:
                size += md.length
                if await mark_under_replicated(self.metastore, md.ledger_id, hit):
                    filed += 1
        self._ledgers_per_bookie = per_bookie
        self._replaced = replaced
        self.counts.under_replicated_bytes = size
        if filed:
            log.info("auditor: %d ledger(s) with replicas on %s filed", filed, sorted(replaced))
        for bookie, action in view.retiring.items():
            cleanup = retirement_cleanup(
                action, bookie in view.available, per_bookie.get(bookie, 0)
            )
            if cleanup is not Cleanup.KEEP:
                await unmark_retiring(self.metastore, bookie, forget=cleanup is Cleanup.FORGET)
                log.info(
                    "auditor: bookie %s is drained (%s); %s", bookie, action.value, cleanup.value
                )
        return filed

    async def check_replicas(self, replaced: frozenset[str], view: BookieView) -> int:
        """File the holes of every closed fragment on its live bookies; the
        number of ledgers with holes."""
        self._checked_at = time.monotonic()
        with_holes = 0
        async for md in all_ledgers(self.metastore):
            holes = await self._holes(md, replaced, view)
            if holes:
                with_holes += 1
                log.warning("auditor: ledger %d lacks replicas: %s", md.ledger_id, holes)
                await mark_under_replicated(self.metastore, md.ledger_id, holes=holes)
        return with_holes

    async def _holes(
        self, md: LedgerMetadata, replaced: frozenset[str], view: BookieView
    ) -> list[tuple[int, str]]:
        holes = []
        for fragment in fragments(md):
            if fragment.open:
                continue
            for index, bookie in enumerate(fragment.ensemble):
                if bookie in replaced or bookie not in view.available:
                    continue
                expected = list(entries_held(fragment, index, md.ensemble_size, md.write_quorum))
                if expected and await self._lacks_any(md.ledger_id, bookie, expected):
                    holes.append((fragment.first, bookie))
        return holes

    async def _lacks_any(self, ledger_id: int, bookie: str, expected: list[int]) -> bool:
        await self.client.resolve([bookie])
        for i in range(0, len(expected), _CHECK_REQUEST_ENTRIES):
            chunk = expected[i : i + _CHECK_REQUEST_ENTRIES]
            try:
                sizes = await self.client.connection(bookie).entry_sizes(ledger_id, chunk)
            except (BKError, grpc.aio.AioRpcError, KeyError):
                return False  # no answer is no proof of a hole
            if len(sizes) < len(chunk):
                return True
        return False
