"""Protobuf wire pieces for the messages written by hand (protos/frames.py,
protos/deliveries.py, the SDK's send frames): field tags and packed
repeated integers, by the encoding rules, from the generated descriptors."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from protos.add_request import varint

VARINT, LENGTH_DELIMITED = 0, 2
_U64 = (1 << 64) - 1


def tag(message: Any, field: str, wire_type: int = LENGTH_DELIMITED) -> bytes:
    """The tag of ``field`` of the generated ``message`` class."""
    return varint((message.DESCRIPTOR.fields_by_name[field].number << 3) | wire_type)


def packed(field_tag: bytes, values: Sequence[int]) -> list[bytes]:
    """A packed repeated integer field (a negative int64 as its two's
    complement, as protobuf writes it); nothing when empty."""
    if not values:
        return []
    body = b"".join([varint(v & _U64) for v in values])
    return [field_tag, varint(len(body)), body]
