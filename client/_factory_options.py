"""The keyword options of ``create_producer``, ``subscribe``,
``create_reader`` and ``send``: which Magnetar honours, and which of the
official client's it refuses by name (never silently ignored).

An official option Magnetar does not implement (end-to-end encryption,
geo-replication, the C++ client's stats cache) is accepted at its default
value, which changes nothing, so code written for ``pulsar-client`` runs
unchanged; any other value raises ``InvalidConfiguration`` naming the option
and the feature. An option no client has raises naming it too.
"""

from __future__ import annotations

import datetime
import re
import time
from typing import Any

from client._schema_use import encode_value
from client.enums import ConsumerCryptoFailureAction
from client.exceptions import InvalidConfiguration, InvalidTopicName
from protos.errors import InvalidTopicNameError
from protos.topic_name import TopicName

PRODUCER_OPTIONS = {
    "producer_name",
    "schema",
    "initial_sequence_id",
    "send_timeout_millis",
    "max_pending_messages",
    "max_pending_messages_across_partitions",
    "block_if_queue_full",
    "batching_enabled",
    "batching_max_messages",
    "batching_max_allowed_size_in_bytes",
    "batching_max_publish_delay_ms",
    "access_mode",
    "batching_type",
    "compression_type",
    "chunking_enabled",
    "message_routing_mode",
    "message_router",
    "hashing_scheme",
    "properties",
}
CONSUMER_OPTIONS = {
    "consumer_type",
    "schema",
    "receiver_queue_size",
    "max_total_receiver_queue_size_across_partitions",
    "consumer_name",
    "initial_position",
    "subscription_mode",
    "priority_level",
    "key_shared_policy",
    "pattern_auto_discovery_period",
    "regex_subscription_mode",
    "is_pattern_topic",
    "negative_ack_redelivery_delay_ms",
    "negative_ack_redelivery_backoff",
    "unacked_messages_timeout_ms",
    "ack_timeout_tick_time_ms",
    "ack_timeout_redelivery_backoff",
    "dead_letter_policy",
    "batch_receive_policy",
    "message_listener",
    "retry_enable",
    "batch_index_ack_enabled",
    "max_pending_chunked_message",
    "auto_ack_oldest_chunked_message_on_queue_full",
    "expire_time_of_incomplete_chunked_message_ms",
    "ack_grouping_time_ms",
    "ack_grouping_max_size",
    "properties",
    "start_message_id_inclusive",
    "is_read_compacted",
}
READER_OPTIONS = {
    "schema",
    "reader_listener",
    "receiver_queue_size",
    "reader_name",
    "subscription_role_prefix",
    "start_message_id_inclusive",
    "is_read_compacted",
}
SEND_ARGUMENTS = {
    "properties",
    "partition_key",
    "ordering_key",
    "sequence_id",
    "event_timestamp",
    "deliver_at",
    "deliver_after",
}

_ENCRYPTION = "end-to-end encryption is not supported by Magnetar"
_REPLICATION = "geo-replication is not supported by Magnetar (one cluster)"
# call -> official option -> (its default, accepted; why any other value is refused)
NOT_SUPPORTED: dict[str, dict[str, tuple[Any, str]]] = {
    "create_producer": {
        "encryption_key": (None, _ENCRYPTION),
        "crypto_key_reader": (None, _ENCRYPTION),
        "lazy_start_partitioned_producers": (
            False,
            "a partitioned producer connects to every partition when it is created",
        ),
    },
    "subscribe": {
        "crypto_key_reader": (None, _ENCRYPTION),
        "crypto_failure_action": (ConsumerCryptoFailureAction.FAIL, _ENCRYPTION),
        "replicate_subscription_state_enabled": (False, _REPLICATION),
        "broker_consumer_stats_cache_time_ms": (
            30000,
            "the SDK has no consumer stats call to cache (use magnetar-admin topics stats)",
        ),
    },
    "create_reader": {
        "crypto_key_reader": (None, _ENCRYPTION),
        "crypto_failure_action": (ConsumerCryptoFailureAction.FAIL, _ENCRYPTION),
    },
    "send": {
        "replication_clusters": (None, _REPLICATION),
        "disable_replication": (False, _REPLICATION),
    },
}
_KNOWN = {
    "create_producer": PRODUCER_OPTIONS,
    "subscribe": CONSUMER_OPTIONS,
    "create_reader": READER_OPTIONS,
    "send": SEND_ARGUMENTS,
}


def check_options(call: str, opts: dict[str, Any]) -> dict[str, Any]:
    """``opts`` without the official options left at their defaults; raises
    ``InvalidConfiguration`` naming an unknown option or a refused value."""
    known, refused = _KNOWN[call], NOT_SUPPORTED[call]
    out = {}
    for name, value in sorted(opts.items()):
        if name in known:
            out[name] = value
        elif name in refused:
            default, why = refused[name]
            if value != default:
                raise InvalidConfiguration(
                    f"{call}({name}={value!r}): {why}; only its default, {default!r}, is accepted"
                )
        else:
            raise InvalidConfiguration(f"{call}() got an unknown option {name!r}")
    return out


def check_topic(topic: Any) -> str:
    if not isinstance(topic, str):
        raise InvalidTopicName(f"a topic name must be a str, not {type(topic).__name__}")
    try:
        return TopicName.parse(topic).full_name
    except InvalidTopicNameError as exc:
        raise InvalidTopicName(str(exc)) from None


def check_properties(props: Any, what: str = "properties") -> dict[str, str]:
    if props is None:
        return {}
    if not isinstance(props, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in props.items()
    ):
        raise InvalidConfiguration(f"{what} must be a dict of str to str, not {props!r}")
    return dict(props)


def prepare_send(schema: Any, content: Any, kwargs: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """The payload and the engine's arguments of ``send(content, **kwargs)``:
    ``content`` encoded with the producer's schema (``InvalidMessage`` when it
    does not fit it: nothing is sent)."""
    if schema is None and not kwargs:  # the common send: nothing to check (once per message)
        return content, kwargs
    args = send_kwargs(kwargs)
    return encode_value(schema, content, args), args


# send() arguments passed to the engine as they are (the others are checked
# or converted below): a send with only these takes the short way.
_AS_IS = frozenset({"partition_key", "sequence_id", "event_timestamp"})


def send_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    """``send``'s keyword arguments, checked, in the engine's terms."""
    if kwargs.keys() <= _AS_IS:  # this runs once per message
        return kwargs
    out = check_options("send", kwargs)
    if out.get("properties") is not None:
        out["properties"] = check_properties(out["properties"])
    okey = out.get("ordering_key")
    if isinstance(okey, str):
        out["ordering_key"] = okey.encode()
    after = out.pop("deliver_after", None)
    if after is not None:
        if not isinstance(after, datetime.timedelta):
            raise InvalidConfiguration(f"deliver_after must be a timedelta, not {after!r}")
        if out.get("deliver_at") is not None:
            raise InvalidConfiguration("give deliver_at or deliver_after, not both")
        out["deliver_at"] = int(time.time() * 1000 + after.total_seconds() * 1000)
    at = out.get("deliver_at")
    if at is not None and (not isinstance(at, int) or isinstance(at, bool) or at < 0):
        raise InvalidConfiguration(f"deliver_at must be epoch milliseconds (int >= 0), not {at!r}")
    return out


def pattern_topic(topic: Any, is_pattern_topic: Any) -> Any:
    """``subscribe``'s topic: with ``is_pattern_topic`` (the official asyncio
    client's flag) a regex given as a str is compiled."""
    if not is_pattern_topic or isinstance(topic, re.Pattern):
        return topic
    if not isinstance(topic, str):
        raise InvalidConfiguration(
            f"is_pattern_topic=True needs the regex as a str, not {type(topic).__name__}"
        )
    try:
        return re.compile(topic)
    except re.error as exc:
        raise InvalidConfiguration(f"is_pattern_topic: {topic!r} is not a regex: {exc}") from None
