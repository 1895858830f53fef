"""The broker's periodic checks over the topics it serves, each at its own
interval setting (Pulsar's defaults): idle ledger rollover, retention,
message expiry (TTL), backlog quotas, subscription expiration, inactive
topics and automatic compaction. Each check is bounded by the topics served
here; one topic failing is logged and the others go on. The decisions are
made elsewhere (:mod:`broker.ledger_rules`, :mod:`broker.expiry`,
:mod:`broker.backlog_quota`, :mod:`broker.inactivity`,
:mod:`broker.compaction`); these loops only run them.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from broker.compaction_plan import COMPACTION_SUBSCRIPTION
from broker.expiry import expire_topic
from broker.inactivity import subscription_expired, topic_inactive
from broker.quota_enforcement import QuotaGuard
from broker.stats import storage_of, subscription_backlog
from broker.topic import Topic, TopicBase
from broker.topics import TopicRegistry

log = logging.getLogger(__name__)

# Idle ledgers are looked at this often at most (and at least).
# A check's pass over every topic lets the event loop run other work this
# often (most checks end at once for most topics, without a wait in which
# the loop would run anything else).
HOUSEKEEPING_STRIDE = 100
IDLE_CHECK_MAX_S = 60.0
IDLE_CHECK_MIN_S = 0.5


class Housekeeping:
    def __init__(self, registry: TopicRegistry) -> None:
        self.registry = registry
        self.settings = registry.settings

    def tasks(self) -> list[Coroutine[Any, Any, None]]:
        s = self.settings
        checks: list[tuple[float, Callable[[TopicBase], Awaitable[None]]]] = [
            (s.retention_check_interval_s, self._retention),
            (s.message_expiry_check_interval_s, self._expiry),
            (s.backlog_quota_check_interval_s, self._backlog_quota),
            (s.subscription_expiry_check_interval_s, self._subscription_expiry),
            (s.inactive_topic_check_interval_s, self._inactive_topic),
            (s.broker_service_compaction_monitor_interval_in_seconds, self._compaction),
        ]
        idle = s.managed_ledger_inactive_ledger_rollover_seconds
        if idle > 0:
            period = min(IDLE_CHECK_MAX_S, max(IDLE_CHECK_MIN_S, idle / 4))
            checks.append((period, self._idle_rollover))
        return [self._every(period, check) for period, check in checks]

    async def _every(self, period_s: float, check: Callable[[TopicBase], Awaitable[None]]) -> None:
        while True:
            await asyncio.sleep(period_s)  # a periodic check, not a synchronisation
            for i, topic in enumerate(list(self.registry.topics.values())):
                if i and i % HOUSEKEEPING_STRIDE == 0:
                    await asyncio.sleep(0)  # other work between strides of a long pass
                if topic.closing:
                    continue
                try:
                    await check(topic)
                except Exception:
                    log.exception("%s of %s failed", check.__name__, topic.name)

    async def _idle_rollover(self, topic: TopicBase) -> None:
        """Roll idle, fully consumed ledgers so trimming can delete them."""
        if isinstance(topic, Topic):
            topic.ledger.idle_check()

    async def _retention(self, topic: TopicBase) -> None:
        """Delete what retention no longer keeps (its time ran out)."""
        if isinstance(topic, Topic):
            topic.ledger.maybe_trim()

    async def _expiry(self, topic: TopicBase) -> None:
        ttl = topic.policies.message_ttl_s
        if ttl > 0 and isinstance(topic, Topic):
            await expire_topic(topic, ttl)

    async def _backlog_quota(self, topic: TopicBase) -> None:
        gate = topic.gate
        if isinstance(gate, QuotaGuard) and topic.policies.backlog_quotas:
            await gate.check()

    async def _subscription_expiry(self, topic: TopicBase) -> None:
        minutes = topic.policies.subscription_expiration_time_minutes
        if minutes <= 0 or not isinstance(topic, Topic) or topic.name.is_system:
            return
        now = time.monotonic()
        for sub in list(topic.subscriptions.values()):
            if sub.name == COMPACTION_SUBSCRIPTION:  # its hold on retention is the compactor's
                continue
            idle_s = now - sub.last_active_s
            if subscription_expired(sub.cursor.durable, len(sub.consumers), idle_s, minutes):
                log.info(
                    "%s: subscription %s expired (%d minutes idle)", topic.name, sub.name, minutes
                )
                await topic.delete_subscription(sub, force=False)

    async def _compaction(self, topic: TopicBase) -> None:
        """Compact a topic once more bytes than its compaction threshold are
        not compacted yet: the backlog of its ``__compaction`` subscription,
        or everything stored before the first run (Pulsar's rule)."""
        threshold = topic.policies.compaction_threshold_bytes
        compaction = self.registry.compaction
        if threshold <= 0 or not isinstance(topic, Topic) or compaction.running(topic.name):
            return
        storage, entries = storage_of(topic)
        sub = topic.subscriptions.get(COMPACTION_SUBSCRIPTION)
        if sub is not None and entries:
            storage = int(subscription_backlog(sub).entries * storage / entries)
        if storage > threshold:
            log.info(
                "%s: %d bytes not compacted (threshold %d): compacting",
                topic.name,
                storage,
                threshold,
            )
            compaction.trigger(topic)

    async def _inactive_topic(self, topic: TopicBase) -> None:
        policy = topic.policies.inactive_topic_policies
        if not policy.delete_while_inactive:
            return
        connected = len(topic.producers) + sum(
            len(s.consumers) for s in topic.subscriptions.values()
        )
        caught_up = all(subscription_backlog(s).entries == 0 for s in topic.subscriptions.values())
        idle_s = time.monotonic() - topic.last_active_s
        if topic_inactive(
            policy, topic.name.is_system, connected, len(topic.subscriptions), caught_up, idle_s
        ):
            log.info(
                "%s: inactive for %.0f s; deleting it (%s)", topic.name, idle_s, policy.mode.value
            )
            await self.registry.delete_topic(topic, force=False)
