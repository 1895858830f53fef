"""Broker-side message deduplication (Pulsar's PIP-6, seed: Message
deduplication): the admission rule and the state it reads.

Theory of operation. Per topic, for every producer name the broker keeps the
highest sequence id *pushed* (handed to storage) and *persisted* (stored).
:func:`admit` decides each entry a producer sends, before it is stored, as
Pulsar's ``PersistentTopic.publishMessage`` does:

* **refused**: the entry is over ``max_message_size`` or its metadata does
  not parse; nothing is stored;
* **duplicate**: its highest sequence id is at or below the persisted one;
  it is answered as stored (message id -1:-1) and not written again;
* **in-flight**: its highest sequence id is at or below the pushed one; it
  is refused with a retryable error;
* **admit**: it is stored. With deduplication on, the push is recorded; when
  a write fails, pushed falls back to persisted, so the retry of that send
  is not taken for a duplicate.

The chunks of one chunked message share its sequence id: only the last chunk
counts for deduplication. At most ``max_producers`` names are tracked (the
oldest are forgotten first). Everything here is decisions on state: no I/O,
no clock. The state survives restarts through snapshots and a replay of the
entries after them (:mod:`broker.dedup_snapshots`).
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass

from protos import common_pb2
from protos.entry import CorruptedEntryError, num_messages, parse_metadata

Position = tuple[int, int]


class Outcome(enum.Enum):
    ADMIT = "admit"
    DUPLICATE = "duplicate"
    IN_FLIGHT = "in-flight"
    REFUSED = "refused"


@dataclass(slots=True)  # not frozen: built once per entry, and frozen init is slow
class Admission:
    outcome: Outcome
    highest: int = -1  # the send's highest sequence id
    tracked: bool = False  # admitted, and deduplication records it
    code: int = common_pb2.OK  # refused / in-flight: the error to answer
    message: str = ""


class DedupState:
    def __init__(self, snapshot_interval: int = 1000, max_producers: int = 10000) -> None:
        self.enabled = False
        self.pushed: dict[str, int] = {}
        self.persisted: dict[str, int] = {}
        self.snapshot_interval = snapshot_interval
        self.max_producers = max_producers
        self.since_snapshot = 0
        self.covered: Position | None = None  # the position the last snapshot covers

    def check(self, producer: str, highest: int) -> Outcome:
        if highest <= self.persisted.get(producer, -1):
            return Outcome.DUPLICATE
        if highest <= self.pushed.get(producer, -1):
            return Outcome.IN_FLIGHT
        return Outcome.ADMIT

    def pushed_to(self, producer: str, highest: int) -> None:
        self.pushed[producer] = max(self.pushed.get(producer, -1), highest)
        self._bound(self.pushed)

    def stored(self, producer: str, highest: int) -> bool:
        """Record a stored send; True when a snapshot is due."""
        self.persisted[producer] = max(self.persisted.get(producer, -1), highest)
        self._bound(self.persisted)
        self.since_snapshot += 1
        return self.since_snapshot >= self.snapshot_interval

    def failed(self, producer: str) -> None:
        """A write failed: its retry must not look like a duplicate."""
        self.pushed[producer] = self.persisted.get(producer, -1)

    def observe(self, entries: list[tuple[Position, bytes]], in_flight_too: bool = True) -> int:
        """Entries found stored (a failed ledger's recovery, a replay after a
        snapshot): their producers' sequence ids count as persisted (and
        pushed); inner chunks count for nothing. Returns how many entries
        counted."""
        seen = 0
        for _, data in entries:
            got = producer_and_highest(data)
            if got is None:
                continue
            name, highest = got
            self.persisted[name] = max(self.persisted.get(name, -1), highest)
            if in_flight_too:
                self.pushed[name] = max(self.pushed.get(name, -1), highest)
            seen += 1
        return seen

    def last_sequence_id(self, producer: str) -> int:
        return self.persisted.get(producer, -1)

    def _bound(self, d: dict[str, int]) -> None:
        """Forget the oldest names over the limit, from both maps."""
        while len(d) > self.max_producers:
            name = next(iter(d))
            self.pushed.pop(name, None)
            self.persisted.pop(name, None)

    # ------------------------------------------------------------ snapshots

    def snapshot_record(self, position: Position) -> bytes:
        """The snapshot record covering everything stored up to ``position``."""
        return json.dumps({"position": list(position), "producers": self.persisted}).encode()

    def snapshot_written(self, position: Position) -> None:
        self.since_snapshot = 0
        self.covered = position

    def restore(self, record: bytes) -> Position:
        """Load a snapshot record; returns the position it covers."""
        data = json.loads(record)
        self.persisted = {str(k): int(v) for k, v in data["producers"].items()}
        return int(data["position"][0]), int(data["position"][1])

    def replayed(self, start: Position) -> None:
        """The entries after ``start`` were replayed: nothing is in flight."""
        self._bound(self.persisted)
        self.pushed = dict(self.persisted)
        self.covered = start


def producer_and_highest(entry: bytes) -> tuple[str, int] | None:
    """(producer name, highest sequence id) of a stored entry; None for an
    inner chunk (its message is stored once its last chunk is, as in admit)."""
    try:
        meta = parse_metadata(entry)
    except CorruptedEntryError:
        return None
    if _inner_chunk(meta):
        return None
    return meta.producer_name, meta.sequence_id + num_messages(meta) - 1


def _inner_chunk(meta: common_pb2.MessageMetadata) -> bool:
    return meta.num_chunks_from_msg > 1 and meta.chunk_id < meta.num_chunks_from_msg - 1


def admit(
    entry: bytes,
    producer: str,
    sequence_id: int,
    messages: int,
    state: DedupState,
    max_message_size: int,
) -> Admission:
    """Decide one entry ``producer`` sends (see the module docstring):
    ``sequence_id`` is its first message's, ``messages`` how many it holds."""
    if len(entry) > max_message_size:
        return Admission(
            Outcome.REFUSED,
            code=common_pb2.MESSAGE_TOO_BIG,
            message=f"entry of {len(entry)} bytes is over max_message_size "
            f"({max_message_size} bytes)",
        )
    try:
        meta = parse_metadata(entry)
    except CorruptedEntryError as exc:
        return Admission(Outcome.REFUSED, code=exc.code, message=exc.message)
    if messages < 1:
        return Admission(
            Outcome.REFUSED,
            code=common_pb2.INVALID_ARGUMENT,
            message=f"an entry holds at least one message; the send says {messages}",
        )
    highest = sequence_id + messages - 1
    if not state.enabled or _inner_chunk(meta):
        return Admission(Outcome.ADMIT, highest)
    outcome = state.check(producer, highest)
    if outcome is Outcome.IN_FLIGHT:
        return Admission(
            outcome,
            highest,
            code=common_pb2.SERVICE_NOT_READY,
            message=f"sequence id {highest} of {producer} is still being stored; retry",
        )
    return Admission(outcome, highest, tracked=outcome is Outcome.ADMIT)
