"""The Magnetar SDK, with the Pulsar Python client's names (see API.md).

    from client import Client
    c = Client("magnetar://localhost:6650")
    p = c.create_producer("my-topic")
    p.send(b"hello")

``client.aio`` has the same API as coroutines.
"""

from client import exceptions as _exceptions
from client import schema
from client._sync import Client, Consumer, Producer, Reader
from client.authentication import Authentication, AuthenticationToken
from client.enums import (
    BatchingType,
    CompressionType,
    ConsumerCryptoFailureAction,
    ConsumerType,
    HashingScheme,
    InitialPosition,
    KeySharedMode,
    PartitionsRoutingMode,
    ProducerAccessMode,
    RegexSubscriptionMode,
    Result,
    SubscriptionMode,
)
from client.exceptions import *  # noqa: F403 - every Pulsar-named exception
from client.exceptions import MagnetarError, PulsarException
from client.message import Message
from client.policies import (
    ConsumerBatchReceivePolicy,
    ConsumerDeadLetterPolicy,
    ConsumerKeySharedPolicy,
    MultiplierRedeliveryBackoff,
)
from protos.message_id import MessageId

__all__ = [
    "Authentication",
    "AuthenticationToken",
    "BatchingType",
    "Client",
    "CompressionType",
    "Consumer",
    "ConsumerBatchReceivePolicy",
    "ConsumerCryptoFailureAction",
    "ConsumerDeadLetterPolicy",
    "ConsumerKeySharedPolicy",
    "ConsumerType",
    "HashingScheme",
    "InitialPosition",
    "KeySharedMode",
    "MagnetarError",
    "Message",
    "MessageId",
    "MultiplierRedeliveryBackoff",
    "PartitionsRoutingMode",
    "Producer",
    "ProducerAccessMode",
    "PulsarException",
    "Reader",
    "RegexSubscriptionMode",
    "Result",
    "SubscriptionMode",
    "schema",
]
# Every exception class, as the official client exports them all.
__all__ += sorted(
    name
    for name, value in vars(_exceptions).items()
    if isinstance(value, type) and issubclass(value, MagnetarError) and name not in __all__
)
