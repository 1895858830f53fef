"""Non-persistent topics (``non-persistent://…``): nothing reaches a bookie.

A published entry is handed at once to every subscription's
:class:`~broker.non_persistent_dispatcher.NonPersistentDispatcher`, which
gives it to one consumer with permits (by the subscription's type) or drops
it and counts the drop. The send is confirmed once that is done. Message ids
are ``(0, n)`` with ``n`` counting the topic's entries since it was loaded,
so they restart after a broker restart, which loses nothing else (nothing
else exists). Subscriptions are in memory only and vanish with their last
consumer; acknowledgements are accepted and change nothing.
"""

from __future__ import annotations

import asyncio
import itertools

from broker.dispatcher import entry_facts
from broker.managed_cursor import ManagedCursor
from broker.managed_ledger import Stored
from broker.metrics import TopicMetrics
from broker.non_persistent_dispatcher import NonPersistentDispatcher
from broker.settings import BrokerSettings
from broker.subscription import Subscription
from broker.topic import Position, TopicBase
from protos.topic_name import TopicName

NON_PERSISTENT_LEDGER_ID = 0


class NullCursor:
    """The cursor of a non-persistent subscription: it keeps nothing."""

    durable = False

    def __init__(self, name: str) -> None:
        self.name = name

    def ack(self, positions: list[Position], cumulative: bool) -> None:
        pass

    def is_acked(self, pos: Position) -> bool:
        return False

    def rewind(self) -> None:
        pass

    def reset(self, mark_delete: Position) -> None:
        pass

    async def close(self) -> None:
        pass

    async def delete(self) -> None:
        pass


class NonPersistentTopic(TopicBase):
    persistent = False

    def __init__(self, name: TopicName, settings: BrokerSettings, metrics: TopicMetrics) -> None:
        super().__init__(name, settings, metrics)
        self._entry_ids = itertools.count()
        self._last: Position = (-1, -1)

    @property
    def last_position(self) -> Position:
        return self._last

    def _store(self, entry: bytes, messages: int, stored: Stored) -> asyncio.Future:
        pos = (NON_PERSISTENT_LEDGER_ID, next(self._entry_ids))
        facts = entry_facts(entry)
        for sub in list(self.subscriptions.values()):
            dispatcher = sub.dispatcher
            assert isinstance(dispatcher, NonPersistentDispatcher)
            dispatcher.dispatch_entry(pos, entry, facts)
        self._last = pos
        done: asyncio.Future = asyncio.get_running_loop().create_future()
        done.set_result(pos)
        stored(True)
        return done

    def subscription_idle(self, sub: Subscription) -> None:
        if self.subscriptions.get(sub.name) is sub:
            del self.subscriptions[sub.name]
            self.metrics.forget_subscription(sub.name)

    async def _open_cursor(
        self, sub_name: str, latest: bool, durable: bool, mark_delete: Position | None
    ) -> ManagedCursor:
        return NullCursor(sub_name)  # type: ignore[return-value]

    async def close(self) -> None:
        self._close_consumers()
        self.subscriptions.clear()
