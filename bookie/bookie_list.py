"""The registered bookies, read from the metastore and kept for a short while.

Theory of operation. A new ledger picks its ensemble from the bookies
registered under ``/bookies/available/``; reading that list for every new
ledger is one metastore call per topic created. This keeps the list it read
for at most ``max_age_s`` and answers new ledgers from it. A bookie that
left in that time may still be chosen: its first add fails and the writer
replaces it, reading the list afresh (``fresh=True``, as every caller but
ledger creation does). Registrations already lag a bookie's death by its
session timeout, so a list that old adds little. A list with too few
writable bookies for an ensemble is read again before giving up (a bookie
that just joined is not missed). ``max_age_s`` 0 reads every time.
"""

from __future__ import annotations

import json
import time

from metastore.client import MetastoreClient
from protos import metadata_paths

Registration = tuple[str, dict]


class BookieList:
    def __init__(self, metastore: MetastoreClient, max_age_s: float) -> None:
        self.metastore = metastore
        self.max_age_s = max_age_s
        self.reads = 0  # metastore reads, for tests and logs
        self._kept: list[Registration] = []
        self._read_at: float | None = None

    async def registered(self, fresh: bool = True) -> list[Registration]:
        """Every registered bookie and its registration (kept ones unless ``fresh``)."""
        now = time.monotonic()
        if not fresh and self._read_at is not None and now - self._read_at < self.max_age_s:
            return self._kept
        prefix = metadata_paths.bookie_available("")
        records, _ = await self.metastore.list_prefix(prefix)
        self.reads += 1
        found = [(r.key.removeprefix(prefix), json.loads(r.value)) for r in records]
        self._kept = [(bookie_id, info) for bookie_id, info in found if "/" not in bookie_id]
        self._read_at = now
        return self._kept
