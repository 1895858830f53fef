"""AUTO_CONSUME: read whatever the writer wrote, from its SchemaInfo alone.

There is no class to rebuild values into, so values come back generic:
AVRO and JSON as dicts (whatever JSON value the payload holds), the
primitive types as their Python values, KEY_VALUE as a (key, value) tuple
of generic parts, BYTES and NONE as bytes, and PROTOBUF_NATIVE as a message
of a class rebuilt from the writer's file descriptors. A type that cannot
be read without the writer's own code (PROTOBUF, whose definition is an Avro
view of the message) is ``OperationNotSupported``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from client.exceptions import InvalidMessage, OperationNotSupported
from client.schema._avro import read_datum, writer_definition
from client.schema._base import FixedInfoSchema, Schema, check_writer_type
from client.schema._json import parse_json
from client.schema._key_value import (
    KeyValueEncoding,
    encoding_of,
    key_value_infos,
    split_payload,
)
from client.schema._primitive import PRIMITIVES
from client.schema._protobuf import message_class_of, parse_message
from protos.schema_info import SchemaInfo, SchemaType

_PRIMITIVE_READERS: dict[SchemaType, Schema] = {kind: cls() for kind, cls in PRIMITIVES.items()}


def _read_avro(data: bytes, writer: SchemaInfo) -> Any:
    return read_datum(data, writer_definition(writer.schema), None)


def _read_json(data: bytes, writer: SchemaInfo) -> Any:
    return parse_json(data)


def _read_protobuf_native(data: bytes, writer: SchemaInfo) -> Any:
    return parse_message(message_class_of(writer.schema), data)


def _read_primitive(data: bytes, writer: SchemaInfo) -> Any:
    return _PRIMITIVE_READERS[writer.type].decode(data)


def _read_key_value(data: bytes, writer: SchemaInfo) -> Any:
    if encoding_of(writer) is KeyValueEncoding.SEPARATED:
        raise OperationNotSupported(
            "the writer's KEY_VALUE schema is SEPARATED: the key is in the message key; use "
            "AutoConsumeSchema.decode_separated(key_bytes, value_bytes, writer)"
        )
    key_bytes, value_bytes = split_payload(data)
    return _read_pair(key_bytes, value_bytes, writer)


def _read_pair(key_bytes: bytes, value_bytes: bytes, writer: SchemaInfo) -> tuple[Any, Any]:
    key_writer, value_writer = key_value_infos(writer)
    parts = []
    for part, data, info in (("key", key_bytes, key_writer), ("value", value_bytes, value_writer)):
        try:
            parts.append(decode_generic(data, info))
        except InvalidMessage as exc:
            raise InvalidMessage(f"KEY_VALUE {part}: {exc}") from None
    return parts[0], parts[1]


_READERS: dict[SchemaType, Callable[[bytes, SchemaInfo], Any]] = {
    SchemaType.AVRO: _read_avro,
    SchemaType.JSON: _read_json,
    SchemaType.KEY_VALUE: _read_key_value,
    SchemaType.PROTOBUF_NATIVE: _read_protobuf_native,
    **{kind: _read_primitive for kind in PRIMITIVES},
}


def decode_generic(data: bytes, writer: SchemaInfo) -> Any:
    """The generic value of ``data`` as ``writer`` describes it."""
    reader = _READERS.get(writer.type)
    if reader is None:
        raise OperationNotSupported(
            f"AUTO_CONSUME cannot read {writer.type.name} data without the writer's class"
        )
    return reader(data, writer)


class AutoConsumeSchema(FixedInfoSchema):
    """A consumer's schema that takes any writer's schema. Without a writer,
    ``decode`` gives the payload's bytes."""

    def __init__(self) -> None:
        super().__init__(SchemaInfo(SchemaType.AUTO_CONSUME, "AUTO_CONSUME"))

    def encode(self, obj: Any) -> bytes:
        raise OperationNotSupported(
            "AUTO_CONSUME only reads; a producer needs the schema its data is written with"
        )

    def decode(self, data: bytes) -> Any:
        return bytes(data)

    def decode_with_writer(self, data: bytes, writer: SchemaInfo) -> Any:
        return decode_generic(data, writer)

    def decode_separated(self, key_bytes: bytes, value_bytes: bytes, writer: SchemaInfo) -> Any:
        """The pair of a SEPARATED KEY_VALUE message (key from the message key)."""
        check_writer_type(SchemaInfo(SchemaType.KEY_VALUE, "KEY_VALUE"), writer)
        return _read_pair(key_bytes, value_bytes, writer)
