"""Topic statistics with Pulsar's field names (``admin.topics.stats``).

Rates come from :class:`broker.meter.Meter` (sliding window). Backlogs count entries, as Pulsar's
``msgBacklog`` does.
"""

from __future__ import annotations

from typing import Any

from broker.dispatcher import KeySharedDispatcher, NonPersistentDispatcher
from broker.topic import SUB_TYPE_NAMES, Consumer, Subscription, Topic, TopicBase
from protos import broker_pb2

ACCESS_MODE_NAMES: dict[int, str] = {
    broker_pb2.ACCESS_SHARED: "Shared",
    broker_pb2.ACCESS_EXCLUSIVE: "Exclusive",
    broker_pb2.ACCESS_WAIT_FOR_EXCLUSIVE: "WaitForExclusive",
    broker_pb2.ACCESS_EXCLUSIVE_WITH_FENCING: "ExclusiveWithFencing",
}


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


def topic_stats(topic: TopicBase) -> dict[str, Any]:
    rate_in, thr_in = topic.meter_in.rates()
    rate_out, thr_out = topic.meter_out.rates()
    storage = 0
    if isinstance(topic, Topic):
        ledger = topic.ledger
        storage = sum(md.length for md in ledger.closed_ledgers.values())
        if ledger.writer is not None:
            storage += ledger.writer.length
    publishers = []
    for p in topic.producers.values():
        r, t = p.meter.rates()
        publishers.append(
            {
                "producerName": p.name,
                "producerId": p.id,
                "accessMode": ACCESS_MODE_NAMES.get(p.access_mode, str(p.access_mode)),
                "msgRateIn": r,
                "msgThroughputIn": t,
            }
        )
    subscriptions = {}
    backlog_entries = 0
    for name, sub in topic.subscriptions.items():
        consumers = []
        s_rate = s_thr = 0.0
        for c in sub.consumers:
            r, t = c.meter.rates()
            s_rate += r
            s_thr += t
            consumer = {
                "consumerName": c.name,
                "msgRateOut": r,
                "msgThroughputOut": t,
                "availablePermits": c.permits,
                "unackedMessages": c.unacked,
                "blockedConsumerOnUnackedMsgs": c.blocked,
                "redeliveryCount": c.redelivered,
                "priorityLevel": c.priority_level,
            }
            if isinstance(sub.dispatcher, KeySharedDispatcher):
                consumer.update(key_shared_consumer_stats(sub.dispatcher, c))
            consumers.append(consumer)
        backlog = subscription_backlog(sub)
        backlog_entries = max(backlog_entries, backlog)
        subscriptions[name] = {
            "type": SUB_TYPE_NAMES.get(sub.sub_type, str(sub.sub_type)),
            "msgBacklog": backlog,
            "unackedMessages": sub.unacked,
            "msgRateOut": s_rate,
            "msgThroughputOut": s_thr,
            "isDurable": sub.cursor.durable,
            "consumers": consumers,
        }
        if isinstance(sub.dispatcher, NonPersistentDispatcher):
            drop_rate, _ = sub.dispatcher.dropped.rates()
            subscriptions[name]["msgDropRate"] = drop_rate
            subscriptions[name]["msgDropCount"] = sub.dispatcher.dropped.msgs
    average = 0.0
    if isinstance(topic, Topic):
        ledger = topic.ledger
        entries = entries_between(topic, ledger.before_first(), ledger.last_confirmed)
        average = storage / entries if entries else 0
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
        "publishers": publishers,
        "subscriptions": subscriptions,
    }
