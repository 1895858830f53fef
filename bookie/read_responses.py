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

from protos import bookie_pb2, common_pb2
from protos.digest import entry_digest
from protos.errors import error

Response = bookie_pb2.ReadRangeResponse
EntryRow = tuple[int, tuple[int, int, bytes] | None]
RangeRow = tuple[int, int, int, bytes]


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


def entries_responses(rows: Sequence[EntryRow], sizes_only: bool, max_bytes: int) -> list[Response]:
    """The messages answering ReadEntries' ``rows`` (one, possibly empty, at least)."""
    sizes = [0 if got is None or sizes_only else len(got[2]) for _, got in rows]
    starts = cut_points(sizes, max_bytes) or [0]
    out: list[Response] = []
    for start, end in zip(starts, [*starts[1:], len(rows)], strict=True):
        resp = Response()
        for eid, got in rows[start:end]:
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
    out: list[Response] = []
    resp = Response()
    held = 0
    for eid, digest, lac, payload in run:
        if entry_digest(ledger_id, eid, lac, payload) != digest:
            if resp.entry_ids:
                out.append(resp)
            out.append(
                Response(
                    error=error(
                        common_pb2.DIGEST_MISMATCH,
                        f"stored entry {eid} of ledger {ledger_id} is corrupt",
                    )
                )
            )
            return out, eid, True
        if held and held + len(payload) > max_bytes:
            out.append(resp)
            resp, held = Response(), 0
        resp.entry_ids.append(eid)
        resp.lacs.append(lac)
        resp.digests.append(digest)
        resp.payloads.append(payload)
        held += len(payload)
    out.append(resp)
    return out, first + len(run), False
