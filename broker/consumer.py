"""A consumer connected to a subscription, and what the core pushes to it.

The core never builds a front-end's messages: a dispatcher hands a
consumer's ``sink`` a :class:`Deliveries` (entries in one batch, parallel
lists) and hands it ``None`` once, when the core closes the consumer. The
front-end that created the consumer turns those into its own protocol.
Deliveries are bounded by the consumer's permits (the dispatcher only
delivers against them), so a sink needs no bound of its own.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

from broker.meter import Meter

_consumer_ids = itertools.count(1)


@dataclass(eq=False, slots=True)
class Deliveries:
    """Entries for one consumer: entry i is at (ledger_ids[i], entry_ids[i]),
    delivered for the redelivery_counts[i]-th time again. With batch-index
    acks, acked_batch_indexes[i] is the little-endian bitmask of the
    messages of entry i already acknowledged (b"": none)."""

    ledger_ids: list[int] = field(default_factory=list)
    entry_ids: list[int] = field(default_factory=list)
    redelivery_counts: list[int] = field(default_factory=list)
    entries: list[bytes] = field(default_factory=list)
    acked_batch_indexes: list[bytes] | None = None


Sink = Callable[[Deliveries | None], None]


@dataclass(eq=False)
class Consumer:
    name: str
    sink: Sink
    priority_level: int = 0
    id: int = field(default_factory=lambda: next(_consumer_ids))
    permits: int = 0
    closed: bool = False
    meter: Meter = field(default_factory=Meter)
    # The authenticated role that subscribed (None: authentication is off);
    # judged again when its grants change (broker/authorizer.py).
    role: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)  # its properties
    schema_version: int | None = None  # its schema's registered version, if any
    read_compacted: bool = False  # reads the topic's compacted view first

    def grant(self, permits: int) -> None:
        """The client can take ``permits`` more messages."""
        self.permits += permits

    def deliver(self, deliveries: Deliveries, messages: int, size: int) -> None:
        """Push entries of ``messages`` messages (``size`` bytes), spending
        that many permits."""
        self.permits -= messages
        self.meter.add(messages, size)
        self.sink(deliveries)

    def close(self) -> None:
        """The core is done with this consumer: its front-end ends the stream."""
        if not self.closed:
            self.closed = True
            self.sink(None)

    def detach(self) -> None:
        """The consumer is going away (its stream ended, or it left its
        subscription): nothing more is dispatched to it."""
        self.closed = True
