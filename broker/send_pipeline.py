"""One producer's sends, from the requests read to their answers, with no
task of their own.

Theory of operation. A front-end (``ProduceMany`` in broker/producer_mux.py,
``Produce`` in broker/producer_stream.py) hands each request it reads to
:meth:`SendPipeline.put_send`. Its entries go to the topic in order:

- at once, through :meth:`~broker.topic.TopicBase.publish_now`, while the
  topic has nothing to wait for (:meth:`~broker.topic.TopicBase.publish_waits`:
  no backlog quota, no publish rate, room in its ledger). That is the common
  case, and it costs no task switch;
- otherwise through one task that awaits the topic's
  :meth:`~broker.topic.TopicBase.publish` for each entry in turn, while later
  requests queue behind it, so order holds.

Every handed entry is a pending send: a future of its position, or its
refusal. Each time a future settles, the sends at the head whose outcome is
known are answered in send order through the front-end's ``answer``: the
stored ones ready together in one :class:`Receipts`, a refused one as
:class:`SendFailed` (it changed nothing). So nothing waits on a send's
answer but the callback of its own future.

Bounds: pending sends are at most ``max_pending`` (the broker's
``max_pending_publish_entries_per_producer``); past it requests wait in the
backlog, and ``taken`` tells the front-end how many requests left it (the
front-end does not read past its own bound of requests not taken).

The end, :class:`Ended`, is answered once and last:

- after a half-close (:meth:`close`: the client's close request or the end of
  its stream), once every request was handed over and every send answered;
- with ``PRODUCER_FENCED`` at once (:meth:`fence`: a newer
  ExclusiveWithFencing producer; the outcome of the sends in flight no
  longer matters);
- with a retryable error once the sends already handed over are answered,
  when the topic closes here or the producer's grant is revoked
  (:meth:`moved`): no more requests are taken, and the client resends what
  has no receipt to the topic's next owner;
- with the ledger's error, after the receipts before it, when a send's
  ledger failed (PersistenceError: nothing took the held adds in time,
  :mod:`broker.held_adds`), another broker fenced it, or the topic closed
  while the send was held. The client reconnects and resends what has no
  receipt, as Pulsar's clients do on a send error; the sends after it were
  not stored (they wait while the ledger is replaced), so none is stored
  twice and deduplication's state stays right.

The producer leaves its topic at the end, or at :meth:`abort` (the call is
gone: nothing more is answered).
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from broker.managed_ledger import ManagedLedgerError
from broker.producer import Producer
from broker.topic import TopicBase
from protos import common_pb2
from protos.errors import MagnetarServerError, error, error_of

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Receipts:
    """Stored sends, in send order: (-1, -1) is a duplicate's position."""

    sequence_ids: list[int]
    ledger_ids: list[int]
    entry_ids: list[int]


@dataclass(slots=True)
class SendFailed:
    """A send refused; nothing of it was stored."""

    sequence_id: int
    error: common_pb2.Error


@dataclass(slots=True)
class Ended:
    """The stream is over; ``error`` is fatal for the producer (None: it
    ended as the client asked)."""

    error: common_pb2.Error | None


Answer = Receipts | SendFailed | Ended


class _Request:
    """A send request not yet wholly handed over (``next``: its next entry),
    or a refusal to answer in its turn."""

    __slots__ = ("entries", "next", "num_messages", "refusal", "sequence_ids")

    def __init__(
        self,
        sequence_ids: Sequence[int],
        num_messages: Sequence[int],
        entries: Sequence[bytes],
        refusal: common_pb2.Error | None = None,
    ) -> None:
        self.sequence_ids = sequence_ids
        self.num_messages = num_messages
        self.entries = entries
        self.next = 0
        self.refusal = refusal


class SendPipeline:
    def __init__(
        self,
        topic: TopicBase,
        producer: Producer,
        max_pending: int,
        answer: Callable[[Answer], None],
        taken: Callable[[int], None],
    ) -> None:
        assert max_pending >= 1
        self.topic = topic
        self.producer = producer
        self.max_pending = max_pending
        self.answer = answer
        self.taken = taken
        self.backlog: collections.deque[_Request] = collections.deque()
        # Handed over, in send order: (sequence id, future of the position,
        # or the refusal).
        self.pending: collections.deque[tuple[int, asyncio.Future | common_pb2.Error]] = (
            collections.deque()
        )
        self.waiter: asyncio.Task | None = None  # publishing what had to wait
        self.half_closed = False  # no more requests come
        self.stopped = False  # no more requests are taken (moved)
        self.ending: common_pb2.Error | None = None  # the end's error, after the pending sends
        self.over = False
        self._advancing = False
        self._again = False
        producer.on_fenced = self.fence
        producer.on_topic_closed = self.moved
        # Fenced or unloaded while it was being created (before these
        # callbacks were set): told now.
        if topic.producers.get(producer.name) is not producer:
            self.fence()
        elif topic.closing:
            self.moved()

    # ------------------------------------------------------------ requests

    def put_send(
        self, sequence_ids: Sequence[int], num_messages: Sequence[int], entries: Sequence[bytes]
    ) -> None:
        """A send request's entries (its three lists pair up)."""
        if not (len(sequence_ids) == len(num_messages) == len(entries)):
            refusal = error(
                common_pb2.INVALID_ARGUMENT,
                "sequence_ids, num_messages and entries differ in length",
            )
            self.refuse(refusal, sequence_ids[0] if sequence_ids else 0)
        elif entries:
            self._put(_Request(sequence_ids, num_messages, entries))
        else:
            self.taken(1)  # nothing to store, nothing to answer

    def refuse(self, refusal: common_pb2.Error, sequence_id: int = 0) -> None:
        """A request that is not a send: answered with ``refusal`` in its turn."""
        self._put(_Request((sequence_id,), (), (), refusal))

    def _put(self, request: _Request) -> None:
        if self.half_closed or self.stopped or self.over:
            self.taken(1)  # dropped: after a close, or when no more are taken
            return
        self.backlog.append(request)
        self._advance()

    def close(self) -> None:
        """No more requests (the client ended its stream): the stream ends
        once every send is answered."""
        self.half_closed = True
        self._advance()

    def put_close(self) -> None:
        """The client's close request: taken at once, then :meth:`close`."""
        self.taken(1)
        self.close()

    def fence(self) -> None:
        self._finish(
            error(
                common_pb2.PRODUCER_FENCED,
                f"producer {self.producer.name} on {self.topic.name} was fenced by a newer "
                "ExclusiveWithFencing producer",
            )
        )

    def moved(self) -> None:
        if self.over:
            return
        self._stop()
        if self.waiter is not None:
            self.waiter.cancel()  # (its entry is not stored: none waits after the store)
        self._advance()

    def abort(self) -> None:
        """The call is gone: the producer leaves, nothing more is answered."""
        if not self.over:
            self.over = True
            if self.waiter is not None:
                self.waiter.cancel()
            self._stop()
            self._leave()

    @property
    def waiting_requests(self) -> int:
        return len(self.backlog)

    # ------------------------------------------------------------ the flow

    def _advance(self) -> None:
        """Hand over what may go, answer what is known, again while answers
        made room; end when nothing is left. A call made while it runs (a
        topic that closes under a publish) is folded into the running one."""
        if self._advancing:
            self._again = True
            return
        self._advancing = True
        try:
            while not self.over:
                self._again = False
                if self.waiter is None:
                    self._hand_over()
                answered = self._answer_known()
                if not (self._again or (answered and self.backlog and self.waiter is None)):
                    break
        finally:
            self._advancing = False
        if (
            not self.over
            and not self.pending
            and self.waiter is None
            and (self.stopped or (self.half_closed and not self.backlog))
        ):
            self._finish(self.ending)

    def _next_entry(self) -> tuple[int, int, bytes] | None:
        """The next entry to hand over, taken off the backlog; None when the
        head is a refusal (handed over here) or the topic is closing (no
        more are taken)."""
        req = self.backlog[0]
        if req.refusal is not None:
            self._took_head()
            self.pending.append((req.sequence_ids[0], req.refusal))
            return None
        if req.next == 0 and self.topic.closing:
            self._stop()  # unloading: what was not taken is sent elsewhere
            return None
        i = req.next
        req.next = i + 1
        if req.next == len(req.entries):
            self._took_head()
        return req.sequence_ids[i], req.num_messages[i], req.entries[i]

    def _hand_over(self) -> None:
        """Entries to the topic while none must wait (a task takes over
        when one must)."""
        topic, producer, backlog, pending = self.topic, self.producer, self.backlog, self.pending
        while backlog and len(pending) < self.max_pending:
            if topic.publish_waits() and backlog[0].refusal is None:
                self.waiter = asyncio.create_task(self._publish_waiting())
                self.waiter.add_done_callback(self._waited)
                return
            entry = self._next_entry()
            if entry is None:
                continue
            seq, count, payload = entry
            try:
                stored = topic.publish_now(producer, seq, count, payload)
            except Exception as exc:
                if self._handed(seq, exc):
                    continue
                return
            self._handed(seq, stored)

    async def _publish_waiting(self) -> None:
        """Entries one by one through the topic's waits (a backlog quota
        held, a publish rate, a full ledger), until none must wait."""
        topic, backlog, pending = self.topic, self.backlog, self.pending
        while backlog and len(pending) < self.max_pending and not self.over:
            if not topic.publish_waits() and backlog[0].refusal is None:
                return  # the quick path again
            entry = self._next_entry()
            if entry is None:
                continue
            seq, count, payload = entry
            try:
                stored = await topic.publish(self.producer, seq, count, payload)
            except Exception as exc:
                if self._handed(seq, exc):
                    continue
                return
            self._handed(seq, stored)

    def _waited(self, task: asyncio.Task) -> None:
        if self.waiter is task:
            self.waiter = None
        if not self.over:
            self._advance()

    def _handed(self, seq: int, outcome: asyncio.Future | Exception) -> bool:
        """What the topic made of one entry: a future of its position, or a
        refusal, pending in send order; False for a failure no send can be
        answered with (logged; the stream ends once the sends taken are
        answered, retryable: what has no receipt is sent again)."""
        if isinstance(outcome, asyncio.Future):
            self.pending.append((seq, outcome))
            outcome.add_done_callback(self._settled)
            return True
        if isinstance(outcome, MagnetarServerError):
            self.pending.append((seq, outcome.to_proto()))
            return True
        log.error(
            "%s: publishing entry %d of %s failed",
            self.topic.name,
            seq,
            self.producer.name,
            exc_info=outcome,
        )
        self._stop()
        return False

    def _took_head(self) -> None:
        self.backlog.popleft()
        self.taken(1)

    def _settled(self, _: asyncio.Future) -> None:
        if not self.over:
            self._advance()

    def _answer_known(self) -> int:
        """Answer every send at the head whose outcome is known, in order;
        how many were answered."""
        pending = self.pending
        answered = 0
        seqs: list[int] = []
        ledgers: list[int] = []
        entries: list[int] = []
        while pending and not self.over:
            seq, outcome = pending[0]
            if isinstance(outcome, asyncio.Future):
                if not outcome.done():
                    break
                exc = outcome.exception() if not outcome.cancelled() else asyncio.CancelledError()
                if exc is None:
                    pending.popleft()
                    answered += 1
                    ledger_id, entry_id = outcome.result()
                    seqs.append(seq)
                    ledgers.append(ledger_id)
                    entries.append(entry_id)
                    continue
                if isinstance(exc, ManagedLedgerError):
                    # The ledger failed, or the topic moved: what has no
                    # receipt yet is resent after the producer reconnects
                    # (later sends are not stored: they wait for the ledger).
                    if seqs and not self.over:
                        self.answer(Receipts(seqs, ledgers, entries))
                    self._finish(exc.to_proto())
                    return answered
                outcome = error_of(exc)
            pending.popleft()
            answered += 1
            if seqs:
                self.answer(Receipts(seqs, ledgers, entries))
                seqs, ledgers, entries = [], [], []
            if not self.over:
                self.answer(SendFailed(seq, outcome))
        if seqs and not self.over:
            self.answer(Receipts(seqs, ledgers, entries))
        return answered

    def _stop(self) -> None:
        """Take no more requests (those waiting are dropped); the stream
        ends with a retryable error once the sends taken are answered."""
        self.stopped = True
        if self.ending is None:
            self.ending = error(
                common_pb2.SERVICE_NOT_READY,
                f"{self.topic.name} was unloaded from this broker; look it up again",
            )
        if self.backlog:
            dropped = len(self.backlog)
            self.backlog.clear()
            self.taken(dropped)

    def _finish(self, failure: common_pb2.Error | None) -> None:
        if self.over:
            return
        self.over = True
        if self.waiter is not None and self.waiter is not asyncio.current_task():
            self.waiter.cancel()
        self._stop()
        self._leave()
        self.answer(Ended(failure))

    def _leave(self) -> None:
        self.producer.on_fenced = None
        self.producer.on_topic_closed = None
        self.topic.remove_producer(self.producer)
