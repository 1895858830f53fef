"""Reassembly of chunked messages on the consumer side.

Theory of operation. Chunks of one message share a ``uuid`` (the producer's
name and the message's sequence id) and its publish time, and are stored in
order, interleaved with other producers' chunks. A message is known by both:
a producer's resend is the same bytes, while a restarted producer may use
the uuid again for a new message, never with the same publish time.
At-least-once resends can store a chunk twice (a producer resends what has
no receipt, and the broker admits an inner chunk again even with
deduplication), and the broker delivers an entry again after a reconnect or
a redelivery request. Since copies are the same bytes, any copy of chunk
``k`` will do. :func:`take_chunk` decides what one chunk means for its
message:

* the next chunk of a message being assembled: appended (``APPEND``);
* a chunk at a position the message already holds: the same entry
  delivered again, nothing to do (``COPY``);
* an earlier chunk id at another position: a stored copy, acknowledged
  (``DUPLICATE``); so is any chunk of a message completed lately, at a
  position that message did not use (a resend of it, even one that never
  completes, such as chunks 0 and 1 again without the last one, which
  deduplication refused), where completed messages are remembered;
* a chunk past a missing one (``GAP``), or one whose message is not held
  (``STRAY``, e.g. its start was evicted): its message is dropped.

Nothing a message still needs is acknowledged: a copy is acknowledged only
when the message it copies is held or was completed (then queued for the
application, which acknowledges that message's own positions).

:class:`ChunkAssembler` keeps at most ``max_pending`` incomplete messages (a
new one evicts the oldest) and remembers as many completed ones (the
positions of their chunks), so a late copy of their chunks is recognised;
an incomplete message older than ``expire_s`` is dropped. It remembers
completed messages only when one consumer gets every entry of the
subscription, in order (Exclusive, Failover): on Shared and Key_Shared
another consumer may hold the message's own chunks, and a copy acknowledged
here could be the only one left. Incomplete messages are forgotten when
the broker delivers their chunks again anyway (:meth:`restart`). A whole
message's redelivery count is the highest of its chunks' (a dropped first
chunk comes back counted, its later chunks may arrive first-time). What is
dropped is returned as the chunk positions, so the consumer can
acknowledge them (``auto_ack_oldest_chunked_message_on_queue_full``) or
have them redelivered; what is to be acknowledged is returned apart.
I/O-free: the consumer engine passes the time.
"""

from __future__ import annotations

import collections
import enum
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import NamedTuple

Position = tuple[int, int]


class Take(enum.Enum):
    APPEND = "append"
    START = "start"
    COPY = "copy"
    DUPLICATE = "duplicate"
    GAP = "gap"
    STRAY = "stray"


def take_chunk(
    held: list[Position] | None,
    chunk_id: int,
    pos: Position,
    completed: Collection[Position] | None,
) -> Take:
    """What chunk ``chunk_id`` at ``pos`` is, given the positions ``held``
    for its message (None: none is being assembled) and those of its
    message completed lately (None: not remembered)."""
    if held is not None:
        if pos in held:
            return Take.COPY
        if chunk_id == len(held):
            return Take.APPEND
        return Take.DUPLICATE if chunk_id < len(held) else Take.GAP
    if completed is not None and pos not in completed:
        return Take.DUPLICATE
    return Take.START if chunk_id == 0 else Take.STRAY


@dataclass
class _Partial:
    total: int
    started_s: float
    redelivery_count: int = 0
    parts: list[bytes] = field(default_factory=list)
    positions: list[Position] = field(default_factory=list)


@dataclass
class Assembled:
    payload: bytes
    positions: list[Position]
    redelivery_count: int = 0


class Added(NamedTuple):
    """One chunk's outcome: the whole message if it completed one, the
    incomplete messages given up (their chunks' positions), and positions
    to acknowledge (copies)."""

    whole: Assembled | None
    dropped: list[list[Position]]
    acked: list[Position]


Key = tuple[str, int]  # (uuid, publish time): one message


class ChunkAssembler:
    def __init__(self, max_pending: int, expire_s: float, remember_completed: bool = True) -> None:
        self.max_pending = max_pending
        self.expire_s = expire_s
        self.remember_completed = remember_completed
        self._partial: collections.OrderedDict[Key, _Partial] = collections.OrderedDict()
        # The last ``max_pending`` completed messages' chunk positions.
        self._completed: collections.OrderedDict[Key, frozenset[Position]] = (
            collections.OrderedDict()
        )

    def add(
        self,
        key: Key,
        chunk_id: int,
        total: int,
        payload: bytes,
        pos: Position,
        now_s: float,
        redelivery_count: int = 0,
    ) -> Added:
        """Take one chunk of message ``key`` (see :func:`take_chunk`)."""
        partial = self._partial.get(key)
        held = None if partial is None else partial.positions
        take = take_chunk(held, chunk_id, pos, self._completed.get(key))
        if take is Take.DUPLICATE:
            return Added(None, [], [pos])
        if take in (Take.GAP, Take.STRAY):
            gone = [] if partial is None else [self._partial.pop(key).positions]
            return Added(None, [*gone, [pos]], [])
        dropped: list[list[Position]] = []
        if partial is None:  # (START) a new message
            while len(self._partial) >= self.max_pending:
                dropped.append(self._partial.popitem(last=False)[1].positions)
            partial = self._partial[key] = _Partial(total, now_s)
        partial.redelivery_count = max(partial.redelivery_count, redelivery_count)
        if take is Take.COPY:
            return Added(None, [], [])
        partial.parts.append(payload)
        partial.positions.append(pos)
        if len(partial.parts) < partial.total:
            return Added(None, dropped, [])
        del self._partial[key]
        if self.remember_completed:
            self._completed.pop(key, None)
            self._completed[key] = frozenset(partial.positions)
            while len(self._completed) > self.max_pending:
                self._completed.popitem(last=False)
        whole = Assembled(b"".join(partial.parts), partial.positions, partial.redelivery_count)
        return Added(whole, dropped, [])

    def restart(self, forget_completed: bool = False) -> None:
        """Forget the incomplete messages: the broker delivers their chunks
        again (a reconnect, a seek; on Shared and Key_Shared a redelivery of
        everything unacknowledged, which may go to another consumer); after
        a seek, the completed ones too (read again as asked)."""
        self._partial.clear()
        if forget_completed:
            self._completed.clear()

    def expire(self, now_s: float) -> list[list[Position]]:
        old = [u for u, p in self._partial.items() if now_s - p.started_s >= self.expire_s]
        return [self._partial.pop(u).positions for u in old]

    def __len__(self) -> int:
        return len(self._partial)
