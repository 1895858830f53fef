"""JSON: a record's fields as a UTF-8 JSON object; the definition is the
record's Avro schema, as in Pulsar (so the registry checks JSON and AVRO
definitions alike).

Bytes fields are written as Avro writes bytes in JSON (a string of code
points 0-255). A plain ``decode`` is strict: a key the record does not
declare is refused. ``decode_with_writer`` reads data written under another
version of the record: it keeps the reader's fields, fills the ones the
data lacks with their defaults, and drops the rest.
"""

from __future__ import annotations

import json
from typing import Any

from client.exceptions import InvalidConfiguration, InvalidMessage
from client.schema._base import (
    FixedInfoSchema,
    check_writer_type,
    decode_error,
    definition_text,
    encode_error,
)
from client.schema._fields import json_form
from client.schema._record import Record, is_record_class, record_from_datum, record_to_datum
from protos.schema_info import SchemaInfo, SchemaType


class JsonSchema(FixedInfoSchema):
    """Values of ``record_cls`` as JSON. A dict of the record's fields is
    accepted in place of a record (checked as a record is: no unknown key,
    every required field present, every value of its field's type)."""

    def __init__(self, record_cls: type[Record]) -> None:
        if not is_record_class(record_cls):
            raise InvalidConfiguration(f"JsonSchema takes a Record class, not {record_cls!r}")
        self._record_cls = record_cls
        definition = definition_text(record_cls.schema())
        super().__init__(SchemaInfo(SchemaType.JSON, "JSON", definition))

    def encode(self, obj: Any) -> bytes:
        try:
            datum = record_to_datum(self._record_cls, obj)
        except InvalidMessage as exc:
            raise encode_error(SchemaType.JSON, f"{self._record_cls.__name__}: {exc}") from None
        try:
            text = json.dumps(json_form(datum), separators=(",", ":"), allow_nan=False)
        except ValueError as exc:  # NaN and infinity have no JSON form
            raise encode_error(SchemaType.JSON, exc) from None
        return text.encode("utf-8")

    def decode(self, data: bytes) -> Any:
        return self._record(data, strict=True)

    def decode_with_writer(self, data: bytes, writer: SchemaInfo) -> Any:
        check_writer_type(self._info, writer)
        return self._record(data, strict=False)

    def _record(self, data: bytes, strict: bool) -> Record:
        datum = parse_json(data)
        try:
            return record_from_datum(self._record_cls, datum, strict)
        except InvalidMessage as exc:
            raise decode_error(SchemaType.JSON, f"{self._record_cls.__name__}: {exc}") from None


def parse_json(data: bytes) -> Any:
    """The JSON value of a payload; ``InvalidMessage`` when it is not UTF-8
    JSON."""
    try:
        return json.loads(bytes(data).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise decode_error(SchemaType.JSON, f"not UTF-8 JSON ({exc})") from None
