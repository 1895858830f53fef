"""AVRO: values as binary Avro, written and read by ``fastavro`` without a
container header (``schemaless_writer`` / ``schemaless_reader``), which is
how Pulsar puts an Avro value in a message.

Definitions are parsed once: a schema parses its own when it is made, and
the writers' definitions met while decoding evolved data are parsed on first
use and kept in a bounded cache (``WRITER_DEFINITIONS_MAX``, least recently
used dropped). Reading data written under another definition is Avro's
schema resolution, done by fastavro: a field the reader added takes its
default, a field the reader dropped is skipped; when the two cannot be
resolved (a new field without a default, another record name) the error is
``IncompatibleSchema``. Bytes that are no Avro value of the writer's schema,
including bytes left over after one, are ``InvalidMessage``.
"""

from __future__ import annotations

import functools
import io
import json
import struct
from collections.abc import Mapping
from typing import Any

import fastavro
from fastavro.read import SchemaResolutionError
from fastavro.validation import ValidationError

from client.exceptions import IncompatibleSchema, InvalidConfiguration, InvalidMessage
from client.schema._base import (
    FixedInfoSchema,
    check_writer_type,
    decode_error,
    definition_text,
    encode_error,
    short,
)
from client.schema._record import Record, is_record_class, record_from_datum, record_to_datum
from protos.schema_info import SchemaInfo, SchemaType

WRITER_DEFINITIONS_MAX = 64

# What fastavro raises on bytes that are not a value of the schema (found by
# feeding it random bytes) and on a value that does not fit the schema.
_UNREADABLE = (EOFError, IndexError, KeyError, OverflowError, TypeError, ValueError, struct.error)
_UNWRITABLE = (AttributeError, KeyError, OverflowError, TypeError, ValueError, struct.error)
_UNPARSABLE = (fastavro.schema.SchemaParseException, KeyError, TypeError, ValueError)


def parse_definition(definition: Any) -> Any:
    """fastavro's parsed form of an Avro schema given as a dict (or any JSON
    value Avro accepts); ``ValueError`` saying why when it is none."""
    try:
        return fastavro.parse_schema(definition)
    except _UNPARSABLE as exc:
        raise ValueError(f"not an Avro schema: {short(exc)}") from None


@functools.lru_cache(maxsize=WRITER_DEFINITIONS_MAX)
def writer_definition(definition: bytes) -> Any:
    """A writer's definition text, parsed; ``IncompatibleSchema`` when it
    is not an Avro schema (nothing can be read under it)."""
    try:
        return parse_definition(json.loads(definition))
    except ValueError as exc:  # json's errors are ValueErrors too
        raise IncompatibleSchema(f"the writer's AVRO definition cannot be read: {exc}") from None


def write_datum(parsed: Any, datum: Any) -> bytes:
    """The binary Avro of ``datum``; ``InvalidMessage`` names the field that
    does not fit. A dict may leave out fields that have defaults."""
    out = io.BytesIO()
    try:
        fastavro.schemaless_writer(out, parsed, datum, strict_allow_default=True)
    except _UNWRITABLE as exc:
        raise encode_error(SchemaType.AVRO, _mismatch(parsed, datum, exc)) from None
    return out.getvalue()


def _mismatch(parsed: Any, datum: Any, exc: Exception) -> str:
    """Why ``datum`` does not fit: fastavro's validator names every field
    that is off (``User.age is <x> ... expected int``); the writer's own
    message when the validator finds nothing (an unknown field)."""
    try:
        fastavro.validation.validate(datum, parsed, raise_errors=True)
    except ValidationError as found:
        return "; ".join(str(error) for error in found.errors)
    except _UNWRITABLE:
        pass
    return str(exc)


def read_datum(data: bytes, writer: Any, reader: Any | None) -> Any:
    """The value in ``data``, written under ``writer`` and resolved to
    ``reader`` (None: read as written)."""
    stream = io.BytesIO(data)
    try:
        datum = fastavro.schemaless_reader(stream, writer, reader)
    except SchemaResolutionError as exc:
        raise IncompatibleSchema(
            f"AVRO data cannot be read with this schema: {short(exc)}"
        ) from None
    except _UNREADABLE as exc:
        raise decode_error(SchemaType.AVRO, f"{type(exc).__name__}: {exc}") from None
    left = len(data) - stream.tell()
    if left:
        raise decode_error(SchemaType.AVRO, f"{left} bytes left over after the value")
    return datum


class AvroSchema(FixedInfoSchema):
    """Values of ``record_cls`` (or dicts of its fields) as binary Avro.

    With ``record_cls=None``, ``schema_definition`` (a dict) is the schema
    and values are plain dicts, decoded as dicts. When both are given they
    must agree: the record's definition is the schema.
    """

    def __init__(
        self, record_cls: type[Record] | None, schema_definition: dict[str, Any] | None = None
    ) -> None:
        self._record_cls = record_cls
        definition = _definition_of(record_cls, schema_definition)
        try:
            self._parsed = parse_definition(definition)
        except ValueError as exc:
            raise InvalidConfiguration(f"AvroSchema: {exc}") from None
        super().__init__(SchemaInfo(SchemaType.AVRO, "AVRO", definition_text(definition)))

    def encode(self, obj: Any) -> bytes:
        if self._record_cls is None:
            return write_datum(self._parsed, obj)
        try:
            datum = record_to_datum(self._record_cls, obj)
        except InvalidMessage as exc:
            raise encode_error(SchemaType.AVRO, f"{self._record_cls.__name__}: {exc}") from None
        return write_datum(self._parsed, datum)

    def decode(self, data: bytes) -> Any:
        return self._value(read_datum(data, self._parsed, None))

    def decode_with_writer(self, data: bytes, writer: SchemaInfo) -> Any:
        check_writer_type(self._info, writer)
        if writer.schema == self._info.schema:
            return self.decode(data)
        return self._value(read_datum(data, writer_definition(writer.schema), self._parsed))

    def _value(self, datum: Any) -> Any:
        if self._record_cls is None:
            return datum
        try:
            return record_from_datum(self._record_cls, datum, strict=False)
        except InvalidMessage as exc:
            raise decode_error(SchemaType.AVRO, f"{self._record_cls.__name__}: {exc}") from None


def _definition_of(
    record_cls: type[Record] | None, schema_definition: Mapping[str, Any] | None
) -> Any:
    if record_cls is None:
        if schema_definition is None:
            raise InvalidConfiguration("AvroSchema needs a record class or a schema definition")
        return schema_definition
    if not is_record_class(record_cls):
        raise InvalidConfiguration(f"AvroSchema takes a Record class, not {record_cls!r}")
    definition = record_cls.schema()
    if schema_definition is not None and schema_definition != definition:
        raise InvalidConfiguration(
            f"AvroSchema: schema_definition differs from {record_cls.__name__}.schema(); "
            "give one or the other"
        )
    return definition
