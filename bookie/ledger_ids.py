"""New ledgers' ids, taken from the metastore's counter a block at a time.

Theory of operation. Every ledger id comes from one counter in the
metastore, which only grows. Asking it for one id per new ledger costs a
replicated, fsynced write per ledger, the most expensive step of creating a
topic; so a client reserves ``block`` ids with one increment and hands them
out from memory. Ids are unique either way (each block is the client's
alone); what a block changes is their order across clients: two brokers
holding blocks hand out interleaved ids.

A managed ledger needs its ledgers' ids to grow (positions, and so message
ids, compare by ledger id first), and a topic moves between brokers. So a
ledger that must follow another (``after``, the last id the topic's owner
made) takes the next id of the block only when that id is higher; if not,
the block is dropped and a new one reserved. A new block starts above every
id any client was handed before it (the counter's value at the time), so the
retry is always enough. A topic just opened from its stored list does not
know the highest id it ever had (its empty ledgers are deleted at open, and
cursors may still point at them; trims may have emptied the list), so its
first ledger asks for ``after=None``: one increment of its own, above every
id handed out anywhere, the block kept. Ids of a dropped block, and those
still held when a process ends, are never used (as BookKeeper's own ids
need not be dense); a topic deleted and made again may start below its old
ids (its old message ids mean nothing to it).
"""

from __future__ import annotations

import asyncio

from metastore.client import MetastoreClient
from protos import metadata_paths


def usable(next_id: int, last_id: int, after: int) -> bool:
    """Whether a block holding ``next_id`` … ``last_id`` gives an id above ``after``."""
    return after < next_id <= last_id


def block_of(counter: int, size: int) -> tuple[int, int]:
    """The ids an increment by ``size`` reserved: it returned ``counter``."""
    return counter - size + 1, counter


class LedgerIds:
    def __init__(self, metastore: MetastoreClient, block: int) -> None:
        if block < 1:
            raise ValueError(f"a ledger id block holds at least one id, not {block}")
        self.metastore = metastore
        self.block = block
        self.reserved = 0  # blocks reserved, for tests and logs
        self._next, self._last = 1, 0  # nothing reserved yet
        self._lock = asyncio.Lock()

    async def take(self, after: int | None = -1) -> int:
        """A new ledger id above ``after`` (None: above every id handed out so far)."""
        if after is None:
            return await self.metastore.increment(metadata_paths.LEDGER_ID_COUNTER)
        async with self._lock:
            if not usable(self._next, self._last, after):
                counter = await self.metastore.increment(
                    metadata_paths.LEDGER_ID_COUNTER, self.block
                )
                self._next, self._last = block_of(counter, self.block)
                self.reserved += 1
            taken = self._next
            self._next += 1
            return taken
