"""The Raft replica (pysyncobj) that applies :class:`MetadataStore` commands.

pysyncobj needs four corrections here (DESIGN §9, measured):

* Its auto-tick thread only commits an entry on the tick *after* the one that
  appended it, so a lone node makes every write wait a full tick period. We
  drive the ticks ourselves and follow every waiting tick with a zero-wait
  one, which commits at once (72 µs per synchronous write instead of 10-50 ms).
* Its file journal is an mmap it never flushes, and its term/vote file is
  written without fsync. :class:`DurableFileJournal` fsyncs the term/vote
  file and flushes truncations at once; appends are flushed once per tick
  (group commit), after pysyncobj's tick and before anything can depend on
  them: the leader counts its own entries towards a majority only at the
  start of the next tick, and a follower's answers to appends
  (``next_node_idx``) are held back until the flush.
* Without ``fullDumpFile`` a compacted log restarts empty, so both the journal
  and the dump file are always set; the dump is fsynced (file and directory)
  before the journal is truncated behind it. ``useFork`` is off because this
  process also runs gRPC threads.
* Commands go out immediately (``appendEntriesUseBatch=False``).
* It gzips its snapshot at level 9, in the Raft thread (with ``useFork``
  off): with 15,000 topics' metadata (8 MB pickled) that alone took ~1 s,
  during which no entry committed and no heartbeat went out (longer than
  an election timeout). Level ``SNAPSHOT_GZIP_LEVEL`` (1) takes ~76 ms for
  a file 18 % larger; the format is the same gzip, so either reads the
  other's files.
"""

from __future__ import annotations

import _socket
import functools
import gzip
import logging
import os
import socket
import threading
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pysyncobj.journal
import pysyncobj.serializer
import pysyncobj.syncobj
from pysyncobj import SyncObj, SyncObjConf, replicated
from pysyncobj.journal import FileJournal, MetaStorer

from metastore.metrics import SNAPSHOT, WAL_FSYNC
from metastore.store import MetadataStore

# pysyncobj's win_inet_pton module replaces socket.inet_ntop, on every
# platform, with a Windows shim that fails on Linux; give the process the
# real one back.
socket.inet_ntop = _socket.inet_ntop

log = logging.getLogger(__name__)

# pysyncobj's snapshot compression (see the module's docstring): it calls
# ``gzip.GzipFile`` through its own module's name, which is pointed here.
SNAPSHOT_GZIP_LEVEL = 1
pysyncobj.serializer.gzip = types.SimpleNamespace(  # type: ignore[attr-defined]
    GzipFile=functools.partial(gzip.GzipFile, compresslevel=SNAPSHOT_GZIP_LEVEL)
)


def _fsync_path(path: str | Path, directory: bool = False) -> None:
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class _DurableMetaStorer(MetaStorer):
    def storeMeta(self, meta: dict) -> None:
        super().storeMeta(meta)
        _fsync_path(self.getPath())
        _fsync_path(os.path.dirname(self.getPath()) or ".", directory=True)


class DurableFileJournal(FileJournal):
    """pysyncobj's file journal, flushed to disk before any change is used."""

    def __init__(self, journal_file: str, dump_file: str) -> None:
        super().__init__(journal_file)
        self._dump_file = dump_file
        self._FileJournal__metaStorer = _DurableMetaStorer(journal_file + ".meta")
        self.dirty = False
        self.flush()

    def add(self, command: Any, idx: int, term: int) -> None:
        super().add(command, idx, term)
        self.dirty = True

    def flush_if_dirty(self) -> bool:
        if not self.dirty:
            return False
        self.dirty = False
        started = time.perf_counter()
        self.flush()
        WAL_FSYNC.observe(time.perf_counter() - started)
        return True

    def deleteEntriesFrom(self, entryFrom: int) -> None:
        super().deleteEntriesFrom(entryFrom)
        self.flush()

    def deleteEntriesTo(self, entryTo: int) -> None:
        with SNAPSHOT.time():
            self._compact(entryTo)

    def _compact(self, entryTo: int) -> None:
        # Compaction: the snapshot replacing these entries must be on disk first.
        self._sync_dump()
        # pysyncobj's version re-adds the kept entries one by one; flush once.
        journal = [self[i] for i in range(entryTo, len(self))]
        FileJournal.clear(self)
        for entry in journal:
            FileJournal.add(self, *entry)
        self.dirty = False
        self.flush()

    def clear(self) -> None:
        self._sync_dump()
        super().clear()
        self.dirty = False
        self.flush()

    def _sync_dump(self) -> None:
        if os.path.exists(self._dump_file):
            _fsync_path(self._dump_file)
            _fsync_path(os.path.dirname(self._dump_file) or ".", directory=True)


class MetastoreNode(SyncObj):
    def __init__(
        self,
        self_address: str,
        partners: list[str],
        data_dir: Path,
        *,
        bind_address: str | None = None,
        max_sessions: int,
        max_history: int,
        dedup_window: int,
        tick_period_ms: int,
        election_timeout_min_ms: int,
        election_timeout_max_ms: int,
        log_compaction_min_entries: int,
        reconnect_interval_ms: int = 250,
        on_apply: Callable[[], None] | None = None,
        password: str | None = None,
    ) -> None:
        data_dir.mkdir(parents=True, exist_ok=True)
        journal = str(data_dir / "raft.journal")
        dump = str(data_dir / "raft.dump")
        conf = SyncObjConf(
            autoTick=False,
            # None: pysyncobj binds 0.0.0.0 (every interface) on the self address's port.
            bindAddress=bind_address,
            journalFile=journal,
            fullDumpFile=dump,
            useFork=False,
            appendEntriesUseBatch=False,
            raftMinTimeout=election_timeout_min_ms / 1000,
            raftMaxTimeout=election_timeout_max_ms / 1000,
            appendEntriesPeriod=min(0.05, election_timeout_min_ms / 1000 / 4),
            logCompactionMinEntries=log_compaction_min_entries,
            dynamicMembershipChange=False,
            # pysyncobj waits 5 s before reconnecting to a peer it could not reach,
            # and an unconnected node never starts an election: two survivors of a
            # leader crash that were not connected to each other stayed leaderless
            # for seconds. Reconnect fast.
            connectionRetryTime=reconnect_interval_ms / 1000,
            # A leader that hears from no majority steps down after two election
            # timeouts (pysyncobj's default is 30 s of possibly stale reads).
            leaderFallbackTimeout=2 * election_timeout_max_ms / 1000,
            password=password or None,  # raft_password: pysyncobj's encryption
        )
        # pysyncobj snapshots exactly the attributes created after its own
        # __init__: the runtime ones go before it, the replicated state after.
        self._tick_s = tick_period_ms / 1000
        self._stopping = threading.Event()
        self._ticker = threading.Thread(target=self._tick_loop, name="raft-tick", daemon=True)
        self._on_apply = on_apply
        self._journal: DurableFileJournal | None = None
        self._held_acks: list[tuple[Any, dict]] = []
        self._send: Callable[[Any, dict], bool] | None = None
        self.leader_changes = 0  # leaders this node has seen change (etcd's series)
        self._seen_leader: Any = None
        with _JOURNAL_LOCK:
            pysyncobj.syncobj.createJournal = lambda path: DurableFileJournal(path, dump)
            try:
                super().__init__(self_address, partners, conf)
            finally:
                pysyncobj.syncobj.createJournal = pysyncobj.journal.createJournal
        self.store = MetadataStore(
            max_sessions=max_sessions, max_history=max_history, dedup_window=dedup_window
        )
        self._journal = self._SyncObj__raftLog
        transport = self._SyncObj__transport
        self._send = transport.send
        transport.send = self._send_after_flush
        self._ticker.start()

    def _send_after_flush(self, node: Any, message: dict) -> bool:
        """Hold a follower's answer to appends until its journal is flushed."""
        assert self._journal is not None and self._send is not None
        if message.get("type") == "next_node_idx" and self._journal.dirty:
            self._held_acks.append((node, message))
            return True
        return bool(self._send(node, message))

    def _sync(self) -> None:
        assert self._journal is not None and self._send is not None
        self._journal.flush_if_dirty()
        held, self._held_acks = self._held_acks, []
        for node, message in held:
            self._send(node, message)

    def _tick_loop(self) -> None:
        while not self._stopping.is_set():
            try:
                self.doTick(self._tick_s)
                self._sync()
                self.doTick(0.0)
                self._sync()
                self._note_leader()
            except Exception:  # a failed tick must not stop replication
                log.exception("raft tick failed")

    def _note_leader(self) -> None:
        leader = self._getLeader()
        if leader is not None and leader != self._seen_leader:
            self.leader_changes += 1
        if leader is not None:
            self._seen_leader = leader

    def stop(self) -> None:
        self._stopping.set()
        self._ticker.join(timeout=5)
        self.destroy()

    @property
    def is_leader(self) -> bool:
        return bool(self._isLeader())

    @property
    def term(self) -> int:
        return int(self.raftCurrentTerm)

    @property
    def leader_address(self) -> str | None:
        """The Raft address of the current leader, if one is known."""
        leader = self._getLeader()
        if leader is None:
            return None
        return str(getattr(leader, "address", leader))

    def status(self) -> dict[str, Any]:
        return dict(self.getStatus())

    # The one replicated command: every write is ``apply(request_id, op, *args)``
    # on every replica, in log order.

    @replicated
    def apply(self, request_id: bytes, op: str, *args: Any) -> Any:
        result = self.store.apply(request_id, op, *args)
        if self._on_apply is not None:
            self._on_apply()
        return result


_JOURNAL_LOCK = threading.Lock()
