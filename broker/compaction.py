"""Topic compaction on the broker that owns a topic: the runs, the record of
the compacted ledger, and the view read-compacted consumers read.

A run (:meth:`CompactionService.trigger`; ``topics compact``, or the monitor
when the ``compaction-threshold`` policy is passed) decides what to keep with
:mod:`broker.compaction_plan` and writes the kept entries to a new ledger on
the bookies (the topic's persistence, replicated like any other). Its
progress is the ``__compaction`` subscription, as in Pulsar: created at the
earliest message before the first run, it holds back retention of what is
not compacted yet, and after a run its mark-delete is the horizon.

The record ``/compaction/{topic}`` (protos.metadata_paths) names the
compacted ledger and its horizon, and is changed by compare-and-set only:

1. ``pending`` = the new ledger, before anything is written to it;
2. the new ledger written and closed;
3. ``ledger`` = the new ledger, ``horizon`` = the last position read,
   ``pending`` cleared — in one write. Then the old ledger is deleted.

A broker killed before step 3 leaves the record naming the old, complete
ledger: the view is never half-written. The next run claims the record
(its own ``pending``) before it deletes the previous run's pending ledger,
and never deletes the ledger the record names; a run whose claim was taken
over by another broker (after a bundle move) fails without writing. The
ledger a run replaced is kept as ``previous`` until the next run, which
deletes it (readers of the old view have had a run's time to move on).
A topic that closes here (unload, move) cancels its run and forgets its
cached view.

Bounds: one run per topic at a time; at most ``max_topics`` topics' states
(least recently used dropped, never one with a run going); the key table of
a run by ``compaction_max_keys``; a cached view holds one position per kept
entry (at most ``compaction_max_keys``); reads and writes in runs of
``compaction_read_batch_entries``.
"""

from __future__ import annotations

import asyncio
import bisect
import collections
import json
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

from bookie.ledger_client import LedgerClient
from broker.compaction_plan import (
    COMPACTION_SUBSCRIPTION,
    CompactedEntry,
    CompactionError,
    KeyTable,
    messages_of,
)
from broker.errors import BrokerError
from metastore.client import MetastoreClient
from protos import common_pb2, metadata_paths
from protos.compression import decompress
from protos.errors import MagnetarServerError
from protos.topic_name import TopicName

if TYPE_CHECKING:
    from broker.settings import BrokerSettings
    from broker.topic import Topic

log = logging.getLogger(__name__)

Position = tuple[int, int]
NOT_RUN, RUNNING, SUCCESS, ERROR = "NOT_RUN", "RUNNING", "SUCCESS", "ERROR"


@dataclass(frozen=True)
class CompactionRecord:
    ledger_id: int = -1  # the compacted ledger (-1: none yet)
    horizon: Position = (-1, -1)  # the last position it covers
    entries: int = 0
    pending: int = -1  # the ledger a run is writing (deleted by the next run)
    previous: int = -1  # the ledger the last run replaced (deleted by the next run)
    status: str = NOT_RUN
    last_error: str = ""
    removed: int = 0  # messages the last successful run left out
    succeeded_ms: int = 0
    failed_ms: int = 0
    duration_ms: int = 0

    def to_json(self) -> bytes:
        return json.dumps(asdict(self)).encode()

    @classmethod
    def from_json(cls, data: bytes) -> CompactionRecord:
        doc = json.loads(data)
        doc["horizon"] = tuple(doc.get("horizon", (-1, -1)))
        return cls(**{k: v for k, v in doc.items() if k in cls.__dataclass_fields__})


@dataclass
class CompactedView:
    """A compacted ledger: entry ``i`` holds the message(s) at ``positions[i]``."""

    ledger_id: int
    horizon: Position
    positions: list[Position]
    ledgers: LedgerClient
    metadata: Any = None  # the closed ledger's, read once

    def index_after(self, pos: Position) -> int:
        """The first entry at a position after ``pos``."""
        return bisect.bisect_right(self.positions, pos)

    async def read(self, first: int, max_entries: int) -> list[CompactedEntry]:
        """Entries ``first`` … (at most ``max_entries``)."""
        last = min(len(self.positions), first + max_entries) - 1
        if last < first:
            return []
        if self.metadata is None:
            self.metadata = await self.ledgers.metadata(self.ledger_id)
        rows = await self.ledgers.read(self.metadata, first, last)
        return [CompactedEntry.decode(data) for _, data in rows]


@dataclass
class TopicCompaction:
    """One topic's compaction on its owner."""

    version: int = -1  # of the record as last read or written
    view: CompactedView | None = None
    view_known: bool = False  # view (or its absence) read from the record
    failure: str = ""  # a run that failed before it claimed the record
    task: asyncio.Task | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)  # runs
    view_lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    @property
    def running(self) -> bool:
        return self.task is not None and not self.task.done()


class CompactionService:
    def __init__(
        self, metastore: MetastoreClient, ledgers: LedgerClient, settings: BrokerSettings
    ) -> None:
        self.metastore = metastore
        self.ledgers = ledgers
        self.settings = settings
        self._topics: collections.OrderedDict[str, TopicCompaction] = collections.OrderedDict()

    def _state(self, name: TopicName) -> TopicCompaction:
        key = name.full_name
        state = self._topics.get(key)
        if state is None:
            state = self._topics[key] = TopicCompaction()
            excess = len(self._topics) - self.settings.max_topics
            if excess > 0:  # the least recently used first, never one with a run going
                idle = [k for k, s in self._topics.items() if not s.running and k != key]
                for old in idle[:excess]:
                    del self._topics[old]
        self._topics.move_to_end(key)
        return state

    def topic_closed(self, name: TopicName) -> None:
        """The topic is no longer served here: its run stops, its view goes."""
        state = self._topics.pop(name.full_name, None)
        if state is not None and state.task is not None:
            state.task.cancel()

    # ------------------------------------------------------------ the record

    async def _load(self, name: TopicName, state: TopicCompaction) -> CompactionRecord:
        stat = await self.metastore.get(metadata_paths.compaction(name))
        if stat is None:
            state.version = -1
            return CompactionRecord()
        state.version = stat.version
        return CompactionRecord.from_json(stat.value)

    async def _store(
        self, name: TopicName, state: TopicCompaction, record: CompactionRecord
    ) -> None:
        """Compare-and-set on the version last read or written here."""
        key = metadata_paths.compaction(name)
        state.version = await self.metastore.put(
            key, record.to_json(), expected_version=state.version
        )

    # ------------------------------------------------------------ status and view

    async def status(self, name: TopicName) -> dict[str, Any]:
        """Pulsar's ``compaction-status``: ``{"status", "lastError"}``."""
        state = self._state(name)
        if state.running:
            return {"status": RUNNING, "lastError": ""}
        if state.failure:
            return {"status": ERROR, "lastError": state.failure}
        record = await self._load(name, state)
        if record.status == RUNNING:  # recorded by a broker that stopped during the run
            return {"status": ERROR, "lastError": "the run was interrupted (its broker stopped)"}
        return {"status": record.status, "lastError": record.last_error}

    async def view(self, name: TopicName) -> CompactedView | None:
        """The topic's compacted view (None: never compacted); read from the
        record once, then kept up to date by the runs here."""
        state = self._state(name)
        if state.view_known:
            return state.view
        async with state.view_lock:
            if not state.view_known:
                stat = await self.metastore.get(metadata_paths.compaction(name))
                record = CompactionRecord.from_json(stat.value) if stat else CompactionRecord()
                if record.ledger_id >= 0:
                    state.view = await self._index(record)
                state.view_known = True
        return state.view

    def forget_view(self, name: TopicName) -> None:
        """A read of the view failed: read the record again next time."""
        state = self._topics.get(name.full_name)
        if state is not None and not state.running:
            state.view, state.view_known = None, False

    async def _index(self, record: CompactionRecord) -> CompactedView:
        md = await self.ledgers.metadata(record.ledger_id)
        positions = [ce.position async for ce in self._compacted_entries(md)]
        return CompactedView(record.ledger_id, record.horizon, positions, self.ledgers, md)

    async def _compacted_entries(self, md: Any) -> AsyncIterator[CompactedEntry]:
        """Every entry of a compacted ledger, in order, read in runs."""
        batch = self.settings.compaction_read_batch_entries
        for first in range(0, md.last_entry_id + 1, batch):
            last = min(md.last_entry_id, first + batch - 1)
            for _, data in await self.ledgers.read(md, first, last):
                yield CompactedEntry.decode(data)

    # ------------------------------------------------------------ runs

    def trigger(self, topic: Topic) -> None:
        """Start a run now; CONFLICT while one is running."""
        state = self._state(topic.name)
        if state.running:
            raise BrokerError(f"{topic.name} is being compacted already", common_pb2.CONFLICT)
        state.failure = ""
        state.task = asyncio.get_running_loop().create_task(self._run(topic, state))

    def running(self, name: TopicName) -> bool:
        state = self._topics.get(name.full_name)
        return state is not None and state.running

    async def _run(self, topic: Topic, state: TopicCompaction) -> None:
        started = time.monotonic()
        claim: list[int] = []  # the ledger this run claimed in the record, once it did
        try:
            async with state.lock:
                await self._compact(topic, state, started, claim)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            why = exc.message if isinstance(exc, MagnetarServerError) else str(exc)
            log.warning("compaction of %s failed: %s", topic.name, why)
            state.failure = why
            if claim:
                await self._failed(topic.name, state, claim[0], why, started)

    async def _failed(
        self, name: TopicName, state: TopicCompaction, claimed: int, why: str, started: float
    ) -> None:
        """Record the failure, if the record is still this run's claim (else
        another broker's run owns it now: leave it alone)."""
        try:
            record = await self._load(name, state)
            if record.pending != claimed:
                return
            failed = replace(
                record,
                status=ERROR,
                last_error=why,
                failed_ms=int(time.time() * 1000),
                duration_ms=int((time.monotonic() - started) * 1000),
            )
            await self._store(name, state, failed)
            state.failure = ""
        except Exception as again:  # the next run starts over anyway
            log.warning("recording the failed compaction of %s failed: %s", name, again)

    async def _compact(
        self, topic: Topic, state: TopicCompaction, started: float, claim: list[int]
    ) -> None:
        name = topic.name
        record = await self._load(name, state)
        await topic.create_subscription(COMPACTION_SUBSCRIPTION, latest=False)
        end = topic.ledger.last_confirmed
        if end[1] < 0 or (record.ledger_id >= 0 and end <= record.horizon):
            await self._store(name, state, replace(record, status=SUCCESS, last_error=""))
            return  # nothing new since the last run
        p = topic.policies.persistence
        writer = await self.ledgers.create_ledger(p.ensemble, p.write_quorum, p.ack_quorum)
        claimed = replace(
            record, pending=writer.ledger_id, previous=-1, status=RUNNING, last_error=""
        )
        try:
            await self._store(name, state, claimed)  # from here the record is this run's
        except BaseException:
            await self.ledgers.delete_ledger(writer.ledger_id)
            raise
        claim.append(writer.ledger_id)
        for garbage in {record.pending, record.previous} - {-1, record.ledger_id}:
            await self.ledgers.delete_ledger(garbage)
        table = KeyTable(self.settings.compaction_max_keys)
        async for pos, messages, _ in self._view_entries(topic, record, end):
            table.add(pos, messages)
        positions = await self._write_kept(topic, record, end, table, writer)
        done = CompactionRecord(
            ledger_id=writer.ledger_id,
            horizon=end,
            entries=len(positions),
            previous=record.ledger_id,
            status=SUCCESS,
            removed=table.messages - table.kept_messages,
            succeeded_ms=int(time.time() * 1000),
            failed_ms=record.failed_ms,
            duration_ms=int((time.monotonic() - started) * 1000),
        )
        await self._store(name, state, done)
        state.view = CompactedView(writer.ledger_id, end, positions, self.ledgers)
        state.view_known = True
        sub = topic.subscriptions.get(COMPACTION_SUBSCRIPTION)
        if sub is not None and not topic.closing:  # (a moved topic's cursor is its new owner's)
            sub.ack([end], cumulative=True, consumer=None)

    async def _write_kept(
        self, topic: Topic, record: CompactionRecord, end: Position, table: KeyTable, writer: Any
    ) -> list[Position]:
        """Phase two: the kept entries to ``writer`` (then closed); their positions."""
        positions: list[Position] = []
        out: list[bytes] = []
        async for pos, messages, entry in self._view_entries(topic, record, end):
            kept = table.kept(pos, messages)
            if kept:
                out.append(CompactedEntry(pos, tuple(kept), entry).encode())
                positions.append(pos)
            if len(out) >= self.settings.compaction_read_batch_entries:
                await writer.add_many(out)
                out = []
        if out:
            await writer.add_many(out)
        await writer.close()
        return positions

    async def _view_entries(
        self, topic: Topic, record: CompactionRecord, end: Position
    ) -> AsyncIterator[tuple[Position, list, bytes]]:
        """The compacted view up to ``end``: the compacted ledger's entries
        (their kept messages), then the topic's after the horizon."""
        batch = self.settings.compaction_read_batch_entries
        max_size = self.settings.max_message_size
        if record.ledger_id >= 0:
            md = await self.ledgers.metadata(record.ledger_id)
            async for ce in self._compacted_entries(md):
                kept = set(ce.kept)
                messages = [
                    m for m in messages_of(ce.entry, decompress, max_size) if m.batch_index in kept
                ]
                yield ce.position, messages, ce.entry
        ledger = topic.ledger
        pos = (
            ledger.next_position(record.horizon) if record.ledger_id >= 0 else ledger.first_position
        )
        while pos <= end:
            entries = await ledger.read_entries(
                pos, batch, self.settings.dispatcher_max_read_size_bytes
            )
            if not entries:
                raise CompactionError(f"{topic.name}: entry {pos} could not be read")
            for at, data in entries:
                if at > end:
                    return
                yield at, messages_of(data, decompress, max_size), data
            pos = ledger.next_position(entries[-1][0])

    async def forget(self, name: TopicName) -> None:
        """The topic was deleted: its compacted ledgers and record go too."""
        self.topic_closed(name)
        stat = await self.metastore.get(metadata_paths.compaction(name))
        if stat is None:
            return
        record = CompactionRecord.from_json(stat.value)
        for ledger_id in {record.ledger_id, record.pending, record.previous} - {-1}:
            await self.ledgers.delete_ledger(ledger_id)
        await self.metastore.delete(metadata_paths.compaction(name))
