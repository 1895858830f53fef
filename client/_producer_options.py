"""A producer's options (the Pulsar Python client's names and defaults) and
their validation.

``ProducerOptions.validate`` runs one check per concept (chunking,
compression, partition routing, batching and the pending queue, access
and send timeout), in that order; the first bad option raises naming it,
its value and what is allowed. A ``message_router`` given turns the
routing mode to ``CustomPartition``, as Pulsar's client does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from client._factory_options import check_properties
from client._schema_use import check_schema
from client.enums import (
    BatchingType,
    CompressionType,
    HashingScheme,
    PartitionsRoutingMode,
    ProducerAccessMode,
)
from client.exceptions import InvalidConfiguration


@dataclass
class ProducerOptions:
    producer_name: str | None = None
    initial_sequence_id: int | None = None
    send_timeout_millis: int = 30000
    max_pending_messages: int = 1000
    block_if_queue_full: bool = False
    batching_enabled: bool = True
    batching_max_messages: int = 1000
    batching_max_allowed_size_in_bytes: int = 131072
    batching_max_publish_delay_ms: int = 10
    access_mode: ProducerAccessMode = ProducerAccessMode.Shared
    batching_type: BatchingType = BatchingType.Default
    compression_type: CompressionType = CompressionType.NONE
    chunking_enabled: bool = False
    # Partitioned topics.
    message_routing_mode: PartitionsRoutingMode = PartitionsRoutingMode.RoundRobinDistribution
    message_router: Callable[[Any, int], int] | None = None
    hashing_scheme: HashingScheme = HashingScheme.JavaStringHash
    max_pending_messages_across_partitions: int = 50000
    # The producer's metadata (broker stats show it as ``metadata``).
    properties: dict[str, str] | None = None
    schema: Any = None

    def validate(self) -> None:
        for check in _CHECKS:
            check(self)


def _check_chunking(o: ProducerOptions) -> None:
    if o.chunking_enabled and o.batching_enabled:
        raise ValueError(
            "chunking_enabled with batching_enabled=True: batching and chunking cannot be "
            "enabled together (Pulsar's rule; chunking alone turns batching off)"
        )


def _check_compression(o: ProducerOptions) -> None:
    if not isinstance(o.compression_type, CompressionType):
        raise InvalidConfiguration(
            f"compression_type {o.compression_type!r} is not a CompressionType"
        )


def _check_routing(o: ProducerOptions) -> None:
    if o.message_router is not None:
        if not callable(o.message_router):
            raise InvalidConfiguration("message_router must be callable (message, n) -> int")
        o.message_routing_mode = PartitionsRoutingMode.CustomPartition
    if not isinstance(o.message_routing_mode, PartitionsRoutingMode):
        raise InvalidConfiguration(
            f"message_routing_mode {o.message_routing_mode!r} is not a PartitionsRoutingMode"
        )
    if o.message_routing_mode == PartitionsRoutingMode.CustomPartition and o.message_router is None:
        raise InvalidConfiguration("CustomPartition routing needs a message_router")
    if not isinstance(o.hashing_scheme, HashingScheme):
        raise InvalidConfiguration(f"hashing_scheme {o.hashing_scheme!r} is not a HashingScheme")


def _check_batching_and_queue(o: ProducerOptions) -> None:
    if not isinstance(o.batching_type, BatchingType):
        raise InvalidConfiguration(f"batching_type {o.batching_type!r} is not a BatchingType")
    for name in ("max_pending_messages", "max_pending_messages_across_partitions"):
        value = getattr(o, name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise InvalidConfiguration(f"{name} is {value!r}; it must be an int >= 1")
    if o.batching_max_messages < 1:
        raise InvalidConfiguration(
            f"batching_max_messages is {o.batching_max_messages}; it must be >= 1"
        )


def _check_schema(o: ProducerOptions) -> None:
    check_schema(o.schema, producer=True)


def _check_properties(o: ProducerOptions) -> None:
    check_properties(o.properties)


def _check_access_and_timeout(o: ProducerOptions) -> None:
    if not isinstance(o.access_mode, ProducerAccessMode):
        raise InvalidConfiguration(f"access_mode {o.access_mode!r} is not a ProducerAccessMode")
    if o.send_timeout_millis < 0:
        raise InvalidConfiguration(
            f"send_timeout_millis is {o.send_timeout_millis}; use 0 for none or > 0"
        )


_CHECKS: tuple[Callable[[ProducerOptions], None], ...] = (
    _check_chunking,
    _check_compression,
    _check_routing,
    _check_batching_and_queue,
    _check_access_and_timeout,
    _check_properties,
    _check_schema,
)
