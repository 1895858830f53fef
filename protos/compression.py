"""Batch payload compression (one codec call per entry, never per message),
shared by the SDK and the broker's compactor (the only broker code that
looks inside a payload: it needs each batched message's key).

Codecs: LZ4 (``lz4.block``, raw block, size known from the metadata), ZLIB
(standard library), ZSTD (``zstandard``), SNAPPY (``cramjam``, a maintained
Rust binding; raw snappy blocks). The type and the uncompressed size travel
in the entry's metadata.
"""

from __future__ import annotations

import zlib

import cramjam
import lz4.block
import zstandard

from protos import common_pb2
from protos.errors import MagnetarServerError

_ZSTD_LEVEL = 3


class PayloadError(MagnetarServerError):
    """A payload that does not decompress to what its metadata says."""

    code = common_pb2.CORRUPTED_MESSAGE


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
    """``data`` back to its ``size`` bytes; PayloadError if it does not decode."""
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
            raise PayloadError(f"unknown compression type {wire}")
    except PayloadError:
        raise
    except Exception as exc:
        raise PayloadError(f"payload does not decompress ({wire}): {exc}") from None
    if len(out) != size:
        raise PayloadError(f"payload decompressed to {len(out)} bytes, metadata says {size}")
    return out
