"""Encoding of stored entries and of message batches (DESIGN §5).

An entry is ``u32 BE len(metadata) | MessageMetadata | payload``, Pulsar's
stored form of a message sent without a checksum; the metadata messages
take Pulsar's field numbers and types (``common.proto``). When the
metadata has ``num_messages_in_batch`` the payload is that many records of
``u32 BE len(smm) | SingleMessageMetadata | payload``. The broker calls only
:func:`parse_metadata`; producers build entries and consumers unpack them.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Mapping

from google.protobuf.message import DecodeError

from protos import common_pb2
from protos.errors import MagnetarServerError

_U32 = struct.Struct(">I")
MAX_METADATA_SIZE = 1 << 20


class CorruptedEntryError(MagnetarServerError):
    code = common_pb2.CORRUPTED_MESSAGE


def encode_entry(metadata: common_pb2.MessageMetadata, payload: bytes) -> bytes:
    meta = metadata.SerializeToString()
    return b"".join((_U32.pack(len(meta)), meta, payload))


def split_entry(entry: bytes) -> tuple[common_pb2.MessageMetadata, memoryview]:
    """Metadata and payload of an entry; CorruptedEntryError on garbage."""
    if len(entry) < 4:
        raise CorruptedEntryError(f"entry of {len(entry)} bytes is shorter than its header")
    (size,) = _U32.unpack_from(entry, 0)
    if size > MAX_METADATA_SIZE or 4 + size > len(entry):
        raise CorruptedEntryError(
            f"entry metadata length {size} does not fit in an entry of {len(entry)} bytes"
        )
    meta = common_pb2.MessageMetadata()
    try:
        meta.ParseFromString(memoryview(entry)[4 : 4 + size])
    except DecodeError as exc:
        raise CorruptedEntryError(f"entry metadata does not parse: {exc}") from None
    if meta.HasField("num_messages_in_batch") and meta.num_messages_in_batch < 1:
        raise CorruptedEntryError(
            f"num_messages_in_batch is {meta.num_messages_in_batch}, it must be >= 1"
        )
    return meta, memoryview(entry)[4 + size :]


def parse_metadata(entry: bytes) -> common_pb2.MessageMetadata:
    return split_entry(entry)[0]


def num_messages(meta: common_pb2.MessageMetadata) -> int:
    return meta.num_messages_in_batch if meta.HasField("num_messages_in_batch") else 1


def encode_batch_record(smm: bytes, payload: bytes) -> bytes:
    return b"".join((_U32.pack(len(smm)), smm, payload))


def iter_batch(
    payload: memoryview | bytes, count: int
) -> Iterator[tuple[common_pb2.SingleMessageMetadata, bytes]]:
    """Yield (SingleMessageMetadata, payload) of each of ``count`` records."""
    view = memoryview(payload)
    pos = 0
    end = len(view)
    for i in range(count):
        if pos + 4 > end:
            raise CorruptedEntryError(f"batch record {i} of {count} is cut short")
        (size,) = _U32.unpack_from(view, pos)
        pos += 4
        if pos + size > end:
            raise CorruptedEntryError(f"batch record {i}: metadata length {size} overruns")
        smm = common_pb2.SingleMessageMetadata()
        try:
            smm.ParseFromString(view[pos : pos + size])
        except DecodeError as exc:
            raise CorruptedEntryError(f"batch record {i}: metadata does not parse: {exc}") from None
        pos += size
        psize = smm.payload_size
        if not smm.HasField("payload_size") or psize < 0:
            raise CorruptedEntryError(f"batch record {i}: no payload size (got {psize})")
        if pos + psize > end:
            raise CorruptedEntryError(f"batch record {i}: payload length {psize} overruns")
        yield smm, bytes(view[pos : pos + psize])
        pos += psize


def key_values(properties: Mapping[str, str] | None) -> list[common_pb2.KeyValue]:
    """Properties as Pulsar's ``KeyValue`` list (messages, producers,
    consumers, schemas)."""
    return [common_pb2.KeyValue(key=k, value=v) for k, v in (properties or {}).items()]


def properties_of(pairs: Iterable[common_pb2.KeyValue]) -> dict[str, str]:
    """The other way: a ``KeyValue`` list as a dict."""
    return {kv.key: kv.value for kv in pairs}
