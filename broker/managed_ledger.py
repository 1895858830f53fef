"""A topic's storage: an ordered list of ledgers (Pulsar's ManagedLedger).

Theory of operation. The list lives at ``/managed-ledgers/<topic path>`` as
JSON and changes only by compare-and-set. Opening the topic recovers (fences
and closes) any ledger left open by a previous owner, drops empty ones,
creates a fresh ledger and compare-and-sets the new list; no write is served
before that succeeds, so a broker that lost the race never writes. Entries
go to the last ledger, confirmed in order; recent ones stay in a byte-bounded
cache for tailing consumers, older ones are read from the bookies.

When to roll over to a new ledger and which ledgers may be deleted are
decided in :mod:`broker.ledger_rules`; cursors (one per subscription) are
:class:`broker.managed_cursor.ManagedCursor`, whose records live under the
topic's key.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable, Iterable

from bookie.ledger_client import LedgerClient
from bookie.ledger_metadata import CLOSED, LedgerFencedError, LedgerMetadata
from bookie.ledger_writer import LedgerWriter
from broker import ledger_list, ledger_reads
from broker.cursor import CursorMark, Position
from broker.entry_cache import EntryCache
from broker.held_adds import HeldAdds, PendingAdd, Stored, answer_stored
from broker.ledger_rules import (
    NO_RETENTION,
    LedgerFacts,
    RolloverPolicy,
    idle_rollover_due,
    normalize_position,
    should_roll,
    trimmable,
)
from broker.message_counts import MessageCounts, TableBudget
from broker.metrics import TopicMetrics
from metastore.client import BadVersionError, Compare, MetastoreClient, Op, Stat
from protos import common_pb2, metadata_paths
from protos.errors import MagnetarServerError
from protos.topic_name import TopicName

log = logging.getLogger(__name__)

# Transactions a new ledger may take while this broker's own trims move the list.
NEW_LEDGER_ATTEMPTS = 5


class ManagedLedgerError(MagnetarServerError):
    code = common_pb2.PERSISTENCE_ERROR


class ManagedLedgerFencedError(ManagedLedgerError):
    code = common_pb2.SERVICE_NOT_READY


class ManagedLedger:
    def __init__(
        self,
        topic: TopicName,
        metastore: MetastoreClient,
        ledgers: LedgerClient,
        *,
        ensemble_size: int,
        write_quorum: int,
        ack_quorum: int,
        cache: EntryCache,
        max_outstanding_adds: int,
        rollover: RolloverPolicy | None = None,
        metrics: TopicMetrics | None = None,
        message_budget: TableBudget | None = None,
        failed_add_hold_s: float = 10.0,
    ) -> None:
        self.topic = topic
        self.key = metadata_paths.managed_ledger(topic)
        self.metastore = metastore
        self.ledger_client = ledgers
        self.quorums = (ensemble_size, write_quorum, ack_quorum)
        self.cache = cache
        self.max_outstanding_adds = max_outstanding_adds
        self.failed_add_hold_s = failed_add_hold_s
        self._held: HeldAdds | None = None  # while a failed writer is replaced (broker.held_adds)
        self.closed_ledgers: dict[int, LedgerMetadata] = {}
        self.ledger_ids: list[int] = []
        self.writer: LedgerWriter | None = None
        self._version = -1
        self._after: int | None = -1  # the next ledger's id is above it; None: above any
        self._listeners: list[Callable[[], None]] = []
        self._room = asyncio.Event()
        self._room.set()
        # The newest entry whose add's callback ran (cached, listeners told): the
        # bookies may have confirmed later ones, whose callbacks are still due.
        self.last_added: Position = (-1, -1)
        self.entries_added = self.bytes_added = 0
        # Messages per entry of every ledger (backlogs count messages); adds and reads counted.
        self.message_counts = MessageCounts(message_budget)
        self.metrics = metrics if metrics is not None else TopicMetrics(topic, 60.0, "", False)
        self.rollover = rollover or RolloverPolicy()
        self.retention = NO_RETENTION  # the namespace's (or broker's) when the topic loads
        self.cursors: set[CursorMark] = set()
        self._writer_opened = self._last_add = time.monotonic()
        self._rolling: asyncio.Task | None = None
        self._trimming: asyncio.Task | None = None
        self._trim_again = False
        self.rollovers = self.trimmed = 0
        # Deduplication replays entries after this position: keep their ledgers.
        self.hold_back: Position | None = None
        # Told about entries a failed ledger turned out to hold (their adds had
        # failed from the producers' view, but the bookies had stored them).
        self.on_recovered_entries: Callable[[list[tuple[Position, bytes]]], None] | None = None
        # Set when another broker fenced the ledger being written: the topic
        # moved (DESIGN §4: storage fencing, not the ownership lease, is what
        # stops an old owner). Every add fails from then on.
        self.fenced_by_other = False
        self.on_fenced: Callable[[], None] | None = None
        self._recovering_own = False
        self._closing = False

    # ---------------------------------------------------------------- open/close

    async def open(self, read: bool = True, record: Stat | None = None) -> None:
        """``read=False``: the caller read the list's ``record`` just now."""
        stat = await self.metastore.get(self.key) if read else record
        ids: list[int] = []
        recorded: dict[int, int] = {}
        if stat is not None:
            ids, recorded = ledger_list.decode(stat.value)
            self._version, self._after = stat.version, None
        kept = []
        for ledger_id in ids:
            md = await self.ledger_client.metadata(ledger_id)
            if md.state != CLOSED:
                md = await self.ledger_client.open_with_recovery(ledger_id)
            if md.last_entry_id >= 0:
                kept.append(ledger_id)
                self.closed_ledgers[ledger_id] = md
                self.message_counts.inherited(
                    ledger_id, md.last_entry_id + 1, recorded.get(ledger_id)
                )
            else:
                await self.ledger_client.delete_ledger(ledger_id)
        self.ledger_ids = kept
        self.writer = await self._new_ledger()
        self._writer_opened = time.monotonic()
        log.info("%s opened with ledgers %s", self.topic, self.ledger_ids)

    async def close(self) -> None:
        self._closing = True  # a failing add starts no replacement now (_add_failed)
        while tasks := {t for t in (self._rolling, self._trimming) if t is not None}:
            # A failed-ledger replacement may wait for bookies: not forever.
            done, _ = await asyncio.wait(tasks, timeout=5)
            for task in tasks - done:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        if self._held is not None:  # a roll cancelled before it took over a failed writer
            held, self._held = self._held, None
            held.fail(self._closing_error)
        if self.writer is not None:
            writer, self.writer = self.writer, None
            try:
                await writer.close()
            except MagnetarServerError as exc:
                log.warning("%s: closing ledger %d: %s", self.topic, writer.ledger_id, exc)
            else:
                await self._record_totals(writer)
        self.message_counts.release()

    async def _record_totals(self, closed: LedgerWriter) -> None:
        """Write the ledger list again with the total of the ledger just closed, so the
        next owner counts its backlogs exactly (a lost race: the next owner estimates)."""
        if closed.lac < 0 or self.fenced_by_other:
            return
        try:
            self._version = await self.metastore.put(
                self.key,
                self._encode_list(self.ledger_ids, [*self.closed_ledgers, closed.ledger_id]),
                expected_version=self._version,
            )
        except (BadVersionError, MagnetarServerError) as exc:
            log.info("%s: message totals not recorded: %s", self.topic, exc)

    # ---------------------------------------------------------------- writes

    def add_listener(self, fn: Callable[[], None]) -> None:
        self._listeners.append(fn)

    def remove_listener(self, fn: Callable[[], None]) -> None:
        if fn in self._listeners:
            self._listeners.remove(fn)

    def has_room(self) -> bool:
        """No ledger switch is running and fewer than the maximum adds are out."""
        return self._rolling is None and (
            self.writer is None or self.writer.outstanding < self.max_outstanding_adds
        )

    async def wait_for_room(self) -> None:
        while not self.has_room():
            self._room.clear()
            await self._room.wait()

    def add_entry(
        self, data: bytes, stored: Stored | None = None, messages: int = 1
    ) -> asyncio.Future:
        """Append an entry of ``messages`` messages; the future gives its
        position once it is stored. ``stored``, if given, is called with the
        outcome (True: stored) right when the write ends, in the same
        callback: no extra loop turn."""
        out: asyncio.Future = asyncio.get_running_loop().create_future()
        writer = self.writer
        if self.fenced_by_other or writer is None:
            out.set_exception(
                self._moved_error()
                if self.fenced_by_other
                else ManagedLedgerError(f"{self.topic} is closed")
            )
            if stored is not None:
                stored(False)
            return out
        self._last_add = started = time.monotonic()
        self._add(writer, PendingAdd(None, data, messages, started, out, stored))
        return out

    def _add(self, writer: LedgerWriter, add: PendingAdd) -> None:
        # A failed or closed writer gives the add no entry id (its future fails at once).
        add.entry_id = None if writer.failed or writer.closed else writer.next_entry_id
        writer.add(add.data).add_done_callback(functools.partial(self._add_done, writer, add))

    def _add_done(self, writer: LedgerWriter, add: PendingAdd, f: asyncio.Future) -> None:
        if not self._room.is_set() and writer.outstanding < self.max_outstanding_adds:
            self._room.set()
        exc = f.exception()
        if exc is not None:
            self.metrics.add_errors += 1
            self._add_failed(writer, add, exc)
            return
        data, out, stored = add.data, add.out, add.stored
        pos = self.last_added = (writer.ledger_id, f.result())
        self.cache.put(pos, data)
        self.entries_added += 1
        self.bytes_added += len(data)
        self.message_counts.added(pos[0], pos[1], add.messages)
        self.metrics.entry_stored(len(data), time.monotonic() - add.started)
        if not out.done():
            out.set_result(pos)
        if stored is not None:
            stored(True)
        for listener in self._listeners:
            listener()
        if self._rolling is None and writer is self.writer and self._should_roll(writer):
            self._rolling = asyncio.get_running_loop().create_task(self._roll())

    def _add_failed(self, writer: LedgerWriter, add: PendingAdd, exc: BaseException) -> None:
        error: MagnetarServerError
        if isinstance(exc, LedgerFencedError) and not self._recovering_own:
            self._fenced(writer)
            error = self._moved_error()
        elif self._closing:  # close() replaces no ledger: the client resends to the next owner
            error = self._closing_error()
        else:
            if writer is self.writer and self._held is None:
                # The ledger is unusable: close it where it ends and go on in a
                # new one, where its failed adds are stored (broker.held_adds).
                # A roll under way does that itself once it sees the writer failed.
                if self.failed_add_hold_s > 0:
                    self._held = HeldAdds(
                        self.failed_add_hold_s, self._hold_expired, str(self.topic)
                    )
                if self._rolling is None:
                    self._rolling = asyncio.get_running_loop().create_task(
                        self._replace_failed_writer(writer)
                    )
                self._room.set()  # a roll waiting for the adds to drain looks again
            if writer is self.writer and self._held is not None and self._held.open:
                self._held.adds.append(add)
                return
            error = ManagedLedgerError(f"{self.topic}: storing the entry failed: {exc}")
        if not add.out.done():
            add.out.set_exception(error)
        if add.stored is not None:
            add.stored(False)

    def _hold_expired(self) -> ManagedLedgerError:
        return ManagedLedgerError(
            f"{self.topic}: its ledger failed and no new one could be opened within "
            f"{self.failed_add_hold_s:g} s (managed_ledger_failed_add_hold_seconds); "
            "the bookies may be down"
        )

    def _closing_error(self) -> ManagedLedgerFencedError:
        return ManagedLedgerFencedError(f"{self.topic} is closing here; look it up again")

    def _moved_error(self) -> ManagedLedgerFencedError:
        return ManagedLedgerFencedError(
            f"{self.topic}: another broker fenced its ledger and serves it now; look it up again"
        )

    def _fenced(self, writer: LedgerWriter) -> None:
        if self.fenced_by_other:
            return
        self.fenced_by_other = True
        msg = "%s: ledger %d was fenced by another broker; not writing any more"
        log.warning(msg, self.topic, writer.ledger_id)
        if self.writer is writer:
            self.writer = None
        self._room.set()
        if self.on_fenced is not None:
            self.on_fenced()

    # ---------------------------------------------------------------- rollover and trimming

    def _should_roll(self, writer: LedgerWriter) -> bool:
        return should_roll(
            self.rollover, writer.lac + 1, writer.length, self._writer_opened, time.monotonic()
        )

    async def _roll(self) -> None:
        """Close the current ledger and continue in a new one. Adds wait
        (``wait_for_room``) while the switch runs, so positions stay ordered."""
        try:
            old = self.writer
            if old is None:
                return
            while old.outstanding and not old.failed:
                self._room.clear()
                await self._room.wait()
            if old.failed:  # its adds are held (_add_failed): replace it instead
                await self._replace_failed_writer(old)
            else:
                await old.close()
                md = await self.ledger_client.metadata(old.ledger_id)
                writer = await self._switch_ledger(md)
                self.rollovers += 1
                msg = "%s rolled over: ledger %d closed at %d, now writing ledger %d"
                log.info(msg, self.topic, old.ledger_id, md.last_entry_id, writer.ledger_id)
        except Exception:
            log.exception("%s: ledger rollover failed", self.topic)
        finally:
            self._rolling = None
            self._room.set()
        self.maybe_trim()

    async def _switch_ledger(self, closed: LedgerMetadata) -> LedgerWriter:
        """Record ``closed`` and continue in a new ledger, appended to the
        ledger list by compare-and-set (a lost race means another broker owns
        the topic: this one stops writing)."""
        try:
            writer = await self._new_ledger(closing=closed.ledger_id)
        except ManagedLedgerFencedError:
            if self.writer is not None:
                self._fenced(self.writer)
            self.writer = None
            raise
        self.closed_ledgers[closed.ledger_id] = closed
        self.writer = writer
        self._writer_opened = time.monotonic()
        return writer

    async def _replace_failed_writer(self, failed: LedgerWriter) -> None:
        """Recover (fence and close) a ledger whose writer failed, then continue
        in a new ledger, first with the held adds; retried with backoff while
        bookies are unavailable. Adds wait meanwhile (``wait_for_room``)."""
        delay = 0.2
        error: Callable[[], MagnetarServerError] = self._hold_expired
        self._recovering_own = True
        try:
            while self.writer is failed:
                try:
                    await self._recover_and_switch(failed)
                except ManagedLedgerFencedError:
                    raise
                except Exception as exc:
                    msg = "%s: replacing failed ledger %d: %s"
                    log.warning(msg, self.topic, failed.ledger_id, exc)
                    holding = self._held is not None and self._held.open
                    await asyncio.sleep(min(delay, 1.0) if holding else delay)  # retry's backoff
                    delay = min(delay * 2, 5.0)
        except ManagedLedgerFencedError:
            pass  # another broker serves the topic (_switch_ledger said so)
        except asyncio.CancelledError:
            error = self._closing_error  # (close)
            raise
        except Exception:
            log.exception("%s: giving up on the failed ledger", self.topic)
        finally:
            self._recovering_own = False
            self._rolling = None
            self._room.set()
            if self._held is not None:  # closed, moved, or given up: the held adds fail
                held, self._held = self._held, None
                held.fail(self._moved_error if self.fenced_by_other else error)

    async def _recover_and_switch(self, failed: LedgerWriter) -> None:
        md = await self.ledger_client.open_with_recovery(failed.ledger_id)
        if md.last_entry_id > failed.lac:
            rows = await self.ledger_client.read(md, failed.lac + 1, md.last_entry_id)
            recovered = [((failed.ledger_id, eid), data) for eid, data in rows]
            self.message_counts.recovered(recovered)
            if self.on_recovered_entries is not None:
                self.on_recovered_entries(recovered)
        stored = [] if self._held is None else self._held.take_stored(md.last_entry_id)
        try:
            writer = await self._switch_ledger(md)
        finally:  # once this broker knows the ledger closed: a receipt's position is readable
            self._answer_stored(failed.ledger_id, stored)
        if self._held is not None:
            for add in self._held.take():  # before any later add: they wait for room
                self._add(writer, add)
            self._held, self._last_add = None, time.monotonic()
        for listener in self._listeners:
            listener()  # recovered entries are readable now
        msg = "%s: ledger %d failed; closed at %d, continuing in ledger %d"
        log.warning(msg, self.topic, failed.ledger_id, md.last_entry_id, writer.ledger_id)

    def _answer_stored(self, ledger_id: int, stored: list[PendingAdd]) -> None:
        """Answer the held adds recovery found stored in the failed ledger
        (broker.held_adds), counted as added."""
        for add in stored:
            self.entries_added += 1
            self.bytes_added += len(add.data)
            self.metrics.entry_stored(len(add.data), time.monotonic() - add.started)
        answer_stored(ledger_id, stored)

    def maybe_trim(self) -> None:
        if self._trimming is not None:
            self._trim_again = True  # the running pass may have missed this change
        elif len(self.ledger_ids) > 1:
            self._trimming = asyncio.get_running_loop().create_task(self._trim())

    async def _trim(self) -> None:
        try:
            while True:
                self._trim_again = False
                await self._trim_once()
                if not self._trim_again:
                    return
        finally:
            self._trimming = None

    async def _trim_once(self) -> None:
        """Delete closed ledgers that every durable cursor has fully consumed
        (non-durable cursors never hold data back)."""
        marks = self._durable_marks()
        if marks:
            self.message_counts.fold_before(min(marks)[0])  # asked of no durable cursor
        try:
            doomed = self._doomed()
            if not doomed:
                return
            kept = [i for i in self.ledger_ids if i not in doomed]
            body = self._encode_list(kept, self.closed_ledgers)
            self._version = await self.metastore.put(self.key, body, expected_version=self._version)
            self.ledger_ids = kept
            for ledger_id in doomed:
                self.closed_ledgers.pop(ledger_id, None)
                self.message_counts.drop(ledger_id)
                await self.ledger_client.delete_ledger(ledger_id)
                self.trimmed += 1
            log.info("%s: deleted consumed ledgers %s", self.topic, doomed)
        except Exception:
            log.exception("%s: trimming consumed ledgers failed", self.topic)

    def idle_check(self) -> None:
        """Roll an idle ledger every cursor has consumed, so its data can go."""
        writer = self.writer
        if writer is None or self._rolling is not None:
            return
        if idle_rollover_due(
            self.rollover,
            (writer.ledger_id, writer.lac),
            self._last_add,
            time.monotonic(),
            self._durable_marks(),
        ):
            self._rolling = asyncio.get_running_loop().create_task(self._roll())

    def _doomed(self) -> list[int]:
        """The closed ledgers that may be deleted now (ledger_rules.trimmable)."""
        closed = {
            i: LedgerFacts(md.last_entry_id, md.ctime_ms, md.length)
            for i, md in self.closed_ledgers.items()
        }
        w = self.writer
        current = (
            None if w is None else (w.ledger_id, LedgerFacts(w.lac, w.metadata.ctime_ms, w.length))
        )
        marks, now_ms = self._durable_marks(), int(time.time() * 1000)
        return trimmable(
            self.ledger_ids, closed, current, marks, self.hold_back, self.retention, now_ms
        )

    def _durable_marks(self) -> list[Position]:
        """Where each durable cursor has acknowledged everything (non-durable
        cursors never hold data back)."""
        return [c.state.mark_delete_position for c in self.cursors if c.durable]

    async def _new_ledger(self, closing: int | None = None) -> LedgerWriter:
        """A new ledger after (id above) the listed ones (``closing``: the one
        it follows), made in one metastore transaction with the list, holding
        only while the list is at the version this broker knows: after a trim
        of this broker's, again; else another broker owns the topic."""
        for _ in range(NEW_LEDGER_ATTEMPTS):
            sent: list[tuple[int, list[int]]] = []  # (version compared, ledgers listed)

            def listing(ledger_id: int, sent: list = sent) -> tuple[Compare, Op]:
                closed = [*self.closed_ledgers, *([] if closing is None else [closing])]
                sent.append((self._version, [*self.ledger_ids, ledger_id]))
                body = self._encode_list(sent[-1][1], closed)
                return Compare(self.key, version=self._version), Op(self.key, body)

            after = self._after  # (bookie.ledger_ids)
            writer = await self.ledger_client.create_ledger_listed(self.quorums, listing, after)
            compared, listed = sent[-1]
            if writer is not None:
                self._after = writer.ledger_id
                self._version = compared + 1  # a record's version goes up by one per write
                self.message_counts.new_ledger(writer.ledger_id)
                self.ledger_ids = listed
                return writer
            if self._version == compared and self._trimming is None:
                break
            if self._trimming is not None:
                await asyncio.wait({self._trimming})  # its write may be what moved the list
        raise ManagedLedgerFencedError(
            f"{self.topic}: the ledger list changed under us; another broker owns it"
        )

    def _encode_list(self, ledger_ids: list[int], closed: Iterable[int]) -> bytes:
        """The ledger list record, with the totals of ``closed`` ledgers (not the one written)."""
        return ledger_list.encode(ledger_ids, self.message_counts.totals(closed))

    # ---------------------------------------------------------------- positions

    @property
    def last_confirmed(self) -> Position:
        """The newest stored position, or (first ledger, -1) when empty."""
        if self.writer is not None and self.writer.lac >= 0:
            return self.writer.ledger_id, self.writer.lac
        for ledger_id in reversed(self.ledger_ids):
            md = self.closed_ledgers.get(ledger_id)
            if md is not None and md.last_entry_id >= 0:
                return ledger_id, md.last_entry_id
        return (self.ledger_ids[0] if self.ledger_ids else 0), -1

    @property
    def first_position(self) -> Position:
        return (self.ledger_ids[0] if self.ledger_ids else 0), 0

    def before_first(self) -> Position:
        return self.first_position[0], -1

    def next_position(self, pos: Position) -> Position:
        return self.normalize((pos[0], pos[1] + 1))

    def before(self, pos: Position) -> Position:
        """The mark-delete position that makes ``pos`` the next one delivered."""
        return pos[0], pos[1] - 1

    def last_entry_of(self, ledger_id: int) -> int:
        """The last entry id of one of this topic's ledgers (-1 when empty)."""
        md = self.closed_ledgers.get(ledger_id)
        if md is not None:
            return int(md.last_entry_id)
        if self.writer is not None and self.writer.ledger_id == ledger_id:
            return int(self.writer.lac)
        return -1

    def normalize(self, pos: Position) -> Position:
        """The first existing-or-future position at or after ``pos``."""
        return normalize_position(self.ledger_ids, self.closed_ledgers, pos)

    def has_entry(self, pos: Position) -> bool:
        return pos <= self.last_confirmed and pos[1] >= 0

    # ---------------------------------------------------------------- reads

    async def read_entries(
        self, start: Position, max_entries: int, max_bytes: int, tailing: bool = False
    ) -> list[tuple[Position, bytes]]:
        """Stored entries from ``start`` (normalized) on, within the limits
        (:func:`broker.ledger_reads.read_entries`)."""
        return await ledger_reads.read_entries(self, start, max_entries, max_bytes, tailing)

    # ---------------------------------------------------------------- cursors

    def cursor_key(self, name: str) -> str:
        return metadata_paths.cursor(self.topic, name)

    async def cursor_names(self) -> list[str]:
        return await self.metastore.children(self.key)
