"""Runs: how a bookie stores the entries of an add request (no I/O here).

Theory of operation. An add request carries its entries as packed records
(protos/digest.py). Stored one RocksDB key per entry, a 1 KiB entry costs a
Python call, a key, a skip-list insert and copies of its own at every stage
of the write; that per-entry cost, not the bytes, is what limits a bookie.
So a bookie stores the records of a request as they arrived, in *runs*:
slices of the request cut at record boundaries once a slice reaches
``entry_run_max_bytes``, each one RocksDB value keyed by ``ledger id | entry
id of its last record``. A point read seeks the first run key at or above
the entry and walks that run's record headers; a range read walks runs in
key order.

That lookup is only right while a ledger's runs never overlap, so a request
is stored as runs only when its entry ids ascend and all lie above the
highest entry already stored for the ledger (the common case: a writer
streams its entries in order). Anything else — a resend after an ensemble
change, a recovery write-back of entries the bookie holds, a re-add — is
stored the old way, one key per entry, and such a single entry wins over a
run that holds the same id (it was written later). The decision is taken
where writes are serialised (the group commit thread), so it sees every
earlier write.

Every record's digest is checked when the request is taken in
(:func:`check_records`), so a bad request is refused whole before anything
is stored, and again on every read.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

import crc32c

from protos.digest import (
    DIGEST_HEADER,
    ENTRY_PART,
    RECORD_HEADER,
    VALUE_OFFSET,
    RecordError,
    digest_seed,
)

_HEAD = RECORD_HEADER.size


@dataclass(frozen=True)
class CheckedRecords:
    """An add request's records, every one well formed and its digest right."""

    ledger_id: int
    data: bytes | memoryview  # a view of the add request as it arrived
    entries: int
    max_lac: int
    first_entry_id: int
    last_entry_id: int  # the highest id in the request
    ascending: bool  # ids strictly increase from record to record
    # (end offset, entry id of the last record) of each run, in order
    runs: tuple[tuple[int, int], ...]


def check_records(ledger_id: int, data: bytes | memoryview, max_run_bytes: int) -> CheckedRecords:
    """Check every record of ``data`` and cut it into runs of about
    ``max_run_bytes``; :class:`RecordError` at the first bad record."""
    return _check_ascending(ledger_id, data, max_run_bytes) or _check_any(
        ledger_id, data, max_run_bytes
    )


def _check_ascending(
    ledger_id: int, data: bytes | memoryview, max_run_bytes: int
) -> CheckedRecords | None:
    """The common case, with the fewest steps per record (this runs for
    every stored copy of every entry): well-formed records whose ids
    ascend from 0 or more. None for anything else, which
    :func:`_check_any` then sorts out and names."""
    view = memoryview(data)
    unpack, crc, pack = RECORD_HEADER.unpack_from, crc32c.crc32c, ENTRY_PART.pack
    seed = digest_seed(ledger_id)
    off, end, n, max_lac, prev, run_start = 0, len(data), 0, -1, -1, 0
    runs: list[tuple[int, int]] = []
    try:
        while off < end:
            entry_id, size, digest, lac = unpack(data, off)
            stop = off + _HEAD + size
            # A payload cut short by the end fails its digest (or the
            # check after the loop).
            if (
                entry_id <= prev
                or crc(view[off + _HEAD : stop], crc(pack(entry_id, lac), seed)) != digest
            ):
                return None
            if lac > max_lac:
                max_lac = lac
            prev, off = entry_id, stop
            n += 1
            if stop - run_start >= max_run_bytes:
                runs.append((stop, entry_id))
                run_start = stop
    except struct.error:  # a header cut short by the end
        return None
    if off != end or n == 0:
        return None
    if run_start < end:
        runs.append((end, prev))
    first = RECORD_HEADER.unpack_from(data)[0]
    return CheckedRecords(ledger_id, data, n, max_lac, first, prev, True, tuple(runs))


def _check_any(ledger_id: int, data: bytes | memoryview, max_run_bytes: int) -> CheckedRecords:
    """Any well-formed records, in any order; :class:`RecordError` naming
    the first bad one (:func:`_bad_record` says what is wrong with it: the
    loop only tests, so it stays one branch per record)."""
    view = memoryview(data)
    unpack, crc, pack = RECORD_HEADER.unpack_from, crc32c.crc32c, DIGEST_HEADER.pack
    off, end, n, max_lac = 0, len(data), 0, -1
    run_start, prev, highest, ascending = 0, -1, -1, True
    runs: list[tuple[int, int]] = []
    entry_id = first = -1
    while off < end:
        if end - off < _HEAD:
            raise RecordError(f"{end - off} trailing bytes are not a whole record header")
        entry_id, size, digest, lac = unpack(data, off)
        stop = off + _HEAD + size
        if (
            stop > end
            or entry_id < 0
            or crc(view[off + _HEAD : stop], crc(pack(ledger_id, entry_id, lac))) != digest
        ):
            raise _bad_record(ledger_id, entry_id, size, end - off - _HEAD)
        if n == 0:
            first = entry_id
        elif entry_id <= prev:
            ascending = False
        if entry_id > highest:
            highest = entry_id
        if lac > max_lac:
            max_lac = lac
        prev = entry_id
        off = stop
        n += 1
        if stop - run_start >= max_run_bytes:
            runs.append((stop, entry_id))
            run_start = stop
    if run_start < end:
        runs.append((end, entry_id))
    return CheckedRecords(ledger_id, data, n, max_lac, first, highest, ascending, tuple(runs))


def _bad_record(ledger_id: int, entry_id: int, size: int, remaining: int) -> RecordError:
    """What is wrong with a record that failed :func:`_check_any`'s test, in
    the order it tests: a payload past the end, a negative id, else its
    digest (``remaining``: the bytes after its header)."""
    if size > remaining:
        return RecordError(f"entry {entry_id} claims {size} payload bytes; {remaining} remain")
    if entry_id < 0:
        return RecordError(f"entry id {entry_id} < 0")
    return RecordError(f"digest mismatch on ledger {ledger_id} entry {entry_id}", digest=True)


def record_values(data: bytes | memoryview) -> Iterator[tuple[int, bytes | memoryview]]:
    """(entry id, stored value) of each record of checked ``data``; the value
    is the record past its entry id and length: ``digest | LAC | payload``."""
    unpack = RECORD_HEADER.unpack_from
    off, end = 0, len(data)
    while off < end:
        entry_id, size, _, _ = unpack(data, off)
        stop = off + _HEAD + size
        yield entry_id, data[off + VALUE_OFFSET : stop]
        off = stop


def _walk(run: bytes) -> Iterator[tuple[int, int, int, int, int]]:
    """(entry id, digest, LAC, payload start, payload end) of each record of
    a stored run. Stops at a header that runs past the end: a run damaged on
    disk yields what can be read, and digests judge the rest."""
    unpack = RECORD_HEADER.unpack_from
    off, end = 0, len(run)
    while end - off >= _HEAD:
        entry_id, size, digest, lac = unpack(run, off)
        stop = off + _HEAD + size
        if stop > end:
            return
        yield entry_id, digest, lac, off + _HEAD, stop
        off = stop


def find_in_run(run: bytes, entry_id: int) -> tuple[int, int, bytes] | None:
    """(digest, LAC, payload) of ``entry_id`` in ``run``, or None."""
    for eid, digest, lac, start, stop in _walk(run):
        if eid == entry_id:
            return digest, lac, run[start:stop]
        if eid > entry_id:
            return None
    return None


def run_rows(run: bytes, first: int, last: int) -> Iterator[tuple[int, int, int, bytes]]:
    """(entry id, digest, LAC, payload) of the records of ``run`` whose ids
    lie in [first, last], in order."""
    for eid, digest, lac, start, stop in _walk(run):
        if eid > last:
            return
        if eid >= first:
            yield eid, digest, lac, run[start:stop]


def run_first_entry(run: bytes) -> int:
    """Entry id of the first record of ``run`` (-1 if it holds none)."""
    for eid, *_ in _walk(run):
        return eid
    return -1


def run_entry_count(run: bytes) -> int:
    return sum(1 for _ in _walk(run))
