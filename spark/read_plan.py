"""What a read of a Magnetar topic covers, decided without I/O (the
``magnetar`` Spark data source, ``docs/spark-datasource.md``).

Theory of operation. The driver turns the options into :class:`ReadOptions`
(every malformed value is refused here, before anything is asked of a
broker), learns each partition's last stored entry (the *snapshot*), and
cuts one :class:`PartitionRange` per partition with :func:`batch_ranges`
(a stream cuts them from two offsets with :func:`stream_range`). An
executor reads a range with a reader and asks :meth:`PartitionRange.verdict`
about each message: skip it, take it, or stop.

Keys. Within one partition messages are ordered by *key* = (ledger id,
entry id, batch index); a message stored alone has batch index -1, so it
sorts before the messages of a batch entry at the same position (as
``MessageId`` orders them). A *position* is (ledger id, entry id): every
message of an entry arrives together, and the snapshot, taken with
``get_last_message_id``, is a position (entry granularity).

Bounds. ``lower`` is inclusive, ``end`` exclusive, ``upper`` (the snapshot)
inclusive of its whole entry, so a read terminates and returns exactly the
messages stored when it was planned; an ``end`` past the snapshot is cut
back to it. The reader starts at ``reader_start``, an entry at or before
``lower`` (it may deliver messages below ``lower``, which are skipped).
Publish-time bounds (``start_time`` inclusive, ``end_time`` exclusive) take
publish times as growing with the position, as the broker's seek by time
does: the read stops at the first message at or after ``end_time``.

Message id strings. ``ledger:entry:partition:batch`` (``12:345:0:-1``),
the partition -1 on a non-partitioned topic, the batch index -1 for a
message stored alone; ``ledger:entry`` and ``ledger:entry:partition`` are
read with the missing fields -1.
"""

from __future__ import annotations

import datetime
import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from protos.errors import InvalidTopicNameError
from protos.topic_name import TopicName

Key = tuple[int, int, int]  # (ledger id, entry id, batch index) within one partition
Position = tuple[int, int]  # (ledger id, entry id)

EARLIEST_KEY: Key = (-1, -1, -1)
NOTHING_STORED: Position = (-1, -1)  # the snapshot of an empty partition

DEFAULT_RECEIVER_QUEUE_SIZE = 5_000
DEFAULT_BATCH_ROWS = 10_000
DEFAULT_READ_TIMEOUT_MS = 60_000
DEFAULT_OPERATION_TIMEOUT_S = 30
MAX_RECEIVER_QUEUE_SIZE = 1_000_000
MAX_BATCH_ROWS = 1_000_000

OPTIONS = (
    "service_url",
    "topic",
    "start_message_id",
    "end_message_id",
    "start_time",
    "end_time",
    "receiver_queue_size",
    "batch_rows",
    "read_timeout_ms",
    "operation_timeout_seconds",
)


class ReadOptionError(ValueError):
    """An option of the ``magnetar`` data source is missing, unknown or malformed."""


class Verdict(enum.Enum):
    SKIP = "skip"
    TAKE = "take"
    STOP = "stop"


# ------------------------------------------------------------------ message ids


def format_message_id(ledger_id: int, entry_id: int, partition: int, batch_index: int) -> str:
    return f"{ledger_id}:{entry_id}:{partition}:{batch_index}"


def parse_message_id(text: str, option: str) -> tuple[int, Key]:
    """(partition, key) of ``ledger:entry[:partition[:batch]]``."""
    parts = text.strip().split(":")
    try:
        if not 2 <= len(parts) <= 4:
            raise ValueError
        numbers = [int(p) for p in parts] + [-1] * (4 - len(parts))
    except ValueError:
        raise ReadOptionError(
            f"{option}: {text!r} is not a message id; expected ledger:entry:partition:batch "
            "(e.g. 12:345:0:-1), as the message_id column shows"
        ) from None
    ledger_id, entry_id, partition, batch_index = numbers
    if ledger_id < 0 or entry_id < 0 or partition < -1 or batch_index < -1:
        raise ReadOptionError(
            f"{option}: {text!r} has a negative field; ledger and entry ids are >= 0, "
            "partition and batch index >= -1"
        )
    return partition, (ledger_id, entry_id, batch_index)


def _parse_ids(text: str, option: str) -> dict[int, Key]:
    """A comma-separated list of message ids, at most one per partition."""
    ids: dict[int, Key] = {}
    for item in text.split(","):
        partition, key = parse_message_id(item, option)
        if partition in ids:
            raise ReadOptionError(f"{option}: partition {partition} is named twice in {text!r}")
        ids[partition] = key
    return ids


# ------------------------------------------------------------------ times


def parse_time_ms(text: str, option: str) -> int:
    """Epoch milliseconds, or an ISO-8601 time (UTC when it names no offset)."""
    value = text.strip()
    if value.isdigit():
        return int(value)
    try:
        when = datetime.datetime.fromisoformat(value)
    except ValueError:
        raise ReadOptionError(
            f"{option}: {text!r} is neither epoch milliseconds nor an ISO-8601 time "
            "(e.g. 2024-05-01T12:00:00Z)"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    ms = int(when.timestamp() * 1000)
    if ms < 0:
        raise ReadOptionError(f"{option}: {text!r} is before 1970-01-01T00:00:00Z")
    return ms


def _parse_int(options: Mapping[str, str], name: str, default: int, top: int) -> int:
    text = options.get(name)
    if text is None:
        return default
    try:
        value = int(str(text).strip())
    except ValueError:
        raise ReadOptionError(f"{name}: {text!r} is not an integer") from None
    if not 1 <= value <= top:
        raise ReadOptionError(f"{name}: {value} is outside 1..{top}")
    return value


# ------------------------------------------------------------------ options


@dataclass(frozen=True)
class ReadOptions:
    service_url: str
    topic: str  # full name
    start_ids: dict[int, Key] = field(default_factory=dict)  # by partition (-1: not partitioned)
    end_ids: dict[int, Key] = field(default_factory=dict)
    start_latest: bool = False  # streams only: start after the entries stored now
    start_time_ms: int | None = None
    end_time_ms: int | None = None
    receiver_queue_size: int = DEFAULT_RECEIVER_QUEUE_SIZE
    batch_rows: int = DEFAULT_BATCH_ROWS
    read_timeout_ms: int = DEFAULT_READ_TIMEOUT_MS
    operation_timeout_s: int = DEFAULT_OPERATION_TIMEOUT_S

    @property
    def has_bounds(self) -> bool:
        """Whether message-id or time bounds were given (``start_message_id=latest`` is none)."""
        return bool(self.start_ids or self.end_ids) or (
            self.start_time_ms is not None or self.end_time_ms is not None
        )


def parse_options(options: Mapping[str, str]) -> ReadOptions:
    """The options of a read, checked (ReadOptionError names what is wrong)."""
    unknown = sorted(set(options) - set(OPTIONS) - {"path"})
    if unknown:
        raise ReadOptionError(
            f"unknown option(s) {', '.join(unknown)}; the magnetar source takes "
            f"{', '.join(OPTIONS)}"
        )
    service_url = (options.get("service_url") or "").strip()
    if not service_url:
        raise ReadOptionError("service_url is required (e.g. magnetar://broker-1:6650)")
    return ReadOptions(
        service_url=service_url,
        topic=_topic(options),
        **_bounds(options),
        receiver_queue_size=_parse_int(
            options, "receiver_queue_size", DEFAULT_RECEIVER_QUEUE_SIZE, MAX_RECEIVER_QUEUE_SIZE
        ),
        batch_rows=_parse_int(options, "batch_rows", DEFAULT_BATCH_ROWS, MAX_BATCH_ROWS),
        read_timeout_ms=_parse_int(
            options, "read_timeout_ms", DEFAULT_READ_TIMEOUT_MS, 24 * 3600 * 1000
        ),
        operation_timeout_s=_parse_int(
            options, "operation_timeout_seconds", DEFAULT_OPERATION_TIMEOUT_S, 3600
        ),
    )


def _topic(options: Mapping[str, str]) -> str:
    topic, path = options.get("topic"), options.get("path")
    if topic and path and topic != path:
        raise ReadOptionError(f"topic {topic!r} and load({path!r}) name different topics")
    name = (topic or path or "").strip()
    if not name:
        raise ReadOptionError("topic is required (.option('topic', T) or .load(T))")
    try:
        parsed = TopicName.parse(name)
    except InvalidTopicNameError as exc:
        raise ReadOptionError(f"topic: {exc}") from None
    if not parsed.is_persistent:
        raise ReadOptionError(
            f"topic: {parsed.full_name} is non-persistent; it stores nothing to read back"
        )
    return parsed.full_name


def _bounds(options: Mapping[str, str]) -> dict:
    start_id, end_id = options.get("start_message_id"), options.get("end_message_id")
    start_time, end_time = options.get("start_time"), options.get("end_time")
    given_ids = [n for n, v in (("start_message_id", start_id), ("end_message_id", end_id)) if v]
    given_times = [n for n, v in (("start_time", start_time), ("end_time", end_time)) if v]
    if given_ids and given_times:
        raise ReadOptionError(
            f"give message-id bounds or time bounds, not both: got {', '.join(given_ids)} "
            f"and {', '.join(given_times)}"
        )
    out: dict = {}
    if start_id and start_id.strip().lower() == "latest":
        out["start_latest"] = True
    elif start_id and start_id.strip().lower() != "earliest":
        out["start_ids"] = _parse_ids(start_id, "start_message_id")
    if end_id and end_id.strip().lower() != "latest":
        out["end_ids"] = _parse_ids(end_id, "end_message_id")
    if start_time:
        out["start_time_ms"] = parse_time_ms(start_time, "start_time")
    if end_time:
        out["end_time_ms"] = parse_time_ms(end_time, "end_time")
    if out.get("start_time_ms", -1) > out.get("end_time_ms", 1 << 62):
        raise ReadOptionError(f"start_time {start_time!r} is after end_time {end_time!r}")
    return out


# ------------------------------------------------------------------ ranges


@dataclass(frozen=True)
class PartitionRange:
    """One partition's share of a read: the unit of a Spark input partition."""

    topic: str  # full name of the topic read (the ``topic`` column)
    partition: int  # -1: not partitioned
    partition_topic: str  # the topic a reader reads
    upper: Position  # the snapshot: the last entry to read, inclusive
    lower: Key = EARLIEST_KEY  # first key to take, inclusive
    reader_start: Position | None = None  # an entry at or before ``lower``; None: earliest
    end: Key | None = None  # first key not to take
    start_time_ms: int | None = None
    end_time_ms: int | None = None

    def is_empty(self) -> bool:
        """Nothing to read, as far as the driver can tell."""
        if self.upper[1] < 0 or self.lower[:2] > self.upper:
            return True
        return self.end is not None and self.end <= self.lower

    def verdict(self, key: Key, publish_time_ms: int) -> Verdict:
        if key[:2] > self.upper:
            return Verdict.STOP  # stored after the snapshot
        if self.end is not None and key >= self.end:
            return Verdict.STOP
        if self.end_time_ms is not None and publish_time_ms >= self.end_time_ms:
            return Verdict.STOP
        if key < self.lower:
            return Verdict.SKIP
        if self.start_time_ms is not None and publish_time_ms < self.start_time_ms:
            return Verdict.SKIP
        return Verdict.TAKE

    def at_snapshot_end(self, key: Key) -> bool:
        """Whether ``key`` is in the snapshot's last entry (the read may end here)."""
        return key[:2] == self.upper


def _check_partitions(ids: dict[int, Key], partitions: list[int], option: str) -> None:
    for p in ids:
        if p not in partitions:
            if partitions == [-1]:
                allowed = "not partitioned: its message ids have partition -1"
            elif partitions == list(range(len(partitions))):
                allowed = f"partitions 0..{len(partitions) - 1}"
            else:
                allowed = f"partition {partitions}"
            raise ReadOptionError(f"{option} names partition {p}; the topic has {allowed}")


def batch_ranges(
    opts: ReadOptions, partition_topics: dict[int, str], snapshot: dict[int, Position]
) -> list[PartitionRange]:
    """The non-empty ranges of a batch read of ``opts.topic``, whose partitions
    (index -> topic to read) stored up to ``snapshot`` when it was planned."""
    if opts.start_latest:
        raise ReadOptionError(
            "start_message_id=latest reads nothing in a batch read (the read ends at the "
            "messages stored when it starts); use spark.readStream for new messages"
        )
    indexes = sorted(partition_topics)
    _check_partitions(opts.start_ids, indexes, "start_message_id")
    _check_partitions(opts.end_ids, indexes, "end_message_id")
    ranges = []
    for p in indexes:
        lower = opts.start_ids.get(p, EARLIEST_KEY)
        # A start time is found by a seek; the reader first checks the snapshot's
        # last entry, so a start after it ends the read instead of waiting.
        if opts.start_time_ms is not None:
            reader_start: Position | None = snapshot[p]
        else:
            reader_start = lower[:2] if lower != EARLIEST_KEY else None
        rng = PartitionRange(
            topic=opts.topic,
            partition=p,
            partition_topic=partition_topics[p],
            upper=snapshot[p],
            lower=lower,
            reader_start=reader_start,
            end=opts.end_ids.get(p),
            start_time_ms=opts.start_time_ms,
            end_time_ms=opts.end_time_ms,
        )
        if not rng.is_empty():
            ranges.append(rng)
    return ranges


def stream_range(
    topic: str, partition: int, partition_topic: str, after: Position, through: Position
) -> PartitionRange:
    """A micro-batch's range of one partition: the entries after ``after``
    (``NOTHING_STORED``: from the earliest) through ``through``."""
    if after == NOTHING_STORED or after[1] < 0:
        return PartitionRange(topic, partition, partition_topic, upper=through)
    return PartitionRange(
        topic,
        partition,
        partition_topic,
        upper=through,
        # Every key of entry ``after`` sorts below (ledger, entry + 1, -1).
        lower=(after[0], after[1] + 1, -1),
        reader_start=after,
    )


def format_position(position: Position) -> str:
    return f"{position[0]}:{position[1]}"


def parse_position(text: str) -> Position:
    """A stream offset's ``ledger:entry`` (``-1:-1``: nothing read)."""
    ledger_id, _, entry_id = str(text).partition(":")
    try:
        return int(ledger_id), int(entry_id)
    except ValueError:
        raise ReadOptionError(f"{text!r} is not a stream offset (ledger:entry)") from None
