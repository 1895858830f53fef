"""Entry storage in RocksDB (rocksdict) with group commit.

Layout (raw-mode RocksDB, so other RocksDB readers see plain bytes):

* ``runs`` column family: key ``ledger id (u64 BE) | entry id (u64 BE)`` of
  the last record of a run, value the run: packed records as they came in an
  add request (bookie/entry_runs.py says when a request is stored this way).
* default column family: single entries, key ``ledger id (u64 BE) | entry
  id (u64 BE)``, value ``digest (u32 BE) | LAC (i64 BE) | payload``; an
  entry stored here wins over a run that holds the same id.
* ``ledgers`` column family: key ``ledger id (u64 BE)``, value JSON of the
  ledger's state: fenced flag and master key.

Big-endian keys keep a ledger's entries contiguous and in order, so a range
read is one scan of each family.

Writes come in groups from one thread (bookie/group_commit.py): journal
first, then RocksDB without its own log.
"""

from __future__ import annotations

import collections
import json
import logging
import os
import queue
import struct
import threading
from dataclasses import dataclass
from pathlib import Path

from rocksdict import DBCompressionType, Options, Rdict, ReadOptions, WriteBatch, WriteOptions

from bookie.entry_runs import (
    CheckedRecords,
    check_records,
    find_in_run,
    record_values,
    run_entry_count,
    run_first_entry,
    run_rows,
)
from bookie.journal import DELETE, ENTRIES, STATE, Journal
from bookie.settings import BookieSettings
from protos.digest import RecordError

log = logging.getLogger(__name__)

KEY = struct.Struct(">QQ")
_LEDGER_KEY = struct.Struct(">Q")
_VALUE_HEAD = struct.Struct(">Iq")
_MAX_ENTRY_ID = (1 << 64) - 1
RUNS_CF = "runs"
# Runs read to estimate entries per run when none was written since start.
_RUN_SAMPLE = 16
# Journal files' checkpoints waiting before writes wait for them.
_MAX_CHECKPOINTS = 4


def entry_key(ledger_id: int, entry_id: int) -> bytes:
    return KEY.pack(ledger_id, entry_id)


def encode_value(digest: int, lac: int, payload: bytes) -> bytes:
    return _VALUE_HEAD.pack(digest, lac) + payload


def decode_value(value: bytes) -> tuple[int, int, bytes]:
    digest, lac = _VALUE_HEAD.unpack_from(value, 0)
    return digest, lac, value[_VALUE_HEAD.size :]


@dataclass
class LedgerState:
    fenced: bool = False
    master_key: bytes | None = None
    lac: int = -1

    def encode(self) -> bytes:
        return json.dumps(
            {
                "fenced": self.fenced,
                "master_key": self.master_key.hex() if self.master_key else None,
            }
        ).encode()

    @classmethod
    def decode(cls, data: bytes) -> LedgerState:
        d = json.loads(data)
        key = d.get("master_key")
        return cls(fenced=bool(d.get("fenced")), master_key=bytes.fromhex(key) if key else None)


@dataclass(frozen=True)
class StoreTuning:
    """Choices that decide what a stored byte costs (bookie settings)."""

    recycle_journal_files: int
    journal_max_bytes: int
    write_buffer_bytes: int
    direct_io: bool
    run_max_bytes: int

    @classmethod
    def from_settings(cls, settings: BookieSettings | None = None) -> StoreTuning:
        s = settings or BookieSettings()
        return cls(
            recycle_journal_files=s.journal_recycle_files,
            journal_max_bytes=s.journal_max_size_mb << 20,
            write_buffer_bytes=s.write_buffer_size_mb << 20,
            direct_io=s.direct_io_for_flush_and_compaction,
            run_max_bytes=s.entry_run_max_bytes,
        )


@dataclass(frozen=True)
class Write:
    """One queued write: checked records, and/or a ledger's new state
    (ledger id, encoded :class:`LedgerState`)."""

    records: CheckedRecords | None = None
    state: tuple[int, bytes] | None = None


def direct_io_works(path: Path) -> bool:
    """Whether a file under ``path`` takes an O_DIRECT write (some file
    systems, such as older kernels' tmpfs, refuse O_DIRECT)."""
    import mmap

    flag = getattr(os, "O_DIRECT", 0)
    if not flag:
        return False
    probe = path / ".direct-io-probe"
    block = mmap.mmap(-1, 4096)  # page-aligned, as O_DIRECT needs
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | flag, 0o600)
        try:
            os.write(fd, block)
        finally:
            os.close(fd)
    except OSError:
        return False
    finally:
        block.close()
        probe.unlink(missing_ok=True)
    return True


def entry_options(path: Path, tuning: StoreTuning) -> tuple[Options, bool]:
    """RocksDB options of an entry store in the existing directory ``path``,
    and whether SST files are written with O_DIRECT there."""
    opts = Options(raw_mode=True)
    # Payloads are the producers' (often compressed) bytes: compressing
    # them again costs flush and compaction CPU for little space.
    opts.set_compression_type(DBCompressionType.none())
    opts.set_write_buffer_size(tuning.write_buffer_bytes)
    direct_io = tuning.direct_io and direct_io_works(path)
    if tuning.direct_io and not direct_io:
        log.warning("%s refuses O_DIRECT; SST files go through the page cache", path)
    opts.set_use_direct_io_for_flush_and_compaction(direct_io)
    return opts, direct_io


class EntryStore:
    """Theory of the tuning: on these machines the kernel's copy of written
    bytes into fresh page-cache pages, not the disk, is the largest cost of a
    stored entry (perf: ~40 % of a bookie's CPU under load). Recycled journal
    files are rewritten in pages already cached, and SST files written with
    O_DIRECT bypass the page cache. Runs (bookie/entry_runs.py) take the
    per-entry cost out of what remains, and the journal (bookie/journal.py)
    the software CRC of RocksDB's own log (benchmarks/ledger_replication.py).

    Every write goes through :meth:`write_group` (or :meth:`delete_ledger`),
    one at a time: journal first, then RocksDB without its log."""

    def __init__(
        self,
        path: Path,
        *,
        sync: bool,
        max_cached_ledger_states: int,
        tuning: StoreTuning | None = None,
        journal_path: Path | None = None,
    ) -> None:
        path.mkdir(parents=True, exist_ok=True)
        self.path = path
        tuning = tuning or StoreTuning.from_settings()
        opts, self.direct_io = entry_options(path, tuning)
        opts.create_if_missing(True)
        opts.create_missing_column_families(True)
        self.db = Rdict(
            str(path),
            opts,
            column_families={"ledgers": Options(raw_mode=True), RUNS_CF: opts},
        )
        self._ledgers_cf = self.db.get_column_family("ledgers")
        self._ledgers_handle = self.db.get_column_family_handle("ledgers")
        self._runs_cf = self.db.get_column_family(RUNS_CF)
        self._runs_handle = self.db.get_column_family_handle(RUNS_CF)
        self.sync = sync
        self._write_opts = WriteOptions()
        # the journal makes writes durable (an attribute, whatever the stub says)
        self._write_opts.disable_wal = True  # type: ignore[method-assign,assignment]
        self._write_lock = threading.Lock()
        self.run_max_bytes = tuning.run_max_bytes
        self._states: collections.OrderedDict[int, LedgerState] = collections.OrderedDict()
        self._max_states = max_cached_ledger_states
        self._states_lock = threading.Lock()
        # Highest entry id written per ledger, owned by the one thread that
        # stages records (the group committer); a ledger not in it is looked
        # up on disk, which that thread's own writes keep exact. Too high
        # (a failed write, a deleted ledger) only means single entries.
        self._last_written: collections.OrderedDict[int, int] = collections.OrderedDict()
        self.runs_written = 0
        self.run_entries_written = 0
        self._sampled_entries_per_run: float | None = None
        self.journal = Journal(
            journal_path or path.parent / "journal",
            max_file_bytes=tuning.journal_max_bytes,
            recycle_files=tuning.recycle_journal_files,
            sync=sync,
        )
        replayed = self.journal.replay(self._replay)
        if replayed:
            self.flush_memtables()
            self.journal.checkpoint_done(replayed)
        # files the journal left behind, waiting for their checkpoint
        self._checkpoints: queue.Queue[list[Path] | None] = queue.Queue(maxsize=_MAX_CHECKPOINTS)
        self._checkpointer = threading.Thread(
            target=self._checkpoint_loop, name="checkpoint", daemon=True
        )
        self._checkpointer.start()

    def close(self) -> None:
        self._checkpoints.put(None)
        self._checkpointer.join(timeout=60)
        with self._write_lock:
            self.flush_memtables()
            self.journal.close()
            self.journal.checkpoint_done([p for _, p in self.journal.existing()])
        del self._ledgers_cf
        del self._ledgers_handle
        del self._runs_cf
        del self._runs_handle
        self.db.close()

    # ---------------------------------------------------------------- journal

    def flush_memtables(self) -> None:
        for cf in (self.db, self._runs_cf, self._ledgers_cf):
            cf.flush(True)

    def _checkpoint_loop(self) -> None:
        while True:
            files = self._checkpoints.get()
            if files is None:
                return
            try:
                self.flush_memtables()
                self.journal.checkpoint_done(files)
            except Exception:  # the files stay and are replayed at the next start
                log.exception("checkpoint of journal files %s failed", files)

    def _replay(self, kind: int, ledger_id: int, body: bytes) -> bool:
        """Apply one journal frame to RocksDB; False if it is bad (replay of
        its file stops there, as at a torn frame)."""
        wb = WriteBatch(raw_mode=True)
        if kind == ENTRIES:
            try:
                records = check_records(ledger_id, body, self.run_max_bytes)
            except RecordError as exc:
                log.warning("journal frame of ledger %d is bad: %s", ledger_id, exc)
                return False
            self.stage_records(wb, records)
        elif kind == STATE:
            # State only moves forward (fenced stays fenced, a master key stays
            # set), so replaying an older frame never undoes a newer one.
            new = LedgerState.decode(body)
            raw = self._ledgers_cf.get(_LEDGER_KEY.pack(ledger_id))
            if raw is not None:
                old = LedgerState.decode(raw)
                new.fenced = new.fenced or old.fenced
                new.master_key = old.master_key or new.master_key
            wb.put(_LEDGER_KEY.pack(ledger_id), new.encode(), self._ledgers_handle)
        else:
            self._delete_ops(wb, ledger_id)
        self.db.write(wb, self._write_opts)
        return True

    # ---------------------------------------------------------------- state

    def ledger_state(self, ledger_id: int) -> LedgerState:
        with self._states_lock:
            state = self._states.get(ledger_id)
            if state is not None:
                self._states.move_to_end(ledger_id)
                return state
        raw = self._ledgers_cf.get(_LEDGER_KEY.pack(ledger_id))
        state = LedgerState.decode(raw) if raw is not None else LedgerState()
        if raw is not None:
            last = self.last_entry(ledger_id)
            if last >= 0:
                got = self.get(ledger_id, last)
                if got is not None:
                    state.lac = got[1]
        with self._states_lock:
            existing = self._states.get(ledger_id)
            if existing is not None:
                return existing
            self._states[ledger_id] = state
            while len(self._states) > self._max_states:
                self._states.popitem(last=False)
        return state

    # ---------------------------------------------------------------- reads

    def _run_at(self, ledger_id: int, entry_id: int) -> tuple[int, bytes] | None:
        """(last entry id, run) of the ledger's run with the lowest last entry
        id >= ``entry_id``: the only run that can hold it, since a ledger's
        runs never overlap."""
        it = self._runs_cf.iter()
        it.seek(entry_key(ledger_id, entry_id))
        if not it.valid():
            return None
        lid, last = KEY.unpack(it.key())
        return (last, it.value()) if lid == ledger_id else None

    def get(self, ledger_id: int, entry_id: int) -> tuple[int, int, bytes] | None:
        value = self.db.get(entry_key(ledger_id, entry_id))
        if value is not None:
            return decode_value(value)
        found = self._run_at(ledger_id, entry_id)
        return None if found is None else find_in_run(found[1], entry_id)

    def scan(
        self, ledger_id: int, first: int, last: int, limit: int
    ) -> list[tuple[int, int, int, bytes]]:
        """(entry id, digest, lac, payload) of stored entries in [first, last],
        at most ``limit`` of them, the lowest ids first."""
        upper = (
            entry_key(ledger_id, last + 1)
            if last < _MAX_ENTRY_ID
            else _LEDGER_KEY.pack(ledger_id + 1) + bytes(8)
        )
        ro = ReadOptions()
        ro.set_iterate_upper_bound(upper)
        singles: dict[int, tuple[int, int, int, bytes]] = {}
        for key, value in self.db.items(from_key=entry_key(ledger_id, first), read_opt=ro):
            _, entry_id = KEY.unpack(bytes(key))  # type: ignore[arg-type]
            singles[entry_id] = (entry_id, *decode_value(value))
            if len(singles) >= limit:
                break
        from_runs: list[tuple[int, int, int, bytes]] = []
        ro = ReadOptions()
        ro.set_iterate_upper_bound(_LEDGER_KEY.pack(ledger_id + 1) + bytes(8))
        for _, run in self._runs_cf.items(from_key=entry_key(ledger_id, first), read_opt=ro):
            if run_first_entry(run) > last:
                break
            from_runs.extend(run_rows(run, first, last))  # type: ignore[arg-type]
            if len(from_runs) >= limit:
                break
        if not singles:
            return from_runs[:limit]
        rows = [singles.pop(row[0], row) for row in from_runs]
        rows.extend(singles.values())
        rows.sort(key=lambda row: row[0])
        return rows[:limit]

    def get_many(
        self, ledger_id: int, entry_ids: list[int]
    ) -> list[tuple[int, tuple[int, int, bytes] | None]]:
        """(entry id, (digest, lac, payload) or None) for each id: one multi-get
        of single entries, then one read per run the others fall in."""
        values: list = self.db.get([entry_key(ledger_id, e) for e in entry_ids])  # type: ignore[assignment]
        out: list[tuple[int, tuple[int, int, bytes] | None]] = []
        run, run_first, run_last = b"", 0, -1
        for e, v in zip(entry_ids, values, strict=True):
            if v is not None:
                out.append((e, decode_value(v)))
                continue
            if not run_first <= e <= run_last:
                found = self._run_at(ledger_id, e)
                if found is None:
                    out.append((e, None))
                    continue
                run_last, run = found
                run_first = run_first_entry(run)
            out.append((e, find_in_run(run, e)))
        return out

    def ledger_count_estimate(self) -> int:
        """Ledgers with a state record, as RocksDB estimates them (no scan)."""
        return int(self._ledgers_cf.property_int_value("rocksdb.estimate-num-keys") or 0)

    def ledger_count(self, limit: int) -> int:
        n = 0
        for _ in self._ledgers_cf.keys():  # noqa: SIM118 (an Rdict iterates items)
            n += 1
            if n >= limit:
                break
        return n

    def _entries_per_run(self) -> float:
        if self.runs_written:
            return self.run_entries_written / self.runs_written
        if self._sampled_entries_per_run is None:
            counts = []
            for _, run in self._runs_cf.items():
                counts.append(run_entry_count(run))  # type: ignore[arg-type]
                if len(counts) >= _RUN_SAMPLE:
                    break
            self._sampled_entries_per_run = sum(counts) / len(counts) if counts else 0.0
        return self._sampled_entries_per_run

    def size_estimate(self) -> tuple[int, int]:
        """(entries, bytes) as RocksDB estimates them; entries in runs are
        estimated from the mean number of entries per run."""

        def prop(cf: Rdict, name: str) -> int:
            return cf.property_int_value(name) or 0

        entries = (
            prop(self.db, "rocksdb.estimate-num-keys")
            + prop(self._runs_cf, "rocksdb.estimate-num-keys") * self._entries_per_run()
        )
        size = sum(
            prop(cf, "rocksdb.total-sst-files-size") + prop(cf, "rocksdb.cur-size-all-mem-tables")
            for cf in (self.db, self._runs_cf)
        )
        return int(entries), size

    def _delete_ops(self, wb: WriteBatch, ledger_id: int) -> tuple[bytes, bytes]:
        begin, end = entry_key(ledger_id, 0), _LEDGER_KEY.pack(ledger_id + 1) + bytes(8)
        wb.delete_range(begin, end)
        wb.delete_range(begin, end, self._runs_handle)
        wb.delete(_LEDGER_KEY.pack(ledger_id), self._ledgers_handle)
        return begin, end

    def delete_ledger(self, ledger_id: int) -> bool:
        """Remove a ledger's entries and state, then compact its range away."""
        existed = (
            self._ledgers_cf.get(_LEDGER_KEY.pack(ledger_id)) is not None
            or self.last_entry(ledger_id) >= 0
        )
        wb = WriteBatch(raw_mode=True)
        begin, end = self._delete_ops(wb, ledger_id)
        with self._write_lock:
            left = self.journal.append([(DELETE, ledger_id, b"")])
            self.db.write(wb, self._write_opts)
        if left:
            self._checkpoints.put(left)
        with self._states_lock:
            self._states.pop(ledger_id, None)
        self.db.compact_range(begin, end)
        self._runs_cf.compact_range(begin, end)
        return existed

    def last_entry(self, ledger_id: int) -> int:
        """The highest entry id stored for the ledger, -1 if none."""
        last = -1
        for cf in (self.db, self._runs_cf):
            it = cf.iter()
            it.seek_for_prev(entry_key(ledger_id, _MAX_ENTRY_ID))
            if it.valid():
                key = it.key()
                if len(key) == KEY.size:
                    lid, eid = KEY.unpack(key)
                    if lid == ledger_id:
                        last = max(last, int(eid))
        return last

    # ---------------------------------------------------------------- writes

    def stage_records(self, wb: WriteBatch, records: CheckedRecords) -> None:
        """Put checked records into ``wb``: as runs when they may be (see
        bookie/entry_runs.py), else one key per entry. Called in write
        order, under the write lock (or in replay, before any write)."""
        ledger_id, data = records.ledger_id, records.data
        last = self._last_written.get(ledger_id)
        if last is None:
            last = self.last_entry(ledger_id)
        else:
            self._last_written.move_to_end(ledger_id)
        if records.ascending and records.first_entry_id > last:
            start = 0
            for stop, last_id in records.runs:
                # bytes() copies a slice of a view (RocksDB takes only bytes)
                # and returns a slice of bytes as it is.
                wb.put(KEY.pack(ledger_id, last_id), bytes(data[start:stop]), self._runs_handle)
                start = stop
            self.runs_written += len(records.runs)
            self.run_entries_written += records.entries
        else:
            for entry_id, value in record_values(data):
                wb.put(KEY.pack(ledger_id, entry_id), bytes(value))
        self._last_written[ledger_id] = max(last, records.last_entry_id)
        while len(self._last_written) > self._max_states:
            self._last_written.popitem(last=False)

    def write_group(self, writes: list[Write]) -> None:
        """Journal the writes (durable once this returns), then apply them to
        RocksDB as one batch."""
        wb = WriteBatch(raw_mode=True)
        ops: list[tuple[int, int, bytes | memoryview]] = []
        with self._write_lock:
            for w in writes:
                if w.state is not None:
                    ledger_id, body = w.state
                    ops.append((STATE, ledger_id, body))
                    wb.put(_LEDGER_KEY.pack(ledger_id), body, self._ledgers_handle)
                if w.records is not None:
                    ops.append((ENTRIES, w.records.ledger_id, w.records.data))
                    self.stage_records(wb, w.records)
            if not ops:
                return
            left = self.journal.append(ops)
            self.db.write(wb, self._write_opts)
        if left:
            self._checkpoints.put(left)  # waits while checkpoints lag behind
