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
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

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


class MetadataStore:
    def __init__(self, max_sessions: int = 10_000) -> None:
        self.kv: SortedDict = SortedDict()
        self.revision = 0
        self.sessions: dict[int, SessionState] = {}
        self.last_session_id = 0
        self.max_sessions = max_sessions
        # Readers on other threads (the gRPC loop) take the lock too; the Raft
        # thread is the only writer.
        self._lock = threading.Lock()

    def __getstate__(self) -> dict:
        state = {k: getattr(self, k) for k in ("kv", "revision", "sessions", "last_session_id")}
        state["max_sessions"] = self.max_sessions
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

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
            self.kv[key] = Record(str(value).encode(), version, create, self.revision, 0)
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
        if record.session_id:
            owner = self.sessions.get(record.session_id)
            if owner is not None:
                owner.keys.discard(key)
