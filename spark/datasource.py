"""The ``magnetar`` Spark data source: a topic as a DataFrame, in batch and
in streaming (Spark 4's Python Data Source API; ``docs/spark-datasource.md``).

    spark.read.format("magnetar").option("service_url", url).option("topic", t).load()

Theory of operation. A batch read is planned in the driver: the topic's
partitions come from its partitioned-topic metadata (a topic that does not
exist raises ``TopicNotFound``; nothing is created), then each partition's
last stored entry is asked through a non-durable subscription that takes no
message and is removed at once (:func:`last_entries`). That snapshot ends the read, so it is
consistent and terminates; ``spark.read_plan`` cuts one input partition per
topic partition. An executor reads its range with an SDK reader (a
non-durable subscription: nothing holds back retention) and hands Spark
Arrow record batches of ``batch_rows`` rows (:class:`ArrowColumns`).

A stream's offsets are, per partition, the last entry read through
(``{"0": "12:345", ...}``; ``-1:-1`` for none); each micro-batch reads the
entries after the previous offset through a new snapshot.

The row schema is :data:`SCHEMA`; ``message_id`` is
``ledger:entry:partition:batch`` (``spark.read_plan``), the form the
``start_message_id``/``end_message_id`` options take.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from client import (
    Client,
    Consumer,
    InitialPosition,
    MagnetarError,
    Message,
    MessageId,
    Reader,
    SubscriptionMode,
    Timeout,
    TopicNotFound,
)
from client.admin import Admin
from protos.topic_name import TopicName
from spark.read_plan import (
    NOTHING_STORED,
    Key,
    PartitionRange,
    Position,
    ReadOptionError,
    ReadOptions,
    Verdict,
    batch_ranges,
    format_position,
    parse_options,
    parse_position,
    stream_range,
)

SCHEMA = StructType(
    [
        StructField("topic", StringType(), False),
        StructField("partition", IntegerType(), False),
        StructField("message_id", StringType(), False),
        StructField("key", StringType(), True),
        StructField("properties", MapType(StringType(), StringType(), True), False),
        StructField("publish_time", TimestampType(), False),
        StructField("event_time", TimestampType(), True),
        StructField("value", BinaryType(), False),
    ]
)
_TIMESTAMP = pa.timestamp("us", tz="UTC")
# What Spark expects of a record batch for SCHEMA (pyspark's to_arrow_schema
# of it, nullability included).
ARROW_SCHEMA = pa.schema(
    [
        pa.field("topic", pa.string(), nullable=False),
        pa.field("partition", pa.int32(), nullable=False),
        pa.field("message_id", pa.string(), nullable=False),
        pa.field("key", pa.string()),
        pa.field("properties", pa.map_(pa.string(), pa.string()), nullable=False),
        pa.field("publish_time", _TIMESTAMP, nullable=False),
        pa.field("event_time", _TIMESTAMP),
        pa.field("value", pa.binary(), nullable=False),
    ]
)


# A stream's planner answers Spark's polls with the last snapshot for this long.
STREAM_SNAPSHOT_INTERVAL_S = 0.2


class MagnetarDataSource(DataSource):
    """``format("magnetar")``: reads a topic (every partition of a partitioned one)."""

    @classmethod
    def name(cls) -> str:
        return "magnetar"

    def schema(self) -> StructType:
        parse_options(self.options)  # a malformed option fails at load()
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return MagnetarBatchReader(parse_options(self.options), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return MagnetarStreamReader(parse_options(self.options), schema)


def _check_schema(schema: StructType) -> None:
    if [(f.name, f.dataType) for f in schema.fields] != [
        (f.name, f.dataType) for f in SCHEMA.fields
    ]:
        raise ReadOptionError(
            f"the magnetar source has the fixed schema {SCHEMA.simpleString()}; "
            f"got {schema.simpleString()}"
        )


# ------------------------------------------------------------------ the driver


def partition_topics(service_url: str, topic: str, timeout_s: float) -> dict[int, str]:
    """Partition index -> topic to read (``{-1: topic}`` when not partitioned);
    ``TopicNotFound`` when the topic does not exist. Creates nothing: a reader
    or a consumer would create a missing topic (auto-creation)."""
    with Admin(service_url, timeout_seconds=timeout_s) as admin:
        n = admin.topics.get_partitioned_topic_metadata(topic)["partitions"]
        if n > 0:
            return {i: f"{topic}-partition-{i}" for i in range(n)}
        try:
            admin.topics.stats(topic)
        except TopicNotFound as exc:
            raise TopicNotFound(
                f"{topic} does not exist (the magnetar source reads existing topics and "
                f"creates none): {exc}"
            ) from None
    # One partition of a partitioned topic, named as such, keeps its index.
    return {TopicName.parse(topic).partition_index: topic}


def last_entries(client: Client, topics: dict[int, str]) -> dict[int, Position]:
    """Each partition's last stored entry (``NOTHING_STORED`` when empty), asked
    through a non-durable subscription that starts at the end, takes no
    message and is removed at once: one left behind would stay listed on the
    broker after a process that held it is killed (as Spark stops a stream's
    planner)."""
    subscription = f"magnetar-spark-snapshot-{uuid.uuid4().hex[:12]}"
    out = {}
    for p, name in topics.items():
        consumer = client.subscribe(
            name,
            subscription,
            subscription_mode=SubscriptionMode.NonDurable,
            initial_position=InitialPosition.Latest,
            receiver_queue_size=1,
        )
        try:
            out[p] = consumer.get_last_message_id().position
        finally:
            _remove(consumer)
    return out


def _remove(consumer: Consumer) -> None:
    try:
        consumer.unsubscribe()
    except MagnetarError:
        consumer.close()


def snapshot(opts: ReadOptions, topics: dict[int, str]) -> dict[int, Position]:
    with Client(opts.service_url, operation_timeout_seconds=opts.operation_timeout_s) as client:
        return last_entries(client, topics)


class MagnetarBatchReader(DataSourceReader):
    def __init__(self, opts: ReadOptions, schema: StructType) -> None:
        _check_schema(schema)
        self.opts = opts

    def partitions(self) -> list[InputPartition]:
        opts = self.opts
        topics = partition_topics(opts.service_url, opts.topic, opts.operation_timeout_s)
        ranges = batch_ranges(opts, topics, snapshot(opts, topics))
        return [InputPartition(r) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if partition.value is None:  # Spark's stand-in when no partition has anything
            return iter(())
        return read_range(self.opts, partition.value)


class MagnetarStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets: partition (a str) -> the last entry read through, ``ledger:entry``."""

    def __init__(self, opts: ReadOptions, schema: StructType) -> None:
        _check_schema(schema)
        if opts.has_bounds:
            raise ReadOptionError(
                "a stream takes start_message_id=earliest|latest only; message-id and time "
                "bounds are for batch reads"
            )
        self.opts = opts
        self._topics: dict[int, str] | None = None
        self._client: Client | None = None
        self._asked_at_s = -1.0
        self._asked: dict[int, Position] = {}
        self._target: dict | None = None  # Trigger.AvailableNow: read through this, no further

    def _partition_topics(self) -> dict[int, str]:
        if self._topics is None:
            opts = self.opts
            self._topics = partition_topics(opts.service_url, opts.topic, opts.operation_timeout_s)
        return self._topics

    def _latest(self) -> dict[int, Position]:
        """A snapshot, at most every ``STREAM_SNAPSHOT_INTERVAL_S`` (Spark asks
        again every few milliseconds while no new data comes)."""
        now_s = time.monotonic()
        if now_s - self._asked_at_s < STREAM_SNAPSHOT_INTERVAL_S:
            return self._asked
        topics = self._partition_topics()
        if self._client is None:
            opts = self.opts
            self._client = Client(
                opts.service_url, operation_timeout_seconds=opts.operation_timeout_s
            )
        self._asked = last_entries(self._client, topics)
        self._asked_at_s = now_s
        return self._asked

    def initialOffset(self) -> dict:
        latest = self._latest()
        if self.opts.start_latest:
            return {str(p): format_position(pos) for p, pos in latest.items()}
        return {str(p): format_position(NOTHING_STORED) for p in latest}

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict:
        if self._target is not None:
            return self._target
        return {str(p): format_position(pos) for p, pos in self._latest().items()}

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = {str(p): format_position(pos) for p, pos in self._latest().items()}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        topics = self._partition_topics()
        out = []
        for key, through in end.items():
            p = int(key)
            rng = stream_range(
                self.opts.topic,
                p,
                topics[p],
                parse_position(start.get(key, format_position(NOTHING_STORED))),
                parse_position(through),
            )
            if not rng.is_empty():
                out.append(InputPartition(rng))
        return out

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_range(self.opts, partition.value)

    def commit(self, end: dict) -> None:
        """Nothing to do: Spark's checkpoint holds the offsets, the broker holds no cursor."""

    def stop(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


# ------------------------------------------------------------------ the executors


class ArrowColumns:
    """The rows of one record batch, gathered column by column."""

    def __init__(self, rng: PartitionRange) -> None:
        self._rng = rng
        self._clear()

    def _clear(self) -> None:
        self.ids: list[str] = []
        self.keys: list[str | None] = []
        self.properties: list[dict[str, str]] = []
        self.publish_ms: list[int] = []
        self.event_ms: list[int | None] = []
        self.values: list[bytes] = []

    def __len__(self) -> int:
        return len(self.ids)

    def add(self, msg: Message) -> None:
        mid = msg.message_id()
        self.ids.append(
            f"{mid.ledger_id()}:{mid.entry_id()}:{self._rng.partition}:{mid.batch_index()}"
        )
        self.keys.append(msg.partition_key() or None)
        self.properties.append(msg.properties())
        self.publish_ms.append(msg.publish_timestamp())
        self.event_ms.append(msg.event_timestamp() or None)  # 0: not set (Pulsar's rule)
        self.values.append(msg.data())

    def take(self) -> pa.RecordBatch:
        """The gathered rows as one record batch; gathering starts over."""
        n = len(self.ids)
        batch = pa.RecordBatch.from_arrays(
            [
                pa.array([self._rng.topic] * n, pa.string()),
                pa.array([self._rng.partition] * n, pa.int32()),
                pa.array(self.ids, pa.string()),
                pa.array(self.keys, pa.string()),
                pa.array(self.properties, ARROW_SCHEMA.field("properties").type),
                _timestamps(self.publish_ms),
                _timestamps(self.event_ms),
                pa.array(self.values, pa.binary()),
            ],
            schema=ARROW_SCHEMA,
        )
        self._clear()
        return batch


def _timestamps(ms: list[Any]) -> pa.Array:
    return pa.array(ms, pa.timestamp("ms", tz="UTC")).cast(_TIMESTAMP)


def read_range(opts: ReadOptions, rng: PartitionRange) -> Iterator[pa.RecordBatch]:
    """The messages of ``rng`` as record batches of at most ``batch_rows`` rows."""
    with Client(opts.service_url, operation_timeout_seconds=opts.operation_timeout_s) as client:
        start = (
            MessageId(rng.partition, rng.reader_start[0], rng.reader_start[1])
            if rng.reader_start is not None
            else MessageId.earliest
        )
        reader = client.create_reader(
            rng.partition_topic,
            start,
            receiver_queue_size=opts.receiver_queue_size,
            start_message_id_inclusive=True,
        )
        try:
            if rng.start_time_ms is not None and not _seek_start_time(reader, rng, opts):
                return
            columns = ArrowColumns(rng)
            for msg in _messages(reader, rng, opts):
                columns.add(msg)
                if len(columns) >= opts.batch_rows:
                    yield columns.take()
            if len(columns):
                yield columns.take()
        finally:
            reader.close()


def _read_next(reader: Reader, rng: PartitionRange, opts: ReadOptions) -> Message:
    try:
        return reader.read_next(opts.read_timeout_ms)
    except Timeout:
        raise Timeout(
            f"no message from {rng.partition_topic} within read_timeout_ms={opts.read_timeout_ms} "
            f"although entries are stored through {format_position(rng.upper)}; the broker may be "
            "overloaded or the entries removed by retention"
        ) from None


def _seek_start_time(reader: Reader, rng: PartitionRange, opts: ReadOptions) -> bool:
    """Move the reader (started at the snapshot's last entry) to ``start_time``;
    False when even that entry is older, so nothing is to be read (a seek past
    the last entry would wait for new messages instead)."""
    assert rng.start_time_ms is not None
    last = _read_next(reader, rng, opts)
    if last.publish_timestamp() < rng.start_time_ms:
        return False
    reader.seek(rng.start_time_ms)
    return True


def _messages(reader: Reader, rng: PartitionRange, opts: ReadOptions) -> Iterator[Message]:
    """The messages ``rng`` takes, in order, each once. Every read waits for a
    message the snapshot says is stored: the read stops at the first message
    past a bound, or after the snapshot's last entry when nothing is queued
    or stored after it."""
    # Keys only grow within a partition. After the reader reconnects (the
    # topic was unloaded or moved) the SDK may deliver again messages of the
    # entry it was in; those are at or below the last key seen, and dropped.
    last: Key | None = None
    while True:
        msg = _read_next(reader, rng, opts)
        mid = msg.message_id()
        key = (mid.ledger_id(), mid.entry_id(), mid.batch_index())
        if last is None or key > last:
            last = key
            verdict = rng.verdict(key, msg.publish_timestamp())
            if verdict is Verdict.STOP:
                return
            if verdict is Verdict.TAKE:
                yield msg
        if rng.at_snapshot_end(key) and not reader.has_message_available():
            return
