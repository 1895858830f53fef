"""The receiver queue: messages the broker pushed, waiting for the
application, and when to grant the broker more (flow permits).

Theory of operation (Pulsar's ``ConsumerImpl``). A consumer grants
``receiver_queue_size`` permits when it subscribes; the broker sends at
most that many messages against them (a batch entry costs its message
count and is never split, so one may overshoot by its size - 1). That is
the queue's bound. Each message the application takes, and each one that
used a permit but never reaches the queue (acknowledged batch indexes, a
chunk held for reassembly, a dead-lettered entry), frees its permit; once
half the queue (at least 1) is free, the freed permits go back to the
broker in one ``Flow``, so a busy consumer does not send one per message.
A queue dropped whole (``redeliver_unacknowledged_messages``, ``seek``)
gives its permits back at once; after a reconnection the new subscription
grants the whole queue again, so the count starts over.

``receiver_queue_size=0`` is Pulsar's zero-prefetch mode: no permits at
subscribe; a receive that finds the queue empty asks for one message
(:meth:`want_one`), and nothing taken gives a permit back. A message that
used the permit but never reaches the queue, a dropped queue or a new
subscription leaves no permit outstanding, so the waiting receive asks again.

I/O-free and not thread-safe: the consumer engine calls it under its lock
and sends the ``Flow`` for the permits the calls answer (0: none yet).
"""

from __future__ import annotations

import collections
from collections.abc import Iterable
from typing import Generic, TypeVar

T = TypeVar("T")


class ReceiverQueue(Generic[T]):
    def __init__(self, receiver_queue_size: int) -> None:
        assert receiver_queue_size >= 0, receiver_queue_size
        self.receiver_queue_size = receiver_queue_size
        self.zero_prefetch = receiver_queue_size == 0
        # Free permits not granted yet; granted once they reach this.
        self.flow_threshold = max(1, receiver_queue_size // 2)
        self._messages: collections.deque[T] = collections.deque()
        self._freed = 0
        self._asked = False  # zero-prefetch: one permit granted, its message not here yet

    @property
    def initial_permits(self) -> int:
        """What a new subscription grants."""
        return self.receiver_queue_size

    def put(self, messages: Iterable[T]) -> None:
        before = len(self._messages)
        self._messages.extend(messages)
        if len(self._messages) > before:
            self._asked = False

    def want_one(self) -> int:
        """Zero-prefetch: the permit to grant for a receive that found the
        queue empty (1, or 0 when one is already out); else always 0."""
        if not self.zero_prefetch or self._messages or self._asked:
            return 0
        self._asked = True
        return 1

    def take(self) -> tuple[T, int]:
        """The oldest message (the queue must not be empty) and the permits
        to grant now."""
        return self._messages.popleft(), self.release(1)

    def release(self, n: int) -> int:
        """``n`` permits freed; the permits to grant now (0: not yet)."""
        if self.zero_prefetch:
            if n:
                self._asked = False  # the message asked for never came: ask again
            return 0
        self._freed += n
        if self._freed < self.flow_threshold:
            return 0
        permits, self._freed = self._freed, 0
        return permits

    def drop_all(self) -> int:
        """Empty the queue; its messages' permits are to be granted at once."""
        dropped = len(self._messages)
        self._messages.clear()
        if self.zero_prefetch:
            self._asked = False
            return 0
        return dropped

    def restart(self) -> None:
        """A new subscription: empty, and no permit freed yet."""
        self._messages.clear()
        self._freed = 0
        self._asked = False

    @property
    def freed(self) -> int:
        """Permits freed and not granted yet (always below the threshold)."""
        return self._freed

    def __len__(self) -> int:
        return len(self._messages)
