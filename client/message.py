"""Messages as consumers see them, and how producers pack them into entries.

A batch of N > 1 messages becomes one entry whose payload holds N records
(``protos.entry``); a batch of one message is stored as a plain message, so
its id has batch index -1, as with Pulsar's clients.
"""

from __future__ import annotations

import asyncio
import base64
import logging
from collections.abc import Callable
from typing import Any

from client.compression import compress, decompress
from client.exceptions import MessageTooBig
from protos import common_pb2
from protos.add_request import varint
from protos.entry import encode_entry, iter_batch, key_values, properties_of, split_entry
from protos.message_id import MessageId

log = logging.getLogger(__name__)


class Message:
    """A received message. Accessors are methods, as in the Pulsar client."""

    __slots__ = (
        "_batch",
        "_chunks",
        "_data",
        "_event_time",
        "_id",
        "_key_b64",
        "_null_value",
        "_ordering_key",
        "_partition_key",
        "_producer",
        "_properties",
        "_publish_time",
        "_redelivery",
        "_schema",
        "_schema_version",
        "_topic",
        "_writer",
    )

    def __init__(
        self,
        data: bytes,
        message_id: MessageId,
        topic: str,
        properties: dict[str, str],
        partition_key: str | None,
        ordering_key: bytes | None,
        publish_time: int,
        event_time: int,
        producer: str,
        redelivery_count: int,
        schema_version: bytes,
        batch: BatchAckTracker | None,
        null_value: bool = False,
        key_b64: bool = False,
    ) -> None:
        self._data = data
        self._key_b64 = key_b64
        self._schema: Any = None  # the consumer's schema (client.schema), if any
        self._writer: Any = None  # the writer's SchemaInfo when not the consumer's version
        self._id = message_id
        self._topic = topic
        self._properties = properties
        self._partition_key = partition_key
        self._ordering_key = ordering_key
        self._publish_time = publish_time
        self._event_time = event_time
        self._producer = producer
        self._redelivery = redelivery_count
        self._schema_version = schema_version
        self._batch = batch
        self._null_value = null_value
        # A message reassembled from chunks: the positions of all its chunks.
        self._chunks: list[tuple[int, int]] | None = None

    def data(self) -> bytes:
        return self._data

    def use_schema(self, schema: Any, writer: Any) -> None:
        """Decode ``value()`` with ``schema`` (against ``writer``, a
        SchemaInfo, when the message was written under another version)."""
        self._schema = schema
        self._writer = writer

    def value(self) -> Any:
        """The payload decoded with the consumer's schema (None for a
        tombstone; the raw bytes without a schema)."""
        if self._null_value:
            return None
        schema = self._schema
        if schema is None:
            return self._data
        separated = getattr(schema, "decode_separated", None)
        if self._key_b64 and separated is not None:
            key = base64.b64decode(self._partition_key or "")
            if self._writer is not None:
                return separated(key, self._data, self._writer)
            return separated(key, self._data)
        if self._writer is not None:
            return schema.decode_with_writer(self._data, self._writer)
        return schema.decode(self._data)

    def properties(self) -> dict[str, str]:
        return dict(self._properties)

    def partition_key(self) -> str:
        return self._partition_key or ""

    def ordering_key(self) -> str:
        """A str, as in the official client (bytes that are not UTF-8 come
        back unchanged through ``encode("utf-8", "surrogateescape")``)."""
        key = self._ordering_key
        return key.decode("utf-8", "surrogateescape") if key else ""

    def has_null_value(self) -> bool:
        """A tombstone: sent as ``send(None)`` (removes its key from a
        compacted topic)."""
        return self._null_value

    def publish_timestamp(self) -> int:
        return self._publish_time

    def event_timestamp(self) -> int:
        return self._event_time

    def message_id(self) -> MessageId:
        return self._id

    def topic_name(self) -> str:
        return self._topic

    def redelivery_count(self) -> int:
        return self._redelivery

    def schema_version(self) -> bytes:
        return self._schema_version

    def producer_name(self) -> str:
        return self._producer

    def __repr__(self) -> str:
        return f"Message(id={self._id}, {len(self._data)} bytes)"


class BatchAckTracker:
    """Which messages of one batch entry the application acknowledged.

    The broker tracks whole entries; the entry is acknowledged once every
    message of its batch is (Pulsar's behaviour without batch-index acks).
    """

    __slots__ = ("_through", "outstanding", "size")

    def __init__(self, size: int) -> None:
        self.size = size
        self.outstanding = set(range(size))
        # Indexes below this were removed by ack_through already: sequential
        # cumulative acks (a reader's) cost O(1) each, not O(batch size).
        self._through = 0

    def ack(self, batch_index: int) -> bool:
        """True when this ack completes the batch."""
        if not self.outstanding:
            return False
        self.outstanding.discard(batch_index)
        return not self.outstanding

    def ack_through(self, batch_index: int) -> bool:
        before = bool(self.outstanding)
        for index in range(self._through, batch_index + 1):
            self.outstanding.discard(index)
        self._through = max(self._through, batch_index + 1)
        return before and not self.outstanding


def unpack_entry(
    entry: bytes,
    ledger_id: int,
    entry_id: int,
    partition: int,
    topic: str,
    redelivery_count: int,
) -> list[Message]:
    meta, payload = split_entry(entry)
    return unpack_split(meta, payload, ledger_id, entry_id, partition, topic, redelivery_count)


def is_chunk(meta: common_pb2.MessageMetadata) -> bool:
    return meta.num_chunks_from_msg > 1


def unpack_split(
    meta: common_pb2.MessageMetadata,
    payload: memoryview | bytes,
    ledger_id: int,
    entry_id: int,
    partition: int,
    topic: str,
    redelivery_count: int,
) -> list[Message]:
    """The messages of an entry already split into metadata and payload (for
    a reassembled chunked message, the whole payload)."""
    if meta.compression != common_pb2.NONE:
        payload = memoryview(decompress(meta.compression, payload, meta.uncompressed_size))
    if not meta.HasField("num_messages_in_batch"):
        return [
            Message(
                bytes(payload),
                MessageId(partition, ledger_id, entry_id, -1, topic=topic),
                topic,
                properties_of(meta.properties),
                meta.partition_key if meta.HasField("partition_key") else None,
                meta.ordering_key if meta.HasField("ordering_key") else None,
                meta.publish_time,
                meta.event_time,
                meta.producer_name,
                redelivery_count,
                meta.schema_version,
                None,
                meta.null_value,
                meta.partition_key_b64_encoded,
            )
        ]
    count = meta.num_messages_in_batch
    tracker = BatchAckTracker(count)
    out = []
    for i, (smm, data) in enumerate(iter_batch(payload, count)):
        out.append(
            Message(
                data,
                MessageId(partition, ledger_id, entry_id, i, topic=topic),
                topic,
                properties_of(smm.properties),
                smm.partition_key if smm.HasField("partition_key") else None,
                smm.ordering_key if smm.HasField("ordering_key") else None,
                meta.publish_time,
                smm.event_time,
                meta.producer_name,
                redelivery_count,
                meta.schema_version,
                tracker,
                smm.null_value,
                smm.partition_key_b64_encoded,
            )
        )
    return out


# A pending message: payload, its options, and what to give the outcome to:
# a function, or the future of an asyncio send (see ``settle``).
Callback = Callable[[BaseException | None, MessageId | None], None] | asyncio.Future


def settle(callback: Callback, exc: BaseException | None, mid: MessageId | None) -> None:
    """Give a send's outcome to its callback. A future is left alone once
    done (its sender cancelled it); a function is called on the loop."""
    if isinstance(callback, asyncio.Future):
        if callback.done():
            return
        if exc is not None:
            callback.set_exception(exc)
        else:
            callback.set_result(mid)
        return
    callback(exc, mid)


_FUTURE = asyncio.Future  # the type of loop.create_future()'s futures


def settle_stored(messages: list[PendingMessage], ids: list[MessageId]) -> None:
    """Give each message its id (``settle``, inline for an asyncio send's
    future and a plain function: this runs once per message sent)."""
    for m, mid in zip(messages, ids, strict=True):
        cb = m.callback
        if type(cb) is _FUTURE:
            if not cb.done():
                cb.set_result(mid)
            continue
        try:
            if isinstance(cb, asyncio.Future):  # a loop's own Future subclass
                settle(cb, None, mid)
            else:
                cb(None, mid)
        except Exception:
            log.exception("send callback failed")


def settle_failed(messages: list[PendingMessage], exc: BaseException) -> None:
    for m in messages:
        try:
            settle(m.callback, exc, None)
        except Exception:
            log.exception("send callback failed")


class PendingMessage:
    __slots__ = (
        "callback",
        "deliver_at",
        "event_time",
        "key_b64",
        "null_value",
        "ordering_key",
        "partition_key",
        "payload",
        "properties",
        "sequence_id",
    )

    def __init__(
        self,
        payload: bytes,
        sequence_id: int,
        callback: Callback,
        properties: dict[str, str] | None = None,
        partition_key: str | None = None,
        ordering_key: bytes | None = None,
        event_time: int = 0,
        deliver_at: int | None = None,
        null_value: bool = False,
        key_b64: bool = False,
    ) -> None:
        self.key_b64 = key_b64  # partition_key is base64 of bytes (KEY_VALUE SEPARATED)
        self.null_value = null_value
        self.deliver_at = deliver_at
        self.payload = payload
        self.sequence_id = sequence_id
        self.callback = callback
        self.properties = properties
        self.partition_key = partition_key
        self.ordering_key = ordering_key
        self.event_time = event_time


def build_entry(
    messages: list[PendingMessage],
    producer_name: str,
    publish_time_ms: int,
    compression: int = common_pb2.NONE,
    schema_version: bytes = b"",
) -> bytes:
    """One entry for a batch of messages (plain when there is one), its
    payload compressed as one block."""
    first = messages[0]
    meta = common_pb2.MessageMetadata(
        producer_name=producer_name,
        sequence_id=first.sequence_id,
        publish_time=publish_time_ms,
        highest_sequence_id=messages[-1].sequence_id,
    )
    if schema_version:
        meta.schema_version = schema_version
    if len(messages) == 1:
        _set_message_fields(meta, first)
        meta.uncompressed_size = len(first.payload)
        return _encode(meta, first.payload, compression)
    plain = _batch_payload(messages)
    meta.num_messages_in_batch = len(messages)
    meta.uncompressed_size = len(plain)
    # A batch's key is its first message's (Key_Shared dispatches on it).
    if first.partition_key is not None:
        meta.partition_key = first.partition_key
        if first.key_b64:
            meta.partition_key_b64_encoded = True
    if first.ordering_key is not None:
        meta.ordering_key = first.ordering_key
    return _encode(meta, plain, compression)


def _set_message_fields(meta: common_pb2.MessageMetadata, m: PendingMessage) -> None:
    """A message stored alone carries its own fields in the entry's metadata."""
    if m.properties:
        meta.properties.extend(key_values(m.properties))
    if m.partition_key is not None:
        meta.partition_key = m.partition_key
        if m.key_b64:
            meta.partition_key_b64_encoded = True
    if m.ordering_key is not None:
        meta.ordering_key = m.ordering_key
    if m.event_time:
        meta.event_time = m.event_time
    if m.deliver_at is not None:
        meta.deliver_at_time = m.deliver_at
    if m.null_value:
        meta.null_value = True


# A plain batch record's SingleMessageMetadata is payload_size (field 3,
# varint) then sequence_id (field 8, varint): built here from bytes, since
# protobuf's own serialisation costs twice as much per record. A keyed
# record goes through protobuf (its key's encoding makes bytes no faster).
_SIZE_TAG, _SEQUENCE_TAG = b"\x18", b"\x40"
_ONE_BYTE = [bytes([i]) for i in range(0x80)]
_LOW_SEVEN = [bytes([i | 0x80]) for i in range(0x80)]  # a varint's first byte of several
_UINT64_END = 1 << 64
_INT32_MAX = (1 << 31) - 1  # payload_size is an int32


def _batch_payload(messages: list[PendingMessage]) -> bytes:
    """Per message: u32 size, SingleMessageMetadata, payload."""
    parts: list[bytes] = []
    keyed = common_pb2.SingleMessageMetadata()  # reused: this runs once per message
    size, size_head = -1, b""  # the payload size whose field size_head holds
    high, high_bytes = -1, b""  # sequence_id >> 7, and its varint
    for m in messages:
        payload, seq = m.payload, m.sequence_id
        if m.properties or m.ordering_key is not None or m.event_time or m.null_value or m.key_b64:
            head = _record_head(m)
        elif m.partition_key is not None:
            keyed.partition_key = m.partition_key
            keyed.payload_size = len(payload)
            keyed.sequence_id = seq
            head = keyed.SerializeToString()
        elif type(seq) is not int or not 0 <= seq < _UINT64_END or len(payload) > _INT32_MAX:
            head = _record_head(m)  # protobuf writes it, or says what is wrong with it
        else:
            if len(payload) != size:
                size = len(payload)
                size_head = _SIZE_TAG + varint(size) + _SEQUENCE_TAG
            if seq < 0x80:
                head = size_head + _ONE_BYTE[seq]
            else:
                if seq >> 7 != high:
                    high = seq >> 7
                    high_bytes = varint(high)
                head = size_head + _LOW_SEVEN[seq & 0x7F] + high_bytes
        parts.append(len(head).to_bytes(4, "big"))
        parts.append(head)
        parts.append(payload)
    return b"".join(parts)


def _record_head(m: PendingMessage) -> bytes:
    """The SingleMessageMetadata of a batch record with its own fields."""
    rec = common_pb2.SingleMessageMetadata(payload_size=len(m.payload), sequence_id=m.sequence_id)
    if m.event_time:
        rec.event_time = m.event_time
    if m.properties:
        rec.properties.extend(key_values(m.properties))
    if m.partition_key is not None:
        rec.partition_key = m.partition_key
        if m.key_b64:
            rec.partition_key_b64_encoded = True
    if m.ordering_key is not None:
        rec.ordering_key = m.ordering_key
    if m.null_value:
        rec.null_value = True
    return rec.SerializeToString()


def build_chunk_entries(
    msg: PendingMessage,
    producer_name: str,
    publish_time_ms: int,
    compression: int,
    max_entry_size: int,
    schema_version: bytes = b"",
) -> list[bytes]:
    """A message too big for one entry as ordered chunk entries: the payload
    is compressed as a whole, then cut; every chunk carries the message's
    metadata plus uuid, chunk id, chunk count and total size."""
    payload = compress(compression, msg.payload) if compression else msg.payload
    meta = common_pb2.MessageMetadata(
        producer_name=producer_name,
        sequence_id=msg.sequence_id,
        publish_time=publish_time_ms,
        highest_sequence_id=msg.sequence_id,
        uncompressed_size=len(msg.payload),
        uuid=f"{producer_name}-{msg.sequence_id}",
        total_chunk_msg_size=len(payload),
    )
    if compression:
        meta.compression = compression  # type: ignore[assignment]
    if schema_version:
        meta.schema_version = schema_version
    _set_message_fields(meta, msg)
    probe = common_pb2.MessageMetadata()
    probe.CopyFrom(meta)
    probe.num_chunks_from_msg = probe.chunk_id = (1 << 31) - 1
    room = max_entry_size - 4 - probe.ByteSize()
    if room < 1:
        raise MessageTooBig(
            f"the message's properties and keys take {probe.ByteSize()} bytes: no room for a "
            f"chunk under max_message_size ({max_entry_size} bytes)"
        )
    count = -(-len(payload) // room)
    meta.num_chunks_from_msg = count
    entries = []
    for i in range(count):
        meta.chunk_id = i
        entries.append(encode_entry(meta, payload[i * room : (i + 1) * room]))
    return entries


def _encode(meta: common_pb2.MessageMetadata, payload: bytes, compression: int) -> bytes:
    if compression != common_pb2.NONE:
        meta.compression = compression  # type: ignore[assignment]
        payload = compress(compression, payload)
    return encode_entry(meta, payload)
