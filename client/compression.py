"""Batch payload compression for the SDK: ``protos.compression``'s codecs
with the SDK's names (a payload that does not decode is InvalidMessage).
The type and the uncompressed size travel in the entry's metadata, so a
consumer decompresses whatever it receives whatever its own settings.
"""

from __future__ import annotations

from client.enums import CompressionType
from client.exceptions import InvalidMessage
from protos import common_pb2
from protos import compression as _codecs
from protos.compression import compress

__all__ = ["compress", "decompress", "wire_type"]

_WIRE = {
    CompressionType.NONE: common_pb2.NONE,
    CompressionType.LZ4: common_pb2.LZ4,
    CompressionType.ZLib: common_pb2.ZLIB,
    CompressionType.ZSTD: common_pb2.ZSTD,
    CompressionType.SNAPPY: common_pb2.SNAPPY,
}


def wire_type(kind: CompressionType) -> int:
    return _WIRE[kind]


def decompress(wire: int, data: bytes | memoryview, size: int) -> bytes:
    """``data`` back to its ``size`` bytes; InvalidMessage if it does not decode."""
    try:
        return _codecs.decompress(wire, data, size)
    except _codecs.PayloadError as exc:
        raise InvalidMessage(exc.message) from None
