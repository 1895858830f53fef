"""How a bookie cuts what one read found into response messages.

A read stream's message holds at most ``max_entries_per_read_response``
entries (the storage read's unit) and, since gRPC refuses a message past its
size limit, at most ``max_bytes_per_read_response`` bytes of payload: a
message is closed before the entry that would take it past the byte bound.
An entry bigger than the bound goes in a message of its own (an entry is at
most the broker's ``max_message_size``, which its settings keep under
15 MiB), so every read makes progress.

A row is ``(entry_id, (digest, lac, payload) or None)`` for ReadEntries,
where ``None`` means "not on this bookie" (listed back in
``missing_entry_ids``), and ``(entry_id, digest, lac, payload)`` for
ReadRange, which stops at the first gap and answers a stored entry whose
digest does not match with DIGEST_MISMATCH.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from protos import bookie_pb2, common_pb2
from protos.digest import entry_digest
from protos.errors import error

Response = bookie_pb2.ReadRangeResponse
EntryRow = tuple[int, tuple[int, int, bytes] | None]
RangeRow = tuple[int, int, int, bytes]
RowT = TypeVar("RowT")


def cut_points(sizes: Sequence[int], max_bytes: int) -> list[int]:
    """Where messages start: indexes into ``sizes`` (the first is 0) such that
    every message's sizes sum to at most ``max_bytes``, or it holds one size."""
    starts: list[int] = []
    held = 0
    for i, size in enumerate(sizes):
        if not starts or (held and held + size > max_bytes):
            starts.append(i)
            held = 0
        held += size
    return starts


def _parts(rows: Sequence[RowT], sizes: Sequence[int], max_bytes: int) -> list[Sequence[RowT]]:
    """``rows`` cut where :func:`cut_points` says (one empty part for no rows)."""
    starts = cut_points(sizes, max_bytes) or [0]
    return [rows[a:b] for a, b in zip(starts, [*starts[1:], len(rows)], strict=True)]


def entries_responses(rows: Sequence[EntryRow], sizes_only: bool, max_bytes: int) -> list[Response]:
    """The messages answering ReadEntries' ``rows`` (one, possibly empty, at least)."""
    sizes = [0 if got is None or sizes_only else len(got[2]) for _, got in rows]
    out: list[Response] = []
    for part in _parts(rows, sizes, max_bytes):
        resp = Response()
        for eid, got in part:
            if got is None:
                resp.missing_entry_ids.append(eid)
                continue
            digest, lac, payload = got
            resp.entry_ids.append(eid)
            if sizes_only:
                resp.sizes.append(len(payload))
                continue
            # The reader checks digests and fails over on a mismatch; the
            # bookie sends what it holds, so the reader knows which replica is bad.
            resp.lacs.append(lac)
            resp.digests.append(digest)
            resp.payloads.append(payload)
        out.append(resp)
    return out


def range_responses(
    ledger_id: int, first: int, rows: Sequence[RangeRow], max_bytes: int
) -> tuple[list[Response], int, bool]:
    """The messages answering ReadRange's ``rows`` from entry ``first`` on:
    (messages, the entry the next pass starts at, whether the stream ends
    here because a stored entry is corrupt — the last message says which)."""
    run: list[RangeRow] = []
    for row in rows:
        if row[0] != first + len(run):
            break  # a hole: the next pass starts at it and reports it
        run.append(row)
    bad = next(
        (
            i
            for i, (eid, digest, lac, payload) in enumerate(run)
            if entry_digest(ledger_id, eid, lac, payload) != digest
        ),
        None,
    )
    good = run if bad is None else run[:bad]
    out: list[Response] = []
    if good or bad is None:
        for part in _parts(good, [len(row[3]) for row in good], max_bytes):
            out.append(
                Response(
                    entry_ids=[r[0] for r in part],
                    digests=[r[1] for r in part],
                    lacs=[r[2] for r in part],
                    payloads=[r[3] for r in part],
                )
            )
    if bad is None:
        return out, first + len(run), False
    eid = run[bad][0]
    message = f"stored entry {eid} of ledger {ledger_id} is corrupt"
    out.append(Response(error=error(common_pb2.DIGEST_MISMATCH, message)))
    return out, eid, True
