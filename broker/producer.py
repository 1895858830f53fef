"""A producer as its topic knows it, and the hook through which backlog
quotas hold publishing (:mod:`broker.quota_enforcement` implements it)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Container, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from broker.errors import BrokerError
from broker.meter import Meter
from broker.modes import ProducerAccessMode
from protos import common_pb2
from protos.entry import properties_of

unique_producer_ids = itertools.count(1)


@dataclass(eq=False)
class Producer:
    name: str
    access_mode: ProducerAccessMode = ProducerAccessMode.SHARED
    id: int = field(default_factory=lambda: next(unique_producer_ids))
    last_sequence_id: int = -1
    # Called when a newer ExclusiveWithFencing producer takes the topic.
    on_fenced: Callable[[], None] | None = None
    # Called when the topic closes here (unload, shutdown): the front-end ends
    # the producer with a retryable error after the sends already taken.
    on_topic_closed: Callable[[], None] | None = None
    meter: Meter = field(default_factory=Meter)
    # The authenticated role that created it (None: authentication is off);
    # judged again when its grants change (broker/authorizer.py).
    role: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)  # its properties
    schema_version: int | None = None  # what its messages are written with


def unique_producer_name(broker_name: str, taken: Container[str]) -> str:
    """A name the broker gives a producer that asked for none."""
    name = f"{broker_name}-{next(unique_producer_ids)}"
    while name in taken:
        name = f"{broker_name}-{next(unique_producer_ids)}"
    return name


def client_metadata(pairs: Iterable[common_pb2.KeyValue], max_bytes: int) -> dict[str, str]:
    """A producer's or consumer's properties as its stats ``metadata``;
    more than ``max_bytes`` of keys and values is refused (nothing made)."""
    metadata = properties_of(pairs)
    size = sum(len(k.encode()) + len(v.encode()) for k, v in metadata.items())
    if size > max_bytes:
        raise BrokerError(
            f"properties of {size} bytes; at most {max_bytes} (max_client_properties_bytes)",
            common_pb2.INVALID_ARGUMENT,
        )
    return metadata


class PublishGate(Protocol):
    """The backlog quotas' hold on publishing (broker.quota_enforcement)."""

    async def admit(self) -> None: ...

    def check_producer(self) -> None: ...

    def judge(self) -> Any: ...

    def on_acked(self) -> None: ...

    def release(self) -> None: ...
