"""The schemas of single values: BYTES and STRING (as in Pulsar's Python
client) and, as Pulsar's Java client has them, BOOLEAN (one byte, 0 or 1),
INT8/16/32/64 (signed, big-endian, 1/2/4/8 bytes), FLOAT and DOUBLE (IEEE
754, big-endian, 4 and 8 bytes). Their definitions are empty; their names
are their type names."""

from __future__ import annotations

import struct
from typing import Any, ClassVar

from client.schema._base import FixedInfoSchema, Schema, decode_error, encode_error, type_name_of
from protos.schema_info import SchemaInfo, SchemaType


def _info(schema_type: SchemaType) -> SchemaInfo:
    return SchemaInfo(schema_type, schema_type.name)


class BytesSchema(FixedInfoSchema):
    """The payload as it is: ``bytes`` (or a bytearray or memoryview) in,
    ``bytes`` out."""

    def __init__(self) -> None:
        super().__init__(_info(SchemaType.BYTES))

    def encode(self, obj: Any) -> bytes:
        if not isinstance(obj, bytes | bytearray | memoryview):
            raise encode_error(SchemaType.BYTES, f"a {type_name_of(obj)} is not bytes")
        return bytes(obj)

    def decode(self, data: bytes) -> Any:
        return bytes(data)


class StringSchema(FixedInfoSchema):
    """A ``str`` as UTF-8."""

    def __init__(self) -> None:
        super().__init__(_info(SchemaType.STRING))

    def encode(self, obj: Any) -> bytes:
        if not isinstance(obj, str):
            raise encode_error(SchemaType.STRING, f"a {type_name_of(obj)} is not a str")
        try:
            return obj.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise encode_error(SchemaType.STRING, exc) from None

    def decode(self, data: bytes) -> Any:
        try:
            return bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise decode_error(SchemaType.STRING, f"not UTF-8 ({exc})") from None


class _FixedWidthSchema(FixedInfoSchema):
    """A value of a fixed number of bytes, packed by ``struct``."""

    schema_type: ClassVar[SchemaType]
    layout: ClassVar[str]  # a struct format, big-endian

    def __init__(self) -> None:
        super().__init__(_info(self.schema_type))

    def check(self, obj: Any) -> Any:
        """The value to pack; raises the encode error when ``obj`` does not fit."""
        raise NotImplementedError

    def encode(self, obj: Any) -> bytes:
        value = self.check(obj)
        try:
            return struct.pack(self.layout, value)
        except (struct.error, OverflowError) as exc:
            raise encode_error(self.schema_type, f"{obj!r} does not fit ({exc})") from None

    def decode(self, data: bytes) -> Any:
        width = struct.calcsize(self.layout)
        if len(data) != width:
            raise decode_error(
                self.schema_type, f"a value is {width} bytes, the payload is {len(data)}"
            )
        return struct.unpack(self.layout, data)[0]


class BooleanSchema(_FixedWidthSchema):
    schema_type = SchemaType.BOOLEAN
    layout = ">B"

    def check(self, obj: Any) -> Any:
        if not isinstance(obj, bool):
            raise encode_error(self.schema_type, f"a {type_name_of(obj)} is not a bool")
        return int(obj)

    def decode(self, data: bytes) -> Any:
        # Any byte but 0 reads as true, as Pulsar's Java client reads it.
        return bool(super().decode(data))


class _IntSchema(_FixedWidthSchema):
    bits: ClassVar[int]

    def check(self, obj: Any) -> Any:
        if isinstance(obj, bool) or not isinstance(obj, int):
            raise encode_error(self.schema_type, f"a {type_name_of(obj)} is not an int")
        low, high = -(1 << (self.bits - 1)), (1 << (self.bits - 1)) - 1
        if not low <= obj <= high:
            raise encode_error(self.schema_type, f"{obj} is out of range {low}..{high}")
        return obj


class Int8Schema(_IntSchema):
    schema_type = SchemaType.INT8
    layout = ">b"
    bits = 8


class Int16Schema(_IntSchema):
    schema_type = SchemaType.INT16
    layout = ">h"
    bits = 16


class Int32Schema(_IntSchema):
    schema_type = SchemaType.INT32
    layout = ">i"
    bits = 32


class Int64Schema(_IntSchema):
    schema_type = SchemaType.INT64
    layout = ">q"
    bits = 64


class _RealSchema(_FixedWidthSchema):
    def check(self, obj: Any) -> Any:
        if isinstance(obj, bool) or not isinstance(obj, int | float):
            raise encode_error(self.schema_type, f"a {type_name_of(obj)} is not a float")
        return float(obj)


class FloatSchema(_RealSchema):
    """A 32-bit float: precision beyond it is rounded away; a value beyond
    its range is refused."""

    schema_type = SchemaType.FLOAT
    layout = ">f"


class DoubleSchema(_RealSchema):
    schema_type = SchemaType.DOUBLE
    layout = ">d"


# The schema that reads each type whose definition says nothing more.
PRIMITIVES: dict[SchemaType, type[Schema]] = {
    SchemaType.NONE: BytesSchema,
    SchemaType.BYTES: BytesSchema,
    SchemaType.STRING: StringSchema,
    SchemaType.BOOLEAN: BooleanSchema,
    SchemaType.INT8: Int8Schema,
    SchemaType.INT16: Int16Schema,
    SchemaType.INT32: Int32Schema,
    SchemaType.INT64: Int64Schema,
    SchemaType.FLOAT: FloatSchema,
    SchemaType.DOUBLE: DoubleSchema,
}
