"""The metadata state machine: an etcd-like key/value store with no I/O.

Theory of operation. Keys are absolute paths (``/a/b/c``) kept in key order so
``children()`` is a range scan. Every key has a ``version`` (0 when created,
+1 per put) and the store a global ``revision`` that every change increments.
Conditional writes compare ``expected_version`` (-1 = must not exist).
Ephemeral keys belong to a session and disappear with it. Every method here
is deterministic given the same sequence of calls, so each Raft replica that
applies the same log holds the same state; time never enters (session expiry
is decided by the leader and arrives as ``expire_session``).

Results are returned as tuples ``(code, message, ...)`` rather than raised,
because they cross the Raft apply boundary.

Every revision is exactly one change and one :class:`Event` (a put, or a
delete of a key that existed); the newest ``max_history`` events are kept so
a watcher can resume from any revision after ``compacted_revision``. Writes
carry a request id: :meth:`apply` remembers the results of the newest
``dedup_window`` requests, so a client retrying a write after a leader change
gets the first result instead of applying the write twice.
"""

from __future__ import annotations

import collections
import threading
from dataclasses import dataclass, field
from typing import Any

from sortedcontainers import SortedDict

from protos import common_pb2

OK = common_pb2.OK
Result = tuple[int, str, int, int]


@dataclass(slots=True)
class Record:
    value: bytes
    version: int
    create_revision: int
    mod_revision: int
    session_id: int = 0


PUT, DELETE = 0, 1  # Event.type, as in metastore.proto's EventType


@dataclass(slots=True, frozen=True)
class Event:
    revision: int
    type: int
    key: str
    value: bytes = b""
    version: int = -1
    session_id: int = 0


# Txn compare targets and op kinds (metastore.proto).
CMP_VERSION, CMP_VALUE = 0, 1
OP_PUT, OP_DELETE = 0, 1


@dataclass(slots=True)
class SessionState:
    ttl_ms: int
    keys: set[str] = field(default_factory=set)


def validate_key(key: str) -> str | None:
    """None if ``key`` is a valid absolute path, else what is wrong with it."""
    if not isinstance(key, str) or not key:
        return "the key is empty"
    if not key.startswith("/"):
        return f"key {key!r} is not absolute: it must start with '/'"
    if key == "/":
        return "the root '/' is not a key"
    for segment in key[1:].split("/"):
        if segment == "":
            return f"key {key!r} has an empty segment"
        if segment in (".", ".."):
            return f"key {key!r} has a {segment!r} segment"
    return None


_STATE = (
    "kv",
    "revision",
    "sessions",
    "last_session_id",
    "max_sessions",
    "events",
    "compacted_revision",
    "max_history",
    "dedup",
    "dedup_window",
)


class MetadataStore:
    def __init__(
        self, max_sessions: int = 10_000, max_history: int = 10_000, dedup_window: int = 10_000
    ) -> None:
        self.kv: SortedDict = SortedDict()
        self.revision = 0
        self.sessions: dict[int, SessionState] = {}
        self.last_session_id = 0
        self.max_sessions = max_sessions
        self.events: collections.deque[Event] = collections.deque()
        self.compacted_revision = 0  # events up to this revision are gone
        self.max_history = max_history
        self.dedup: collections.OrderedDict[bytes, Any] = collections.OrderedDict()
        self.dedup_window = dedup_window
        # Readers on other threads (the gRPC loop) take the lock too; the Raft
        # thread is the only writer.
        self._lock = threading.RLock()

    def __getstate__(self) -> dict:
        return {k: getattr(self, k) for k in _STATE}

    def __setstate__(self, state: dict) -> None:
        self.__init__()  # type: ignore[misc]
        self.__dict__.update(state)

    # ------------------------------------------------------------- Raft entry point

    def apply(self, request_id: bytes, op: str, *args: Any) -> Any:
        """Run write ``op`` once per request id; a repeated id gets the first result."""
        with self._lock:
            if request_id and request_id in self.dedup:
                self.dedup.move_to_end(request_id)
                return self.dedup[request_id]
            result = getattr(self, op)(*args)
            if request_id:
                self.dedup[request_id] = result
                while len(self.dedup) > self.dedup_window:
                    self.dedup.popitem(last=False)
            return result

    def _event(self, event: Event) -> None:
        self.events.append(event)
        while len(self.events) > self.max_history:
            self.compacted_revision = self.events.popleft().revision

    def events_since(self, first_revision: int, prefix: str, limit: int) -> tuple[list[Event], int]:
        """Events with revision >= ``first_revision`` under ``prefix`` (at most
        ``limit``), and the revision to continue from. Raises
        :class:`CompactedError` when some of them are no longer kept."""
        with self._lock:
            if first_revision <= self.compacted_revision:
                raise CompactedError(first_revision, self.compacted_revision)
            out: list[Event] = []
            if not self.events or first_revision > self.revision:
                return out, max(first_revision, self.revision + 1)
            start = max(0, first_revision - self.events[0].revision)
            nxt = first_revision
            for i in range(start, len(self.events)):
                ev = self.events[i]
                nxt = ev.revision + 1
                if ev.key.startswith(prefix):
                    out.append(ev)
                    if len(out) >= limit:
                        break
            return out, max(nxt, first_revision)

    # ------------------------------------------------------------- reads

    def get(self, key: str) -> tuple[Record | None, int]:
        with self._lock:
            return self.kv.get(key), self.revision

    def children(self, path: str) -> list[str]:
        prefix = path.rstrip("/") + "/"
        names: list[str] = []
        with self._lock:
            for key in self.kv.irange(prefix, prefix + "\U0010ffff", inclusive=(True, False)):
                name = key[len(prefix) :].split("/", 1)[0]
                if not names or names[-1] != name:
                    names.append(name)
        return names

    def list_prefix(self, prefix: str, limit: int) -> tuple[list[tuple[str, Record]], int, bool]:
        """Keys starting with ``prefix`` in key order (at most ``limit``), the
        revision they were read at, and whether more were left out."""
        with self._lock:
            out: list[tuple[str, Record]] = []
            for key in self.kv.irange(prefix, None):
                if not key.startswith(prefix):
                    break
                if len(out) >= limit:
                    return out, self.revision, True
                out.append((key, self.kv[key]))
            return out, self.revision, False

    def session_ids(self) -> list[int]:
        with self._lock:
            return list(self.sessions)

    # ------------------------------------------------------------- writes

    def put(self, key: str, value: bytes, expected_version: int | None, session_id: int) -> Result:
        with self._lock:
            current = self.kv.get(key)
            if expected_version is not None:
                found = -1 if current is None else current.version
                if found != expected_version:
                    return (
                        common_pb2.BAD_VERSION,
                        f"put {key}: expected version {expected_version}, found {found}",
                        found,
                        self.revision,
                    )
            if session_id and session_id not in self.sessions:
                return (
                    common_pb2.SESSION_EXPIRED,
                    f"put {key}: session {session_id} does not exist or has expired",
                    -1,
                    self.revision,
                )
            self.revision += 1
            if current is None:
                record = Record(value, 0, self.revision, self.revision, session_id)
            else:
                record = Record(
                    value, current.version + 1, current.create_revision, self.revision, session_id
                )
                if current.session_id and current.session_id != session_id:
                    owner = self.sessions.get(current.session_id)
                    if owner is not None:
                        owner.keys.discard(key)
            if session_id:
                self.sessions[session_id].keys.add(key)
            self.kv[key] = record
            self._event(Event(self.revision, PUT, key, value, record.version, session_id))
            return OK, "", record.version, self.revision

    def delete(self, key: str, expected_version: int | None) -> Result:
        with self._lock:
            current = self.kv.get(key)
            if expected_version is not None:
                found = -1 if current is None else current.version
                if found != expected_version:
                    return (
                        common_pb2.BAD_VERSION,
                        f"delete {key}: expected version {expected_version}, found {found}",
                        0,
                        self.revision,
                    )
            if current is None:
                return OK, "", 0, self.revision
            self._remove(key, current)
            return OK, "", 1, self.revision

    def increment(self, key: str, delta: int) -> Result:
        with self._lock:
            current = self.kv.get(key)
            try:
                value = int(current.value) if current is not None else 0
            except ValueError:
                return (
                    common_pb2.INVALID_ARGUMENT,
                    f"increment {key}: the value is not a decimal counter",
                    0,
                    self.revision,
                )
            value += delta
            self.revision += 1
            version = 0 if current is None else current.version + 1
            create = self.revision if current is None else current.create_revision
            if current is not None and current.session_id:
                owner = self.sessions.get(current.session_id)
                if owner is not None:
                    owner.keys.discard(key)
            data = str(value).encode()
            self.kv[key] = Record(data, version, create, self.revision, 0)
            self._event(Event(self.revision, PUT, key, data, version, 0))
            return OK, "", value, self.revision

    def create_session(self, ttl_ms: int) -> Result:
        with self._lock:
            if len(self.sessions) >= self.max_sessions:
                return (
                    common_pb2.TOO_MANY_REQUESTS,
                    f"the store already holds {len(self.sessions)} sessions "
                    f"(max_sessions = {self.max_sessions})",
                    0,
                    self.revision,
                )
            self.last_session_id += 1
            self.sessions[self.last_session_id] = SessionState(ttl_ms)
            return OK, "", self.last_session_id, self.revision

    def end_session(self, session_id: int) -> Result:
        """Close or expire a session: its ephemeral keys are deleted."""
        with self._lock:
            state = self.sessions.pop(session_id, None)
            if state is None:
                return OK, "", 0, self.revision
            for key in sorted(state.keys):
                record = self.kv.get(key)
                if record is not None and record.session_id == session_id:
                    self._remove(key, record)
            return OK, "", 1, self.revision

    def _remove(self, key: str, record: Record) -> None:
        self.revision += 1
        del self.kv[key]
        self._event(Event(self.revision, DELETE, key))
        if record.session_id:
            owner = self.sessions.get(record.session_id)
            if owner is not None:
                owner.keys.discard(key)

    def noop(self) -> Result:
        """A barrier: once a new leader applied it, it has applied every earlier entry."""
        return OK, "", 0, self.revision

    def txn(
        self,
        compares: list[tuple[str, int, int, bytes]],
        ops: list[tuple[int, str, bytes, int]],
    ) -> tuple[int, str, bool, int]:
        """All ``compares`` hold -> every op applies, in order; else none does.

        A compare is ``(key, CMP_VERSION, version, b"")`` (-1 = must not
        exist) or ``(key, CMP_VALUE, 0, value)``; an op is ``(OP_PUT, key,
        value, session_id)`` or ``(OP_DELETE, key, b"", 0)``. Returns
        ``(code, message, succeeded, revision)``.
        """
        with self._lock:
            for key, target, version, value in compares:
                current = self.kv.get(key)
                if target == CMP_VERSION:
                    found = -1 if current is None else current.version
                    if found != version:
                        return OK, f"{key}: version is {found}, not {version}", False, self.revision
                elif current is None or current.value != value:
                    return OK, f"{key}: the value differs", False, self.revision
            for kind, key, _, session_id in ops:
                if kind == OP_PUT and session_id and session_id not in self.sessions:
                    return (
                        common_pb2.SESSION_EXPIRED,
                        f"txn put {key}: session {session_id} does not exist or has expired",
                        False,
                        self.revision,
                    )
            for kind, key, value, session_id in ops:
                if kind == OP_PUT:
                    self.put(key, value, None, session_id)
                else:
                    self.delete(key, None)
            return OK, "", True, self.revision


class CompactedError(Exception):
    """The events a watcher asked for are no longer kept."""

    def __init__(self, wanted: int, compacted: int) -> None:
        super().__init__(
            f"revision {wanted} is compacted (events up to {compacted} are gone); "
            f"read the current state and watch from its revision + 1"
        )
        self.wanted = wanted
        self.compacted = compacted
