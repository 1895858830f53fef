"""The bookie add request's wire form, written and read by hand.

An ``AddRequest`` (protos/bookie.proto) is a few small fields and
``entries``: megabytes of packed records (protos/digest.py). Through the
generated classes those bytes are copied at every step: into the message
when it is built, into upb's arena when it is parsed, and again into a new
``bytes`` object on *every* read of ``req.entries``. So the writer builds
the message with one join (:func:`encode_add_request`), and the bookie reads
it with :func:`decode_add_request`: a walk over the top-level fields that
finds ``entries`` and hands it on as a view of the received buffer; the
small rest is parsed by the generated class, which also checks it.

Anything the walk does not expect (a field of a wire type it does not
skip, a field cut short) goes to the generated parser whole, which accepts
it or raises its ``DecodeError``, so the result never differs from
``AddRequest.FromString``'s: for ``entries`` too, the last occurrence of
the field wins.

:func:`add_requests` splits a ledger's records into one ``AddRequest`` per
bookie of the ensemble (each entry to the bookies of its write set); the
ledger client's recovery writes use it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from protos import bookie_pb2

ENTRIES_FIELD = bookie_pb2.AddRequest.DESCRIPTOR.fields_by_name["entries"].number
_LENGTH_DELIMITED = 2
_ENTRIES_TAG = bytes([(ENTRIES_FIELD << 3) | _LENGTH_DELIMITED])
REQUESTS_FIELD = bookie_pb2.AddBatch.DESCRIPTOR.fields_by_name["requests"].number
_REQUESTS_TAG = bytes([(REQUESTS_FIELD << 3) | _LENGTH_DELIMITED])


@dataclass(frozen=True, slots=True)
class AddRequestView:
    """A parsed add request whose ``entries`` are a view of the bytes it
    arrived in (no copy)."""

    request_id: int
    ledger_id: int
    master_key: bytes
    recovery: bool
    entries: memoryview


def varint(n: int) -> bytes:
    """``n`` ≥ 0 as a protobuf base-128 varint."""
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def encode_add_request(
    request_id: int, ledger_id: int, master_key: bytes, recovery: bool, records: list[bytes]
) -> bytes:
    """The serialised ``AddRequest`` whose ``entries`` are ``records``
    joined: the other fields, then ``entries``' tag, length and the records,
    in one join, so each record is copied once."""
    head = bookie_pb2.AddRequest(
        request_id=request_id, ledger_id=ledger_id, master_key=master_key, recovery=recovery
    ).SerializeToString()
    parts = [head, _ENTRIES_TAG, varint(sum(map(len, records)))]
    parts += records
    return b"".join(parts)


class _Unexpected(Exception):
    """The walk met something it leaves to the generated parser."""


def _varint_at(data: bytes | memoryview, pos: int) -> tuple[int, int]:
    """(value, position after it) of the varint at ``pos``."""
    value = shift = 0
    while shift < 64:
        if pos >= len(data):
            raise _Unexpected
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
    raise _Unexpected


def _entries_spans(data: bytes | memoryview) -> list[tuple[int, int, int]]:
    """(field start, value start, end) of each ``entries`` field in ``data``."""
    spans = []
    pos, end = 0, len(data)
    while pos < end:
        start = pos
        key, pos = _varint_at(data, pos)
        wire = key & 7
        if wire == 0:
            _, pos = _varint_at(data, pos)
        elif wire == 1:
            pos += 8
        elif wire == _LENGTH_DELIMITED:
            length, pos = _varint_at(data, pos)
            if key >> 3 == ENTRIES_FIELD:
                spans.append((start, pos, pos + length))
            pos += length
        elif wire == 5:
            pos += 4
        else:  # groups, and wire types that do not exist
            raise _Unexpected
    if pos != end:
        raise _Unexpected
    return spans


def decode_add_request(data: bytes | memoryview) -> AddRequestView:
    """``data`` (a serialised ``AddRequest``) with its entries as a view of
    ``data``; ``google.protobuf.message.DecodeError`` if it is not one."""
    try:
        spans = _entries_spans(data)
    except _Unexpected:
        spans = []  # the generated parser takes it whole
    if not spans:
        req = bookie_pb2.AddRequest.FromString(bytes(data))
        entries = memoryview(req.entries)
    else:
        rest, pos = [], 0
        for start, _, stop in spans:
            rest.append(data[pos:start])
            pos = stop
        rest.append(data[pos:])
        req = bookie_pb2.AddRequest.FromString(b"".join(rest))
        _, first, stop = spans[-1]
        entries = memoryview(data)[first:stop]
    return AddRequestView(req.request_id, req.ledger_id, req.master_key, req.recovery, entries)


def encode_add_batch(requests: list[bytes]) -> bytes:
    """The serialised ``AddBatch`` of serialised ``AddRequest``\\ s (each
    copied once, by one join)."""
    parts: list[bytes] = []
    for req in requests:
        parts += (_REQUESTS_TAG, varint(len(req)), req)
    return b"".join(parts)


def _requests_spans(data: bytes | memoryview) -> list[tuple[int, int]]:
    """(start, end) of each ``requests`` field's value in ``data``."""
    spans = []
    pos, end = 0, len(data)
    while pos < end:
        key, pos = _varint_at(data, pos)
        if key != _REQUESTS_TAG[0]:
            raise _Unexpected
        length, pos = _varint_at(data, pos)
        if pos + length > end:
            raise _Unexpected
        spans.append((pos, pos + length))
        pos += length
    return spans


def decode_add_batch(data: bytes) -> list[AddRequestView]:
    """``data`` (a serialised ``AddBatch``) as its requests, each with its
    entries a view of ``data``; ``google.protobuf.message.DecodeError`` if it
    is not one."""
    try:
        spans = _requests_spans(data)
    except _Unexpected:
        # Whatever the walk does not expect goes to the generated parser whole.
        batch = bookie_pb2.AddBatch.FromString(bytes(data))
        return [decode_add_request(r.SerializeToString()) for r in batch.requests]
    view = memoryview(data)
    return [decode_add_request(view[lo:hi]) for lo, hi in spans]


def add_requests(
    ledger_id: int,
    key: bytes,
    records: Iterable[tuple[int, bytes]],
    ensemble_size: int,
    write_quorum: int,
    wanted: Callable[[int], bool],
    recovery: bool = False,
) -> dict[int, bookie_pb2.AddRequest]:
    """One add request per ensemble index for ``(entry id, record)`` rows:
    each entry goes to the indexes of its write set that ``wanted`` keeps."""
    cols: dict[int, list[bytes]] = {}
    for entry_id, record in records:
        for i in range(write_quorum):
            idx = (entry_id + i) % ensemble_size
            if wanted(idx):
                cols.setdefault(idx, []).append(record)
    return {
        idx: bookie_pb2.AddRequest(
            ledger_id=ledger_id, master_key=key, entries=b"".join(recs), recovery=recovery
        )
        for idx, recs in cols.items()
    }
