"""Session liveness as the metastore leader tracks it (no I/O, no clock:
callers pass ``now``, a monotonic time in seconds).

Theory of operation. Only the leader tracks keep-alives, in memory: creating
a session or keeping it alive moves its deadline to now + TTL, and a session
whose deadline has passed is ended by the caller through a replicated
``end_session`` command (only the leader decides time, DESIGN §3). A node
that becomes leader, or leads again after another node did, cannot know
when sessions were last kept alive, so the first expiry pass of each of its
terms gives every session a fresh TTL and expires nothing.
"""

from __future__ import annotations

from collections.abc import Container, Mapping


class SessionDeadlines:
    """When each session expires unless it is kept alive, for one leader term."""

    def __init__(self) -> None:
        self._deadlines: dict[int, float] = {}
        self._term = -1  # the term whose deadlines these are; -1: none

    def __len__(self) -> int:
        return len(self._deadlines)

    def kept_alive(self, session_id: int, ttl_ms: int, now: float) -> None:
        self._deadlines[session_id] = now + ttl_ms / 1000

    def closed(self, session_id: int) -> None:
        self._deadlines.pop(session_id, None)

    def not_leading(self) -> None:
        """This node follows: when it leads again, its deadlines are stale."""
        self._term = -1

    def start_pass(self, term: int, ttls_ms: Mapping[int, int], now: float) -> bool:
        """Whether an expiry pass in ``term`` may expire sessions. On the
        first pass of a term, no: every session of ``ttls_ms`` (session id
        -> TTL) gets a fresh deadline instead, and any other is forgotten."""
        if self._term == term:
            return True
        self._term = term
        self._deadlines = {sid: now + ttl / 1000 for sid, ttl in ttls_ms.items()}
        return False

    def expired(self, session_id: int, ttl_ms: int, now: float) -> bool:
        """Whether the session's deadline has passed; a session this leader
        has not seen yet (created through another node's term) gets one."""
        deadline = self._deadlines.setdefault(session_id, now + ttl_ms / 1000)
        return deadline < now

    def forget_ended(self, live: Container[int]) -> None:
        """Drop the deadlines of sessions no longer in ``live`` (ended)."""
        for session_id in [s for s in self._deadlines if s not in live]:
            del self._deadlines[session_id]

    def time_left(self, now: float) -> dict[int, float]:
        """Seconds left per session (for the debug log)."""
        return {sid: round(deadline - now, 2) for sid, deadline in self._deadlines.items()}
