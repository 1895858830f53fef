"""Entry storage in RocksDB (rocksdict) with group commit.

Layout (raw-mode RocksDB, so other RocksDB readers see plain bytes):

* default column family: key ``ledger id (u64 BE) | entry id (u64 BE)``,
  value ``digest (u32 BE) | LAC (i64 BE) | payload``. Big-endian keys keep a
  ledger's entries contiguous and in order, so a range read is one scan.
* ``ledgers`` column family: key ``ledger id (u64 BE)``, value JSON of the
  ledger's state: fenced flag and master key.

Theory of operation of :class:`GroupCommitter`: every add is queued; one
writer thread takes everything queued (up to the batch limits), writes it as
one ``WriteBatch``, makes the write-ahead log durable, and only then
reports the whole group done. (The batch is written without ``sync`` and
the log synced by ``flush_wal(True)`` after it: rocksdict holds the GIL for
the whole of a synced ``write``, fsync included, which would stop the
event loop from taking in the next group meanwhile; ``flush_wal`` lets it
run. The entries are readable a moment before they are durable; only
recovery reads past the LAC, and what it finds there the writer did send.)
While one fsync runs the next group gathers, so the number of fsyncs
follows the disk, not the add rate (DESIGN §9: 100 entries per sync give 37x
the rate of one put per sync).
"""

from __future__ import annotations

import collections
import json
import logging
import os
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import crc32c
from rocksdict import DBCompressionType, Options, Rdict, ReadOptions, WriteBatch, WriteOptions

from bookie.settings import BookieSettings
from protos.digest import DIGEST_HEADER, RECORD_HEADER, VALUE_OFFSET, RecordError

log = logging.getLogger(__name__)

KEY = struct.Struct(">QQ")
_LEDGER_KEY = struct.Struct(">Q")
_VALUE_HEAD = struct.Struct(">Iq")
_MAX_ENTRY_ID = (1 << 64) - 1


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
    """RocksDB choices that decide what a stored byte costs (bookie settings)."""

    recycle_log_files: int
    write_buffer_bytes: int
    max_total_wal_bytes: int
    direct_io: bool

    @classmethod
    def from_settings(cls, settings: BookieSettings | None = None) -> StoreTuning:
        s = settings or BookieSettings()
        return cls(
            recycle_log_files=s.journal_recycle_files,
            write_buffer_bytes=s.write_buffer_size_mb << 20,
            max_total_wal_bytes=s.max_total_wal_size_mb << 20,
            direct_io=s.direct_io_for_flush_and_compaction,
        )


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
    opts.set_recycle_log_file_num(tuning.recycle_log_files)
    opts.set_write_buffer_size(tuning.write_buffer_bytes)
    opts.set_max_total_wal_size(tuning.max_total_wal_bytes)
    direct_io = tuning.direct_io and direct_io_works(path)
    if tuning.direct_io and not direct_io:
        log.warning("%s refuses O_DIRECT; SST files go through the page cache", path)
    opts.set_use_direct_io_for_flush_and_compaction(direct_io)
    return opts, direct_io


class EntryStore:
    """Theory of the tuning: on these machines the kernel's copy of written
    bytes into fresh page-cache pages, not the disk, is the largest cost of a
    stored entry (perf: ~40 % of a bookie's CPU under load). Recycled
    write-ahead-log files are rewritten in pages already cached, and SST files
    written with O_DIRECT bypass the page cache; together they halve the CPU
    of a raw synced write (benchmarks/ledger_replication.py)."""

    def __init__(
        self,
        path: Path,
        *,
        sync: bool,
        max_cached_ledger_states: int,
        tuning: StoreTuning | None = None,
    ) -> None:
        path.mkdir(parents=True, exist_ok=True)
        self.path = path
        opts, self.direct_io = entry_options(path, tuning or StoreTuning.from_settings())
        opts.create_if_missing(True)
        opts.create_missing_column_families(True)
        self.db = Rdict(str(path), opts, column_families={"ledgers": Options(raw_mode=True)})
        self._ledgers_cf = self.db.get_column_family("ledgers")
        self._ledgers_handle = self.db.get_column_family_handle("ledgers")
        self.sync = sync
        self._write_opts = WriteOptions()
        self._write_opts.sync = False  # see the module docstring: flush_wal syncs
        self._states: collections.OrderedDict[int, LedgerState] = collections.OrderedDict()
        self._max_states = max_cached_ledger_states
        self._states_lock = threading.Lock()

    def close(self) -> None:
        del self._ledgers_cf
        del self._ledgers_handle
        self.db.close()

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

    def get(self, ledger_id: int, entry_id: int) -> tuple[int, int, bytes] | None:
        value = self.db.get(entry_key(ledger_id, entry_id))
        return None if value is None else decode_value(value)

    def scan(
        self, ledger_id: int, first: int, last: int, limit: int
    ) -> list[tuple[int, int, int, bytes]]:
        """(entry id, digest, lac, payload) of stored entries in [first, last]."""
        ro = ReadOptions()
        ro.set_iterate_upper_bound(
            entry_key(ledger_id, last + 1)
            if last < _MAX_ENTRY_ID
            else _LEDGER_KEY.pack(ledger_id + 1) + bytes(8)
        )
        out = []
        for key, value in self.db.items(from_key=entry_key(ledger_id, first), read_opt=ro):
            _, entry_id = KEY.unpack(bytes(key))  # type: ignore[arg-type]
            digest, lac, payload = decode_value(value)
            out.append((entry_id, digest, lac, payload))
            if len(out) >= limit:
                break
        return out

    def get_many(
        self, ledger_id: int, entry_ids: list[int]
    ) -> list[tuple[int, tuple[int, int, bytes] | None]]:
        """(entry id, (digest, lac, payload) or None) for each id, one multi-get."""
        values: list = self.db.get([entry_key(ledger_id, e) for e in entry_ids])  # type: ignore[assignment]
        return [
            (e, None if v is None else decode_value(v))
            for e, v in zip(entry_ids, values, strict=True)
        ]

    def ledger_count(self, limit: int) -> int:
        n = 0
        for _ in self._ledgers_cf.keys():  # noqa: SIM118 (an Rdict iterates items)
            n += 1
            if n >= limit:
                break
        return n

    def size_estimate(self) -> tuple[int, int]:
        """(entries, bytes) as RocksDB estimates them."""
        keys = self.db.property_int_value("rocksdb.estimate-num-keys") or 0
        sst = self.db.property_int_value("rocksdb.total-sst-files-size") or 0
        mem = self.db.property_int_value("rocksdb.cur-size-all-mem-tables") or 0
        return int(keys), int(sst + mem)

    def delete_ledger(self, ledger_id: int) -> bool:
        """Remove a ledger's entries and state, then compact its range away."""
        existed = (
            self._ledgers_cf.get(_LEDGER_KEY.pack(ledger_id)) is not None
            or self.last_entry(ledger_id) >= 0
        )
        begin, end = entry_key(ledger_id, 0), _LEDGER_KEY.pack(ledger_id + 1) + bytes(8)
        wb = WriteBatch(raw_mode=True)
        wb.delete_range(begin, end)
        wb.delete(_LEDGER_KEY.pack(ledger_id), self._ledgers_handle)
        self.write_group([wb])
        with self._states_lock:
            self._states.pop(ledger_id, None)
        self.db.compact_range(begin, end)
        return existed

    def last_entry(self, ledger_id: int) -> int:
        it = self.db.iter()
        it.seek_for_prev(entry_key(ledger_id, _MAX_ENTRY_ID))
        if it.valid():
            key = it.key()
            if len(key) == KEY.size:
                lid, eid = KEY.unpack(key)
                if lid == ledger_id:
                    return int(eid)
        return -1

    # ---------------------------------------------------------------- writes

    @staticmethod
    def new_batch() -> WriteBatch:
        return WriteBatch(raw_mode=True)

    @staticmethod
    def put_records(wb: WriteBatch, ledger_id: int, data: bytes) -> tuple[int, int]:
        """Put every packed record of ``data`` (protos/digest.py) into ``wb``,
        each digest checked; returns (entries, highest LAC). Raises
        :class:`RecordError` at the first bad record; ``wb`` is then to be
        dropped, so a bad request stores nothing.

        One pass from request bytes to the batch: the stored value is sliced
        straight out of the record, no tuple per entry in between."""
        view = memoryview(data)
        unpack, crc, pack, key = (
            RECORD_HEADER.unpack_from,
            crc32c.crc32c,
            DIGEST_HEADER.pack,
            KEY.pack,
        )
        put = wb.put
        head = RECORD_HEADER.size
        off, end, n, max_lac = 0, len(data), 0, -1
        while off < end:
            if end - off < head:
                raise RecordError(f"{end - off} trailing bytes are not a whole record header")
            entry_id, size, digest, lac = unpack(data, off)
            stop = off + head + size
            if stop > end:
                raise RecordError(
                    f"entry {entry_id} claims {size} payload bytes; {end - off - head} remain"
                )
            if entry_id < 0:
                raise RecordError(f"entry id {entry_id} < 0")
            if crc(view[off + head : stop], crc(pack(ledger_id, entry_id, lac))) != digest:
                raise RecordError(
                    f"digest mismatch on ledger {ledger_id} entry {entry_id}", digest=True
                )
            put(key(ledger_id, entry_id), data[off + VALUE_OFFSET : stop])
            if lac > max_lac:
                max_lac = lac
            off = stop
            n += 1
        return n, max_lac

    def put_state(self, wb: WriteBatch, ledger_id: int, value: bytes) -> None:
        wb.put(_LEDGER_KEY.pack(ledger_id), value, self._ledgers_handle)

    def write_group(self, batches: list[WriteBatch]) -> None:
        """Write the batches, then make them durable with one sync."""
        for wb in batches:
            self.db.write(wb, self._write_opts)
        if self.sync:
            self.db.flush_wal(True)


@dataclass
class _Item:
    batch: WriteBatch
    entries: int
    size: int
    done: Callable[[BaseException | None], None]


class GroupCommitter:
    """One writer thread that turns queued writes into synced batches."""

    def __init__(
        self,
        store: EntryStore,
        *,
        max_entries: int,
        max_bytes: int,
        max_wait_ms: float,
        on_group_done: Callable[
            [list[Callable[[BaseException | None], None]], BaseException | None], None
        ],
        observe: Callable[[int, float], None] | None = None,
    ) -> None:
        self.observe = observe
        self.store = store
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.max_wait_s = max_wait_ms / 1000
        self.on_group_done = on_group_done
        self._queue: collections.deque[_Item] = collections.deque()
        self._cond = threading.Condition()
        self._stopping = False
        self.groups = 0
        self.entries_written = 0
        self._thread = threading.Thread(target=self._run, name="group-commit", daemon=True)
        self._thread.start()

    def submit(
        self,
        batch: WriteBatch,
        entries: int,
        size: int,
        done: Callable[[BaseException | None], None],
    ) -> None:
        """Queue ``batch`` (``entries`` entries, ``size`` bytes) for the next group."""
        with self._cond:
            if self._stopping:
                raise RuntimeError("the bookie is stopping")
            self._queue.append(_Item(batch, entries, size, done))
            self._cond.notify()

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify()
        self._thread.join(timeout=10)

    def _take_group(self) -> list[_Item] | None:
        with self._cond:
            while not self._queue:
                if self._stopping:
                    return None
                self._cond.wait()
            if self.max_wait_s > 0:
                self._cond.wait_for(
                    lambda: len(self._queue) >= self.max_entries or self._stopping,
                    timeout=self.max_wait_s,
                )
            group = [self._queue.popleft()]
            n, size = group[0].entries, group[0].size
            while self._queue:
                nxt = self._queue[0]
                if n + nxt.entries > self.max_entries or size + nxt.size > self.max_bytes:
                    break
                group.append(self._queue.popleft())
                n += nxt.entries
                size += nxt.size
            return group

    def _run(self) -> None:
        while True:
            group = self._take_group()
            if group is None:
                return
            entries = sum(item.entries for item in group)
            exc: BaseException | None = None
            started = time.perf_counter()
            try:
                self.store.write_group([item.batch for item in group])
            except Exception as e:
                log.exception("group commit of %d entries failed", entries)
                exc = e
            self.groups += 1
            self.entries_written += entries
            if self.observe is not None:
                self.observe(entries, time.perf_counter() - started)
            self.on_group_done([item.done for item in group], exc)
