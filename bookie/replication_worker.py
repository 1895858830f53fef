"""AutoRecovery's replication worker: takes under-replicated ledgers one at
a time and repairs them (BookKeeper's ReplicationWorker).

A task is taken by putting ``/underreplication/locks/{id}`` as an ephemeral
key of the worker's session (only one worker can create it); the lock is
deleted when the worker is done with the task, and disappears with the
session if the worker dies, so another worker takes the task over. The
task itself is deleted only when :func:`~bookie.replication_rules.plan_ledger`
says DONE, by compare-and-set on the version the worker read: a task the
auditor widened meanwhile stays for the next round.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Collection

import grpc

from bookie.fragment_copier import FragmentCopier
from bookie.ledger_client import LedgerClient
from bookie.ledger_metadata import BKError, LedgerMetadata
from bookie.metrics import RecoveryCounts
from bookie.replication_rules import LedgerPlan, Outcome, pick_target, plan_ledger
from bookie.replication_tasks import BookieView, ReplicationTask, bookie_view, now_ms, tasks
from metastore.client import BadVersionError, MetastoreClient, MetastoreError, Session
from protos import common_pb2, metadata_paths

log = logging.getLogger(__name__)

# Steps (copies, fences) one task may take in one round before it is released.
_MAX_STEPS_PER_TASK = 1000
# Rounds that change nothing double the rounds skipped after them, up to 2**5 - 1.
_MAX_IDLE_DOUBLINGS = 5


class ReplicationWorker:
    def __init__(
        self,
        metastore: MetastoreClient,
        client: LedgerClient,
        copier: FragmentCopier,
        local_bookie: str,
        grace_ms: int,
        counts: RecoveryCounts,
    ) -> None:
        self.metastore = metastore
        self.client = client
        self.copier = copier
        self.local_bookie = local_bookie
        self.grace_ms = grace_ms
        self.counts = counts
        self.rng = random.Random()
        self._last_ids: frozenset[int] = frozenset()
        self._idle = 0  # rounds in a row that changed nothing
        self._skip = 0  # rounds still to skip

    async def round(self, session: Session) -> int:
        """Work on every task that can advance now and that no other worker
        holds; the tasks finished. While rounds change nothing (tasks that
        wait for a writer or for a bookie to copy to), rounds are skipped,
        twice as many each time (up to 31), until the set of tasks changes."""
        pending = await tasks(self.metastore)
        self.counts.under_replicated_ledgers = len(pending)
        ids = frozenset(t.ledger_id for t in pending)
        if ids == self._last_ids and self._skip > 0:
            self._skip -= 1
            return 0
        view = await bookie_view(self.metastore) if pending else None
        self.rng.shuffle(pending)
        finished, written = 0, self.counts.entries_written
        for task in pending:
            if session.lost or view is None:
                break
            if await self._plan(task, view) is None:
                continue  # nothing it can do now: not worth a lock
            if await self._take(task, session, view):
                finished += 1
        progress = finished > 0 or self.counts.entries_written > written or ids != self._last_ids
        self._idle = 0 if progress else min(self._idle + 1, _MAX_IDLE_DOUBLINGS)
        self._skip, self._last_ids = 2**self._idle - 1, ids
        return finished

    async def _take(self, task: ReplicationTask, session: Session, view: BookieView) -> bool:
        lock = metadata_paths.replication_lock(task.ledger_id)
        try:
            await self.metastore.put(
                lock, self.local_bookie.encode(), expected_version=-1, session_id=session.id
            )
        except BadVersionError:
            return False  # another worker has it
        try:
            return await self.repair(task, view)
        except (BKError, MetastoreError, grpc.aio.AioRpcError) as exc:
            log.warning("ledger %d: re-replication failed, retried later: %s", task.ledger_id, exc)
            return False
        finally:
            if not session.lost:  # else the lock went with the session, maybe to another worker
                await self.metastore.delete(lock)

    def _replaced(self, task: ReplicationTask, view: BookieView) -> set[str]:
        # A lost bookie that came back (same cookie, so the same disk) keeps its replicas.
        lost = {b for b in task.bookies if b not in view.available or b in view.retiring}
        return lost | set(view.retiring)

    async def _plan(
        self, task: ReplicationTask, view: BookieView, filled: Collection[tuple[int, str]] = ()
    ) -> tuple[LedgerPlan, LedgerMetadata | None, str | None] | None:
        """The task's next step, its metadata (None: the ledger is gone) and
        the target of a replaced replica; None when it cannot advance now."""
        try:
            md = await self.client.metadata(task.ledger_id)
        except BKError as exc:
            if exc.code != common_pb2.NO_SUCH_LEDGER:
                raise
            return LedgerPlan(Outcome.DONE), None, None  # deleted meanwhile: nothing to repair
        replaced = self._replaced(task, view)
        holes = set(task.holes) - set(filled)
        plan = plan_ledger(md, replaced, holes, now_ms() - task.created_ms, self.grace_ms)
        if plan.outcome is Outcome.WAIT:
            return None
        target = None
        if plan.outcome is Outcome.COPY:
            repair = plan.first
            target = repair.bookie
            if repair.replace:
                target = pick_target(
                    repair.fragment.ensemble, view.writable(), replaced, self.local_bookie, self.rng
                )
                if target is None:
                    return None
        return plan, md, target

    async def repair(self, task: ReplicationTask, view: BookieView) -> bool:
        """Repair the task's ledger as far as possible now; True when it is
        done (and the task deleted)."""
        filled: set[tuple[int, str]] = set()
        for _ in range(_MAX_STEPS_PER_TASK):
            step = await self._plan(task, view, filled)
            if step is None:
                return False
            plan, md, target = step
            if plan.outcome is Outcome.DONE:
                return await self._finish(task)
            if plan.outcome is Outcome.FENCE:
                log.info(
                    "ledger %d: still open past the grace period with a replica on %s; "
                    "fencing and closing it before copying",
                    task.ledger_id,
                    sorted(self._replaced(task, view)),
                )
                await self.client.open_with_recovery(task.ledger_id)
                continue
            assert md is not None and target is not None
            repair = plan.first
            copied = await self.copier.copy(md, repair, target, self._replaced(task, view))
            if copied and not repair.replace:
                filled.add((repair.fragment.first, repair.bookie))
        return False

    async def _finish(self, task: ReplicationTask) -> bool:
        try:
            await self.metastore.delete(
                metadata_paths.under_replicated(task.ledger_id), expected_version=task.version
            )
        except BadVersionError:
            return False  # widened meanwhile: the next round looks again
        self.counts.ledgers_replicated += 1
        log.info("ledger %d: fully replicated again", task.ledger_id)
        return True
