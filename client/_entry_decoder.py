"""From delivered entries to the messages a consumer queues.

Theory of operation. Each entry the broker delivers (its position,
redelivery count, bytes and the mask of batch indexes acknowledged before)
becomes a :class:`DecodedEntry`, in four steps:

1. A chunk goes to the :class:`~client.chunks.ChunkAssembler`; until its
   message is whole it yields nothing and its permit is freed (the chunk is
   held here, not in the queue). Incomplete messages the assembler gives up
   are handed back as ``dropped_chunks``, chunks it found to be copies as
   ``acked_chunks``.
2. The entry (or the reassembled message) is unpacked: decompressed, a
   batch split into its messages. An entry that does not decode is
   reported (``error``) and skipped.
3. Messages whose batch index is set in the mask were acknowledged before
   (batch-index acks, then a redelivery of the whole entry): skipped, their
   permits freed.
4. An entry delivered more than the dead letter policy's
   ``max_redeliver_count`` times is marked ``dead_letter``: it goes to the
   dead letter topic, not to the queue.

Then, over a whole delivery, :class:`StartMessageSkip`: a start message id
inside a batch (a reader's start, a seek target) delivers its whole entry,
so the messages of that entry before it (and itself, unless inclusive) are
skipped, until an entry past it arrives. For the same start,
:func:`unread_stored` says whether a reader has anything left to read.

I/O-free: the consumer engine passes the time (chunk expiry) and acts on
each result (permits, dropped chunks, dead letters, the queue).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from client.chunks import ChunkAssembler
from client.exceptions import MagnetarError
from client.message import Message, is_chunk, unpack_split
from protos.entry import split_entry
from protos.message_id import MessageId

Position = tuple[int, int]


class DeliveredEntry(NamedTuple):
    ledger_id: int
    entry_id: int
    redelivery_count: int
    entry: bytes
    # Little-endian bitmask of batch indexes acknowledged before (b"": none).
    acked_batch_indexes: bytes = b""


@dataclass
class DecodedEntry:
    position: Position
    # For the queue, or for the dead letter topic when ``dead_letter``.
    messages: list[Message] = field(default_factory=list)
    dead_letter: bool = False
    # Messages that used a permit and will not reach the queue or the dead
    # letter topic (acknowledged batch indexes, a chunk held here).
    freed_permits: int = 0
    held_chunk: bool = False
    # A reassembled chunked message: the positions of all its chunks.
    chunk_positions: list[Position] | None = None
    # Incomplete chunked messages given up (each as its chunks' positions).
    dropped_chunks: list[list[Position]] = field(default_factory=list)
    # Chunks to acknowledge: stored copies of a chunk.
    acked_chunks: list[Position] = field(default_factory=list)
    error: MagnetarError | None = None


def skip_acked_indexes(messages: list[Message], mask: int) -> list[Message]:
    """The messages of a redelivered batch not acknowledged before; the others
    leave their batch's outstanding set, so acking the rest completes it."""
    kept = []
    for m in messages:
        index = m.message_id().batch_index()
        if index >= 0 and mask >> index & 1:
            if m._batch is not None:
                m._batch.outstanding.discard(index)
            continue
        kept.append(m)
    return kept


class StartMessageSkip:
    """Skips the messages before a start id inside a batch (entry granularity
    elsewhere: the broker starts at the start id's entry)."""

    def __init__(self, start: MessageId | None, inclusive: bool) -> None:
        self._before: MessageId | None = None
        self._inclusive = inclusive
        if start is not None:
            self.skip_to(start, inclusive)

    def skip_to(self, target: MessageId, inclusive: bool) -> None:
        """From now on (a seek): skip up to ``target``, when it is inside a
        batch; else keep whatever skip is in place."""
        if target.batch_index() >= 0 and target.ledger_id() >= 0:
            self._before = target
            self._inclusive = inclusive

    def filter(self, messages: list[Message]) -> list[Message]:
        """The messages of one delivery (in order) not before the start."""
        skip = self._before
        if skip is None or not messages:
            return messages
        kept = []
        for m in messages:
            mid = m.message_id()
            if mid.position != skip.position:
                if mid.position > skip.position:
                    self._before = None  # past the start entry: nothing more to skip
                kept.append(m)
            elif mid.batch_index() > skip.batch_index() or (
                self._inclusive and mid.batch_index() == skip.batch_index()
            ):
                kept.append(m)
        return kept


def unread_stored(
    last: MessageId, read: MessageId | None, start: MessageId | None, inclusive: bool
) -> bool:
    """Whether the topic stores a message a reader has not read: ``last`` is
    the last stored entry, ``read`` the last message taken (None: none yet),
    ``start`` and ``inclusive`` where the reader started. Entry granularity,
    as every message of an entry arrives together."""
    if last.entry_id() < 0:
        return False  # nothing stored
    if read is not None:
        return last.position > read.position
    if start is None or start.ledger_id() < 0:
        return True  # earliest: the topic holds an entry
    if start == MessageId.latest:
        return inclusive
    if inclusive or start.batch_index() >= 0:
        return last.position >= start.position  # the start entry itself is to be read
    return last.position > start.position


class EntryDecoder:
    def __init__(
        self,
        partition: int,
        chunks: ChunkAssembler,
        max_redeliver_count: int | None,
    ) -> None:
        self.partition = partition
        self.chunks = chunks
        self.max_redeliver_count = max_redeliver_count

    def decode(self, delivered: DeliveredEntry, topic: str, now_s: float) -> DecodedEntry:
        """One entry's outcome; a payload that does not decode (the SDK's typed
        error, e.g. a bad compression) is reported in ``error``."""
        ledger_id, entry_id, redelivery, entry, mask = delivered
        out = DecodedEntry((ledger_id, entry_id))
        chunk_positions = None
        try:
            meta, view = split_entry(entry)
            payload: bytes | memoryview = view
            if is_chunk(meta):
                whole, out.dropped_chunks, out.acked_chunks = self.chunks.add(
                    (meta.uuid, meta.publish_time),
                    meta.chunk_id,
                    meta.num_chunks_from_msg,
                    bytes(view),
                    out.position,
                    now_s,
                    redelivery,
                )
                if whole is None:
                    out.held_chunk, out.freed_permits = True, 1
                    return out
                payload, redelivery = whole.payload, whole.redelivery_count
                chunk_positions = whole.positions
            messages = unpack_split(
                meta, payload, ledger_id, entry_id, self.partition, topic, redelivery
            )
        except MagnetarError as exc:
            out.error = exc
            return out
        if chunk_positions is not None:
            messages[0]._chunks = out.chunk_positions = chunk_positions
        return self._after_unpacking(out, messages, mask, redelivery)

    def _after_unpacking(
        self, out: DecodedEntry, messages: list[Message], mask: bytes, redelivery: int
    ) -> DecodedEntry:
        if mask:
            kept = skip_acked_indexes(messages, int.from_bytes(mask, "little"))
            out.freed_permits = len(messages) - len(kept)
            messages = kept
            if not messages:
                return out
        out.messages = messages
        out.dead_letter = self.past_dead_letter_threshold(redelivery)
        return out

    def past_dead_letter_threshold(self, redelivery_count: int) -> bool:
        """Delivered more than ``max_redeliver_count`` times (Pulsar's rule)."""
        limit = self.max_redeliver_count
        return limit is not None and redelivery_count > limit
