"""Consumer options (client/_consumer_options.py): Pulsar's defaults, one
typed error per bad option, and the Subscribe request they become."""

from __future__ import annotations

import dataclasses

import pytest

from client import (
    ConsumerKeySharedPolicy,
    ConsumerType,
    InitialPosition,
    InvalidConfiguration,
    KeySharedMode,
    SubscriptionMode,
)
from client._consumer_options import ConsumerOptions, subscribe_request
from client._factory_options import CONSUMER_OPTIONS
from protos import broker_pb2
from protos.message_id import MessageId, id_fields

# The Pulsar client's defaults (C++ for the ack grouping, which Python does not expose).
DEFAULTS = {
    "consumer_type": ConsumerType.Exclusive,
    "receiver_queue_size": 1000,
    "initial_position": InitialPosition.Latest,
    "negative_ack_redelivery_delay_ms": 60000,
    "unacked_messages_timeout_ms": None,
    "ack_timeout_tick_time_ms": 1000,
    "max_pending_chunked_message": 10,
    "auto_ack_oldest_chunked_message_on_queue_full": False,
    "expire_time_of_incomplete_chunked_message_ms": 60000,
    "batch_index_ack_enabled": False,
    "ack_grouping_time_ms": 100,
    "ack_grouping_max_size": 1000,
}

# One bad option at a time -> the start of what InvalidConfiguration says.
BAD_OPTIONS = [
    ({"max_pending_chunked_message": 0}, "max_pending_chunked_message is 0; it must be >= 1"),
    (
        {"expire_time_of_incomplete_chunked_message_ms": 0},
        "expire_time_of_incomplete_chunked_message_ms must be >= 1, not 0",
    ),
    ({"negative_ack_redelivery_delay_ms": -1}, "negative_ack_redelivery_delay_ms is -1"),
    ({"negative_ack_redelivery_delay_ms": 1.5}, "negative_ack_redelivery_delay_ms is 1.5"),
    ({"negative_ack_redelivery_backoff": 5}, "negative_ack_redelivery_backoff must be a"),
    ({"ack_timeout_redelivery_backoff": 5}, "ack_timeout_redelivery_backoff must be a"),
    (
        {"unacked_messages_timeout_ms": 999},
        "unacked_messages_timeout_ms is 999; it must be >= 1000",
    ),
    ({"ack_timeout_tick_time_ms": 0}, "ack_timeout_tick_time_ms is 0; it must be >= 1"),
    ({"dead_letter_policy": "dlq"}, "dead_letter_policy must be a ConsumerDeadLetterPolicy"),
    ({"batch_receive_policy": 10}, "batch_receive_policy must be a ConsumerBatchReceivePolicy"),
    ({"pattern_auto_discovery_period": 0}, "pattern_auto_discovery_period is 0"),
    ({"regex_subscription_mode": "all"}, "regex_subscription_mode 'all' is not a"),
    ({"priority_level": -1}, "priority_level is -1; it must be an int >= 0"),
    ({"receiver_queue_size": -1}, "receiver_queue_size is -1; it must be an int >= 0"),
    ({"consumer_type": "Shared"}, "consumer_type 'Shared' is not a ConsumerType"),
    ({"key_shared_policy": "sticky"}, "key_shared_policy 'sticky' is not a"),
    (
        {"key_shared_policy": ConsumerKeySharedPolicy()},
        "key_shared_policy is for ConsumerType.KeyShared, not Exclusive",
    ),
    ({"initial_position": "earliest"}, "initial_position 'earliest' is not an InitialPosition"),
    ({"ack_grouping_time_ms": -1}, "ack_grouping_time_ms is -1; it must be an int >= 0"),
    ({"ack_grouping_time_ms": True}, "ack_grouping_time_ms is True"),
    ({"ack_grouping_max_size": 0}, "ack_grouping_max_size is 0; it must be an int >= 1"),
]


def test_defaults_are_pulsars():
    opts = ConsumerOptions()
    opts.validate()
    assert {name: getattr(opts, name) for name in DEFAULTS} == DEFAULTS


@pytest.mark.parametrize(("bad", "message"), BAD_OPTIONS, ids=lambda v: str(v)[:40])
def test_each_bad_option_is_named(bad: dict, message: str):
    with pytest.raises(InvalidConfiguration) as err:
        ConsumerOptions(**bad).validate()
    assert str(err.value).startswith(message)


def test_the_first_bad_option_in_concept_order_is_reported():
    bad = ConsumerOptions(receiver_queue_size=0, max_pending_chunked_message=0)
    with pytest.raises(InvalidConfiguration, match="max_pending_chunked_message"):
        bad.validate()


def test_every_option_but_the_readers_start_id_is_accepted_by_subscribe():
    fields = {f.name for f in dataclasses.fields(ConsumerOptions)}
    assert fields - {"start_message_id"} <= CONSUMER_OPTIONS


def test_the_subscribe_request_carries_the_options():
    opts = ConsumerOptions(
        consumer_type=ConsumerType.KeyShared,
        initial_position=InitialPosition.Earliest,
        subscription_mode=SubscriptionMode.NonDurable,
        priority_level=2,
        key_shared_policy=ConsumerKeySharedPolicy(
            KeySharedMode.Sticky, allow_out_of_order_delivery=True, sticky_ranges=[(0, 99)]
        ),
    )
    opts.validate()
    req = subscribe_request(
        opts, "t", "s", "c", MessageId(ledger_id=4, entry_id=5, batch_index=2), True
    ).subscribe
    assert (req.topic, req.subscription, req.consumer_name) == ("t", "s", "c")
    assert req.sub_type == broker_pb2.KEY_SHARED and req.initial_position == broker_pb2.EARLIEST
    assert not req.durable and req.priority_level == 2
    assert id_fields(req.start_message_id) == (4, 5, -1, 2) and req.start_message_id_inclusive
    ks = req.key_shared
    assert ks.mode == broker_pb2.STICKY and ks.allow_out_of_order_delivery
    assert (list(ks.range_starts), list(ks.range_ends)) == ([0], [99])


def test_a_subscribe_without_a_start_has_none():
    req = subscribe_request(ConsumerOptions(), "t", "s", "", None, False).subscribe
    assert not req.HasField("start_message_id")
    assert req.sub_type == broker_pb2.EXCLUSIVE and req.durable
    assert req.initial_position == broker_pb2.LATEST
