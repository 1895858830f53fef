"""KEY_VALUE: a (key, value) pair, each part under a schema of its own.

The layout is Pulsar's (``protos.schema_info``): the definition is the two
parts' definitions joined by :func:`join_key_value`, and the properties name
each part's schema (``key.schema.name``, ``key.schema.type``,
``key.schema.properties`` as JSON text; the same for ``value.``) and the
encoding (``kv.encoding.type``). INLINE puts both parts in the payload,
joined the same way; SEPARATED puts the key in the message key and only the
value in the payload, so a SEPARATED schema encodes and decodes the two
parts apart (``encode_separated`` / ``decode_separated``) and refuses the
one-payload calls.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Callable
from typing import Any

from client.exceptions import (
    IncompatibleSchema,
    InvalidConfiguration,
    InvalidMessage,
    OperationNotSupported,
)
from client.schema._base import FixedInfoSchema, Schema, check_writer_type, decode_error
from protos.errors import InvalidArgumentError
from protos.schema_info import (
    KV_ENCODING,
    STORABLE,
    SchemaInfo,
    SchemaType,
    join_key_value,
    schema_type_of,
    split_key_value,
)

PARTS = ("key", "value")


class KeyValueEncoding(enum.Enum):
    """Where a KEY_VALUE message keeps its key (Java's KeyValueEncodingType)."""

    INLINE = "INLINE"
    SEPARATED = "SEPARATED"


def key_value_info(key: SchemaInfo, value: SchemaInfo, encoding: KeyValueEncoding) -> SchemaInfo:
    """The KEY_VALUE SchemaInfo of two parts."""
    properties = {KV_ENCODING: encoding.value}
    for part, info in zip(PARTS, (key, value), strict=True):
        properties[f"{part}.schema.name"] = info.name
        properties[f"{part}.schema.type"] = info.type.name
        properties[f"{part}.schema.properties"] = json.dumps(info.properties, sort_keys=True)
    return SchemaInfo(
        SchemaType.KEY_VALUE, "KEY_VALUE", join_key_value(key.schema, value.schema), properties
    )


def encoding_of(info: SchemaInfo) -> KeyValueEncoding:
    """A KEY_VALUE SchemaInfo's encoding (INLINE when it names none, as in
    Pulsar)."""
    text = info.properties.get(KV_ENCODING, KeyValueEncoding.INLINE.value)
    try:
        return KeyValueEncoding(text.upper())
    except ValueError:
        raise IncompatibleSchema(
            f"KEY_VALUE {KV_ENCODING} is {text!r}; it is INLINE or SEPARATED"
        ) from None


def key_value_infos(info: SchemaInfo) -> tuple[SchemaInfo, SchemaInfo]:
    """The key's and the value's SchemaInfo inside a KEY_VALUE one. A part
    whose type is not named is BYTES."""
    try:
        definitions = split_key_value(info.schema)
        parts = []
        for part, definition in zip(PARTS, definitions, strict=True):
            type_name = info.properties.get(f"{part}.schema.type", SchemaType.BYTES.name)
            properties = json.loads(info.properties.get(f"{part}.schema.properties") or "{}")
            name = info.properties.get(f"{part}.schema.name", type_name)
            parts.append(SchemaInfo(schema_type_of(type_name), name, definition, properties))
    except (InvalidArgumentError, ValueError) as exc:
        raise IncompatibleSchema(f"a KEY_VALUE SchemaInfo that cannot be read: {exc}") from None
    return parts[0], parts[1]


def split_payload(data: bytes) -> tuple[bytes, bytes]:
    """An INLINE payload's key and value bytes."""
    try:
        return split_key_value(bytes(data))
    except InvalidArgumentError as exc:
        raise decode_error(SchemaType.KEY_VALUE, exc) from None


def _in_part(part: str, exc: InvalidMessage) -> InvalidMessage:
    return InvalidMessage(f"KEY_VALUE {part}: {exc}")


class KeyValueSchema(FixedInfoSchema):
    """``(key, value)`` tuples, the key under ``key_schema`` and the value
    under ``value_schema``."""

    def __init__(
        self,
        key_schema: Schema,
        value_schema: Schema,
        key_value_encoding: KeyValueEncoding = KeyValueEncoding.INLINE,
    ) -> None:
        for part, schema in zip(PARTS, (key_schema, value_schema), strict=True):
            if not isinstance(schema, Schema) or schema.schema_info().type not in STORABLE:
                raise InvalidConfiguration(
                    f"KeyValueSchema: the {part} schema {schema!r} is not a schema data is written with"
                )
        if not isinstance(key_value_encoding, KeyValueEncoding):
            raise InvalidConfiguration(
                f"key_value_encoding is {key_value_encoding!r}; it is a KeyValueEncoding"
            )
        self._key, self._value = key_schema, value_schema
        self._encoding = key_value_encoding
        info = key_value_info(
            key_schema.schema_info(), value_schema.schema_info(), key_value_encoding
        )
        super().__init__(info)

    def key_schema(self) -> Schema:
        return self._key

    def value_schema(self) -> Schema:
        return self._value

    def key_value_encoding(self) -> KeyValueEncoding:
        return self._encoding

    def is_separated(self) -> bool:
        return self._encoding is KeyValueEncoding.SEPARATED

    def encode(self, obj: Any) -> bytes:
        self._refuse_if_separated("encode", "encode_separated(obj) -> (key_bytes, value_bytes)")
        return join_key_value(*self.encode_separated(obj))

    def encode_separated(self, obj: Any) -> tuple[bytes, bytes]:
        """The key's and the value's bytes apart (for SEPARATED, the key goes
        into the message key)."""
        if not (isinstance(obj, tuple | list) and len(obj) == 2):
            raise InvalidMessage(
                f"cannot encode as KEY_VALUE: {type(obj).__name__} is not a (key, value) tuple"
            )
        parts = []
        for part, schema, item in zip(PARTS, (self._key, self._value), obj, strict=True):
            try:
                parts.append(schema.encode(item))
            except InvalidMessage as exc:
                raise _in_part(part, exc) from None
        return parts[0], parts[1]

    def decode(self, data: bytes) -> Any:
        self._refuse_if_separated("decode", "decode_separated(key_bytes, value_bytes)")
        return self.decode_separated(*split_payload(data))

    def decode_with_writer(self, data: bytes, writer: SchemaInfo) -> Any:
        self._refuse_if_separated(
            "decode_with_writer", "decode_separated(key_bytes, value_bytes, writer)"
        )
        return self.decode_separated(*split_payload(data), writer=writer)

    def decode_separated(
        self, key_bytes: bytes, value_bytes: bytes, writer: SchemaInfo | None = None
    ) -> tuple[Any, Any]:
        """The pair from the key's and the value's bytes; with ``writer``,
        each part is read as written under the writer's part schema."""
        if writer is None:
            return self._decode_part("key", self._key.decode, key_bytes), self._decode_part(
                "value", self._value.decode, value_bytes
            )
        check_writer_type(self._info, writer)
        if encoding_of(writer) is not self._encoding:
            raise IncompatibleSchema(
                f"data written with KEY_VALUE {encoding_of(writer).value} encoding cannot be "
                f"read with a {self._encoding.value} one"
            )
        key_writer, value_writer = key_value_infos(writer)
        key = self._decode_part(
            "key", lambda d: self._key.decode_with_writer(d, key_writer), key_bytes
        )
        value = self._decode_part(
            "value", lambda d: self._value.decode_with_writer(d, value_writer), value_bytes
        )
        return key, value

    @staticmethod
    def _decode_part(part: str, decode: Callable[[bytes], Any], data: bytes) -> Any:
        try:
            return decode(data)
        except InvalidMessage as exc:
            raise _in_part(part, exc) from None

    def _refuse_if_separated(self, call: str, instead: str) -> None:
        if self.is_separated():
            raise OperationNotSupported(
                f"KeyValueSchema.{call}: with SEPARATED encoding the key travels in the "
                f"message key, not the payload; use {instead}"
            )
