"""Entry digests and the packed form in which entries travel to bookies.

The digest is CRC32C over (ledger id, entry id, LAC) and the payload. The
writer computes it, the bookie checks it on add and on read, and the reader
checks it again, so corruption anywhere between is caught. (`crc32c` is the
hardware-accelerated C implementation from PyPI.)

An add request carries its entries as one ``bytes`` field: records of
``entry id (i64 BE) | payload length (u32 BE) | digest (u32 BE) | LAC (i64 BE)
| payload``, back to back. The last 12 header bytes and the payload are, as
they stand, the value a bookie stores (``digest | LAC | payload``), so a
bookie slices values out of the request instead of re-encoding them, and a
writer builds a request with one join.
"""

from __future__ import annotations

import struct

import crc32c

# What the digest covers before the payload: ledger id, entry id, LAC.
DIGEST_HEADER = struct.Struct(">qqq")
# The same in two parts. CRC32C continues across calls, so a request's
# records can seed their CRC with the ledger id's (digest_seed, once) and
# cover only (entry id, LAC) and the payload each.
_LEDGER_PART = struct.Struct(">q")
ENTRY_PART = struct.Struct(">qq")
RECORD_HEADER = struct.Struct(">qIIq")
# Where the stored value starts inside a record: after entry id and length.
VALUE_OFFSET = 12


class RecordError(ValueError):
    """A packed entry record is malformed or fails its digest."""

    def __init__(self, message: str, *, digest: bool = False) -> None:
        super().__init__(message)
        self.digest = digest


def entry_digest(ledger_id: int, entry_id: int, lac: int, payload: bytes) -> int:
    return crc32c.crc32c(payload, crc32c.crc32c(DIGEST_HEADER.pack(ledger_id, entry_id, lac)))


def digest_seed(ledger_id: int) -> int:
    """CRC32C of the ledger id part of every digest of ``ledger_id``."""
    return crc32c.crc32c(_LEDGER_PART.pack(ledger_id))


def encode_record(entry_id: int, lac: int, digest: int, payload: bytes) -> bytes:
    return RECORD_HEADER.pack(entry_id, len(payload), digest, lac) + payload


def pack_record(
    ledger_id: int,
    entry_id: int,
    lac: int,
    payload: bytes,
    _crc=crc32c.crc32c,  # bound once: this runs per entry
    _head=DIGEST_HEADER.pack,
    _record=RECORD_HEADER.pack,
) -> bytes:
    """The record of a new entry, its digest computed (entry_digest, inlined)."""
    digest = _crc(payload, _crc(_head(ledger_id, entry_id, lac)))
    return _record(entry_id, len(payload), digest, lac) + payload
