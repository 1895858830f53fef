"""The stats history: every ``stats_export_interval_s`` a snapshot of what
this broker serves goes to the stats topic (``docs/stats-schema.md``).

Theory of operation. Snapshots are taken on the event loop at wall-clock
multiples of the interval (every broker's snapshots of 12:01:00 carry that
timestamp, which lines up the reports' intervals across brokers): one
``topic`` record per topic served here (system topics left out, so the
history never describes itself), the ``broker`` record of its last load
report and, on the load manager leader only, one ``bookie`` record per
bookie that answers. Building is paced (:mod:`broker.pacing`: 2 ms of work,
then 2 ms for everything else), so ten thousand topics never hold up
traffic for long. Each record is encoded for the stats topic as it is made,
in the same slices: with 10,000 topics, encoding them all at once when the
snapshot was sent held the loop ~200 ms, and the records waiting as dicts
made the next garbage collections scan a few hundred thousand objects.

Snapshots wait in a queue of at most ``stats_export_max_pending_snapshots``
for one publishing task, which sends the oldest and removes it only once
every record is stored. While the stats topic cannot take them (its owner
moving, bookies down) the task retries with a growing pause; a snapshot
that would overflow the queue pushes the oldest out, counted in
``dropped_snapshots``. One the stats topic refuses outright (a record over
``max_message_size``) is dropped at once, counted there too.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Awaitable, Callable, Sequence

from bookie.ledger_client import LedgerClient
from broker.load_manager import LoadManager
from broker.ownership import Ownership
from broker.pacing import Pacer
from broker.settings import BrokerSettings
from broker.stats_records import (
    RecordsRefused,
    Snapshot,
    bookie_record,
    broker_record,
    encode_record,
    topic_record,
)
from broker.topics import TopicRegistry

log = logging.getLogger(__name__)

# Pauses between attempts to publish a snapshot the stats topic did not take.
RETRY_MIN_S = 0.5

# Stores a snapshot's encoded records (broker.stats_records.encode_record).
Publish = Callable[[Sequence[bytes]], Awaitable[None]]


def next_snapshot_at(now_s: float, interval_s: float) -> float:
    """The first wall-clock multiple of ``interval_s`` after ``now_s``."""
    return (now_s // interval_s + 1) * interval_s


class StatsHistory:
    def __init__(
        self,
        settings: BrokerSettings,
        topics: TopicRegistry,
        ownership: Ownership,
        load_manager: LoadManager,
        ledgers: LedgerClient,
        publish: Publish,
    ) -> None:
        self.settings = settings
        self.topics = topics
        self.ownership = ownership
        self.load_manager = load_manager
        self.ledgers = ledgers
        self.publish = publish
        self.pending: collections.deque[list[bytes]] = collections.deque()
        self._queued = asyncio.Event()
        self.snapshots = 0
        self.published_snapshots = 0
        self.dropped_snapshots = 0

    async def run_forever(self) -> None:
        interval = self.settings.stats_export_interval_s
        if interval <= 0:
            return
        publisher = asyncio.create_task(self._publish_forever())
        try:
            while True:
                at = next_snapshot_at(time.time(), interval)
                await asyncio.sleep(max(0.0, at - time.time()))
                try:
                    self.enqueue(await self.snapshot(int(at * 1000)))
                except Exception:
                    log.exception("the stats snapshot failed")
        finally:
            publisher.cancel()

    async def snapshot(self, timestamp_ms: int) -> list[bytes]:
        """Every record of one snapshot taken at ``timestamp_ms``, encoded."""
        s = self.settings
        snap = Snapshot(
            timestamp_ms, s.stats_export_interval_s, s.cluster_name, self.ownership.address
        )
        records: list[bytes] = []
        served = [t for t in list(self.topics.topics.values()) if not t.name.is_system]
        pacer = Pacer()
        for topic in served:
            await pacer.step()
            if self.topics.topics.get(topic.name.full_name) is not topic:
                continue  # closed or reloaded meanwhile: the next snapshot has it
            name = topic.name
            boundaries = self.ownership.cached_bundles(name.namespace_name)
            bundle = boundaries.bundle_for_topic(name.full_name).name if boundaries else ""
            records.append(encode_record(topic_record(snap, topic, bundle)))
        lm = self.load_manager
        records.append(encode_record(broker_record(snap, await lm.report(), lm.thresholds)))
        if lm.is_leader:
            for bookie_id, stats in sorted((await self.ledgers.bookie_stats()).items()):
                records.append(encode_record(bookie_record(snap, bookie_id, stats)))
        self.snapshots += 1
        return records

    def enqueue(self, records: list[bytes]) -> None:
        """Queue a snapshot for publishing; the oldest goes when the queue is full."""
        while len(self.pending) >= max(1, self.settings.stats_export_max_pending_snapshots):
            self.pending.popleft()
            self.dropped_snapshots += 1
            log.warning("a stats snapshot was dropped: the stats topic is not taking them")
        self.pending.append(records)
        self._queued.set()

    async def _publish_forever(self) -> None:
        pause = RETRY_MIN_S
        while True:
            if not self.pending:
                self._queued.clear()
                await self._queued.wait()
                continue
            records = self.pending[0]
            try:
                await self.publish(records)
            except RecordsRefused as exc:
                self._done(records, published=False)
                log.error("the stats topic refused a snapshot (dropped): %s", exc)
            except Exception as exc:
                log.warning("publishing a stats snapshot failed (retrying): %s", exc)
                await asyncio.sleep(pause)  # a retry timer, bounded below
                pause = min(pause * 2, max(RETRY_MIN_S, self.settings.stats_export_interval_s))
            else:
                self._done(records, published=True)
                pause = RETRY_MIN_S

    def _done(self, records: list[bytes], published: bool) -> None:
        if self.pending and self.pending[0] is records:
            self.pending.popleft()
        if published:
            self.published_snapshots += 1
        else:
            self.dropped_snapshots += 1
