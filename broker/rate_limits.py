"""Rate limits by token bucket: dispatch (per topic and per subscription),
publish (per topic) and subscribe (per consumer name) rates.

Theory of operation. A :class:`TokenBucket` holds up to ``per_period``
tokens and gains ``per_period / period_s`` tokens per second. It starts
empty, so a rate of N per second delivers N per second from the first
second on (a full bucket would add a burst of one period on top). What is
taken is taken whole even when it is more than the bucket holds — an entry
of a batch carries all its messages, and splitting it would reorder them —
so the bucket goes into debt, and nothing more goes until the debt is paid:
over any long window the rate is kept to within one entry (and one batch,
below). A throttled
caller waits for ``BATCH_S`` worth of tokens (at least one), so 10,000 msg/s
is 100 wake-ups a second, not 10,000. A
:class:`Throttle` is the buckets of one rate (messages and bytes) and
several throttles stack (a subscription's and its topic's): what may go is
the least any allows, and the wait is the longest any asks. A rate of 0 or
-1 limits nothing and has no bucket. The caller passes the clock (seconds
of a monotonic clock); nothing here sleeps.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from broker.policies import AppliedPolicies

UNLIMITED = 1 << 62
# A throttled dispatch or publish waits for at least this much of its rate.
BATCH_S = 0.01


class TokenBucket:
    def __init__(self, per_period: int, period_s: float, now_s: float, full: bool = False) -> None:
        assert per_period > 0 and period_s > 0, (per_period, period_s)
        self.capacity = float(per_period)
        self.per_s = per_period / period_s
        self.tokens = self.capacity if full else 0.0
        self.at_s = now_s

    def _refill(self, now_s: float) -> None:
        if now_s > self.at_s:
            self.tokens = min(self.capacity, self.tokens + (now_s - self.at_s) * self.per_s)
            self.at_s = now_s

    def available(self, now_s: float) -> int:
        """Whole tokens there now (0 while in debt)."""
        self._refill(now_s)
        return max(0, int(self.tokens))

    def take(self, n: float, now_s: float) -> None:
        """Take ``n`` tokens, into debt if there are fewer."""
        self._refill(now_s)
        self.tokens -= n

    def wait_s(self, now_s: float) -> float:
        """How long until a worthwhile batch of tokens is there (0: now):
        one token, or ``BATCH_S`` of the rate when that is more, so a high
        rate is served in batches, not one wake-up per token."""
        self._refill(now_s)
        want = max(1.0, min(self.capacity, self.per_s * BATCH_S))
        return 0.0 if self.tokens >= want else (want - self.tokens) / self.per_s


class Throttle:
    """One rate: at most ``msgs`` messages and ``bytes`` bytes per ``period_s``."""

    def __init__(self, msgs: int, nbytes: int, period_s: float, now_s: float) -> None:
        self.msgs = TokenBucket(msgs, period_s, now_s) if msgs > 0 else None
        self.bytes = TokenBucket(nbytes, period_s, now_s) if nbytes > 0 else None

    @property
    def limits(self) -> bool:
        return self.msgs is not None or self.bytes is not None

    def allowance(self, now_s: float) -> tuple[int, int]:
        """(messages, bytes) that may go now."""
        msgs = self.msgs.available(now_s) if self.msgs is not None else UNLIMITED
        nbytes = self.bytes.available(now_s) if self.bytes is not None else UNLIMITED
        return msgs, nbytes

    def take(self, msgs: int, nbytes: int, now_s: float) -> None:
        if self.msgs is not None:
            self.msgs.take(msgs, now_s)
        if self.bytes is not None:
            self.bytes.take(nbytes, now_s)

    def wait_s(self, now_s: float) -> float:
        return max(
            self.msgs.wait_s(now_s) if self.msgs is not None else 0.0,
            self.bytes.wait_s(now_s) if self.bytes is not None else 0.0,
        )


def allowance(throttles: Sequence[Throttle | None], now_s: float) -> tuple[int, int]:
    """What the stacked throttles let go now: (messages, bytes)."""
    msgs = nbytes = UNLIMITED
    for t in throttles:
        if t is not None:
            m, b = t.allowance(now_s)
            msgs, nbytes = min(msgs, m), min(nbytes, b)
    return msgs, nbytes


def wait_s(throttles: Sequence[Throttle | None], now_s: float) -> float:
    return max((t.wait_s(now_s) for t in throttles if t is not None), default=0.0)


def take(throttles: Sequence[Throttle | None], msgs: int, nbytes: int, now_s: float) -> None:
    for t in throttles:
        if t is not None:
            t.take(msgs, nbytes, now_s)


class SubscribeLimiter:
    """Subscribes per consumer name: at most ``per_period`` per ``period_s``
    (a consumer's first subscribes may come at once: its bucket starts
    full). Remembers at most ``max_names`` names, the least recent going
    first."""

    def __init__(self, per_period: int, period_s: float, max_names: int) -> None:
        self.per_period = per_period
        self.period_s = period_s
        self.max_names = max(1, max_names)
        self._buckets: OrderedDict[str, TokenBucket] = OrderedDict()

    def _bucket(self, name: str, now_s: float) -> TokenBucket:
        bucket = self._buckets.pop(name, None)
        if bucket is None:
            bucket = TokenBucket(self.per_period, self.period_s, now_s, full=True)
        self._buckets[name] = bucket
        while len(self._buckets) > self.max_names:
            self._buckets.popitem(last=False)
        return bucket

    def allows(self, name: str, now_s: float) -> bool:
        """May ``name`` subscribe now?"""
        return self._bucket(name, now_s).available(now_s) >= 1

    def spend(self, name: str, now_s: float) -> None:
        """``name`` subscribed (a refused attempt spends nothing)."""
        self._bucket(name, now_s).take(1, now_s)

    def admit(self, name: str, now_s: float) -> bool:
        """:meth:`allows`, spending when it does."""
        if not self.allows(name, now_s):
            return False
        self.spend(name, now_s)
        return True


class TopicRates:
    """A topic's rates in force: its dispatch rate (for all its
    subscriptions together; persistent topics only), publish rate (per
    second) and subscribe rate. A rate whose policy changes starts a new
    bucket; an unchanged one keeps its tokens."""

    def __init__(self, persistent: bool) -> None:
        self.persistent = persistent
        self.dispatch: Throttle | None = None
        self.publish: Throttle | None = None
        self.subscribe: SubscribeLimiter | None = None

    def update(self, before: AppliedPolicies | None, after: AppliedPolicies, now_s: float) -> None:
        if before is None or before.dispatch_rate != after.dispatch_rate:
            d = after.dispatch_rate
            unlimited = d.unlimited or not self.persistent
            self.dispatch = None if unlimited else Throttle(d.msgs, d.bytes, d.period_s, now_s)
        if before is None or before.publish_rate != after.publish_rate:
            p = after.publish_rate
            self.publish = None if p.unlimited else Throttle(p.msgs, p.bytes, 1.0, now_s)
        if (
            before is None
            or before.subscribe_rate != after.subscribe_rate
            or before.max_consumers_per_topic != after.max_consumers_per_topic
        ):
            r = after.subscribe_rate
            self.subscribe = (
                None
                if r.unlimited
                else SubscribeLimiter(r.per_consumer, r.period_s, after.max_consumers_per_topic)
            )
