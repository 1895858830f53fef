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
ledger: the view is never half-written. The next run deletes the pending
ledger first and starts over.

Bounds: one run per topic at a time; at most ``max_topics`` topics' states
(least recently used dropped); the key table of a run by
``compaction_max_keys``; reads and writes in runs of
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
from broker.compaction_plan import CompactedEntry, CompactionError, KeyTable, messages_of
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

COMPACTION_SUBSCRIPTION = "__compaction"
Position = tuple[int, int]
NOT_RUN, RUNNING, SUCCESS, ERROR = "NOT_RUN", "RUNNING", "SUCCESS", "ERROR"


@dataclass(frozen=True)
class CompactionRecord:
    ledger_id: int = -1  # the compacted ledger (-1: none yet)
    horizon: Position = (-1, -1)  # the last position it covers
    entries: int = 0
    pending: int = -1  # a ledger being written (deleted by the next run)
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
    """A compacted ledger, found by the original positions it holds."""

    ledgers: LedgerClient
    ledger_id: int
    horizon: Position
    positions: list[Position]  # of compacted entry i, in order
    metadata: Any = None  # the closed ledger's, read once

    async def read(self, start: Position, max_entries: int) -> list[CompactedEntry]:
        """The compacted entries at or after ``start`` (at most ``max_entries``)."""
        first = bisect.bisect_left(self.positions, start)
        if first >= len(self.positions):
            return []
        last = min(len(self.positions), first + max_entries) - 1
        if self.metadata is None:
            self.metadata = await self.ledgers.metadata(self.ledger_id)
        rows = await self.ledgers.read(self.metadata, first, last)
        return [CompactedEntry.decode(data) for _, data in rows]


@dataclass
class TopicCompaction:
    """One topic's compaction on its owner."""

    record: CompactionRecord | None = None  # as last read or written
    version: int = -1
    view: CompactedView | None = None
    task: asyncio.Task | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


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
            while len(self._topics) > self.settings.max_topics:
                self._topics.popitem(last=False)
        self._topics.move_to_end(key)
        return state

    # ------------------------------------------------------------ the record

    async def _load(self, name: TopicName, state: TopicCompaction) -> CompactionRecord:
        stat = await self.metastore.get(metadata_paths.compaction(name))
        if stat is None:
            state.record, state.version = CompactionRecord(), -1
        else:
            state.record, state.version = CompactionRecord.from_json(stat.value), stat.version
        return state.record

    async def _store(
        self, name: TopicName, state: TopicCompaction, record: CompactionRecord
    ) -> None:
        key = metadata_paths.compaction(name)
        state.version = await self.metastore.put(
            key, record.to_json(), expected_version=state.version
        )
        state.record = record

    # ------------------------------------------------------------ status and view

    async def status(self, name: TopicName) -> dict[str, Any]:
        """Pulsar's ``compaction-status``: ``{"status", "lastError"}``."""
        state = self._state(name)
        if state.task is not None and not state.task.done():
            return {"status": RUNNING, "lastError": ""}
        record = await self._load(name, state)
        if record.status == RUNNING:  # recorded by a broker that stopped during the run
            return {"status": ERROR, "lastError": "the run was interrupted (its broker stopped)"}
        return {"status": record.status, "lastError": record.last_error}

    async def view(self, name: TopicName) -> CompactedView | None:
        """The topic's compacted view (None: never compacted)."""
        state = self._state(name)
        if state.view is not None:
            return state.view
        async with state.lock:
            if state.view is None:
                record = await self._load(name, state)
                if record.ledger_id >= 0:
                    state.view = await self._index(record)
        return state.view

    async def _index(self, record: CompactionRecord) -> CompactedView:
        positions: list[Position] = []
        md = await self.ledgers.metadata(record.ledger_id)
        batch = self.settings.compaction_read_batch_entries
        for first in range(0, md.last_entry_id + 1, batch):
            rows = await self.ledgers.read(md, first, min(md.last_entry_id, first + batch - 1))
            positions.extend(CompactedEntry.decode(data).position for _, data in rows)
        return CompactedView(self.ledgers, record.ledger_id, record.horizon, positions)

    # ------------------------------------------------------------ runs

    def trigger(self, topic: Topic) -> None:
        """Start a run now; CONFLICT while one is running."""
        state = self._state(topic.name)
        if state.task is not None and not state.task.done():
            raise BrokerError(f"{topic.name} is being compacted already", common_pb2.CONFLICT)
        state.task = asyncio.get_running_loop().create_task(self._run(topic, state))

    def running(self, name: TopicName) -> bool:
        task = self._topics.get(name.full_name, TopicCompaction()).task
        return task is not None and not task.done()

    async def _run(self, topic: Topic, state: TopicCompaction) -> None:
        started = time.monotonic()
        try:
            async with state.lock:
                await self._compact(topic, state, started)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("compaction of %s failed: %s", topic.name, exc)
            await self._failed(topic.name, state, exc, started)

    async def _failed(
        self, name: TopicName, state: TopicCompaction, exc: Exception, started: float
    ) -> None:
        why = exc.message if isinstance(exc, MagnetarServerError) else str(exc)
        try:
            record = await self._load(name, state)
            await self._store(
                name,
                state,
                replace(
                    record,
                    status=ERROR,
                    last_error=why,
                    failed_ms=int(time.time() * 1000),
                    duration_ms=int((time.monotonic() - started) * 1000),
                ),
            )
        except Exception as again:  # the next run starts over anyway
            log.warning("recording the failed compaction of %s failed: %s", name, again)

    async def _compact(self, topic: Topic, state: TopicCompaction, started: float) -> None:
        name = topic.name
        record = await self._load(name, state)
        if record.pending >= 0:  # a run that did not finish: its ledger is garbage
            await self.ledgers.delete_ledger(record.pending)
        await topic.create_subscription(COMPACTION_SUBSCRIPTION, latest=False)
        end = topic.ledger.last_confirmed
        if end[1] < 0 or (record.ledger_id >= 0 and end <= record.horizon):
            await self._store(name, state, replace(record, pending=-1, status=SUCCESS))
            return  # nothing new since the last run
        p = topic.policies.persistence
        writer = await self.ledgers.create_ledger(p.ensemble, p.write_quorum, p.ack_quorum)
        await self._store(name, state, replace(record, pending=writer.ledger_id, status=RUNNING))
        table = KeyTable(self.settings.compaction_max_keys)
        async for pos, messages, _ in self._view_entries(topic, record, end):
            table.add(pos, messages)
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
        old = record.ledger_id
        await self._store(
            name,
            state,
            CompactionRecord(
                ledger_id=writer.ledger_id,
                horizon=end,
                entries=len(positions),
                status=SUCCESS,
                removed=table.messages - len(positions),
                succeeded_ms=int(time.time() * 1000),
                failed_ms=record.failed_ms,
                duration_ms=int((time.monotonic() - started) * 1000),
            ),
        )
        state.view = CompactedView(self.ledgers, writer.ledger_id, end, positions)
        sub = topic.subscriptions.get(COMPACTION_SUBSCRIPTION)
        if sub is not None and not topic.closing:  # (a moved topic's cursor is its new owner's)
            sub.ack([end], cumulative=True, consumer=None)
        if old >= 0:
            await self.ledgers.delete_ledger(old)

    async def _view_entries(
        self, topic: Topic, record: CompactionRecord, end: Position
    ) -> AsyncIterator[tuple[Position, list, bytes]]:
        """The compacted view up to ``end``: the compacted ledger's entries
        (their kept messages), then the topic's after the horizon."""
        batch = self.settings.compaction_read_batch_entries
        if record.ledger_id >= 0:
            md = await self.ledgers.metadata(record.ledger_id)
            for first in range(0, md.last_entry_id + 1, batch):
                last = min(md.last_entry_id, first + batch - 1)
                for _, data in await self.ledgers.read(md, first, last):
                    ce = CompactedEntry.decode(data)
                    kept = set(ce.kept)
                    messages = [
                        m for m in messages_of(ce.entry, decompress) if m.batch_index in kept
                    ]
                    yield ce.position, messages, ce.entry
        ledger = topic.ledger
        pos = (
            ledger.next_position(record.horizon) if record.ledger_id >= 0 else ledger.first_position
        )
        while pos <= end:
            entries = await ledger.read_entries(pos, batch, 1 << 62)
            if not entries:
                raise CompactionError(f"{topic.name}: entry {pos} could not be read")
            for at, data in entries:
                if at > end:
                    return
                yield at, messages_of(data, decompress), data
            pos = ledger.next_position(entries[-1][0])

    async def forget(self, name: TopicName) -> None:
        """The topic was deleted: its compacted ledger and record go too."""
        state = self._topics.pop(name.full_name, None)
        if state is not None and state.task is not None:
            state.task.cancel()
        stat = await self.metastore.get(metadata_paths.compaction(name))
        if stat is None:
            return
        record = CompactionRecord.from_json(stat.value)
        for ledger_id in (record.ledger_id, record.pending):
            if ledger_id >= 0:
                await self.ledgers.delete_ledger(ledger_id)
        await self.metastore.delete(metadata_paths.compaction(name))


def compaction_error(exc: CompactionError) -> BrokerError:
    return BrokerError(str(exc), common_pb2.PRECONDITION_FAILED)
