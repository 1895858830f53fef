"""Which consumer gets the messages: Failover ordering, Shared priority and limits."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from types import SimpleNamespace

from broker.dispatcher import SharedDispatcher
from broker.settings import BrokerSettings
from broker.topic import Subscription
from protos import broker_pb2
from protos.topic_name import TopicName


def _sub(topic: str, sub_type: int, **settings: int) -> Subscription:
    cursor = SimpleNamespace(rewind=lambda: None, is_acked=lambda pos: False)
    t = SimpleNamespace(
        settings=replace(BrokerSettings(), **settings),  # type: ignore[arg-type]
        name=TopicName.parse(topic),
        ledger=None,
        persistent=True,
    )
    return Subscription(t, "s", sub_type, cursor)  # type: ignore[arg-type]


def test_failover_on_a_partition_sorts_by_priority_then_name():
    async def main() -> None:
        sub = _sub("t-partition-3", broker_pb2.FAILOVER)
        for name, prio in (("C2", 0), ("C3", 1), ("C1", 0)):
            sub.add_consumer(name, broker_pb2.FAILOVER, prio)
        # sorted: C1, C2 (priority 0), C3 (priority 1); partition 3 -> 3 % 3 = 0
        assert sub.active_consumer().name == "C1"  # type: ignore[union-attr]
        sub.remove_consumer(sub.consumers[2])  # C1 leaves: [C2, C3], 3 % 2 = 1
        assert sub.active_consumer().name == "C3"  # type: ignore[union-attr]

    asyncio.run(main())


def test_failover_on_a_non_partitioned_topic_is_first_come():
    async def main() -> None:
        sub = _sub("plain", broker_pb2.FAILOVER)
        for name in ("Z", "A", "M"):
            sub.add_consumer(name, broker_pb2.FAILOVER, 0)
        assert sub.active_consumer().name == "Z"  # type: ignore[union-attr]
        sub.remove_consumer(sub.consumers[0])
        assert sub.active_consumer().name == "A"  # type: ignore[union-attr]

    asyncio.run(main())


def test_shared_serves_the_best_priority_with_permits_and_respects_the_unacked_limit():
    async def main() -> None:
        sub = _sub("t", broker_pb2.SHARED, max_unacked_messages_per_consumer=10)
        best = sub.add_consumer("best", broker_pb2.SHARED, 0)
        a = sub.add_consumer("a", broker_pb2.SHARED, 1)
        b = sub.add_consumer("b", broker_pb2.SHARED, 1)
        d = sub.dispatcher
        assert isinstance(d, SharedDispatcher)
        a.permits = b.permits = 5
        assert d._ready_consumers() == [a, b]  # 'best' has no permits
        best.permits = 1
        assert d._ready_consumers() == [best]
        best.unacked = 10  # at the limit: blocked until half are acked
        assert d._ready_consumers() == [a, b]
        best.unacked = 6
        assert d._ready_consumers() == [a, b] and best.blocked
        best.unacked = 5
        assert d._ready_consumers() == [best] and not best.blocked

    asyncio.run(main())
