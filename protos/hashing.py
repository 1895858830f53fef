"""Hash functions every side must compute identically.

* :func:`murmur3_32` -- unsigned 32-bit Murmur3 (seed 0) of a key's UTF-8
  bytes, for message keys (Key_Shared, key routing). Seed example:
  ``murmur3_32("Order-3459134") == 3112179635``.
* :func:`java_string_hash` -- Java's ``String.hashCode`` (signed 32-bit over
  UTF-16 code units), for Pulsar's ``JavaStringHash`` routing.
* :func:`topic_crc32` -- unsigned CRC32 of a full topic name's UTF-8 bytes:
  the position of a topic in its namespace's bundle ranges (DESIGN §5).
"""

from __future__ import annotations

import array
import sys
import zlib

import mmh3

KEY_SHARED_HASH_RANGE = 65536
_UTF16_NATIVE = "utf-16-le" if sys.byteorder == "little" else "utf-16-be"


def murmur3_32(key: str | bytes) -> int:
    return mmh3.hash(key, 0, signed=False)


def java_string_hash(s: str) -> int:
    # Over UTF-16 code units; an ASCII string's bytes are its code units.
    units = s.encode() if s.isascii() else array.array("H", s.encode(_UTF16_NATIVE))
    h = 0
    for unit in units:
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def topic_crc32(full_topic_name: str) -> int:
    return zlib.crc32(full_topic_name.encode("utf-8")) & 0xFFFFFFFF


def key_shared_slot(key: str | bytes) -> int:
    """Position of a key in Key_Shared's 0..65535 hash space."""
    return murmur3_32(key) % KEY_SHARED_HASH_RANGE
