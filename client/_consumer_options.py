"""A consumer's options (the Pulsar Python client's names and defaults), their
validation, and the ``Subscribe`` request they become.

``ConsumerOptions.validate`` runs one check per concept (chunking,
redelivery, batch receive, regex subscriptions, the subscription itself,
acknowledgement grouping), in that order; the first bad option raises
``InvalidConfiguration`` naming it, its value and what is allowed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from client._factory_options import check_properties
from client._schema_use import check_schema, schema_data
from client.enums import (
    ConsumerType,
    InitialPosition,
    KeySharedMode,
    RegexSubscriptionMode,
    SubscriptionMode,
)
from client.exceptions import InvalidConfiguration
from client.policies import (
    ConsumerBatchReceivePolicy,
    ConsumerDeadLetterPolicy,
    ConsumerKeySharedPolicy,
    MultiplierRedeliveryBackoff,
)
from protos import broker_pb2, common_pb2
from protos.entry import key_values
from protos.message_id import MessageId, id_data

# Pulsar's ack grouping defaults (the C++ client's ackGroupingTimeMs and
# ackGroupingMaxSize; Java's acknowledgmentGroupTime and maxAcknowledgmentGroupSize).
DEFAULT_ACK_GROUPING_TIME_MS = 100
DEFAULT_ACK_GROUPING_MAX_SIZE = 1000


@dataclass
class ConsumerOptions:
    consumer_type: ConsumerType = ConsumerType.Exclusive
    receiver_queue_size: int = 1000
    consumer_name: str | None = None
    initial_position: InitialPosition = InitialPosition.Latest
    subscription_mode: SubscriptionMode = SubscriptionMode.Durable
    priority_level: int = 0
    key_shared_policy: ConsumerKeySharedPolicy | None = None
    # Readers: where to start (None = initial_position).
    start_message_id: MessageId | None = None
    start_message_id_inclusive: bool = False
    # Regex subscriptions.
    pattern_auto_discovery_period: float = 60
    regex_subscription_mode: RegexSubscriptionMode = RegexSubscriptionMode.PersistentOnly
    # Client-side redelivery.
    negative_ack_redelivery_delay_ms: int = 60000
    negative_ack_redelivery_backoff: MultiplierRedeliveryBackoff | None = None
    unacked_messages_timeout_ms: int | None = None
    ack_timeout_tick_time_ms: int = 1000
    ack_timeout_redelivery_backoff: MultiplierRedeliveryBackoff | None = None
    dead_letter_policy: ConsumerDeadLetterPolicy | None = None
    batch_receive_policy: ConsumerBatchReceivePolicy | None = None
    batch_index_ack_enabled: bool = False
    # Chunked messages.
    max_pending_chunked_message: int = 10
    auto_ack_oldest_chunked_message_on_queue_full: bool = False
    expire_time_of_incomplete_chunked_message_ms: int = 60000
    # Acknowledgements are sent in groups: this long after the first one of
    # a group, or at once when this many are pending (the bound on them).
    ack_grouping_time_ms: int = DEFAULT_ACK_GROUPING_TIME_MS
    ack_grouping_max_size: int = DEFAULT_ACK_GROUPING_MAX_SIZE
    # Multi-topic and partitioned consumers: each topic's queue is at most
    # this divided by the number of topics.
    max_total_receiver_queue_size_across_partitions: int = 50000
    # The consumer's metadata (broker stats show it as ``metadata``).
    properties: dict[str, str] | None = None
    schema: Any = None
    is_read_compacted: bool = False

    def validate(self) -> None:
        for check in _CHECKS:
            check(self)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_chunking(o: ConsumerOptions) -> None:
    if o.max_pending_chunked_message < 1:
        raise InvalidConfiguration(
            f"max_pending_chunked_message is {o.max_pending_chunked_message}; it must be >= 1"
        )
    if o.expire_time_of_incomplete_chunked_message_ms < 1:
        raise InvalidConfiguration(
            "expire_time_of_incomplete_chunked_message_ms must be >= 1, not "
            f"{o.expire_time_of_incomplete_chunked_message_ms}"
        )


def _check_redelivery(o: ConsumerOptions) -> None:
    delay_ms = o.negative_ack_redelivery_delay_ms
    if not isinstance(delay_ms, int) or delay_ms < 0:
        raise InvalidConfiguration(
            f"negative_ack_redelivery_delay_ms is {delay_ms!r}; it must be an int >= 0"
        )
    for name in ("negative_ack_redelivery_backoff", "ack_timeout_redelivery_backoff"):
        value = getattr(o, name)
        if value is not None and not isinstance(value, MultiplierRedeliveryBackoff):
            raise InvalidConfiguration(f"{name} must be a MultiplierRedeliveryBackoff")
    timeout = o.unacked_messages_timeout_ms
    if timeout is not None and (not isinstance(timeout, int) or timeout < 1000):
        raise InvalidConfiguration(
            f"unacked_messages_timeout_ms is {timeout!r}; it must be >= 1000 (or None: off)"
        )
    if not isinstance(o.ack_timeout_tick_time_ms, int) or o.ack_timeout_tick_time_ms < 1:
        raise InvalidConfiguration(
            f"ack_timeout_tick_time_ms is {o.ack_timeout_tick_time_ms!r}; it must be >= 1"
        )
    if o.dead_letter_policy is not None and not isinstance(
        o.dead_letter_policy, ConsumerDeadLetterPolicy
    ):
        raise InvalidConfiguration("dead_letter_policy must be a ConsumerDeadLetterPolicy")


def _check_batch_receive(o: ConsumerOptions) -> None:
    if o.batch_receive_policy is not None and not isinstance(
        o.batch_receive_policy, ConsumerBatchReceivePolicy
    ):
        raise InvalidConfiguration("batch_receive_policy must be a ConsumerBatchReceivePolicy")


def _check_regex_subscription(o: ConsumerOptions) -> None:
    period = o.pattern_auto_discovery_period
    if not isinstance(period, int | float) or not (period > 0):
        raise InvalidConfiguration(
            f"pattern_auto_discovery_period is {period!r}; it must be a number of seconds > 0"
        )
    if not isinstance(o.regex_subscription_mode, RegexSubscriptionMode):
        raise InvalidConfiguration(
            f"regex_subscription_mode {o.regex_subscription_mode!r} is not a RegexSubscriptionMode"
        )


def _check_subscription(o: ConsumerOptions) -> None:
    if not isinstance(o.priority_level, int) or o.priority_level < 0:
        raise InvalidConfiguration(
            f"priority_level is {o.priority_level!r}; it must be an int >= 0 "
            "(0 = the highest priority)"
        )
    if not _is_int(o.receiver_queue_size) or o.receiver_queue_size < 0:
        raise InvalidConfiguration(
            f"receiver_queue_size is {o.receiver_queue_size!r}; it must be an int >= 0 "
            "(0: no prefetch, each receive asks for one message)"
        )
    total = o.max_total_receiver_queue_size_across_partitions
    if not _is_int(total) or total < 1:
        raise InvalidConfiguration(
            f"max_total_receiver_queue_size_across_partitions is {total!r}; it must be an int >= 1"
        )
    check_properties(o.properties)
    if not isinstance(o.consumer_type, ConsumerType):
        raise InvalidConfiguration(f"consumer_type {o.consumer_type!r} is not a ConsumerType")
    _check_key_shared_policy(o)
    if not isinstance(o.initial_position, InitialPosition):
        raise InvalidConfiguration(
            f"initial_position {o.initial_position!r} is not an InitialPosition"
        )


def _check_key_shared_policy(o: ConsumerOptions) -> None:
    if o.key_shared_policy is None:
        return
    if not isinstance(o.key_shared_policy, ConsumerKeySharedPolicy):
        raise InvalidConfiguration(
            f"key_shared_policy {o.key_shared_policy!r} is not a ConsumerKeySharedPolicy"
        )
    if o.consumer_type != ConsumerType.KeyShared:
        raise InvalidConfiguration(
            f"key_shared_policy is for ConsumerType.KeyShared, not {o.consumer_type.name}"
        )


def _check_schema(o: ConsumerOptions) -> None:
    check_schema(o.schema, producer=False)


def _check_read_compacted(o: ConsumerOptions) -> None:
    if o.is_read_compacted and o.consumer_type not in (
        ConsumerType.Exclusive,
        ConsumerType.Failover,
    ):
        raise InvalidConfiguration(
            "Read compacted can only be used with exclusive or failover persistent "
            f"subscriptions, not {o.consumer_type.name}"
        )


def _check_ack_grouping(o: ConsumerOptions) -> None:
    if not _is_int(o.ack_grouping_time_ms) or o.ack_grouping_time_ms < 0:
        raise InvalidConfiguration(
            f"ack_grouping_time_ms is {o.ack_grouping_time_ms!r}; it must be an int >= 0 "
            "(0: acks go out at the next turn of the event loop)"
        )
    if not _is_int(o.ack_grouping_max_size) or o.ack_grouping_max_size < 1:
        raise InvalidConfiguration(
            f"ack_grouping_max_size is {o.ack_grouping_max_size!r}; it must be an int >= 1"
        )


_CHECKS: tuple[Callable[[ConsumerOptions], None], ...] = (
    _check_chunking,
    _check_redelivery,
    _check_batch_receive,
    _check_regex_subscription,
    _check_subscription,
    _check_ack_grouping,
    _check_read_compacted,
    _check_schema,
)


# ---------------------------------------------------------------- on the wire

_SUB_TYPES = {
    ConsumerType.Exclusive: broker_pb2.EXCLUSIVE,
    ConsumerType.Shared: broker_pb2.SHARED,
    ConsumerType.Failover: broker_pb2.FAILOVER,
    ConsumerType.KeyShared: broker_pb2.KEY_SHARED,
}


def id_data_of(mid: MessageId | None) -> common_pb2.MessageIdData | None:
    if mid is None:
        return None
    return id_data(mid.ledger_id(), mid.entry_id(), mid.partition(), mid.batch_index())


def _key_shared_meta(policy: ConsumerKeySharedPolicy | None) -> broker_pb2.KeySharedMeta:
    if policy is None:
        return broker_pb2.KeySharedMeta()
    ranges = policy.sticky_ranges
    return broker_pb2.KeySharedMeta(
        mode=(
            broker_pb2.STICKY
            if policy.key_shared_mode == KeySharedMode.Sticky
            else broker_pb2.AUTO_SPLIT
        ),
        allow_out_of_order_delivery=policy.allow_out_of_order_delivery,
        range_starts=[r[0] for r in ranges],
        range_ends=[r[1] for r in ranges],
    )


def subscribe_request(
    opts: ConsumerOptions,
    topic: str,
    subscription: str,
    consumer_name: str,
    start: MessageId | None,
    start_inclusive: bool,
) -> broker_pb2.ConsumerRequest:
    """The first request of a consumer stream: subscribe ``consumer_name`` with
    these options, from ``start`` (a reader's start, or where it resumes)."""
    return broker_pb2.ConsumerRequest(
        subscribe=broker_pb2.Subscribe(
            topic=topic,
            subscription=subscription,
            sub_type=_SUB_TYPES[opts.consumer_type],  # type: ignore[arg-type]
            initial_position=(
                broker_pb2.EARLIEST
                if opts.initial_position == InitialPosition.Earliest
                else broker_pb2.LATEST
            ),
            consumer_name=consumer_name,
            durable=opts.subscription_mode == SubscriptionMode.Durable,
            priority_level=opts.priority_level,
            start_message_id=id_data_of(start),
            start_message_id_inclusive=start_inclusive,
            key_shared=_key_shared_meta(opts.key_shared_policy),
            properties=key_values(opts.properties),
            schema=schema_data(opts.schema),
            read_compacted=bool(opts.is_read_compacted),
        )
    )
