"""Topic statistics with Pulsar's field names (``admin.topics.stats``) and
the figures the Prometheus exporter shows (:func:`topic_figures`): both read
the same meters and the same backlog, so they agree.

Rates come from :class:`broker.meter.Meter` (a sliding window of
``stats_update_frequency_in_secs``). Backlogs count messages (a batch entry
holds many; :mod:`broker.message_counts`): everything after the
mark-delete position up to the last stored entry, less what is
acknowledged individually and, with batch-index acknowledgement, the
acknowledged messages of batches. ``backlogSize`` (bytes) is the largest
subscription backlog in entries times the topic's average entry size.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from broker.consumer import Consumer
from broker.errors import BrokerError
from broker.key_shared import SLOT_MAX, slot_of
from broker.key_shared_dispatcher import KeySharedDispatcher
from broker.meter import Shown
from broker.non_persistent_dispatcher import NonPersistentDispatcher
from broker.policy_values import BacklogQuotaType
from broker.subscription import Subscription
from broker.topic import Topic, TopicBase
from protos import common_pb2

Position = tuple[int, int]


class Backlog(NamedTuple):  # a tuple: made for every subscription at every scrape
    entries: int = 0
    messages: int = 0


def backlog_between(topic: Topic, after: Position, through: Position) -> Backlog:
    """Stored entries (and their messages) in (after, through]."""
    ledger = topic.ledger
    counts = ledger.message_counts
    entries = messages = 0
    for ledger_id in ledger.ledger_ids:
        if ledger_id < after[0]:
            continue
        if ledger_id > through[0]:
            break
        lo = after[1] + 1 if ledger_id == after[0] else 0
        hi = ledger.last_entry_of(ledger_id)
        if ledger_id == through[0]:
            hi = min(hi, through[1])
        if hi >= lo:
            entries += hi - lo + 1
            messages += counts.messages(ledger_id, lo, hi)
    return Backlog(entries, messages)


def subscription_backlog(sub: Subscription) -> Backlog:
    """What ``sub`` has not acknowledged (module docstring)."""
    if not isinstance(sub.topic, Topic):
        return Backlog()  # non-persistent: nothing is kept
    topic = sub.topic
    state = sub.cursor.state
    last = topic.ledger.last_confirmed
    if last[1] < 0:
        return Backlog()
    backlog = backlog_between(topic, state.mark_delete_position, last)
    if not len(state.individually_deleted) and not state.batch_acked:
        return backlog  # (iterating even an empty sorted dict costs microseconds)
    counts = topic.ledger.message_counts
    entries = messages = 0
    for start, end in state.individually_deleted:
        entries += end[1] - start[1] + 1
        messages += counts.messages(start[0], start[1], end[1])
    for mask in state.batch_acked.values():
        messages += mask.bit_count()
    return Backlog(max(0, backlog.entries - entries), max(0, backlog.messages - messages))


def delayed_messages(sub: Subscription) -> int:
    """Messages held back until their deliver-at time."""
    delayed = sub.dispatcher.delayed
    return delayed.messages if delayed is not None else 0


def storage_of(topic: TopicBase) -> tuple[int, int]:
    """(bytes stored, entries stored) of a topic, without replicas."""
    if not isinstance(topic, Topic):
        return 0, 0
    ledger = topic.ledger
    storage = sum(md.length for md in ledger.closed_ledgers.values())
    if ledger.writer is not None:
        storage += ledger.writer.length
    entries = sum(ledger.last_entry_of(i) + 1 for i in ledger.ledger_ids)
    return storage, entries


@dataclass(slots=True)
class SubscriptionFigures:
    """One subscription's figures (rates per second over the stats window)."""

    type: str | None  # None: no consumer since the subscription was loaded
    durable: bool
    backlog: Backlog
    delayed: int
    unacked: int
    blocked: bool
    consumers: int
    rate_out: float
    throughput_out: float
    rate_redeliver: float
    rate_ack: float
    msgs_out: int
    bytes_out: int


def subscription_figures(sub: Subscription) -> SubscriptionFigures:
    m = sub.metrics
    rate_out, throughput_out = m.out.rates()
    return SubscriptionFigures(
        type=sub.sub_type.display if sub.type_known else None,
        durable=sub.cursor.durable,
        backlog=subscription_backlog(sub),
        delayed=delayed_messages(sub),
        unacked=sub.unacked,
        blocked=sub.pending.subscription_blocked,
        consumers=len(sub.consumers),
        rate_out=rate_out,
        throughput_out=throughput_out,
        rate_redeliver=m.redelivered.rates()[0],
        rate_ack=m.acked.rates()[0],
        msgs_out=m.out.msgs,
        bytes_out=m.out.bytes,
    )


@dataclass(slots=True)
class TopicFigures:
    """One topic's figures; ``subscriptions`` by name."""

    producers: int
    consumers: int
    rate_in: float
    throughput_in: float
    rate_out: float
    throughput_out: float
    msgs_in: int
    bytes_in: int
    msgs_out: int
    bytes_out: int
    storage: int  # bytes, without replicas
    write_quorum: int
    backlog_messages: int  # summed over subscriptions
    backlog_bytes: int  # the largest subscription backlog, estimated in bytes
    quota_limit_bytes: int  # the destination_storage backlog quota (-1: none)
    quota_limit_s: int  # the message_age backlog quota (-1: none)
    publish_throttled: int  # publishes the publish rate made wait
    average_entry_bytes: float  # of what is stored
    delayed: int
    write_rate: float  # entries/s stored
    write_bytes_rate: float
    read_rate: float  # entries/s read back
    read_bytes_rate: float
    # The last complete stats interval: Pulsar's bands and the failed adds.
    write_latency: Shown
    entry_size: Shown
    add_errors: int
    subscriptions: dict[str, SubscriptionFigures] = field(default_factory=dict)


def _quota_limit(topic: TopicBase, kind: BacklogQuotaType) -> int:
    quota = topic.policies.backlog_quota(kind)
    if quota is None:
        return -1
    return (
        quota.limit_size_bytes
        if kind is BacklogQuotaType.DESTINATION_STORAGE
        else quota.limit_time_s
    )


def topic_figures(topic: TopicBase) -> TopicFigures:
    m = topic.metrics
    subs = {name: subscription_figures(sub) for name, sub in topic.subscriptions.items()}
    rate_in, throughput_in = m.meter_in.rates()
    rate_out, throughput_out = m.meter_out.rates()
    storage, entries = storage_of(topic)
    write_rate, write_bytes_rate = m.writes.rates()
    read_rate, read_bytes_rate = m.reads.rates()
    average = storage / entries if entries else 0.0
    consumers = widest = backlog = delayed = 0
    for f in subs.values():
        consumers += f.consumers
        widest = max(widest, f.backlog.entries)
        backlog += f.backlog.messages
        delayed += f.delayed
    return TopicFigures(
        producers=len(topic.producers),
        consumers=consumers,
        rate_in=rate_in,
        throughput_in=throughput_in,
        rate_out=rate_out,
        throughput_out=throughput_out,
        msgs_in=m.meter_in.msgs,
        bytes_in=m.meter_in.bytes,
        msgs_out=m.meter_out.msgs,
        bytes_out=m.meter_out.bytes,
        storage=storage,
        write_quorum=topic.ledger.quorums[1] if isinstance(topic, Topic) else 0,
        backlog_messages=backlog,
        backlog_bytes=int(widest * average),
        quota_limit_bytes=_quota_limit(topic, BacklogQuotaType.DESTINATION_STORAGE),
        quota_limit_s=_quota_limit(topic, BacklogQuotaType.MESSAGE_AGE),
        publish_throttled=m.publish_throttled,
        average_entry_bytes=average,
        delayed=delayed,
        write_rate=write_rate,
        write_bytes_rate=write_bytes_rate,
        read_rate=read_rate,
        read_bytes_rate=read_bytes_rate,
        write_latency=m.write_latency.shown(),
        entry_size=m.entry_size.shown(),
        add_errors=m.add_errors_shown,
        subscriptions=subs,
    )


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
                "metadata": dict(p.metadata),
            }
        )
    return out


def _consumer_stats(sub: Subscription, c: Consumer) -> dict[str, Any]:
    r, t = c.meter.rates()
    consumer = {
        "consumerName": c.name,
        "msgRateOut": r,
        "msgThroughputOut": t,
        "bytesOutCounter": c.meter.bytes,
        "msgOutCounter": c.meter.msgs,
        "availablePermits": c.permits,
        "unackedMessages": sub.pending.unacked(c),
        "blockedConsumerOnUnackedMsgs": sub.pending.is_blocked(c),
        "redeliveryCount": sub.pending.redelivered(c),
        "priorityLevel": c.priority_level,
        "metadata": dict(c.metadata),
    }
    if isinstance(sub.dispatcher, KeySharedDispatcher):
        consumer.update(key_shared_consumer_stats(sub.dispatcher, c))
    return consumer


def _subscription_stats(sub: Subscription, f: SubscriptionFigures) -> dict[str, Any]:
    out = {
        "type": f.type,
        "msgBacklog": f.backlog.messages,
        "msgBacklogNoDelayed": max(0, f.backlog.messages - f.delayed),
        "msgDelayed": f.delayed,
        "unackedMessages": f.unacked,
        "blockedSubscriptionOnUnackedMsgs": f.blocked,
        "msgRateOut": f.rate_out,
        "msgThroughputOut": f.throughput_out,
        "msgRateRedeliver": f.rate_redeliver,
        "messageAckRate": f.rate_ack,
        "bytesOutCounter": f.bytes_out,
        "msgOutCounter": f.msgs_out,
        "isDurable": f.durable,
        "msgRateExpired": sub.metrics.expired.rates()[0],
        "totalMsgExpired": sub.metrics.expired.msgs,
        "lastExpireTimestamp": sub.last_expire_ms,
        "consumers": [_consumer_stats(sub, c) for c in sub.consumers],
    }
    if isinstance(sub.dispatcher, NonPersistentDispatcher):
        drop_rate, _ = sub.dispatcher.dropped.rates()
        out["msgDropRate"] = drop_rate
        out["msgDropCount"] = sub.dispatcher.dropped.msgs
    return out


_SUMMED_SUBSCRIPTION_FIELDS = (
    "msgBacklog",
    "msgBacklogNoDelayed",
    "msgDelayed",
    "unackedMessages",
    "msgRateOut",
    "msgThroughputOut",
    "msgRateRedeliver",
    "messageAckRate",
    "bytesOutCounter",
    "msgOutCounter",
    "msgRateExpired",
    "totalMsgExpired",
)


def sum_stats(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Partitioned stats: the numbers of every partition's stats added up,
    publishers listed together, subscriptions merged by name (Pulsar's
    ``partitioned-stats``)."""
    total: dict[str, Any] = {"publishers": [], "subscriptions": {}}
    for part in parts:
        for key, value in part.items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                total[key] = total.get(key, 0) + value
        total["publishers"].extend(part.get("publishers", []))
        for name, sub in part.get("subscriptions", {}).items():
            merged = total["subscriptions"].setdefault(
                name, {"type": sub.get("type"), "isDurable": sub.get("isDurable"), "consumers": []}
            )
            merged["type"] = merged["type"] or sub.get("type")
            for key in _SUMMED_SUBSCRIPTION_FIELDS:
                merged[key] = merged.get(key, 0) + sub.get(key, 0)
            merged["consumers"].extend(sub.get("consumers", []))
    in_rate = total.get("msgRateIn", 0)
    total["averageMsgSize"] = total.get("msgThroughputIn", 0) / in_rate if in_rate else 0.0
    return total


def topic_stats(topic: TopicBase) -> dict[str, Any]:
    f = topic_figures(topic)
    return {
        "msgRateIn": f.rate_in,
        "msgRateOut": f.rate_out,
        "msgThroughputIn": f.throughput_in,
        "msgThroughputOut": f.throughput_out,
        "msgInCounter": f.msgs_in,
        "bytesInCounter": f.bytes_in,
        "msgOutCounter": f.msgs_out,
        "bytesOutCounter": f.bytes_out,
        "averageMsgSize": f.throughput_in / f.rate_in if f.rate_in else 0.0,
        "storageSize": f.storage,
        "backlogSize": f.backlog_bytes,
        "backlogQuotaLimitSize": f.quota_limit_bytes,
        "backlogQuotaLimitTime": f.quota_limit_s,
        "publishers": _publisher_stats(topic),
        "subscriptions": {
            name: _subscription_stats(sub, f.subscriptions[name])
            for name, sub in topic.subscriptions.items()
        },
    }
