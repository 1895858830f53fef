"""The bookie's journal: what makes a write durable before it is answered.

Theory of operation. A bookie writes RocksDB with its write-ahead log off;
this journal takes the log's place, as BookKeeper's journal does beside its
ledger storage. (Why not RocksDB's own log: the RocksDB inside rocksdict
computes the log's CRC32C in software, a table lookup per byte — perf put it
at ~4 % of all CPU per loaded bookie — and an entry already carries its own
CRC32C digest, checked before it is journaled.)

* Every write group is appended to the current journal file as frames and
  made durable with one ``fdatasync``; only then is it applied to RocksDB
  (memtables) and answered.
* A frame is ``file number (u64 BE) | kind (u8) | ledger id (u64 BE) | body
  length (u32 BE) | CRC32C (u32 BE)`` and the body. The CRC covers the header
  fields and, except for ENTRIES, the body; an ENTRIES body is packed records
  whose digests are checked again on replay.
* When a file passes ``journal_max_size_mb`` the journal moves to the next
  file, and a checkpoint flushes every memtable to SST files; the files
  before the move are then no longer needed. Up to ``journal_recycle_files``
  of them are renamed ``*.free`` (out of replay's way) and later rewritten
  in place as new files (rewriting pages the kernel has cached costs far
  less than filling fresh ones); a frame's file number tells a frame of the
  current file from a stale one. The rest are deleted.
* On start every journal file is replayed in order, each up to its first
  frame that is torn, stale or fails a check: frames are written in order
  and a group is answered only once synced, so nothing after such a frame
  was answered. Then memtables are flushed and the files released. A frame
  replayed twice (a crash between a flush and the release) changes nothing:
  entries are rewritten as they were and ledger state only moves forward.
"""

from __future__ import annotations

import collections
import logging
import os
import struct
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import crc32c

log = logging.getLogger(__name__)

ENTRIES, STATE, DELETE = 1, 2, 3
_HEADER = struct.Struct(">QBQII")
_FIELDS = struct.Struct(">QBQI")  # what the header CRC starts with
_SUFFIX = ".jnl"
# Buffers one pwritev(2) takes (IOV_MAX; POSIX guarantees at least 16).
_IOV_MAX = max(16, os.sysconf("SC_IOV_MAX") if hasattr(os, "sysconf") else 16)
_FREE = ".free"


def _crc(kind: int, fields: bytes, body: bytes | memoryview) -> int:
    head = crc32c.crc32c(fields)
    return head if kind == ENTRIES else crc32c.crc32c(body, head)


def frame(
    file_number: int, kind: int, ledger_id: int, body: bytes | memoryview
) -> list[bytes | memoryview]:
    """The frame's parts: header fields, CRC and body."""
    fields = _FIELDS.pack(file_number, kind, ledger_id, len(body))
    return [fields, _crc(kind, fields, body).to_bytes(4, "big"), body]


def read_frames(data: bytes, file_number: int) -> Iterator[tuple[int, int, bytes]]:
    """(kind, ledger id, body) of each good frame of a journal file's bytes,
    up to the first frame that is torn, stale or fails its CRC."""
    off, end = 0, len(data)
    while end - off >= _HEADER.size:
        number, kind, ledger_id, length, crc = _HEADER.unpack_from(data, off)
        body_at = off + _HEADER.size
        if number != file_number or kind not in (ENTRIES, STATE, DELETE):
            return
        if body_at + length > end:
            return
        body = data[body_at : body_at + length]
        if _crc(kind, data[off : off + _FIELDS.size], body) != crc:
            return
        yield kind, ledger_id, body
        off = body_at + length


def _number(p: Path) -> int:
    """The file number in a journal file's name (-1 if it has none)."""
    try:
        return int(p.stem, 16)
    except ValueError:
        return -1


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Journal:
    """Journal files in one directory; :meth:`append` is called by one thread
    (the group committer), :meth:`checkpoint_done` by the checkpointer."""

    def __init__(self, path: Path, *, max_file_bytes: int, recycle_files: int, sync: bool) -> None:
        path.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.max_file_bytes = max_file_bytes
        self.recycle_files = recycle_files
        self.sync = sync
        self._lock = threading.Lock()
        # files whose frames are all in flushed SST files, to be rewritten
        free = sorted(path.glob(f"*{_FREE}"))
        self._free: collections.deque[Path] = collections.deque(free[:recycle_files])
        for extra in free[recycle_files:]:
            extra.unlink()
        self._fd = -1
        # Numbers are never reused, free files' included: a rewritten file's
        # stale frames must never carry its new number.
        self.file_number = max((_number(p) for p in free), default=0)
        self._offset = 0
        self.last_sync_s = 0.0  # how long the last append's fdatasync took

    def file_path(self, number: int) -> Path:
        return self.path / f"{number:016x}{_SUFFIX}"

    def existing(self) -> list[tuple[int, Path]]:
        """(file number, path) of the journal files on disk, oldest first."""
        found = [(_number(p), p) for p in self.path.glob(f"*{_SUFFIX}")]
        return sorted((n, p) for n, p in found if n >= 0)

    def replay(self, apply: Callable[[int, int, bytes], bool]) -> list[Path]:
        """Feed every good frame on disk to ``apply``, oldest first (a file
        ends where ``apply`` says a frame is bad); returns the files replayed,
        to be released once their frames are flushed."""
        files = self.existing()
        for number, p in files:
            n = 0
            for kind, ledger_id, body in read_frames(p.read_bytes(), number):
                if not apply(kind, ledger_id, body):
                    break
                n += 1
            if n:
                log.info("journal %s: replayed %d frames", p.name, n)
        if files:
            self.file_number = max(self.file_number, files[-1][0])
        return [p for _, p in files]

    def open_next(self) -> list[Path]:
        """Move to a new journal file; returns the files it leaves behind
        (to be released once a checkpoint has flushed their frames)."""
        left = []
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
            left.append(self.file_path(self.file_number))
        self.file_number += 1
        new = self.file_path(self.file_number)
        with self._lock:
            old = self._free.popleft() if self._free else None
        if old is not None:
            os.rename(old, new)
        self._fd = os.open(new, os.O_WRONLY | os.O_CREAT, 0o600)
        self._offset = 0
        _fsync_dir(self.path)  # the new name must survive a crash
        return left

    def append(self, ops: Sequence[tuple[int, int, bytes | memoryview]]) -> list[Path]:
        """Write (kind, ledger id, body) frames at the end of the current file
        and make them durable; returns files left behind by a move to the
        next file. After an error the journal moves to a fresh file, so a
        torn frame is never followed by frames that were answered."""
        left: list[Path] = []
        if self._fd < 0 or self._offset >= self.max_file_bytes:
            left = self.open_next()
        parts: list[bytes | memoryview] = []
        for kind, ledger_id, body in ops:
            parts += frame(self.file_number, kind, ledger_id, body)
        try:
            # Gathered from the frames' own buffers: joining them first would
            # copy every byte of the group once more.
            for i in range(0, len(parts), _IOV_MAX):
                self._write_all(parts[i : i + _IOV_MAX])
            if self.sync:
                started = time.perf_counter()
                os.fdatasync(self._fd)
                self.last_sync_s = time.perf_counter() - started
        except OSError:
            self._offset = self.max_file_bytes  # the next append starts a new file
            raise
        return left

    def _write_all(self, parts: list[bytes | memoryview]) -> None:
        written = os.pwritev(self._fd, parts, self._offset)
        self._offset += written
        if written < sum(map(len, parts)):  # a short write: finish the rest
            view = memoryview(b"".join(parts))[written:]
            while view:
                written = os.pwrite(self._fd, view, self._offset)
                self._offset += written
                view = view[written:]

    def checkpoint_done(self, files: list[Path]) -> None:
        """``files``' frames are all in SST files: keep up to
        ``recycle_files`` of them for reuse, delete the rest."""
        with self._lock:
            for p in files:
                if len(self._free) < self.recycle_files:
                    free = p.with_suffix(_FREE)
                    os.rename(p, free)
                    self._free.append(free)
                else:
                    p.unlink(missing_ok=True)
        _fsync_dir(self.path)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
