"""A producer's entries on their way to the broker: :class:`Batch` (a batch
of messages, or one chunk of a message), how messages group into batches by
key, and one send request of several entries."""

from __future__ import annotations

import time
from collections.abc import Iterable

from client._produce_mux import ProducerCall
from client.message import PendingMessage


class Batch:
    """One entry on its way: a batch of messages, or one chunk of a message
    (only the last chunk carries the message; ``chunk_failure`` is shared by
    the chunks so one failed chunk fails the message)."""

    __slots__ = (
        "chunk_failure",
        "entry",
        "messages",
        "num_messages",
        "sent_at",
        "sequence_id",
    )

    def __init__(
        self,
        messages: list[PendingMessage],
        entry: bytes,
        sequence_id: int | None = None,
        chunk_failure: list[BaseException] | None = None,
    ) -> None:
        self.messages = messages
        self.entry = entry
        self.sequence_id = messages[0].sequence_id if sequence_id is None else sequence_id
        self.num_messages = len(messages)
        self.sent_at = time.monotonic()  # sealed; sent (_send_ready): its send time
        self.chunk_failure = chunk_failure


def group_by_key(messages: list[PendingMessage]) -> list[list[PendingMessage]]:
    """Key-based batching: one batch per key (ordering key, else partition key;
    keyless messages together), in order of each key's first message."""
    groups: dict[object, list[PendingMessage]] = {}
    for m in messages:
        key = m.ordering_key if m.ordering_key is not None else m.partition_key
        groups.setdefault(key, []).append(m)
    return list(groups.values())


def send_batches(call: ProducerCall, batches: Iterable[Batch]) -> None:
    """One send request of these entries (a chunk but the last counts 1)."""
    seqs, nums, entries = [], [], []
    for b in batches:
        seqs.append(b.sequence_id)
        nums.append(b.num_messages or 1)
        entries.append(b.entry)
    call.send_entries(seqs, nums, entries)
