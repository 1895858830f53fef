"""A consumer's client-side redelivery: negative acks and ack timeouts.

Theory of operation. The trackers of ``client/redelivery.py`` say which
entries are due; this class owns them for one consumer, feeds them from
any thread (``nack``, ``taken``, ``acked``, ``clear``, under its own lock)
and runs the task that, once per tick, takes what is due and has the
consumer send it in one redeliver request. The tick is 50 ms while nacks
are pending (their deadlines are met within it), else
``ack_timeout_tick_time_ms``. The task starts with the first nack, or at
subscribe when ack timeouts are on, and is cancelled with the consumer.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable, Callable

from client._consumer_options import ConsumerOptions
from client.message import Message
from client.redelivery import AckTimeoutTracker, NegativeAckTracker, Position
from protos.message_id import MessageId

log = logging.getLogger(__name__)

NACK_TICK_S = 0.05  # nack deadlines are met within 50 ms

Redeliver = Callable[[list[Position]], Awaitable[None]]


class RedeliveryTask:
    def __init__(
        self,
        options: ConsumerOptions,
        loop: asyncio.AbstractEventLoop,
        redeliver: Redeliver,
        active: Callable[[], bool],
        topic: Callable[[], str],
    ) -> None:
        self.opts = options
        self.loop = loop
        self._redeliver = redeliver
        self._active = active
        self._topic = topic
        self._lock = threading.Lock()
        self._nacks = NegativeAckTracker()
        timeout_ms = options.unacked_messages_timeout_ms
        self._ack_timeouts = AckTimeoutTracker(timeout_ms / 1000) if timeout_ms else None
        self._task: asyncio.Task | None = None

    @property
    def ack_timeouts_on(self) -> bool:
        return self._ack_timeouts is not None

    def nack(self, mid: MessageId, redelivery_count: int, now_s: float) -> None:
        """Due after the nack delay, or the backoff of its redelivery count."""
        backoff = self.opts.negative_ack_redelivery_backoff
        delay_ms = (
            backoff.next(redelivery_count)
            if backoff
            else self.opts.negative_ack_redelivery_delay_ms
        )
        with self._lock:
            self._nacks.nack(mid.position, now_s, delay_ms / 1000)
            if self._ack_timeouts is not None:
                self._ack_timeouts.acked(mid.position)

    def taken(self, msg: Message, now_s: float) -> None:
        """The application took ``msg``: its ack timeout starts (if on)."""
        if self._ack_timeouts is None:
            return
        backoff = self.opts.ack_timeout_redelivery_backoff
        extra_s = backoff.next(msg.redelivery_count()) / 1000 if backoff else 0.0
        with self._lock:
            self._ack_timeouts.taken(msg.message_id().position, now_s, extra_s)

    def acked(self, pos: Position) -> None:
        with self._lock:
            self._nacks.acked(pos)
            if self._ack_timeouts is not None:
                self._ack_timeouts.acked(pos)

    def clear(self) -> None:
        """Everything unacked comes again anyway (a redelivery of all)."""
        with self._lock:
            self._nacks.clear()
            if self._ack_timeouts is not None:
                self._ack_timeouts.clear()

    def start(self) -> None:
        """Start the task (on the loop), unless running or the consumer is closed."""
        if self._task is None and self._active():
            self._task = self.loop.create_task(self._run())

    def cancel(self) -> None:
        if self._task is not None:
            self._task.cancel()

    def _tick_s(self) -> float:
        if self._ack_timeouts is not None and not len(self._nacks):
            return self.opts.ack_timeout_tick_time_ms / 1000
        return NACK_TICK_S

    def _due(self, now_s: float) -> list[Position]:
        with self._lock:
            due = set(self._nacks.due(now_s))
            if self._ack_timeouts is not None:
                due.update(self._ack_timeouts.due(now_s))
        return sorted(due)

    async def _run(self) -> None:
        while self._active():
            await asyncio.sleep(self._tick_s())  # a timer, not a wait on state
            due = self._due(time.monotonic())
            if not due:
                continue
            try:
                await self._redeliver(due)
            except Exception as exc:
                log.warning("%s: redelivery request failed: %s", self._topic(), exc)
