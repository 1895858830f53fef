"""Reassembly of chunked messages on the consumer side.

Theory of operation. Chunks of one message share a ``uuid`` and arrive in
order (one producer, one topic), interleaved with other producers' chunks.
:class:`ChunkAssembler` keeps at most ``max_pending`` incomplete messages;
a chunk with a new uuid when it is full evicts the oldest one, a chunk that
does not follow the previous one (a resend) restarts or drops its message,
and an incomplete message older than ``expire_s`` is dropped. A whole
message's redelivery count is the highest of its chunks' (a dropped first
chunk comes back counted, its later chunks may arrive first-time). What is
dropped is returned as the chunk positions, so the consumer can
acknowledge them (``auto_ack_oldest_chunked_message_on_queue_full``) or
have them redelivered. I/O-free: the consumer engine passes the time.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field

Position = tuple[int, int]


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


class ChunkAssembler:
    def __init__(self, max_pending: int, expire_s: float) -> None:
        self.max_pending = max_pending
        self.expire_s = expire_s
        self._partial: collections.OrderedDict[str, _Partial] = collections.OrderedDict()

    def add(
        self,
        uuid: str,
        chunk_id: int,
        total: int,
        payload: bytes,
        pos: Position,
        now_s: float,
        redelivery_count: int = 0,
    ) -> tuple[Assembled | None, list[list[Position]]]:
        """Take one chunk: (the whole message if this completed it, dropped ones)."""
        dropped: list[list[Position]] = []
        partial = self._partial.get(uuid)
        if partial is not None and chunk_id != len(partial.parts):
            # Out of sequence (a resend, or a chunk lost to a redelivery): start over.
            dropped.append(self._partial.pop(uuid).positions)
            partial = None
        if partial is None:
            if chunk_id != 0:
                return None, [*dropped, [pos]]
            while len(self._partial) >= self.max_pending:
                dropped.append(self._partial.popitem(last=False)[1].positions)
            partial = self._partial[uuid] = _Partial(total, now_s)
        partial.parts.append(payload)
        partial.positions.append(pos)
        partial.redelivery_count = max(partial.redelivery_count, redelivery_count)
        if len(partial.parts) < partial.total:
            return None, dropped
        del self._partial[uuid]
        whole = Assembled(b"".join(partial.parts), partial.positions, partial.redelivery_count)
        return whole, dropped

    def expire(self, now_s: float) -> list[list[Position]]:
        old = [u for u, p in self._partial.items() if now_s - p.started_s >= self.expire_s]
        return [self._partial.pop(u).positions for u in old]

    def __len__(self) -> int:
        return len(self._partial)
