"""Producer options (client/_producer_options.py): Pulsar's defaults and one
typed error per bad option, in the documented order."""

from __future__ import annotations

import pytest

from client import InvalidConfiguration, PartitionsRoutingMode
from client._producer_options import ProducerOptions

DEFAULTS = {
    "send_timeout_millis": 30000,
    "max_pending_messages": 1000,
    "block_if_queue_full": False,
    "batching_max_messages": 1000,
    "batching_max_allowed_size_in_bytes": 131072,
    "batching_max_publish_delay_ms": 10,
    "chunking_enabled": False,
    "message_routing_mode": PartitionsRoutingMode.RoundRobinDistribution,
}

# One bad option at a time -> (the error, the start of its message).
BAD_OPTIONS = [
    ({"chunking_enabled": True}, ValueError, "chunking_enabled with batching_enabled=True"),
    ({"compression_type": "lz4"}, InvalidConfiguration, "compression_type 'lz4' is not a"),
    ({"message_router": 3}, InvalidConfiguration, "message_router must be callable"),
    ({"message_routing_mode": 1}, InvalidConfiguration, "message_routing_mode 1 is not a"),
    (
        {"message_routing_mode": PartitionsRoutingMode.CustomPartition},
        InvalidConfiguration,
        "CustomPartition routing needs a message_router",
    ),
    ({"hashing_scheme": "murmur"}, InvalidConfiguration, "hashing_scheme 'murmur' is not a"),
    ({"batching_type": 0}, InvalidConfiguration, "batching_type 0 is not a BatchingType"),
    ({"max_pending_messages": 0}, InvalidConfiguration, "max_pending_messages is 0; it must"),
    ({"batching_max_messages": 0}, InvalidConfiguration, "batching_max_messages is 0; it must"),
    ({"access_mode": "Shared"}, InvalidConfiguration, "access_mode 'Shared' is not a"),
    ({"send_timeout_millis": -1}, InvalidConfiguration, "send_timeout_millis is -1; use 0"),
]


def test_defaults_are_pulsars_and_valid():
    opts = ProducerOptions()
    opts.validate()
    assert {name: getattr(opts, name) for name in DEFAULTS} == DEFAULTS


@pytest.mark.parametrize(("bad", "error", "message"), BAD_OPTIONS, ids=lambda v: str(v)[:40])
def test_each_bad_option_is_named(bad: dict, error: type[Exception], message: str):
    with pytest.raises(error) as err:
        ProducerOptions(**bad).validate()
    assert str(err.value).startswith(message)


def test_a_message_router_makes_the_routing_custom():
    opts = ProducerOptions(message_router=lambda message, n: 0)
    opts.validate()
    assert opts.message_routing_mode == PartitionsRoutingMode.CustomPartition


def test_the_first_bad_option_in_concept_order_is_reported():
    with pytest.raises(InvalidConfiguration, match="compression_type"):
        ProducerOptions(compression_type="x", send_timeout_millis=-1).validate()  # type: ignore[arg-type]
