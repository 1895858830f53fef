"""Namespace policy records, read once and kept while the policy watch runs.

Theory of operation. Loading a topic and answering its partitioned-topic
metadata read the namespace's policies; with thousands of topics in one
namespace that is one metastore read per topic for the same record. This
cache answers those reads from memory, and is right only because the policy
watch (:mod:`broker.policy_watch`) tells it of every change:

- it holds entries only while the watch runs: the watch's (re)start clears
  it and turns it on (:meth:`start`), a failed watch turns it off and clears
  it (:meth:`stop`), so a change made while no watch ran is never missed;
- a watch event of a record drops that record (:meth:`changed`), and so
  does this broker's own write of it, so an administrator reads back what
  they wrote through the same broker at once;
- a read that was in flight while any record was dropped is not kept (a
  generation number counts the drops): it may have read the record before
  the change the drop stands for;
- a missing record (no such namespace) is not kept.

Between a change and its watch event another broker may still answer from
the old record for a moment; the loaded topics apply the change when the
event arrives (as in Pulsar, whose metadata cache is watch-driven too).
At most ``max_namespaces_cached`` namespaces are kept (oldest out first).
"""

from __future__ import annotations

from collections import OrderedDict

from metastore.client import MetastoreClient, Stat


class PolicyCache:
    def __init__(self, metastore: MetastoreClient, max_entries: int) -> None:
        self.metastore = metastore
        self.max_entries = max_entries
        self.live = False  # a watch is running
        self._entries: OrderedDict[str, Stat] = OrderedDict()
        self._generation = 0

    def start(self) -> None:
        """The watch (re)started: what is read from now on may be kept."""
        self._entries.clear()
        self._generation += 1
        self.live = True

    def stop(self) -> None:
        """The watch ended: nothing cached can be trusted any more."""
        self.live = False
        self._entries.clear()
        self._generation += 1

    def changed(self, key: str) -> None:
        """``key`` changed (a watch event, or this broker wrote it)."""
        self._entries.pop(key, None)
        self._generation += 1

    def peek(self, key: str) -> Stat | None:
        """The kept copy of ``key``, if any (no read)."""
        return self._entries.get(key) if self.live else None

    async def get(self, key: str) -> Stat | None:
        if self.live and key in self._entries:
            return self._entries[key]
        generation = self._generation
        stat = await self.metastore.get(key)
        # A missing record is not kept: no name asked for can push out real ones.
        if stat is not None and self.live and generation == self._generation:
            self._entries[key] = stat
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
        return stat
