"""The bookie's ``/metrics`` with BookKeeper's names (docs/metrics.md).

BookKeeper's conventions are kept: latencies are summaries in
milliseconds with ``success="true|false"`` and quantiles 0.5 to 1.0 over
the last complete window (``_count`` and ``_sum`` grow forever); its
counters carry no ``_total`` suffix (``bookie_WRITE_BYTES``). An add or
read request here carries many entries, so a request counts once per
entry, with the request's latency (as BookKeeper counts its one-entry
requests), in O(1) (:meth:`protos.prometheus_text.OpStats.record`).

Figures that cost a scan (ledgers, entries, disk usage) are read at
scrape time, in the scrape's thread, and the ledger count at most every
``LEDGER_COUNT_REFRESH_S``.
"""

from __future__ import annotations

import re
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from prometheus_client import REGISTRY, generate_latest

from bookie.storage import EntryStore
from protos import prometheus_text
from protos.prometheus_text import BOOKKEEPER_QUANTILES, Family, OpStats, counter, gauge

LEDGER_COUNT_REFRESH_S = 30.0
WINDOW_S = 60.0  # BookKeeper's latency rollover


class SuccessStats:
    """An OpStatsLogger: one summary for successes, one for failures."""

    def __init__(self) -> None:
        self.success = OpStats()
        self.failure = OpStats()

    def record(self, ok: bool, latency_ms: float, times: int = 1) -> None:
        (self.success if ok else self.failure).record(latency_ms, times)

    def rotate(self) -> None:
        self.success.rotate()
        self.failure.rotate()

    def family(self, name: str, help_text: str) -> Family:
        family = Family(name, "summary", help_text)
        self.failure.family_samples(family, 'success="false"', BOOKKEEPER_QUANTILES)
        self.success.family_samples(family, 'success="true"', BOOKKEEPER_QUANTILES)
        return family


def dir_usage_name(path: Path) -> str:
    """BookKeeper's per-directory gauge name: ``/data/ledgers`` gives
    ``bookie_ledger_dir__data_ledgers_usage``."""
    return "bookie_ledger_dir_" + re.sub(r"[^A-Za-z0-9_]", "_", str(path)) + "_usage"


@dataclass
class RecoveryCounts:
    """AutoRecovery's figures in this bookie (BookKeeper's auditor and
    replication worker stats), written by its daemon on the event loop."""

    auditor_leader: bool = False
    under_replicated_ledgers: int = 0  # tasks as this bookie last listed them
    under_replicated_bytes: int = 0  # their ledgers' length (the auditor's last scan)
    ledgers_checked: int = 0
    ledgers_replicated: int = 0  # tasks this worker finished (full or partial)
    entries_read: int = 0
    bytes_read: int = 0
    entries_written: int = 0
    bytes_written: int = 0
    throttled_s: float = 0.0

    def families(self) -> list[Family]:
        return [
            gauge(
                "auditor_NUM_UNDER_REPLICATED_LEDGERS",
                "Ledgers waiting for re-replication (/underreplication/ledgers)",
                self.under_replicated_ledgers,
            ),
            gauge(
                "auditor_UNDER_REPLICATED_LEDGERS_TOTAL_SIZE",
                "Bytes of those ledgers, at the auditor's last scan (auditor only)",
                self.under_replicated_bytes,
            ),
            counter(
                "auditor_NUM_LEDGERS_CHECKED",
                "Ledgers the auditor checked",
                self.ledgers_checked,
                suffix="",
            ),
            gauge(
                "magnetar_auditor_leader",
                "1 if this bookie runs the auditor",
                int(self.auditor_leader),
            ),
            counter(
                "replication_worker_NUM_FULL_OR_PARTIAL_LEDGERS_REPLICATED",
                "Under-replicated ledgers this worker repaired",
                self.ledgers_replicated,
                suffix="",
            ),
            counter(
                "replication_worker_NUM_ENTRIES_READ",
                "Entries read for re-replication",
                self.entries_read,
                suffix="",
            ),
            counter(
                "replication_worker_NUM_BYTES_READ",
                "Bytes read for re-replication",
                self.bytes_read,
                suffix="",
            ),
            counter(
                "replication_worker_NUM_ENTRIES_WRITTEN",
                "Entries re-replicated",
                self.entries_written,
                suffix="",
            ),
            counter(
                "replication_worker_NUM_BYTES_WRITTEN",
                "Bytes re-replicated",
                self.bytes_written,
                suffix="",
            ),
            counter(
                "magnetar_rereplication_throttled_seconds",
                "Time re-replication waited for rereplication_rate_bytes_per_s",
                self.throttled_s,
                suffix="_total",
            ),
        ]


class BookieMetrics:
    def __init__(self, store: EntryStore) -> None:
        self.store = store
        self.recovery = RecoveryCounts()
        self.add_request = SuccessStats()  # whole add requests, per entry
        self.add_entry = SuccessStats()  # from accepted to durable, per entry
        self.read_request = SuccessStats()  # whole read requests, per entry
        self.read_entry = SuccessStats()  # the storage read, per entry
        self.journal_add_entry = OpStats()  # queued to synced, per entry
        self.journal_sync = OpStats()  # one group's fdatasync
        self.force_write_batch_entries = OpStats()  # entries per group commit
        self.force_write_batch_bytes = OpStats()  # bytes per group commit
        self.write_bytes = 0
        self.read_bytes = 0
        self.read_only = False
        self.queued_entries = 0  # waiting for the next group commit
        self._ledgers = (0, -LEDGER_COUNT_REFRESH_S)  # (count, when counted)
        self._lock = threading.Lock()
        self._last_rotate = time.monotonic()

    def group_written(self, entries: int, size: int, sync_seconds: float | None) -> None:
        """The group committer's report (its thread) of one group written;
        ``sync_seconds`` its fdatasync (None: no sync ran, or the write failed)."""
        self.force_write_batch_entries.record(entries)
        self.force_write_batch_bytes.record(size)
        if sync_seconds is not None:
            self.journal_sync.record(sync_seconds * 1000)

    def _rotate_if_due(self) -> None:
        now = time.monotonic()
        with self._lock:
            if now - self._last_rotate < WINDOW_S:
                return
            self._last_rotate = now
        for stats in (self.add_request, self.add_entry, self.read_request, self.read_entry):
            stats.rotate()
        for op in (
            self.journal_add_entry,
            self.journal_sync,
            self.force_write_batch_entries,
            self.force_write_batch_bytes,
        ):
            op.rotate()

    def _ledger_count(self) -> int:
        count, when = self._ledgers
        if time.monotonic() - when >= LEDGER_COUNT_REFRESH_S:
            count = self.store.ledger_count_estimate()
            self._ledgers = (count, time.monotonic())
        return count

    def families(self) -> list[Family]:
        self._rotate_if_due()
        entries, _ = self.store.size_estimate()
        usage = shutil.disk_usage(self.store.path)
        percent = 100.0 * usage.used / usage.total if usage.total else 0.0
        out = [
            gauge("bookie_SERVER_STATUS", "1 writable, 0 read-only", 0 if self.read_only else 1),
            self.add_request.family(
                "bookkeeper_server_ADD_ENTRY_REQUEST", "Add request latency per entry (ms)"
            ),
            self.add_entry.family(
                "bookkeeper_server_ADD_ENTRY", "Add latency per entry, accepted to durable (ms)"
            ),
            self.read_request.family(
                "bookkeeper_server_READ_ENTRY_REQUEST", "Read request latency per entry (ms)"
            ),
            self.read_entry.family(
                "bookkeeper_server_READ_ENTRY", "Storage read latency per entry (ms)"
            ),
            counter("bookie_WRITE_BYTES", "Entry bytes written", self.write_bytes, suffix=""),
            counter("bookie_READ_BYTES", "Entry bytes read", self.read_bytes, suffix=""),
            self.journal_add_entry.family(
                "bookie_journal_JOURNAL_ADD_ENTRY",
                "Queued to synced, per entry (ms)",
                BOOKKEEPER_QUANTILES,
            ),
            self.journal_sync.family(
                "bookie_journal_JOURNAL_SYNC",
                "Journal fdatasync latency (ms)",
                BOOKKEEPER_QUANTILES,
            ),
            self.force_write_batch_entries.family(
                "bookie_journal_JOURNAL_FORCE_WRITE_BATCH_ENTRIES",
                "Entries per group commit",
                BOOKKEEPER_QUANTILES,
            ),
            self.force_write_batch_bytes.family(
                "bookie_journal_JOURNAL_FORCE_WRITE_BATCH_BYTES",
                "Bytes per group commit",
                BOOKKEEPER_QUANTILES,
            ),
            gauge(
                "bookie_journal_JOURNAL_QUEUE_SIZE",
                "Entries waiting for a group commit",
                self.queued_entries,
            ),
            gauge("bookie_ledgers_count", "Ledgers stored", self._ledger_count()),
            gauge("bookie_entries_count", "Entries stored (RocksDB's estimate)", entries),
            gauge(
                "bookie_ledger_writable_dirs",
                "Ledger directories taking writes",
                0 if self.read_only else 1,
            ),
            gauge(
                dir_usage_name(self.store.path), "Disk usage of the ledger directory (%)", percent
            ),
        ]
        return out + self.recovery.families()

    def render(self) -> bytes:
        """The whole text (with the process's own series); call it in a thread."""
        return prometheus_text.render(self.families()).encode() + generate_latest(REGISTRY)
