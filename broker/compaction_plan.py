"""Topic compaction, decided with no I/O (Pulsar's two-phase compactor).

Theory of operation. A compaction reads the topic's *compacted view* — the
entries of the previous compacted ledger, then the live topic after that
ledger's horizon up to the last entry stored when the run began — twice:

1. :meth:`KeyTable.add` remembers, for every key, the position (entry and
   batch index) of its latest message. A tombstone (a key with a null
   value) forgets the key; a message without a key never enters the view.
2. :meth:`KeyTable.kept` keeps, of each entry, the messages that are still
   their key's latest. An entry that keeps none is left out; one that keeps
   some is written to the new compacted ledger as a :class:`CompactedEntry`:
   its original position, the batch indexes kept and the original entry
   bytes. A reader of the view so sees the original message ids, and the
   broker delivers the batch indexes left out as already acknowledged, the
   way batch-index acknowledgements are delivered (no payload is rewritten
   and nothing is recompressed).

The table is bounded by ``max_keys`` (the ``compaction_max_keys`` setting):
a topic with more live keys fails the run with :class:`CompactionError` and
nothing changes. As in Pulsar, an empty value counts as a tombstone too.
Chunked messages are not part of the view (as with Pulsar's compactor):
their chunks are treated as messages without a key, and so is an entry
that does not decode (a producer's garbage must not stop every later run).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from protos import common_pb2
from protos.entry import iter_batch, split_entry

Position = tuple[int, int]
Decompress = Callable[[int, memoryview, int], bytes]
COMPACTION_SUBSCRIPTION = "__compaction"  # the compactor's progress (Pulsar's name)

_HEADER = struct.Struct(">qqI")  # original ledger id, entry id, count of kept indexes
_INDEX = struct.Struct(">I")


class CompactedSource(Protocol):
    """A topic's compacted view as a dispatcher reads it (broker.compaction)."""

    ledger_id: int
    horizon: Position
    positions: list[Position]

    def index_after(self, pos: Position) -> int: ...

    async def read(self, first: int, max_entries: int) -> list[CompactedEntry]: ...


class CompactionError(Exception):
    """The run cannot go on (too many keys, an entry that does not decode)."""


@dataclass(frozen=True)
class MessageFacts:
    batch_index: int  # -1: the entry holds this one message
    key: str | None  # the partition key; None: no key
    null_value: bool  # a tombstone


def messages_of(entry: bytes, decompress: Decompress, max_size: int) -> list[MessageFacts]:
    """What compaction needs of each message of a stored entry; an entry
    that does not decode (or claims more than ``max_size`` bytes
    uncompressed) is one message without a key."""
    try:
        meta, payload = split_entry(entry)
        if meta.num_chunks_from_msg > 1:
            return [MessageFacts(-1, None, False)]
        if not meta.HasField("num_messages_in_batch"):
            key = meta.partition_key if meta.HasField("partition_key") else None
            size = meta.uncompressed_size if meta.HasField("uncompressed_size") else len(payload)
            return [MessageFacts(-1, key, meta.null_value or size == 0)]
        if meta.compression != common_pb2.NONE:
            if not 0 <= meta.uncompressed_size <= max_size:
                return [MessageFacts(-1, None, False)]
            payload = memoryview(decompress(meta.compression, payload, meta.uncompressed_size))
        return [
            MessageFacts(
                i,
                smm.partition_key if smm.HasField("partition_key") else None,
                smm.null_value or smm.payload_size == 0,
            )
            for i, (smm, _) in enumerate(iter_batch(payload, meta.num_messages_in_batch))
        ]
    except Exception:  # garbage from a producer: not part of the view
        return [MessageFacts(-1, None, False)]


class KeyTable:
    def __init__(self, max_keys: int) -> None:
        self.max_keys = max_keys
        self._latest: dict[str, tuple[Position, int]] = {}
        self.messages = 0  # read in phase one
        self.tombstones = 0
        self.kept_messages = 0  # written in phase two

    def __len__(self) -> int:
        return len(self._latest)

    def add(self, pos: Position, messages: list[MessageFacts]) -> None:
        """Phase one: the messages of the entry at ``pos``, in order."""
        for m in messages:
            self.messages += 1
            if m.key is None:
                continue
            if m.null_value:
                self.tombstones += 1
                self._latest.pop(m.key, None)
                continue
            self._latest[m.key] = (pos, m.batch_index)
            if len(self._latest) > self.max_keys:
                raise CompactionError(
                    f"the topic has more than {self.max_keys} keys (compaction_max_keys)"
                )

    def kept(self, pos: Position, messages: list[MessageFacts]) -> list[int]:
        """Phase two: the batch indexes of the entry at ``pos`` still latest
        for their key (``[-1]`` for a one-message entry kept)."""
        kept = [
            m.batch_index
            for m in messages
            if m.key is not None
            and not m.null_value
            and self._latest.get(m.key) == (pos, m.batch_index)
        ]
        self.kept_messages += len(kept)
        return kept


@dataclass(frozen=True)
class CompactedEntry:
    position: Position
    kept: tuple[int, ...]  # batch indexes kept; (-1,) for a one-message entry
    entry: bytes  # the original entry, as stored

    def encode(self) -> bytes:
        head = _HEADER.pack(self.position[0], self.position[1], len(self.kept))
        return head + b"".join(_INDEX.pack(i & 0xFFFFFFFF) for i in self.kept) + self.entry

    @classmethod
    def decode(cls, data: bytes) -> CompactedEntry:
        if len(data) < _HEADER.size:
            raise CompactionError(f"a compacted entry of {len(data)} bytes has no header")
        ledger_id, entry_id, count = _HEADER.unpack_from(data)
        end = _HEADER.size + count * _INDEX.size
        if count < 1 or len(data) < end:
            raise CompactionError(f"a compacted entry lists {count} messages it does not hold")
        kept = tuple(
            struct.unpack(">i", data[o : o + 4])[0] for o in range(_HEADER.size, end, _INDEX.size)
        )
        return cls((ledger_id, entry_id), kept, data[end:])

    def skipped_mask(self, messages: int) -> int:
        """The batch indexes left out, as the bitmask of acknowledged indexes
        a delivery carries (0: nothing left out)."""
        if self.kept == (-1,):
            return 0
        kept = sum(1 << i for i in self.kept)
        return ((1 << messages) - 1) & ~kept


def skipped_spans(
    after: Position, before: Position, ledger_ids: list[int], last_entry_of: Callable[[int], int]
) -> list[tuple[Position, Position]]:
    """The positions strictly between ``after`` and ``before``, as closed
    ranges within one ledger each (ledgers no longer the topic's are left out)."""
    out = []
    for ledger_id in ledger_ids:
        if ledger_id < after[0] or ledger_id > before[0]:
            continue
        lo = after[1] + 1 if ledger_id == after[0] else 0
        hi = before[1] - 1 if ledger_id == before[0] else last_entry_of(ledger_id)
        if lo <= hi:
            out.append(((ledger_id, lo), (ledger_id, hi)))
    return out
