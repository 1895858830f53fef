"""Whether this metastore node may answer, and how a write becomes a
committed Raft command.

Theory of operation. Only the leader answers reads and writes; any other
node answers ``NOT_LEADER`` naming the leader's client address
(metastore/cluster_layout.py), and the client library follows it. A new
leader may hold committed entries it has not applied yet, so it first
commits and applies a no-op of its own term (the barrier) and answers
nothing before that. A write becomes one Raft command
``apply(request_id, op, args)`` and is answered once a majority has it on
disk and this node applied it. Reads come from the leader's replica (a
deposed leader that has not noticed yet may answer a read stale for up to an
election timeout; writes are never affected, they need a majority).
"""

from __future__ import annotations

import asyncio
from typing import Any

from metastore.cluster_layout import ClusterLayout
from metastore.raft_node import MetastoreNode
from metastore.settings import MetastoreSettings
from protos import common_pb2
from protos.errors import error

# How long a new leader waits for its no-op to commit before trying again.
BARRIER_TIMEOUT_S = 2.0


class _RaftFailure(Exception):
    pass


class Leadership:
    """This node's leadership as the request handlers see it."""

    def __init__(
        self, node: MetastoreNode, layout: ClusterLayout, settings: MetastoreSettings
    ) -> None:
        self.node = node
        self.layout = layout
        self.settings = settings
        self.loop = asyncio.get_running_loop()
        self._ready_term = -1
        self._barrier_term = -1
        self._barrier: asyncio.Task | None = None
        self.proposals_pending = 0  # writes proposed here, not yet committed
        self.proposals_failed = 0  # writes that were refused or timed out

    def not_leader(self) -> common_pb2.Error | None:
        """None when this node leads; else NOT_LEADER naming the leader's
        client address (empty while no leader is known)."""
        if self.node.is_leader:
            return None
        raft_leader = self.node.leader_address
        leader = self.layout.client_of_raft.get(raft_leader or "", "")
        err = error(
            common_pb2.NOT_LEADER,
            f"metastore node {self.layout.node_id} is not the leader"
            + (f"; the leader is {leader}" if leader else "; no leader is known yet"),
        )
        err.leader = leader
        return err

    async def ready(self) -> common_pb2.Error | None:
        """None when this node leads and has applied every entry before its term.

        A new leader may hold committed entries it has not applied yet; it
        commits and applies a no-op of its own term before answering anything.
        """
        bad = self.not_leader()
        if bad is not None:
            return bad
        term = self.node.term
        if self._ready_term == term:
            return None
        if self._barrier is None or self._barrier_term != term:
            self._barrier_term = term
            # Short: a no-op lost in an election must not stall readiness
            # (and session expiry) for a whole write timeout; the next
            # request or expiry pass proposes a new one.
            timeout_s = min(BARRIER_TIMEOUT_S, self.settings.write_timeout_ms / 1000)
            self._barrier = self.loop.create_task(self.propose(b"", "noop", timeout_s=timeout_s))
        try:
            await asyncio.shield(self._barrier)
        except Exception as exc:
            if self._barrier_term == term:
                self._barrier = None
            return self.not_leader() or error(
                common_pb2.SERVICE_NOT_READY, f"the new leader is not ready: {exc}"
            )
        if self.node.term == term:
            self._ready_term = term
        return self.not_leader()

    async def propose(
        self, request_id: bytes, op: str, *args: Any, timeout_s: float | None = None
    ) -> Any:
        fut: asyncio.Future = self.loop.create_future()

        def done(result: Any, err: Any) -> None:
            self.loop.call_soon_threadsafe(_settle, fut, result, err)

        self.node.apply(bytes(request_id), op, *args, callback=done)
        if timeout_s is None:
            timeout_s = self.settings.write_timeout_ms / 1000
        self.proposals_pending += 1
        try:
            return await asyncio.wait_for(fut, timeout_s)
        except TimeoutError:
            self.proposals_failed += 1
            raise _RaftFailure("the write was not committed in time") from None
        except _RaftFailure:
            self.proposals_failed += 1
            raise
        finally:
            self.proposals_pending -= 1

    async def write(self, request_id: bytes, op: str, *args: Any) -> tuple[Any, Any]:
        """(result, None) or (None, Error) for a replicated write."""
        bad = await self.ready()
        if bad is not None:
            return None, bad
        try:
            return await self.propose(request_id, op, *args), None
        except _RaftFailure as exc:
            return None, self.not_leader() or error(common_pb2.SERVICE_NOT_READY, str(exc))


def _settle(fut: asyncio.Future, result: Any, err: Any) -> None:
    if fut.done():
        return
    if result is None:
        fut.set_exception(_RaftFailure(f"raft refused the write (reason {err})"))
    else:
        fut.set_result(result)
