"""Schema descriptions shared by the SDK and the broker's schema registry.

A schema is described as Pulsar describes it (``SchemaInfo``): a type, a
name, the definition bytes and string properties. For AVRO and JSON the
definition is an Avro record schema as JSON text; for the primitive types it
is empty; for KEY_VALUE it is the key's and the value's definitions, each
after its length (4 bytes, big-endian), with the two types and the encoding
(``kv.encoding.type``: INLINE or SEPARATED) in the properties — Pulsar's own
layout, so a definition reads the same in both systems.

A schema version is the registry's version number (0, 1, …) carried on every
message as 8 bytes big-endian, as Pulsar carries it.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from enum import IntEnum

from protos import common_pb2
from protos.entry import key_values, properties_of
from protos.errors import InvalidArgumentError

VERSION_BYTES = 8
KV_ENCODING = "kv.encoding.type"
KV_ENCODINGS = ("INLINE", "SEPARATED")


class SchemaType(IntEnum):
    """Pulsar's schema type codes (``SchemaType`` in every client)."""

    NONE = 0
    STRING = 1
    JSON = 2
    PROTOBUF = 3
    AVRO = 4
    BOOLEAN = 5
    INT8 = 6
    INT16 = 7
    INT32 = 8
    INT64 = 9
    FLOAT = 10
    DOUBLE = 11
    KEY_VALUE = 15
    PROTOBUF_NATIVE = 20
    BYTES = -1
    AUTO_CONSUME = -3
    AUTO_PUBLISH = -4


# Types whose definition is an Avro record schema (checked field by field).
AVRO_DEFINED = frozenset({SchemaType.AVRO, SchemaType.JSON})
# Types a producer or a registry entry can have (AUTO_* exist only in clients).
STORABLE = frozenset(SchemaType) - {SchemaType.AUTO_CONSUME, SchemaType.AUTO_PUBLISH}


@dataclass(frozen=True)
class SchemaInfo:
    type: SchemaType
    name: str = ""
    schema: bytes = b""
    properties: dict[str, str] = field(default_factory=dict)

    def schema_type(self) -> SchemaType:
        return self.type

    def to_json(self) -> dict[str, object]:
        """The form ``magnetar-admin schemas get`` prints (Pulsar's field names)."""
        if self.type == SchemaType.KEY_VALUE:
            key, value = split_key_value(self.schema)
            text = json.dumps({"key": _loads_or_text(key), "value": _loads_or_text(value)})
        else:
            text = self.schema.decode("utf-8", "replace")
        return {
            "type": self.type.name,
            "name": self.name,
            "schema": text,
            "properties": dict(self.properties),
        }


def _loads_or_text(data: bytes) -> object:
    try:
        return json.loads(data) if data else ""
    except ValueError:
        return data.decode("utf-8", "replace")


def schema_type_of(value: int | str) -> SchemaType:
    """A schema type from its code or its name; a typed error names the
    types there are."""
    try:
        if isinstance(value, str):
            return SchemaType[value.strip().upper()]
        return SchemaType(value)
    except (KeyError, ValueError):
        known = ", ".join(t.name for t in SchemaType)
        raise InvalidArgumentError(
            f"unknown schema type {value!r}; the types are {known}"
        ) from None


def join_key_value(key: bytes, value: bytes) -> bytes:
    """A KEY_VALUE definition (or an INLINE payload): each part after its
    length, 4 bytes big-endian."""
    return struct.pack(">i", len(key)) + key + struct.pack(">i", len(value)) + value


def split_key_value(data: bytes) -> tuple[bytes, bytes]:
    """The two parts of :func:`join_key_value`; garbage raises a typed error."""
    view = memoryview(data)
    parts: list[bytes] = []
    offset = 0
    for _ in range(2):
        if len(view) < offset + 4:
            raise InvalidArgumentError("KEY_VALUE data is cut short (no length)")
        (size,) = struct.unpack_from(">i", view, offset)
        offset += 4
        if size < 0:  # Pulsar writes -1 for a null part
            parts.append(b"")
            continue
        if len(view) < offset + size:
            raise InvalidArgumentError(
                f"KEY_VALUE data is cut short: a part of {size} bytes, {len(view) - offset} left"
            )
        parts.append(bytes(view[offset : offset + size]))
        offset += size
    if offset != len(view):
        raise InvalidArgumentError(f"KEY_VALUE data has {len(view) - offset} bytes past its end")
    return parts[0], parts[1]


def encode_version(version: int | None) -> bytes:
    """A version as messages carry it (empty for none)."""
    return b"" if version is None else struct.pack(">q", version)


def decode_version(data: bytes) -> int | None:
    """The registry version a message carries, or None when it carries none."""
    if len(data) != VERSION_BYTES:
        return None
    return int(struct.unpack(">q", data)[0])


def to_data(info: SchemaInfo) -> common_pb2.SchemaData:
    return common_pb2.SchemaData(
        type=int(info.type),
        name=info.name,
        schema=info.schema,
        properties=key_values(info.properties),
    )


def from_data(data: common_pb2.SchemaData) -> SchemaInfo:
    """A SchemaInfo from the wire; an unknown type code is a typed error."""
    return SchemaInfo(
        schema_type_of(data.type),
        data.name,
        bytes(data.schema),
        properties_of(data.properties),
    )
