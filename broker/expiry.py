"""Message expiry: unacknowledged messages older than a subscription's TTL
are acknowledged (Pulsar's message TTL and ``expire-messages``).

Theory of operation. Expiry moves a subscription's mark-delete position up
to the last entry published before ``now - age``, found by the binary
search over publish times that seek by time uses
(:func:`broker.publish_time.find_by_publish_time`, which takes publish
times as growing with the position). It is a cumulative acknowledgement
made by the broker: what consumers held up to there is released, the
cursor persists as after any acknowledgement, and ledgers that every
cursor has now passed are trimmed — unless retention still keeps them, as
for any acknowledged data. Nothing is deleted by expiry itself. A
subscription with nothing to expire costs one comparison; only durable
subscriptions expire (a reader acknowledges nothing).
"""

from __future__ import annotations

import logging
import time

from broker.publish_time import find_by_publish_time
from broker.stats import subscription_backlog
from broker.subscription import Subscription
from broker.topic import Topic

log = logging.getLogger(__name__)


async def expire_subscription(topic: Topic, sub: Subscription, age_s: float) -> int:
    """Acknowledge ``sub``'s messages published more than ``age_s`` seconds
    ago; the number of messages expired."""
    if not sub.cursor.durable:
        return 0
    ledger = topic.ledger
    mark_delete = sub.cursor.state.mark_delete_position
    if ledger.last_confirmed[1] < 0 or mark_delete >= ledger.last_confirmed:
        return 0
    now_ms = int(time.time() * 1000)
    first_kept = await find_by_publish_time(ledger, now_ms - int(age_s * 1000))
    up_to = ledger.before(first_kept)
    if up_to <= sub.cursor.state.mark_delete_position:
        return 0
    before = subscription_backlog(sub).messages
    sub.expire_through(up_to)
    expired = max(0, before - subscription_backlog(sub).messages)
    sub.metrics.expired.add(expired, 0)
    sub.last_expire_ms = now_ms
    return expired


async def expire_topic(topic: Topic, age_s: float) -> int:
    """Expire every durable subscription of ``topic``; the messages expired."""
    total = 0
    for sub in list(topic.subscriptions.values()):
        total += await expire_subscription(topic, sub, age_s)
    return total
