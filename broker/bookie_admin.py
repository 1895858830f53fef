"""``magnetar-admin bookies``: the bookies, what AutoRecovery has left to
do, and an operator's decommission or recover of a bookie
(docs/reliability.md). Superuser only.

Decommission and recover only put the bookie's retiring mark
(``/bookies/retiring/{id}``); the AutoRecovery auditor then files every
ledger the bookie is in, the bookies' replication workers copy the
replicas elsewhere, and the auditor drops the mark once no ledger names the
bookie (and the cookie too once the bookie is gone, so its id may start
again with an empty disk). ``bookies list`` and ``bookies under-replicated``
show the progress.
"""

from __future__ import annotations

from typing import Any

from bookie.replication_rules import Retire, bookie_state, retire_refusal
from bookie.replication_tasks import all_ledgers, bookie_view, mark_retiring, tasks
from broker.errors import BrokerError
from metastore.client import MetastoreClient
from protos import common_pb2, metadata_paths


class BookieAdministration:
    def __init__(self, metastore: MetastoreClient) -> None:
        self.metastore = metastore

    async def _ledgers_per_bookie(self) -> tuple[dict[str, int], dict[str, tuple[int, int]]]:
        """Ledgers naming each bookie, and the largest ensemble among them
        (size, one such ledger id)."""
        count: dict[str, int] = {}
        largest: dict[str, tuple[int, int]] = {}
        async for md in all_ledgers(self.metastore):
            for bookie in {b for _, ensemble in md.ensembles for b in ensemble}:
                count[bookie] = count.get(bookie, 0) + 1
                if md.ensemble_size > largest.get(bookie, (0, -1))[0]:
                    largest[bookie] = (md.ensemble_size, md.ledger_id)
        return count, largest

    async def list(self) -> dict[str, Any]:
        view = await bookie_view(self.metastore)
        count, _ = await self._ledgers_per_bookie()
        rows = []
        for bookie in sorted(view.known | set(view.available) | set(view.retiring)):
            info = view.available.get(bookie, {})
            read_only = bool(info.get("read_only"))
            retiring = view.retiring.get(bookie)
            rows.append(
                {
                    "bookie": bookie,
                    "address": info.get("address", ""),
                    "state": bookie_state(
                        bookie in view.available, read_only, retiring, count.get(bookie, 0)
                    ),
                    "readOnly": read_only,
                    "ledgers": count.get(bookie, 0),
                }
            )
        return {"bookies": rows}

    async def retire(self, bookie: str, action: Retire, force: bool) -> dict[str, Any]:
        if not isinstance(bookie, str) or not bookie:
            raise BrokerError(f"bookie {bookie!r}: give a bookie id", common_pb2.INVALID_ARGUMENT)
        view = await bookie_view(self.metastore)
        if bookie not in view.known and bookie not in view.available:
            raise BrokerError(
                f"there is no bookie {bookie!r}; bookies: "
                f"{', '.join(sorted(view.known | set(view.available))) or 'none'}",
                common_pb2.NOT_FOUND,
            )
        count, largest = await self._ledgers_per_bookie()
        # Other retiring bookies take no replicas either.
        candidates = {b: ro or b in view.retiring for b, ro in view.read_only().items()}
        why = retire_refusal(action, bookie, candidates, largest.get(bookie, (0, -1)), force)
        if why is not None:
            raise BrokerError(why, common_pb2.PRECONDITION_FAILED)
        await mark_retiring(self.metastore, bookie, action)
        return {"bookie": bookie, "action": action.value, "ledgers": count.get(bookie, 0)}

    async def decommission(self, bookie: str) -> dict[str, Any]:
        return await self.retire(bookie, Retire.DECOMMISSION, False)

    async def recover(self, bookie: str, force: bool = False) -> dict[str, Any]:
        if not isinstance(force, bool):
            raise BrokerError(f"force {force!r} is not true or false", common_pb2.INVALID_ARGUMENT)
        return await self.retire(bookie, Retire.RECOVER, force)

    async def under_replicated(self) -> dict[str, Any]:
        rows = []
        for task in sorted(await tasks(self.metastore), key=lambda t: t.ledger_id):
            lock = await self.metastore.get(metadata_paths.replication_lock(task.ledger_id))
            rows.append(
                {
                    "ledgerId": task.ledger_id,
                    "bookies": task.bookies,
                    "holes": [{"firstEntryId": f, "bookie": b} for f, b in task.holes],
                    "sinceMs": task.created_ms,
                    "worker": lock.value.decode() if lock is not None else "",
                }
            )
        return {"count": len(rows), "ledgers": rows}
