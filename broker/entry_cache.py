"""Recently added entries of every topic of a broker, for tailing consumers.

One byte-bounded cache per broker (``managed_ledger_cache_size_mb``): an
entry is kept from the moment it is stored, and the oldest go first once
the bytes held exceed the bound. An entry larger than the whole bound is
never kept. A miss is read from the bookies (the managed ledger reports each
read's hits and misses with :meth:`EntryCache.counted`). Entries never change once stored and
ledger ids are never reused, so an entry of a topic closed here stays valid
until it ages out.

The cache counts what Pulsar's ``pulsar_ml_cache_*`` series show: hits and
misses (entries and bytes, with rates), entries inserted and evicted.
"""

from __future__ import annotations

import collections

from broker.meter import DEFAULT_WINDOW_S, Meter

Position = tuple[int, int]


class EntryCache:
    def __init__(self, max_bytes: int, window_s: float = DEFAULT_WINDOW_S) -> None:
        self.max_bytes = max_bytes
        self.size = 0
        self._entries: collections.OrderedDict[Position, bytes] = collections.OrderedDict()
        self.hits = Meter(window_s)  # entries and bytes served from the cache
        self.misses = Meter(window_s)  # entries and bytes read from bookies instead
        self.inserted = 0
        self.evicted = 0

    def __len__(self) -> int:
        return len(self._entries)

    def put(self, pos: Position, data: bytes) -> None:
        if len(data) > self.max_bytes:
            return
        self._entries[pos] = data
        self.size += len(data)
        self.inserted += 1
        while self.size > self.max_bytes:
            _, old = self._entries.popitem(last=False)
            self.size -= len(old)
            self.evicted += 1

    def get(self, pos: Position) -> bytes | None:
        return self._entries.get(pos)

    def counted(self, hits: int, hit_bytes: int, misses: int, miss_bytes: int) -> None:
        """One read's entries served from the cache and read from bookies
        (counted once per read, not per entry: this is the dispatch path)."""
        if hits:
            self.hits.add(hits, hit_bytes)
        if misses:
            self.misses.add(misses, miss_bytes)

    def clear(self) -> None:
        self.evicted += len(self._entries)
        self._entries.clear()
        self.size = 0
