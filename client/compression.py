"""Batch payload compression (one codec call per entry, never per message).

Codecs: LZ4 (``lz4.block``, raw block, size known from the metadata), ZLIB
(standard library), ZSTD (``zstandard``), SNAPPY (``cramjam``, a maintained
Rust binding; raw snappy blocks). The type and the uncompressed size travel
in the entry's metadata, so a consumer decompresses whatever it receives
whatever its own settings; the broker never decompresses.
"""

from __future__ import annotations

import zlib

import cramjam
import lz4.block
import zstandard

from client.enums import CompressionType
from client.exceptions import InvalidMessage
from protos import common_pb2

_ZSTD_LEVEL = 3

_WIRE = {
    CompressionType.NONE: common_pb2.NONE,
    CompressionType.LZ4: common_pb2.LZ4,
    CompressionType.ZLib: common_pb2.ZLIB,
    CompressionType.ZSTD: common_pb2.ZSTD,
    CompressionType.SNAPPY: common_pb2.SNAPPY,
}


def wire_type(kind: CompressionType) -> int:
    return _WIRE[kind]


def compress(wire: int, data: bytes) -> bytes:
    if wire == common_pb2.NONE:
        return data
    if wire == common_pb2.LZ4:
        return lz4.block.compress(data, store_size=False)
    if wire == common_pb2.ZLIB:
        return zlib.compress(data)
    if wire == common_pb2.ZSTD:
        return zstandard.ZstdCompressor(level=_ZSTD_LEVEL).compress(data)
    if wire == common_pb2.SNAPPY:
        return bytes(cramjam.snappy.compress_raw(data))
    raise ValueError(f"unknown compression type {wire}")


def decompress(wire: int, data: bytes | memoryview, size: int) -> bytes:
    """``data`` back to its ``size`` bytes; InvalidMessage if it does not decode."""
    if wire == common_pb2.NONE:
        return bytes(data)
    try:
        if wire == common_pb2.LZ4:
            out = lz4.block.decompress(bytes(data), uncompressed_size=size)
        elif wire == common_pb2.ZLIB:
            out = zlib.decompress(data, bufsize=max(size, 1))
        elif wire == common_pb2.ZSTD:
            out = zstandard.ZstdDecompressor().decompress(bytes(data), max_output_size=size)
        elif wire == common_pb2.SNAPPY:
            out = bytes(cramjam.snappy.decompress_raw(bytes(data)))
        else:
            raise InvalidMessage(f"unknown compression type {wire}")
    except InvalidMessage:
        raise
    except Exception as exc:
        raise InvalidMessage(f"payload does not decompress ({wire}): {exc}") from None
    if len(out) != size:
        raise InvalidMessage(f"payload decompressed to {len(out)} bytes, metadata says {size}")
    return out
