"""One process per data directory.

Every server process (and the ``standalone`` / ``local-cluster``
supervisors, over their whole data tree) holds an exclusive ``flock`` on
``<data_dir>/magnetar.lock`` from before it touches anything there until it
exits. The file names the holder (pid and role), so a second start is
refused at once with a message naming it, instead of a second metastore
opening the same Raft journal before RocksDB's own lock stops the bookie.

The lock is the kernel's: it goes with the process however it dies (even
``kill -9``), so a stale file never blocks a restart. A file whose lock is
free is simply taken over.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

LOCK_FILE = "magnetar.lock"


class DataDirLocked(RuntimeError):
    """Another live process holds the data directory."""

    def __init__(self, path: Path, holder: str) -> None:
        self.path = path
        self.holder = holder
        super().__init__(f"{path} is in use by {holder}; stop it first (one process per data dir)")


def holder_of(data_dir: Path) -> str | None:
    """Who holds ``data_dir``'s lock ("pid 123 (metastore)"), or None when
    nobody does. Does not take the lock."""
    path = Path(data_dir) / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _describe(os.pread(fd, 256, 0))
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _describe(content: bytes) -> str:
    pid, _, role = content.decode(errors="replace").strip().partition(" ")
    if not pid.isdigit():
        return "another process"
    return f"pid {pid} ({role})" if role else f"pid {pid}"


class DataDirLock:
    """The held lock on one data directory (created if missing)."""

    def __init__(self, data_dir: Path, role: str) -> None:
        self.data_dir = Path(data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        path = self.data_dir / LOCK_FILE
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _describe(os.pread(fd, 256, 0))
            os.close(fd)
            raise DataDirLocked(self.data_dir, holder) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} {role}\n".encode(), 0)
        self._fd: int | None = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the last descriptor drops the flock
            self._fd = None
