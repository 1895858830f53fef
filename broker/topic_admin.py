"""The admin verbs that move or read a subscription's cursor on the broker
serving its topic: ``reset-cursor``, ``skip``, ``peek-messages`` (pulsar-admin's
names). The administration forwards them to the topic's owner.

``peek-messages`` answers stored entries as they are (base64), from the
first one the subscription has not acknowledged: the broker never unpacks
or decompresses a batch, so the admin client does (as pulsar-admin unpacks
what Pulsar's REST API answers). ``skip`` acknowledges whole entries only,
never more messages than asked. ``reset-cursor`` moves the mark-delete
position (to a message id, or to the first message published at or after
a time) and disconnects the subscription's consumers, which reconnect and
receive from there, as Pulsar does.
"""

from __future__ import annotations

import base64
from typing import Any

from broker.dispatcher import entry_facts
from broker.errors import BrokerError
from broker.subscription import Subscription
from broker.topic import Topic, TopicBase
from broker.topics import TopicRegistry
from protos import common_pb2
from protos.message_id import MessageId
from protos.topic_name import TopicName

Position = tuple[int, int]

# The most entries one peek or skip reads.
MAX_PEEK = 1000
MAX_SKIP_READ = 1000


def _count(value: Any, what: str, lowest: int, highest: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lowest <= value <= highest:
        raise BrokerError(
            f"{what} = {value!r} is not a whole number from {lowest} to {highest}",
            common_pb2.INVALID_ARGUMENT,
        )
    return value


def persistent(found: TopicBase) -> Topic:
    """``found`` as a persistent topic; NOT_ALLOWED for a non-persistent one."""
    if not isinstance(found, Topic):
        raise BrokerError(
            f"{found.name} is non-persistent: it keeps no cursor or ledger", common_pb2.NOT_ALLOWED
        )
    return found


def subscription_of(found: TopicBase, subscription: str) -> Subscription:
    """A subscription of ``found``; NOT_FOUND naming it when there is none."""
    sub = found.subscriptions.get(subscription)
    if sub is None:
        raise BrokerError(
            f"subscription {subscription!r} does not exist on {found.name}", common_pb2.NOT_FOUND
        )
    return sub


class TopicAdministration:
    def __init__(self, topics: TopicRegistry) -> None:
        self.topics = topics

    async def _subscription(self, topic: str, subscription: str) -> tuple[Topic, Subscription]:
        found = persistent(await self.topics.existing_topic(TopicName.parse(topic)))
        return found, subscription_of(found, subscription)

    async def _unacked(
        self, topic: Topic, sub: Subscription, most: int
    ) -> list[tuple[Position, bytes]]:
        """Up to ``most`` stored entries ``sub`` has not acknowledged, oldest first."""
        ledger = topic.ledger
        out: list[tuple[Position, bytes]] = []
        pos = ledger.next_position(sub.cursor.state.mark_delete_position)
        while len(out) < most and ledger.has_entry(ledger.normalize(pos)):
            got = await ledger.read_entries(
                pos, most - len(out), topic.settings.dispatcher_max_read_size_bytes
            )
            if not got:
                break
            out.extend((p, data) for p, data in got if not sub.cursor.is_acked(p))
            pos = ledger.next_position(got[-1][0])
        return out[:most]

    async def stats_internal(self, topic: str) -> dict[str, Any]:
        return internal_stats(persistent(await self.topics.existing_topic(TopicName.parse(topic))))

    async def peek_messages(self, topic: str, subscription: str, count: Any = 1) -> dict[str, Any]:
        n = _count(count, "count", 1, MAX_PEEK)
        found, sub = await self._subscription(topic, subscription)
        entries = await self._unacked(found, sub, n)
        return {
            "topic": found.name.full_name,
            "partition": found.name.partition_index,
            "entries": [
                {"ledgerId": p[0], "entryId": p[1], "entry": base64.b64encode(data).decode()}
                for p, data in entries
            ],
        }

    async def skip(self, topic: str, subscription: str, count: Any) -> dict[str, Any]:
        """Acknowledge the oldest unacknowledged entries holding at most
        ``count`` messages in all."""
        n = _count(count, "count", 1, 1 << 31)
        found, sub = await self._subscription(topic, subscription)
        skipped_entries: list[Position] = []
        messages = 0
        for pos, data in await self._unacked(found, sub, min(n, MAX_SKIP_READ)):
            size = entry_facts(data).messages
            if messages + size > n:
                break
            skipped_entries.append(pos)
            messages += size
        if skipped_entries:
            sub.ack(skipped_entries, False)
        return {"topic": found.name.full_name, "subscription": subscription, "skipped": messages}

    async def reset_cursor(
        self,
        topic: str,
        subscription: str,
        timestamp_ms: Any = None,
        message_id: Any = None,
        exclude: Any = False,
    ) -> dict[str, Any]:
        """Move ``subscription`` to a message id (``"ledger:entry"``; with
        ``exclude`` to just after it) or to the first message published at or
        after ``timestamp_ms``."""
        if (timestamp_ms is None) == (message_id is None):
            raise BrokerError(
                "reset-cursor takes a time or a message id, not both or neither",
                common_pb2.INVALID_ARGUMENT,
            )
        found, sub = await self._subscription(topic, subscription)
        target: MessageId | int
        if message_id is not None:
            target = _message_id(message_id)
            if exclude is True:
                target = MessageId(ledger_id=target.ledger_id(), entry_id=target.entry_id() + 1)
        else:
            target = _count(timestamp_ms, "timestamp_ms", 0, 1 << 62)
        mark_delete = await found.seek_position(target, inclusive=True)
        sub.seek(mark_delete)
        for consumer in list(sub.consumers):
            consumer.close()  # they reconnect and receive from the new position
        return {
            "topic": found.name.full_name,
            "subscription": subscription,
            "markDeletePosition": f"{mark_delete[0]}:{mark_delete[1]}",
        }


def _at(pos: Position) -> str:
    return f"{pos[0]}:{pos[1]}"


def internal_stats(topic: Topic) -> dict[str, Any]:
    """The managed ledger view (Pulsar's ``stats-internal``): its ledgers and
    its cursors with their positions and individually acknowledged ranges."""
    ledger = topic.ledger
    ledgers = []
    for ledger_id in ledger.ledger_ids:
        closed = ledger.closed_ledgers.get(ledger_id)
        writer = (
            ledger.writer
            if ledger.writer is not None and ledger.writer.ledger_id == ledger_id
            else None
        )
        size = closed.length if closed is not None else writer.length if writer is not None else 0
        ledgers.append(
            {
                "ledgerId": ledger_id,
                "entries": ledger.last_entry_of(ledger_id) + 1,
                "size": size,
                "offloaded": False,
                "underReplicated": False,
            }
        )
    writer = ledger.writer
    cursors = {}
    for name, sub in topic.subscriptions.items():
        state = sub.cursor.state
        ranges = ",".join(
            f"({_at(ledger.before(s))}..{_at(e)}]" for s, e in state.individually_deleted
        )
        cursors[name] = {
            "markDeletePosition": _at(state.mark_delete_position),
            "readPosition": _at(sub.cursor.read_position),
            "individuallyDeletedMessages": f"[{ranges}]",
            "totalNonContiguousDeletedMessagesRange": len(state.individually_deleted),
            "durable": sub.cursor.durable,
            "active": bool(sub.consumers),
            "state": "Open",
        }
    return {
        "entriesAddedCounter": ledger.entries_added,
        "numberOfEntries": sum(entry["entries"] for entry in ledgers),
        "totalSize": sum(entry["size"] for entry in ledgers),
        "currentLedgerEntries": writer.lac + 1 if writer is not None else 0,
        "currentLedgerSize": writer.length if writer is not None else 0,
        "lastConfirmedEntry": _at(ledger.last_confirmed),
        "state": "LedgerOpened" if writer is not None else "ClosedLedger",
        "ledgers": ledgers,
        "cursors": cursors,
    }


def _message_id(text: Any) -> MessageId:
    try:
        ledger, entry = (int(part) for part in str(text).split(":"))
    except ValueError:
        raise BrokerError(
            f"message id {text!r} is not ledgerId:entryId", common_pb2.INVALID_ARGUMENT
        ) from None
    if ledger < 0 or entry < 0:
        raise BrokerError(f"message id {text!r} is negative", common_pb2.INVALID_ARGUMENT)
    return MessageId(ledger_id=ledger, entry_id=entry)
