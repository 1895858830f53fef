"""Acknowledgement grouping: Pulsar's ``AckGroupingTracker``.

Theory of operation. The acknowledgements a consumer takes between two
flushes are kept here and go to the broker together: every individually
acknowledged entry, plus the batch-index acks of the batch entries not
acknowledged whole, in one ``Ack(INDIVIDUAL)``; the highest cumulative
position in one ``Ack(CUMULATIVE)``. A flush is due
``ack_grouping_time_ms`` after the first ack since the last flush, or at
once when ``ack_grouping_max_size`` acks are pending (individual positions
plus entries with batch-index acks): that is the bound on what is kept.

Each ``add_*`` answers the delay after which the flush timer must fire
when it must be armed (or armed to fire earlier than it would), else None;
the caller arms the timer and calls ``take()`` when it fires (or sooner: on
close, seek, redelivery). ``take()`` hands out everything and starts a new
group; ``restore()`` puts back what a failed flush could not send, in
front of what came since, to go with the next flush (after a
reconnection). It arms nothing: the next ack, or the reconnection, flushes.

I/O-free and clock-free (callers pass ``now_s``); not thread-safe (the
consumer engine calls it under its lock).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from client.message import BatchAckTracker, Message
from protos.message_id import MessageId

Position = tuple[int, int]


@dataclass
class PendingAcks:
    """One group of acknowledgements, as a flush sends them."""

    individual: list[Position] = field(default_factory=list)
    # Batch entry -> (its batch size, the acknowledged batch indexes).
    batch_index: dict[Position, tuple[int, set[int]]] = field(default_factory=dict)
    cumulative: Position | None = None

    def __bool__(self) -> bool:
        return bool(self.individual or self.batch_index or self.cumulative is not None)


class AckGroupingTracker:
    def __init__(self, group_time_s: float, max_size: int) -> None:
        assert group_time_s >= 0 and max_size >= 1, (group_time_s, max_size)
        self.group_time_s = group_time_s
        self.max_size = max_size
        self._acks = PendingAcks()
        # When the armed flush timer fires (None: no timer since the last take).
        self._flush_at_s: float | None = None

    def add_individual(self, positions: Iterable[Position], now_s: float) -> float | None:
        """Entries acknowledged whole (a message, or every chunk of one)."""
        self._acks.individual.extend(positions)
        return self._due(now_s)

    def add_batch_index(
        self, pos: Position, batch_size: int, batch_index: int, now_s: float
    ) -> float | None:
        """One message of a batch entry (batch-index acknowledgement)."""
        self._acks.batch_index.setdefault(pos, (batch_size, set()))[1].add(batch_index)
        return self._due(now_s)

    def add_cumulative(self, pos: Position, now_s: float) -> float | None:
        """Everything up to ``pos``; only the highest position is kept."""
        if self._acks.cumulative is None or pos > self._acks.cumulative:
            self._acks.cumulative = pos
        return self._due(now_s)

    def pending(self) -> int:
        """What counts against ``max_size``."""
        return len(self._acks.individual) + len(self._acks.batch_index)

    def take(self) -> PendingAcks:
        """Everything to send now; the tracker starts a new group. Batch-index
        acks of an entry also acknowledged whole are left out."""
        acks, self._acks = self._acks, PendingAcks()
        self._flush_at_s = None
        whole = set(acks.individual)
        acks.batch_index = {p: a for p, a in acks.batch_index.items() if p not in whole}
        return acks

    def restore(self, acks: PendingAcks) -> None:
        """Put back a group a flush could not send."""
        self._acks.individual[:0] = acks.individual
        cumulative = acks.cumulative
        if cumulative is not None and (
            self._acks.cumulative is None or cumulative > self._acks.cumulative
        ):
            self._acks.cumulative = cumulative
        for pos, (size, indexes) in acks.batch_index.items():
            self._acks.batch_index.setdefault(pos, (size, set()))[1].update(indexes)

    def _due(self, now_s: float) -> float | None:
        delay_s = 0.0 if self.pending() >= self.max_size else self.group_time_s
        if self._flush_at_s is not None and self._flush_at_s <= now_s + delay_s:
            return None  # the armed timer fires soon enough
        self._flush_at_s = now_s + delay_s
        return delay_s


def ack_target(target: Message | MessageId, verb: str) -> tuple[MessageId, BatchAckTracker | None]:
    """The id an ack (or nack) names, and the batch it is part of (a Message of
    a batch entry)."""
    if isinstance(target, Message):
        return target.message_id(), target._batch
    if isinstance(target, MessageId):
        return target, None
    raise TypeError(f"{verb} takes a Message or MessageId, not {type(target).__name__}")


def cumulative_position(target: Message | MessageId) -> tuple[int, int]:
    """The last entry a cumulative ack covers: a message inside a batch not
    acknowledged through its end covers the entries before its own."""
    mid, batch = ack_target(target, "acknowledge_cumulative")
    if batch is not None and not batch.ack_through(mid.batch_index()) and batch.outstanding:
        return (mid.ledger_id(), mid.entry_id() - 1)
    return mid.position
