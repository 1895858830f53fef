"""``admin.bookies``: the bookies and AutoRecovery (docs/reliability.md).
Superuser only. ``list`` answers ``{"bookies": [{"bookie", "address",
"state", "readOnly", "ledgers"}]}``; a state is ``available``,
``read-only``, ``lost``, ``decommissioning``, ``decommissioned`` or
``recovering``."""

from __future__ import annotations

from typing import Any

from client._admin_policies import AdminCalls


class BookieVerbs:
    def __init__(self, admin: AdminCalls) -> None:
        self._admin = admin

    def list(self) -> dict[str, Any]:
        """Every bookie the cluster knows, with its state and how many ledgers name it."""
        return self._admin._op("bookies.list")  # type: ignore[no-any-return]

    def decommission(self, bookie: str) -> dict[str, Any]:
        """Copy every replica off ``bookie`` (it takes no new ledgers meanwhile);
        once no ledger names it, it may be stopped for good. Refused when the
        other writable bookies could not hold its ledgers' ensembles."""
        return self._admin._op("bookies.decommission", bookie=bookie)  # type: ignore[no-any-return]

    def recover(self, bookie: str, force: bool = False) -> dict[str, Any]:
        """Restore the replicas ``bookie`` held from the other replicas, now
        (no lost-bookie delay). Refused for a live bookie unless ``force``."""
        return self._admin._op("bookies.recover", bookie=bookie, force=force)  # type: ignore[no-any-return]

    def under_replicated(self) -> dict[str, Any]:
        """``{"count", "ledgers": [{"ledgerId", "bookies", "holes", "sinceMs", "worker"}]}``:
        what AutoRecovery has left to do."""
        return self._admin._op("bookies.under-replicated")  # type: ignore[no-any-return]
