"""``Schema``, the base every schema derives from, and what they share: how
a schema reads data written under another definition, and the errors."""

from __future__ import annotations

import abc
import json
from typing import Any

from client.exceptions import IncompatibleSchema, InvalidMessage
from protos.schema_info import SchemaInfo, SchemaType

# An error message quotes at most this much of a decoder's own message (a
# fastavro resolution error prints both schemas whole).
DETAIL_CHARS_MAX = 300

# BYTES and NONE both mean "no schema, the payload as it is" (Pulsar's
# default schema is BYTES; a topic that never had one answers NONE).
_SAME_TYPES = {SchemaType.NONE: SchemaType.BYTES}


class Schema(abc.ABC):
    """The base of schemas: a custom schema implements ``encode``, ``decode``
    and ``schema_info``. Two schemas are equal when their ``SchemaInfo``
    are."""

    @abc.abstractmethod
    def encode(self, obj: Any) -> bytes:
        """The payload for ``obj``; ``InvalidMessage`` when it does not fit."""

    @abc.abstractmethod
    def decode(self, data: bytes) -> Any:
        """The value a payload holds; ``InvalidMessage`` when it holds none."""

    @abc.abstractmethod
    def schema_info(self) -> SchemaInfo:
        """What the registry stores for this schema."""

    def decode_with_writer(self, data: bytes, writer: SchemaInfo) -> Any:
        """Decode ``data`` written under ``writer``'s definition. The base
        only checks the writer's type is this schema's; schemas whose
        definitions evolve (AVRO, JSON, KEY_VALUE) project old data onto
        their own definition."""
        check_writer_type(self.schema_info(), writer)
        return self.decode(data)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Schema):
            return NotImplemented
        return self.schema_info() == other.schema_info()

    def __hash__(self) -> int:
        info = self.schema_info()
        return hash((info.type, info.name, info.schema, tuple(sorted(info.properties.items()))))

    def __repr__(self) -> str:
        info = self.schema_info()
        return f"{type(self).__name__}({info.type.name}, name={info.name!r})"


class FixedInfoSchema(Schema):
    """A schema whose ``SchemaInfo`` is worked out once, when it is made."""

    def __init__(self, info: SchemaInfo) -> None:
        self._info = info

    def schema_info(self) -> SchemaInfo:
        return self._info


def short(detail: object) -> str:
    text = str(detail)
    return text if len(text) <= DETAIL_CHARS_MAX else text[: DETAIL_CHARS_MAX - 3] + "..."


def encode_error(schema_type: SchemaType, what: object) -> InvalidMessage:
    return InvalidMessage(f"cannot encode as {schema_type.name}: {short(what)}")


def decode_error(schema_type: SchemaType, what: object) -> InvalidMessage:
    return InvalidMessage(f"cannot decode {schema_type.name} data: {short(what)}")


def check_writer_type(reader: SchemaInfo, writer: SchemaInfo) -> None:
    """``IncompatibleSchema`` unless data written under ``writer`` is data
    of the reader's type."""
    ours = _SAME_TYPES.get(reader.type, reader.type)
    theirs = _SAME_TYPES.get(writer.type, writer.type)
    if ours != theirs:
        raise IncompatibleSchema(
            f"data written with a {writer.type.name} schema ({writer.name!r}) cannot be "
            f"read with a {reader.type.name} schema ({reader.name!r})"
        )


def definition_text(definition: object) -> bytes:
    """A definition (an Avro schema as a dict) as the registry stores it:
    compact JSON, so equal definitions are equal bytes."""
    return json.dumps(definition, separators=(",", ":")).encode("utf-8")


def type_name_of(value: Any) -> str:
    return type(value).__name__
