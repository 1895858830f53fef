"""A topic's storage: an ordered list of ledgers (Pulsar's ManagedLedger).

Theory of operation. The list lives at ``/managed-ledgers/<topic path>`` as
JSON and changes only by compare-and-set. Opening the topic recovers (fences
and closes) any ledger left open by a previous owner, drops empty ones,
creates a fresh ledger and compare-and-sets the new list; no write is served
before that succeeds, so a broker that lost the race never writes. Entries
are appended to the last ledger and confirmed in order. Recently added
entries stay in a byte-bounded cache for tailing consumers; anything else is
read from the bookies.

Cursors (one per durable subscription) live under the topic's key and are
written at most once per ``persist_interval`` and on close.
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from bookie.ledger_client import LedgerClient
from bookie.ledger_metadata import CLOSED, LedgerFencedError, LedgerMetadata
from bookie.ledger_writer import LedgerWriter
from broker.cursor import CursorState, Position
from metastore.client import BadVersionError, MetastoreClient
from protos import common_pb2
from protos.entry import parse_metadata
from protos.errors import MagnetarServerError
from protos.topic_name import TopicName

log = logging.getLogger(__name__)


class ManagedLedgerError(MagnetarServerError):
    code = common_pb2.PERSISTENCE_ERROR


class ManagedLedgerFencedError(ManagedLedgerError):
    code = common_pb2.SERVICE_NOT_READY


class EntryCache:
    """Recently added entries, evicted oldest first past ``max_bytes``."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.size = 0
        self._entries: collections.OrderedDict[Position, bytes] = collections.OrderedDict()

    def put(self, pos: Position, data: bytes) -> None:
        if len(data) > self.max_bytes:
            return
        self._entries[pos] = data
        self.size += len(data)
        while self.size > self.max_bytes:
            _, old = self._entries.popitem(last=False)
            self.size -= len(old)

    def get(self, pos: Position) -> bytes | None:
        return self._entries.get(pos)

    def clear(self) -> None:
        self._entries.clear()
        self.size = 0


@dataclass
class RolloverPolicy:
    """When a managed ledger closes its ledger and starts a new one (Pulsar's
    managedLedgerMaxEntriesPerLedger, ...MaxSizePerLedgerMbytes,
    ...MinLedgerRolloverTimeMinutes, ...MaxLedgerRolloverTimeMinutes)."""

    max_entries: int = 50000
    max_size_bytes: int = 2048 * 1024 * 1024
    min_time_s: float = 600.0
    max_time_s: float = 4 * 3600.0
    inactive_rollover_s: float = 300.0


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
    ) -> None:
        self.topic = topic
        self.key = f"/managed-ledgers/{topic.persistence_path}"
        self.metastore = metastore
        self.ledger_client = ledgers
        self.quorums = (ensemble_size, write_quorum, ack_quorum)
        self.cache = cache
        self.max_outstanding_adds = max_outstanding_adds
        self.closed_ledgers: dict[int, LedgerMetadata] = {}
        self.ledger_ids: list[int] = []
        self.writer: LedgerWriter | None = None
        self._version = -1
        self._listeners: list[Callable[[], None]] = []
        self._room = asyncio.Event()
        self._room.set()
        self.entries_added = 0
        self.bytes_added = 0
        self.rollover = rollover or RolloverPolicy()
        self.cursors: set[ManagedCursor] = set()
        self._writer_opened = time.monotonic()
        self._last_add = time.monotonic()
        self._rolling: asyncio.Task | None = None
        self._trimming: asyncio.Task | None = None
        self._trim_again = False
        self.rollovers = 0
        self.trimmed = 0
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

    # ---------------------------------------------------------------- open/close

    async def open(self) -> None:
        stat = await self.metastore.get(self.key)
        ids: list[int] = []
        if stat is not None:
            ids = [int(i) for i in json.loads(stat.value)["ledgers"]]
            self._version = stat.version
        kept = []
        for ledger_id in ids:
            md = await self.ledger_client.metadata(ledger_id)
            if md.state != CLOSED:
                md = await self.ledger_client.open_with_recovery(ledger_id)
            if md.last_entry_id >= 0:
                kept.append(ledger_id)
                self.closed_ledgers[ledger_id] = md
            else:
                await self.ledger_client.delete_ledger(ledger_id)
        e, qw, qa = self.quorums
        writer = await self.ledger_client.create_ledger(e, qw, qa)
        new_ids = [*kept, writer.ledger_id]
        body = json.dumps({"ledgers": new_ids}).encode()
        try:
            self._version = await self.metastore.put(self.key, body, expected_version=self._version)
        except BadVersionError:
            await self.ledger_client.delete_ledger(writer.ledger_id)
            raise ManagedLedgerFencedError(
                f"{self.topic}: the ledger list changed while opening; another broker owns it"
            ) from None
        self.ledger_ids = new_ids
        self.writer = writer
        self._writer_opened = time.monotonic()
        log.info("%s opened with ledgers %s", self.topic, new_ids)

    async def close(self) -> None:
        for task in (self._rolling, self._trimming):
            if task is not None:
                # A rollover finishes in milliseconds; a failed-ledger replacement
                # may be waiting for bookies: do not wait for it forever.
                done, _ = await asyncio.wait({task}, timeout=5)
                if not done:
                    task.cancel()
                    await asyncio.gather(task, return_exceptions=True)
        if self.writer is not None:
            writer, self.writer = self.writer, None
            try:
                await writer.close()
            except MagnetarServerError as exc:
                log.warning("%s: closing ledger %d: %s", self.topic, writer.ledger_id, exc)
        self.cache.clear()

    # ---------------------------------------------------------------- writes

    def add_listener(self, fn: Callable[[], None]) -> None:
        self._listeners.append(fn)

    def remove_listener(self, fn: Callable[[], None]) -> None:
        if fn in self._listeners:
            self._listeners.remove(fn)

    async def wait_for_room(self) -> None:
        while self._rolling is not None or (
            self.writer is not None and self.writer.outstanding >= self.max_outstanding_adds
        ):
            self._room.clear()
            await self._room.wait()

    def add_entry(self, data: bytes) -> asyncio.Future:
        """Append; the future gives the entry's position once it is stored."""
        loop = asyncio.get_running_loop()
        out: asyncio.Future = loop.create_future()
        writer = self.writer
        if self.fenced_by_other:
            out.set_exception(self._moved_error())
            return out
        if writer is None:
            out.set_exception(ManagedLedgerError(f"{self.topic} is closed"))
            return out
        inner = writer.add(data)

        def done(f: asyncio.Future) -> None:
            if not self._room.is_set() and writer.outstanding < self.max_outstanding_adds:
                self._room.set()
            exc = f.exception()
            if isinstance(exc, LedgerFencedError) and not self._recovering_own:
                self._fenced(writer)
                if not out.done():
                    out.set_exception(self._moved_error())
                return
            if exc is not None:
                if not out.done():
                    out.set_exception(
                        ManagedLedgerError(f"{self.topic}: storing the entry failed: {exc}")
                    )
                if writer is self.writer and self._rolling is None:
                    # The ledger is unusable: close it where it ends and go on in a new one.
                    self._rolling = loop.create_task(self._replace_failed_writer(writer))
                return
            pos = (writer.ledger_id, f.result())
            self.cache.put(pos, data)
            self.entries_added += 1
            self.bytes_added += len(data)
            if not out.done():
                out.set_result(pos)
            for listener in self._listeners:
                listener()
            if self._rolling is None and writer is self.writer and self._should_roll(writer):
                self._rolling = loop.create_task(self._roll())

        self._last_add = time.monotonic()
        inner.add_done_callback(done)
        return out

    def _moved_error(self) -> ManagedLedgerFencedError:
        return ManagedLedgerFencedError(
            f"{self.topic}: another broker fenced its ledger and serves it now; look it up again"
        )

    def _fenced(self, writer: LedgerWriter) -> None:
        if self.fenced_by_other:
            return
        self.fenced_by_other = True
        log.warning(
            "%s: ledger %d was fenced by another broker; not writing any more",
            self.topic,
            writer.ledger_id,
        )
        if self.writer is writer:
            self.writer = None
        self._room.set()
        if self.on_fenced is not None:
            self.on_fenced()

    # ---------------------------------------------------------------- rollover and trimming

    def _should_roll(self, writer: LedgerWriter) -> bool:
        """Pulsar's rule: full (entries or size) and older than the minimum
        rollover time, or older than the maximum rollover time."""
        p = self.rollover
        entries = writer.lac + 1
        if entries <= 0:
            return False
        age = time.monotonic() - self._writer_opened
        full = entries >= p.max_entries or writer.length >= p.max_size_bytes
        return (full and age >= p.min_time_s) or age >= p.max_time_s

    async def _roll(self) -> None:
        """Close the current ledger and continue in a new one. Adds wait
        (``wait_for_room``) while the switch runs, so positions stay ordered."""
        try:
            old = self.writer
            if old is None:
                return
            while old.outstanding:
                self._room.clear()
                await self._room.wait()
            await old.close()
            md = await self.ledger_client.metadata(old.ledger_id)
            writer = await self._switch_ledger(md)
            self.rollovers += 1
            log.info(
                "%s rolled over: ledger %d closed at %d, now writing ledger %d",
                self.topic,
                old.ledger_id,
                md.last_entry_id,
                writer.ledger_id,
            )
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
        e, qw, qa = self.quorums
        writer = await self.ledger_client.create_ledger(e, qw, qa)
        new_ids = [*self.ledger_ids, writer.ledger_id]
        body = json.dumps({"ledgers": new_ids}).encode()
        try:
            self._version = await self.metastore.put(self.key, body, expected_version=self._version)
        except BadVersionError:
            await self.ledger_client.delete_ledger(writer.ledger_id)
            if self.writer is not None:
                self._fenced(self.writer)
            self.writer = None
            raise ManagedLedgerFencedError(
                f"{self.topic}: the ledger list changed under us; another broker owns it"
            ) from None
        self.closed_ledgers[closed.ledger_id] = closed
        self.ledger_ids = new_ids
        self.writer = writer
        self._writer_opened = time.monotonic()
        return writer

    async def _replace_failed_writer(self, failed: LedgerWriter) -> None:
        """Recover (fence and close) a ledger whose writer failed, then continue
        in a new ledger; retried with backoff while bookies are unavailable.
        Adds wait meanwhile (``wait_for_room``)."""
        delay = 0.2
        self._recovering_own = True
        try:
            while self.writer is failed:
                try:
                    md = await self.ledger_client.open_with_recovery(failed.ledger_id)
                    if md.last_entry_id > failed.lac:
                        rows = await self.ledger_client.read(md, failed.lac + 1, md.last_entry_id)
                        recovered = [((failed.ledger_id, eid), data) for eid, data in rows]
                        if self.on_recovered_entries is not None:
                            self.on_recovered_entries(recovered)
                    writer = await self._switch_ledger(md)
                    for listener in self._listeners:
                        listener()  # recovered entries are readable now
                    log.warning(
                        "%s: ledger %d failed; closed at %d, continuing in ledger %d",
                        self.topic,
                        failed.ledger_id,
                        md.last_entry_id,
                        writer.ledger_id,
                    )
                except ManagedLedgerFencedError:
                    raise
                except Exception as exc:
                    log.warning(
                        "%s: replacing failed ledger %d: %s", self.topic, failed.ledger_id, exc
                    )
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 5.0)
        except ManagedLedgerFencedError:
            pass  # another broker serves the topic (_switch_ledger said so)
        except Exception:
            log.exception("%s: giving up on the failed ledger", self.topic)
        finally:
            self._recovering_own = False
            self._rolling = None
            self._room.set()

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
        try:
            durable = [c for c in self.cursors if c.durable]
            marks = [c.state.mark_delete_position for c in durable]
            current = self.writer.ledger_id if self.writer is not None else None
            doomed = []
            for ledger_id in self.ledger_ids:
                if ledger_id == current:
                    break
                md = self.closed_ledgers.get(ledger_id)
                if md is None:
                    break
                last = (ledger_id, md.last_entry_id)
                if self.hold_back is not None and last > self.hold_back:
                    break
                if all(m >= last for m in marks):
                    doomed.append(ledger_id)
                else:
                    break  # keep order: only a prefix of the list goes
            if not doomed:
                return
            kept = [i for i in self.ledger_ids if i not in doomed]
            body = json.dumps({"ledgers": kept}).encode()
            self._version = await self.metastore.put(self.key, body, expected_version=self._version)
            self.ledger_ids = kept
            for ledger_id in doomed:
                self.closed_ledgers.pop(ledger_id, None)
                await self.ledger_client.delete_ledger(ledger_id)
                self.trimmed += 1
            log.info("%s: deleted consumed ledgers %s", self.topic, doomed)
        except Exception:
            log.exception("%s: trimming consumed ledgers failed", self.topic)

    def idle_check(self) -> None:
        """Roll an idle ledger every cursor has consumed, so its data can go."""
        writer = self.writer
        p = self.rollover
        if (
            writer is None
            or self._rolling is not None
            or writer.lac < 0
            or p.inactive_rollover_s <= 0
            or time.monotonic() - self._last_add < p.inactive_rollover_s
        ):
            return
        last = (writer.ledger_id, writer.lac)
        if all(c.state.mark_delete_position >= last for c in self.cursors if c.durable):
            self._rolling = asyncio.get_running_loop().create_task(self._roll())

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
        return (self.ledger_ids[0] if self.ledger_ids else 0), -1

    def next_position(self, pos: Position) -> Position:
        return self.normalize((pos[0], pos[1] + 1))

    def before(self, pos: Position) -> Position:
        """The mark-delete position that makes ``pos`` the next one delivered."""
        return pos[0], pos[1] - 1

    async def find_by_publish_time(self, publish_time_ms: int) -> Position:
        """The first stored entry published at or after ``publish_time_ms``
        (the position after the last entry when none is)."""
        last = self.last_confirmed
        end = self.next_position(last) if last[1] >= 0 else self.first_position
        for ledger_id in self.ledger_ids:
            hi = self.last_entry_of(ledger_id)
            if hi < 0:
                continue
            if await self._publish_time((ledger_id, hi)) < publish_time_ms:
                continue  # the whole ledger is older
            lo, top = 0, hi
            while lo < top:  # first entry of this ledger with time >= t
                mid = (lo + top) // 2
                if await self._publish_time((ledger_id, mid)) >= publish_time_ms:
                    top = mid
                else:
                    lo = mid + 1
            return ledger_id, lo
        return end

    def last_entry_of(self, ledger_id: int) -> int:
        """The last entry id of one of this topic's ledgers (-1 when empty)."""
        md = self.closed_ledgers.get(ledger_id)
        if md is not None:
            return int(md.last_entry_id)
        if self.writer is not None and self.writer.ledger_id == ledger_id:
            return int(self.writer.lac)
        return -1

    async def _publish_time(self, pos: Position) -> int:
        got = await self.read_entries(pos, 1, 64 * 1024 * 1024)
        if not got:
            return 0
        return int(parse_metadata(got[0][1]).publish_time)

    def normalize(self, pos: Position) -> Position:
        """The first existing-or-future position at or after ``pos``."""
        ledger_id, entry_id = pos
        for idx, lid in enumerate(self.ledger_ids):
            if lid < ledger_id:
                continue
            if lid > ledger_id:
                return lid, 0
            md = self.closed_ledgers.get(lid)
            if md is None or entry_id <= md.last_entry_id:
                return lid, max(entry_id, 0)
            if idx + 1 < len(self.ledger_ids):
                return self.ledger_ids[idx + 1], 0
            return lid, entry_id
        return pos

    def has_entry(self, pos: Position) -> bool:
        return pos <= self.last_confirmed and pos[1] >= 0

    # ---------------------------------------------------------------- reads

    async def read_entries(
        self, start: Position, max_entries: int, max_bytes: int
    ) -> list[tuple[Position, bytes]]:
        """Stored entries from ``start`` (normalized) on, within the limits."""
        out: list[tuple[Position, bytes]] = []
        size = 0
        pos = self.normalize(start)
        last = self.last_confirmed
        while len(out) < max_entries and size < max_bytes and pos <= last and pos[1] >= 0:
            data = self.cache.get(pos)
            if data is None:
                fetched = await self._read_from_bookies(pos, max_entries - len(out), last)
                if not fetched:
                    break
                for item in fetched:
                    out.append(item)
                    size += len(item[1])
                pos = self.next_position(fetched[-1][0])
                continue
            out.append((pos, data))
            size += len(data)
            pos = self.next_position(pos)
        return out

    async def _read_from_bookies(
        self, pos: Position, count: int, last: Position
    ) -> list[tuple[Position, bytes]]:
        ledger_id, first = pos
        md = self.closed_ledgers.get(ledger_id)
        if md is None:
            if self.writer is None or self.writer.ledger_id != ledger_id:
                return []
            md = self.writer.metadata
            end = self.writer.lac
        else:
            end = md.last_entry_id
        if last[0] == ledger_id:
            end = min(end, last[1])
        end = min(end, first + count - 1)
        if end < first:
            return []
        rows = await self.ledger_client.read(md, first, end)
        return [((ledger_id, eid), payload) for eid, payload in rows]

    # ---------------------------------------------------------------- cursors

    def cursor_key(self, name: str) -> str:
        return f"{self.key}/{name}"

    async def cursor_names(self) -> list[str]:
        return await self.metastore.children(self.key)


class ManagedCursor:
    """A durable subscription's cursor: state plus throttled persistence."""

    def __init__(
        self,
        ledger: ManagedLedger,
        name: str,
        state: CursorState,
        *,
        durable: bool,
        version: int,
        persist_interval_ms: int,
        max_ranges: int,
    ) -> None:
        self.ledger = ledger
        self.name = name
        self.state = state
        self.durable = durable
        self._version = version
        self._interval_s = persist_interval_ms / 1000
        self._max_ranges = max_ranges
        self._last_persist = 0.0
        self._dirty = False
        self._timer: asyncio.TimerHandle | None = None
        self._persisting: asyncio.Task | None = None
        self.read_position = ledger.next_position(state.mark_delete_position)
        ledger.cursors.add(self)

    @classmethod
    async def open(
        cls,
        ledger: ManagedLedger,
        name: str,
        *,
        initial_position_latest: bool,
        durable: bool,
        persist_interval_ms: int,
        max_ranges: int,
        mark_delete: Position | None = None,
    ) -> tuple[ManagedCursor, bool]:
        """The cursor and whether it was created now. A new cursor starts after
        ``mark_delete`` when given, else at the initial position."""
        created = False
        version = -1
        stat = await ledger.metastore.get(ledger.cursor_key(name)) if durable else None
        if stat is not None:
            state = CursorState.from_json(stat.value)
            version = stat.version
        else:
            created = True
            if mark_delete is not None:
                start = mark_delete
            else:
                start = ledger.last_confirmed if initial_position_latest else ledger.before_first()
            state = CursorState(start)
        cursor = cls(
            ledger,
            name,
            state,
            durable=durable,
            version=version,
            persist_interval_ms=persist_interval_ms,
            max_ranges=max_ranges,
        )
        if created and durable:
            await cursor.persist()
        return cursor, created

    def is_acked(self, pos: Position) -> bool:
        return self.state.is_acked(pos)

    def ack(self, positions: list[Position], cumulative: bool) -> None:
        changed = False
        nxt = self.ledger.next_position
        for pos in positions:
            if cumulative:
                changed |= self.state.ack_cumulative(pos, nxt)
            else:
                changed |= self.state.ack_individual(pos, nxt)
        if changed:
            self._mark_dirty()
            first = self.ledger.ledger_ids[0] if self.ledger.ledger_ids else None
            if first is not None and self.state.mark_delete_position[0] > first:
                self.ledger.maybe_trim()

    def ack_batch_indexes(self, pos: Position, batch_size: int, indexes: list[int]) -> bool:
        """Acknowledge messages of a batch; True if that completed the entry."""
        if self.state.ack_batch_indexes(pos, batch_size, indexes, self.ledger.next_position):
            self._mark_dirty()
        return self.state.is_acked(pos)

    def rewind(self) -> None:
        self.read_position = self.ledger.next_position(self.state.mark_delete_position)

    def reset(self, mark_delete: Position) -> None:
        """Seek: everything after ``mark_delete`` becomes unacknowledged again."""
        self.state = CursorState(mark_delete)
        self.rewind()
        self._mark_dirty()

    def _mark_dirty(self) -> None:
        if not self.durable:
            return
        self._dirty = True
        if self._timer is not None or self._persisting is not None:
            return
        delay = self._last_persist + self._interval_s - time.monotonic()
        loop = asyncio.get_running_loop()
        if delay <= 0:
            self._persisting = loop.create_task(self._persist_soon())
        else:
            self._timer = loop.call_later(delay, self._timer_fired)

    def _timer_fired(self) -> None:
        self._timer = None
        if self._dirty and self._persisting is None:
            self._persisting = asyncio.get_running_loop().create_task(self._persist_soon())

    async def _persist_soon(self) -> None:
        try:
            await self.persist()
        except Exception as exc:
            log.warning(
                "%s/%s: persisting the cursor failed: %s", self.ledger.topic, self.name, exc
            )
        finally:
            self._persisting = None
            if self._dirty:
                self._mark_dirty()

    async def persist(self) -> None:
        # A fenced ledger means another broker serves the topic and owns this
        # cursor's record now: writing it would undo the new owner's state.
        if not self.durable or self.ledger.fenced_by_other:
            return
        self._dirty = False
        self._last_persist = time.monotonic()
        body = self.state.to_json(self._max_ranges)
        self._version = await self.ledger.metastore.put(
            self.ledger.cursor_key(self.name), body, expected_version=self._version
        )

    async def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._persisting is not None:
            await asyncio.gather(self._persisting, return_exceptions=True)
        if self._dirty:
            await self.persist()

    async def delete(self) -> None:
        await self.close()
        self.ledger.cursors.discard(self)
        if self.durable:
            await self.ledger.metastore.delete(self.ledger.cursor_key(self.name))
