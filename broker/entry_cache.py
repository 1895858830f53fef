"""Recently added entries of every topic of a broker, for tailing consumers.

One byte-bounded cache per broker (``managed_ledger_cache_size_mb``): an
entry is kept from the moment it is stored, and the oldest go first once
the bytes held exceed the bound. An entry larger than the whole bound is
never kept. A miss is read from the bookies.
"""

from __future__ import annotations

import collections

Position = tuple[int, int]


class EntryCache:
    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.size = 0
        self._entries: collections.OrderedDict[Position, bytes] = collections.OrderedDict()

    def put(self, pos: Position, data: bytes) -> None:
        if len(data) > self.max_bytes:
            return
        self._entries[pos] = data
        self.size += len(data)
        while self.size > self.max_bytes:
            _, old = self._entries.popitem(last=False)
            self.size -= len(old)

    def get(self, pos: Position) -> bytes | None:
        return self._entries.get(pos)

    def clear(self) -> None:
        self._entries.clear()
        self.size = 0
