"""Backlog quotas applied to a topic: measuring its backlog, holding or
refusing publishes, evicting the oldest backlog (the decisions are
:mod:`broker.backlog_quota`'s).

Theory of operation. A topic with quotas has a :class:`QuotaGuard`. The
guard judges the topic at every ``backlog_quota_check_interval_s`` (the
registry's check) and on every publish (from figures kept in memory: no
I/O on the publish path, a few operations per subscription). The storage figure is the largest durable
subscription backlog in entries times the topic's average entry size, as
``backlogSize``; the age figure is the age of the oldest unacknowledged
message, which only the full check measures (it reads the publish time of
the first entry the slowest subscription has not acknowledged): between
checks, judging uses the age the last check found. While a quota is
exceeded the topic is checked again every ``RECHECK_EXCEEDED_S``, and soon
after anything that shrinks a backlog (an acknowledgement, an expiry, a
seek, a deleted subscription), so held publishes resume when the backlog
fits. Held publishes wait on an event that is set whenever the topic is not
holding, and when it closes.
"""

from __future__ import annotations

import asyncio
import logging
import time

from broker.backlog_quota import UNDER_QUOTA, Backlog, Verdict, eviction_point, judge
from broker.compaction_plan import COMPACTION_SUBSCRIPTION
from broker.errors import BrokerError
from broker.expiry import expire_subscription
from broker.policy_values import BacklogQuotaType
from broker.publish_time import publish_time_at
from broker.stats import storage_of, subscription_backlog
from broker.topic import Topic
from protos import common_pb2

log = logging.getLogger(__name__)

# A shrunk backlog (acknowledgements) is checked again after this long.
RECHECK_MIN_S = 0.1
# A topic over a quota is checked again (age included) this often.
RECHECK_EXCEEDED_S = 1.0


class QuotaGuard:
    def __init__(self, topic: Topic) -> None:
        self.topic = topic
        self.verdict: Verdict = UNDER_QUOTA
        self.not_holding = asyncio.Event()
        self.not_holding.set()
        self.oldest_age_s = 0.0  # of the oldest unacknowledged message, at the last check
        self._check: asyncio.Task | None = None
        self._check_at = 0.0

    # ------------------------------------------------------------ measuring

    def measure(self) -> Backlog:
        topic = self.topic
        storage, entries = storage_of(topic)
        average = storage / entries if entries else 0.0
        widest = max(
            (
                subscription_backlog(sub).entries
                for sub in topic.subscriptions.values()
                if sub.cursor.durable
            ),
            default=0,
        )
        return Backlog(int(widest * average), self.oldest_age_s)

    async def _read_oldest(self) -> None:
        """The age of the first entry the slowest durable subscription has
        not acknowledged (only with an age quota; 0 when there is none)."""
        age = 0.0
        ledger = self.topic.ledger
        marks = [
            s.cursor.state.mark_delete_position
            for s in self.topic.subscriptions.values()
            if s.cursor.durable
        ]
        quotas = self.topic.policies.backlog_quotas
        if BacklogQuotaType.MESSAGE_AGE in quotas and marks and min(marks) < ledger.last_confirmed:
            published_ms = await publish_time_at(ledger, ledger.next_position(min(marks)))
            age = max(0.0, time.time() - published_ms / 1000) if published_ms else 0.0
        self.oldest_age_s = age

    def judge(self) -> Verdict:
        """Judge from the figures in memory; wake or stop the held publishes."""
        quotas = self.topic.policies.backlog_quotas
        self.verdict = judge(quotas, self.measure()) if quotas else UNDER_QUOTA
        if self.verdict.hold and not self.topic.closing:
            self.not_holding.clear()
        else:
            self.not_holding.set()
        if self.verdict.exceeded:
            self._check_soon(RECHECK_EXCEEDED_S)
        return self.verdict

    async def check(self) -> Verdict:
        """The full check: read the oldest message's age, judge, evict when
        a consumer_backlog_eviction quota is exceeded, judge again."""
        await self._read_oldest()
        verdict = self.judge()
        if verdict.evict:
            for kind, quota in verdict.evict:
                await self._evict(kind, quota.limit_size_bytes, quota.limit_time_s)
            await self._read_oldest()
            verdict = self.judge()
        return verdict

    async def _evict(self, kind: BacklogQuotaType, limit_bytes: int, limit_s: int) -> None:
        topic = self.topic
        if kind is BacklogQuotaType.MESSAGE_AGE:
            for sub in list(topic.subscriptions.values()):
                if sub.name != COMPACTION_SUBSCRIPTION:
                    await expire_subscription(topic, sub, limit_s)
            return
        storage, entries = storage_of(topic)
        average = storage / entries if entries else 0.0
        if average <= 0:
            return
        keep = int(limit_bytes // average)
        ledger = topic.ledger
        ledgers = [(i, ledger.last_entry_of(i)) for i in ledger.ledger_ids]
        for sub in list(topic.subscriptions.values()):
            if not sub.cursor.durable or sub.name == COMPACTION_SUBSCRIPTION:
                continue  # (evicting the compactor's would lose what it has not compacted)
            point = eviction_point(ledgers, sub.cursor.state.mark_delete_position, keep)
            if point is not None:
                log.info("%s: backlog quota evicts %s up to %s", topic.name, sub.name, point)
                sub.expire_through(point)

    # ------------------------------------------------------------ the topic's hooks

    async def admit(self) -> None:
        """On publish: refuse (producer_exception) or wait while holding."""
        self.judge()
        while True:
            if self.verdict.refuse:
                raise BrokerError(
                    self.verdict.describe(str(self.topic.name)),
                    common_pb2.PRODUCER_BLOCKED_QUOTA_EXCEEDED,
                )
            if not self.verdict.hold or self.topic.closing:
                return
            await self.not_holding.wait()
            self.judge()

    def check_producer(self) -> None:
        """A new producer is refused while producer_exception is in force."""
        if self.topic.policies.backlog_quotas and self.judge().refuse:
            raise BrokerError(
                self.verdict.describe(str(self.topic.name)),
                common_pb2.PRODUCER_BLOCKED_QUOTA_EXCEEDED,
            )

    def on_acked(self) -> None:
        """A backlog shrank (acknowledgements, expiry, a seek, a deleted
        subscription): while over quota, check again soon."""
        if self.verdict.exceeded:
            self._check_soon(RECHECK_MIN_S)

    def _check_soon(self, delay_s: float) -> None:
        """One full check after ``delay_s`` (or sooner, if one is already
        due sooner); none once the topic closes."""
        if self.topic.closing:
            return
        due = time.monotonic() + delay_s
        if self._check is not None:
            if self._check_at <= due:
                return
            self._check.cancel()
        self._check_at = due
        self._check = asyncio.get_running_loop().create_task(self._recheck(delay_s))

    async def _recheck(self, delay_s: float) -> None:
        try:
            await asyncio.sleep(delay_s)  # gathers the acknowledgements of a burst
        except asyncio.CancelledError:
            return  # replaced by a sooner check
        self._check = None
        try:
            await self.check()
        except Exception:
            log.exception("the backlog quota check of %s failed", self.topic.name)

    def release(self) -> None:
        """The topic closes: held publishes go on (and fail or move with it)."""
        self.not_holding.set()
        if self._check is not None:
            self._check.cancel()
