"""Entry digests: CRC32C over (ledger id, entry id, LAC) and the payload.

The writer computes the digest, the bookie checks it on add and on read, and
the reader checks it again, so corruption anywhere between is caught.
(`crc32c` is the hardware-accelerated C implementation from PyPI.)
"""

from __future__ import annotations

import struct

import crc32c

_HEADER = struct.Struct(">qqq")


def entry_digest(ledger_id: int, entry_id: int, lac: int, payload: bytes) -> int:
    return crc32c.crc32c(payload, crc32c.crc32c(_HEADER.pack(ledger_id, entry_id, lac)))
