"""Topic statistics with Pulsar's field names (``admin.topics.stats``).

Rates come from :class:`broker.meter.Meter` (sliding window). Backlogs count entries, as Pulsar's
``msgBacklog`` does.
"""

from __future__ import annotations

from typing import Any

from broker.consumer import Consumer
from broker.errors import BrokerError
from broker.key_shared import SLOT_MAX, slot_of
from broker.key_shared_dispatcher import KeySharedDispatcher
from broker.non_persistent_dispatcher import NonPersistentDispatcher
from broker.subscription import Subscription
from broker.topic import Topic, TopicBase
from protos import common_pb2


def entries_between(topic: Topic, after: tuple[int, int], through: tuple[int, int]) -> int:
    """Stored entries in (after, through]."""
    ledger = topic.ledger
    total = 0
    for ledger_id in ledger.ledger_ids:
        last = ledger.last_entry_of(ledger_id)
        if last < 0:
            continue
        lo = 0
        if ledger_id < after[0]:
            continue
        if ledger_id == after[0]:
            lo = after[1] + 1
        hi = last
        if ledger_id > through[0]:
            break
        if ledger_id == through[0]:
            hi = min(hi, through[1])
        if hi >= lo:
            total += hi - lo + 1
    return total


def subscription_backlog(sub: Subscription) -> int:
    if not isinstance(sub.topic, Topic):
        return 0  # non-persistent: nothing is kept
    state = sub.cursor.state
    last = sub.topic.ledger.last_confirmed
    if last[1] < 0:
        return 0
    backlog = entries_between(sub.topic, state.mark_delete_position, last)
    for start, end in state.individually_deleted:
        backlog -= end[1] - start[1] + 1
    return max(0, backlog)


def key_shared_consumer_stats(dispatcher: KeySharedDispatcher, c: Consumer) -> dict[str, Any]:
    """Pulsar 4's Key_Shared consumer fields (hash slots 0..65535)."""
    draining = dispatcher.tracker.draining(c)
    ranges = dispatcher.selector.ranges().get(c, [])
    return {
        "keyHashRangeArrays": [[s, e] for s, e in ranges],
        "keyHashRanges": [f"[{s}, {e}]" for s, e in ranges],
        "drainingHashesCount": draining.count,
        "drainingHashesClearedTotal": draining.cleared_total,
        "drainingHashesUnackedMessages": draining.unacked,
        "drainingHashes": draining.hashes,
    }


def key_shared_lookup(
    dispatcher: KeySharedDispatcher, slot: int, key: str | None
) -> dict[str, Any]:
    """Which consumer a slot goes to, who holds it, and which unacknowledged
    message ids keep it from moving (the seed's "future improvement")."""
    chosen = dispatcher.selector.select(slot)
    holder = dispatcher.tracker.holder(slot)
    positions = dispatcher.blocking_positions(slot) if holder is not None else []
    return {
        "key": key,
        "hash": slot,
        "consumer": chosen.name if chosen is not None else None,
        "holder": holder.name if holder is not None else None,
        "draining": holder is not None and holder is not chosen,
        "unackedMessageIds": [f"{ledger}:{entry}" for ledger, entry in positions],
        "waitingForDelivery": sum(1 for s, _ in dispatcher.replay.values() if s == slot),
    }


def key_shared_lookup_of(
    topic: TopicBase, subscription: str, key: str | None, slot: int | None
) -> dict[str, Any]:
    """:func:`key_shared_lookup` for a subscription named by the caller, by
    key or by hash slot (exactly one)."""
    sub = topic.subscriptions.get(subscription)
    if sub is None:
        raise BrokerError(
            f"subscription {subscription!r} does not exist on {topic.name}",
            common_pb2.SUBSCRIPTION_NOT_FOUND,
        )
    if not isinstance(sub.dispatcher, KeySharedDispatcher):
        raise BrokerError(
            f"subscription {sub.name!r} is {sub.sub_type.display}, not Key_Shared",
            common_pb2.NOT_ALLOWED,
        )
    if (key is None) == (slot is None):
        raise BrokerError("give a key or a hash", common_pb2.INVALID_ARGUMENT)
    if key is not None:
        slot = slot_of(key)
    assert slot is not None
    if not 0 <= slot <= SLOT_MAX:
        raise BrokerError(f"hash {slot} is outside 0..{SLOT_MAX}", common_pb2.INVALID_ARGUMENT)
    return key_shared_lookup(sub.dispatcher, slot, key)


def _publisher_stats(topic: TopicBase) -> list[dict[str, Any]]:
    out = []
    for p in topic.producers.values():
        r, t = p.meter.rates()
        out.append(
            {
                "producerName": p.name,
                "producerId": p.id,
                "accessMode": p.access_mode.display,
                "msgRateIn": r,
                "msgThroughputIn": t,
            }
        )
    return out


def _consumer_stats(sub: Subscription, c: Consumer) -> dict[str, Any]:
    r, t = c.meter.rates()
    consumer = {
        "consumerName": c.name,
        "msgRateOut": r,
        "msgThroughputOut": t,
        "availablePermits": c.permits,
        "unackedMessages": sub.pending.unacked(c),
        "blockedConsumerOnUnackedMsgs": sub.pending.is_blocked(c),
        "redeliveryCount": sub.pending.redelivered(c),
        "priorityLevel": c.priority_level,
    }
    if isinstance(sub.dispatcher, KeySharedDispatcher):
        consumer.update(key_shared_consumer_stats(sub.dispatcher, c))
    return consumer


def _subscription_stats(sub: Subscription) -> dict[str, Any]:
    consumers = [_consumer_stats(sub, c) for c in sub.consumers]
    out = {
        "type": sub.sub_type.display,
        "msgBacklog": subscription_backlog(sub),
        "unackedMessages": sub.unacked,
        "msgRateOut": sum(c["msgRateOut"] for c in consumers),
        "msgThroughputOut": sum(c["msgThroughputOut"] for c in consumers),
        "isDurable": sub.cursor.durable,
        "consumers": consumers,
    }
    if isinstance(sub.dispatcher, NonPersistentDispatcher):
        drop_rate, _ = sub.dispatcher.dropped.rates()
        out["msgDropRate"] = drop_rate
        out["msgDropCount"] = sub.dispatcher.dropped.msgs
    return out


def _storage(topic: TopicBase) -> tuple[int, float]:
    """(bytes stored, average entry size) of a topic."""
    if not isinstance(topic, Topic):
        return 0, 0.0
    ledger = topic.ledger
    storage = sum(md.length for md in ledger.closed_ledgers.values())
    if ledger.writer is not None:
        storage += ledger.writer.length
    entries = entries_between(topic, ledger.before_first(), ledger.last_confirmed)
    return storage, storage / entries if entries else 0.0


def topic_stats(topic: TopicBase) -> dict[str, Any]:
    rate_in, thr_in = topic.meter_in.rates()
    rate_out, thr_out = topic.meter_out.rates()
    subscriptions = {name: _subscription_stats(sub) for name, sub in topic.subscriptions.items()}
    backlog_entries = max((s["msgBacklog"] for s in subscriptions.values()), default=0)
    storage, average = _storage(topic)
    return {
        "msgRateIn": rate_in,
        "msgRateOut": rate_out,
        "msgThroughputIn": thr_in,
        "msgThroughputOut": thr_out,
        "msgInCounter": topic.meter_in.msgs,
        "bytesInCounter": topic.meter_in.bytes,
        "msgOutCounter": topic.meter_out.msgs,
        "bytesOutCounter": topic.meter_out.bytes,
        "storageSize": storage,
        "backlogSize": int(backlog_entries * average),
        "publishers": _publisher_stats(topic),
        "subscriptions": subscriptions,
    }
