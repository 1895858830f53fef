"""The broker core's own names for the modes a client asks for.

The core takes these, not a front-end's protocol types, so another client
protocol can sit beside the gRPC one without the core changing. The values
equal the gRPC enums' (``protos/broker.proto``), so a front-end converts
with the enum call, which refuses a value it does not know (ValueError).
Display names are Pulsar's, as stats and error messages show them.
"""

from __future__ import annotations

import enum
from typing import TypeVar

from broker.errors import BrokerError
from protos import common_pb2

E = TypeVar("E", bound=enum.IntEnum)


class SubscriptionType(enum.IntEnum):
    EXCLUSIVE = 0
    SHARED = 1
    FAILOVER = 2
    KEY_SHARED = 3

    @property
    def display(self) -> str:
        return _SUBSCRIPTION_NAMES[self]

    @property
    def single_active(self) -> bool:
        """Exclusive and Failover deliver to one consumer at a time."""
        return self in (SubscriptionType.EXCLUSIVE, SubscriptionType.FAILOVER)


_SUBSCRIPTION_NAMES = {
    SubscriptionType.EXCLUSIVE: "Exclusive",
    SubscriptionType.SHARED: "Shared",
    SubscriptionType.FAILOVER: "Failover",
    SubscriptionType.KEY_SHARED: "Key_Shared",
}


class ProducerAccessMode(enum.IntEnum):
    SHARED = 0  # any number of producers
    EXCLUSIVE = 1  # the only producer, or ProducerBusy at once
    WAIT_FOR_EXCLUSIVE = 2  # admitted once it is the only producer
    EXCLUSIVE_WITH_FENCING = 3  # the others are fenced

    @property
    def display(self) -> str:
        return _ACCESS_NAMES[self]


_ACCESS_NAMES = {
    ProducerAccessMode.SHARED: "Shared",
    ProducerAccessMode.EXCLUSIVE: "Exclusive",
    ProducerAccessMode.WAIT_FOR_EXCLUSIVE: "WaitForExclusive",
    ProducerAccessMode.EXCLUSIVE_WITH_FENCING: "ExclusiveWithFencing",
}


class KeySharedMode(enum.IntEnum):
    AUTO_SPLIT = 0  # hash ranges (or consistent hashing, a broker setting)
    STICKY = 1  # the consumer brings its ranges


def mode_of(cls: type[E], value: int, what: str) -> E:
    """The mode a client sent as a number; INVALID_ARGUMENT for one we do not know."""
    try:
        return cls(value)
    except ValueError:
        raise BrokerError(f"unknown {what} {value}", common_pb2.INVALID_ARGUMENT) from None
