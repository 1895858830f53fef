"""Appending to an open ledger: :class:`LedgerWriter`, the ledger's only writer.

A writer stripes entry ``e`` over the write set ``(e + i) % E, i < Qw`` of
the current ensemble, many entries per bookie request, and confirms entries
in order once Qa bookies of their write set stored them
(:mod:`bookie.quorum`); the LAC travels with every entry. When a bookie
fails, the writer replaces it (ensemble change): a new segment starts at the
first unconfirmed entry, written to the metadata by compare-and-set, and
every unconfirmed entry of the failed bookie's write sets is sent to the
replacement. Only a fence (``LedgerFenced``), a wrong key or no replacement
fails the writer.

The writer reaches its client only through :class:`~bookie.client_context.ClientContext`.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import itertools
import logging
import time
from collections.abc import Iterable

from bookie.client_context import ClientContext
from bookie.ledger_metadata import (
    OPEN,
    BKError,
    LedgerFencedError,
    LedgerMetadata,
    NotEnoughBookiesError,
    master_key,
)
from bookie.quorum import AckTracker, stripe, write_set
from protos import common_pb2
from protos.digest import RECORD_HEADER, pack_record

log = logging.getLogger(__name__)


class LedgerWriter:
    """Appends entries to one open ledger; the ledger's only writer."""

    def __init__(self, client: ClientContext, metadata: LedgerMetadata) -> None:
        self.client = client
        self.metadata = metadata
        self.ledger_id = metadata.ledger_id
        self._key = master_key(metadata.password)
        self._ensemble = list(metadata.ensembles[-1][1])
        self._tracker = AckTracker(metadata.ack_quorum)
        self._next_entry_id = 0
        self.lac = -1
        self.length = 0
        # (last entry id, future) per add/add_many call, in entry order.
        self._waiters: collections.deque[tuple[int, asyncio.Future]] = collections.deque()
        # Records (protos/digest.py) of the unconfirmed entries, lac + 1 ..
        # _next_entry_id - 1 in order (entries are confirmed in order), kept
        # to resend them after an ensemble change.
        self._unconfirmed: list[bytes] = []
        # Records of the entries not sent yet: always the run of entry ids
        # that ends just before _next_entry_id.
        self._unsent: list[bytes] = []
        self._unsent_bytes = 0
        self._flush_scheduled = False
        self._failure: BaseException | None = None
        self._replacing: set[int] = set()
        # Per ensemble index: (bookie id, send time) of requests not answered yet,
        # in send order (a bookie answers one stream in order).
        self._outstanding: dict[int, collections.deque[tuple[str, float]]] = {}
        self._watchdog: asyncio.Task | None = None
        self._change_lock = asyncio.Lock()
        self._tasks: set[asyncio.Task] = set()
        self.ensemble_changes = 0
        self.closed = False

    @property
    def next_entry_id(self) -> int:
        """Entries added so far (confirmed or not), ``length`` bytes together."""
        return self._next_entry_id

    @property
    def failed(self) -> bool:
        """The writer failed: every add fails from now on."""
        return self._failure is not None

    @property
    def outstanding(self) -> int:
        """Entries added and not confirmed yet."""
        return len(self._unconfirmed)

    @property
    def ensemble(self) -> list[str]:
        return list(self._ensemble)

    def add(self, payload: bytes) -> asyncio.Future:
        """Append; the future gives the entry id once the entry is confirmed."""
        return self.add_many((payload,))

    def add_many(self, payloads: Iterable[bytes]) -> asyncio.Future:
        """Append entries in order; the future gives the last one's id once all
        are confirmed (one future for the lot: cheaper than one per entry)."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future = loop.create_future()
        if self._failure is not None or self.closed:
            fut.set_exception(
                self._failure
                if isinstance(self._failure, BKError)
                else BKError(f"ledger {self.ledger_id} is closed or failed: {self._failure}")
            )
            return fut
        if not isinstance(payloads, (list, tuple)):
            payloads = list(payloads)
        if not payloads:
            fut.set_result(self.lac)
            return fut
        first = self._next_entry_id
        # map() steps through the entries in C: this runs for every entry.
        records = list(
            map(
                pack_record,
                itertools.repeat(self.ledger_id),
                itertools.count(first),
                itertools.repeat(self.lac),
                payloads,
            )
        )
        self._unconfirmed += records
        self._unsent += records
        length = sum(map(len, payloads))
        self.length += length
        self._unsent_bytes += length + len(records) * RECORD_HEADER.size
        entry_id = self._next_entry_id = first + len(records)
        self._waiters.append((entry_id - 1, fut))
        self._schedule_flush()
        return fut

    def _schedule_flush(self) -> None:
        """Flush unsent entries on the next loop turn (once, however many
        adds and answers arrive in this one)."""
        if self._unsent and not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        """Send the unsent run, unless every bookie already has
        ``max_add_requests_in_flight`` requests unanswered: then the run
        grows until an answer arrives (``_on_response`` flushes again), so
        a busy writer sends fewer, larger requests and an idle one waits
        for nothing."""
        self._flush_scheduled = False
        unsent = self._unsent
        if not unsent or self._failure is not None:
            return
        settings = self.client.settings
        in_flight, max_bytes = settings.max_add_requests_in_flight, settings.max_add_request_bytes
        outstanding, replacing = self._outstanding, self._replacing
        size = self._unsent_bytes
        if size < max_bytes and all(
            len(outstanding.get(idx, ())) >= in_flight
            for idx in range(len(self._ensemble))
            if idx not in replacing
        ):
            return
        self._unsent, self._unsent_bytes = [], 0
        first = self._next_entry_id - len(unsent)
        if size <= max_bytes:
            self._send_run(first, unsent)
            return
        for lo, hi in _runs_under(unsent, max_bytes):
            self._send_run(first + lo, unsent[lo:hi])

    def _send_run(self, first: int, records: list[bytes]) -> None:
        """Add requests for the contiguous entries ``first``.. with ``records``:
        each bookie's share in entry order (bookie.quorum.stripe)."""
        md = self.metadata
        e_size, qw = md.ensemble_size, md.write_quorum
        end = first + len(records)
        for idx in range(e_size):
            if idx in self._replacing:
                continue  # its share is resent to the replacement
            ids: Iterable[int]
            share: list[bytes]
            if qw == e_size:
                ids, share = range(first, end), records
            else:
                # In entry order: a bookie stores a request whose ids ascend
                # as runs (bookie/entry_runs.py).
                share = stripe(records, first, e_size, qw, idx)
                ids = stripe(range(first, end), first, e_size, qw, idx)
            if share:
                self._request(idx, ids, share)

    def _request(self, idx: int, ids: Iterable[int], records: list[bytes]) -> None:
        bookie_id = self._ensemble[idx]
        try:
            fut = self.client.connection(bookie_id).send_records(self.ledger_id, self._key, records)
        except BKError as exc:
            self._bookie_failed(idx, bookie_id, exc)
            return
        sent = self._outstanding.get(idx)
        if sent is None:
            sent = self._outstanding[idx] = collections.deque()
        sent.append((bookie_id, time.monotonic()))
        fut.add_done_callback(functools.partial(self._on_response, idx, bookie_id, ids))
        if self._watchdog is None:
            self._watchdog = asyncio.get_running_loop().create_task(self._watch_timeouts())

    def _resend(self, idx: int) -> None:
        """Every unconfirmed entry whose write set holds ``idx``, to that
        index's (new) bookie; the unsent run goes with the next flush."""
        md = self.metadata
        unsent_from = self._next_entry_id - len(self._unsent)
        ids: list[int] = []
        records: list[bytes] = []
        for entry_id, record in enumerate(self._unconfirmed, self.lac + 1):
            if entry_id >= unsent_from:
                break
            if idx in write_set(entry_id, md.ensemble_size, md.write_quorum):
                ids.append(entry_id)
                records.append(record)
        if records:
            for lo, hi in _runs_under(records, self.client.settings.max_add_request_bytes):
                self._request(idx, ids[lo:hi], records[lo:hi])

    def _on_response(
        self, idx: int, bookie_id: str, entry_ids: Iterable[int], fut: asyncio.Future
    ) -> None:
        self._answered(idx, bookie_id)
        if self._failure is not None:
            return
        self._schedule_flush()
        exc = fut.exception()
        if exc is None and fut.result().error.code != common_pb2.OK:
            err = fut.result().error
            cls = LedgerFencedError if err.code == common_pb2.LEDGER_FENCED else BKError
            exc = cls(
                f"bookie {bookie_id} refused ledger {self.ledger_id} adds: {err.message}", err.code
            )
        if exc is not None:
            code = getattr(exc, "code", None)
            if code in (common_pb2.LEDGER_FENCED, common_pb2.UNAUTHORIZED):
                self._fail(exc)
            else:
                self._bookie_failed(idx, bookie_id, exc)
            return
        if self._ensemble[idx] != bookie_id:
            return  # a late answer of a replaced bookie: its copies do not count
        confirmed = self._tracker.ack_many(entry_ids, idx)
        if not confirmed:
            return
        self.lac = lac = confirmed[-1]
        del self._unconfirmed[: len(confirmed)]
        assert len(self._unconfirmed) == self._next_entry_id - lac - 1
        waiters = self._waiters
        while waiters and waiters[0][0] <= lac:
            last, waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(last)

    def _answered(self, idx: int, bookie_id: str) -> None:
        """The oldest request to ``idx`` was answered (if it went to ``bookie_id``)."""
        sent = self._outstanding.get(idx)
        if sent and sent[0][0] == bookie_id:
            sent.popleft()
            if not sent:  # an idle ledger keeps no empty queue (memory per idle topic)
                del self._outstanding[idx]

    async def _watch_timeouts(self) -> None:
        """A bookie that leaves an add unanswered for ``timeout_s`` is failed
        (it may hang without closing its stream)."""
        limit = self.client.settings.timeout_s
        try:
            while not self.closed and self._failure is None and any(self._outstanding.values()):
                await asyncio.sleep(max(0.05, limit / 4))  # the watch's period
                self._time_out_late_bookies(limit)
        finally:
            # It ends with nothing outstanding (the next request starts another):
            # an idle ledger keeps no task waking up.
            self._watchdog = None

    def _time_out_late_bookies(self, limit: float) -> None:
        now = time.monotonic()
        for idx, sent in list(self._outstanding.items()):
            if sent and now - sent[0][1] > limit and sent[0][0] == self._ensemble[idx]:
                bookie_id = sent[0][0]
                del self._outstanding[idx]
                self._bookie_failed(
                    idx, bookie_id, TimeoutError(f"no answer to an add within {limit:g} s")
                )

    # ------------------------------------------------------------ ensemble change

    def _bookie_failed(self, idx: int, bookie_id: str, exc: BaseException) -> None:
        if self._ensemble[idx] != bookie_id or idx in self._replacing or self.closed:
            return
        log.warning(
            "ledger %d: bookie %s (index %d) failed: %s; changing the ensemble",
            self.ledger_id,
            bookie_id,
            idx,
            exc,
        )
        self._replacing.add(idx)
        task = asyncio.get_running_loop().create_task(self._replace(idx, bookie_id))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _replace(self, idx: int, failed: str) -> None:
        try:
            async with self._change_lock:
                await self._change_ensemble(idx, failed)
        except Exception as exc:
            log.warning("ledger %d: ensemble change failed: %s", self.ledger_id, exc)
            self._fail(exc if isinstance(exc, BKError) else BKError(str(exc)))
        finally:
            self._replacing.discard(idx)
        if self._failure is None:
            # Everything unconfirmed that the failed bookie should hold goes to its replacement.
            self._resend(idx)
            self._schedule_flush()

    async def _change_ensemble(self, idx: int, failed: str) -> None:
        ensemble = await self.client.replace_bookies(self._ensemble, (idx,))
        if ensemble is None:
            raise NotEnoughBookiesError(
                f"ledger {self.ledger_id}: bookie {failed} failed and no other writable "
                f"bookie can replace it"
            )
        replacement = ensemble[idx]
        first = self._tracker.next_to_confirm

        def change(md: LedgerMetadata) -> bool:
            if md.state != OPEN:
                raise LedgerFencedError(
                    f"ledger {self.ledger_id} is {md.state}: another owner recovers it",
                    common_pb2.LEDGER_FENCED,
                )
            md.start_segment(first, ensemble)
            return True

        self.metadata = await self.client.update_metadata(self.ledger_id, change)
        self._tracker.forget(idx, first)
        self._ensemble = ensemble
        self.ensemble_changes += 1
        log.info(
            "ledger %d: bookie %s replaced by %s from entry %d",
            self.ledger_id,
            failed,
            replacement,
            first,
        )

    def _fail(self, exc: BaseException) -> None:
        if self._failure is not None:
            return
        self._failure = exc
        if self._watchdog is not None:
            self._watchdog.cancel()
        waiters, self._waiters = self._waiters, collections.deque()
        for _, fut in waiters:
            if not fut.done():
                fut.set_exception(exc)

    async def close(self) -> None:
        """Wait for outstanding adds, then mark the ledger closed at its LAC."""
        if self._waiters:
            await asyncio.gather(*(f for _, f in self._waiters), return_exceptions=True)
        self.closed = True
        for task in list(self._tasks):
            task.cancel()
        if self._watchdog is not None:
            self._watchdog.cancel()
        await self.client.close_metadata(self.ledger_id, self.lac, self.length)


def _runs_under(records: list[bytes], limit: int) -> list[tuple[int, int]]:
    """[lo, hi) index runs of ``records`` of at most ``limit`` bytes each (a
    record larger than ``limit`` is a run of its own)."""
    runs = []
    lo, size = 0, 0
    for i, record in enumerate(records):
        if size and size + len(record) > limit:
            runs.append((lo, i))
            lo, size = i, 0
        size += len(record)
    runs.append((lo, len(records)))
    return runs
