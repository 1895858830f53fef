"""The SDK's exceptions: one per non-Ok :class:`Result`, named like Pulsar's.

``MagnetarError`` is the base. The broker's wire codes map onto these in
:func:`from_wire`; every message names the wrong value and what is allowed.
"""

from __future__ import annotations

from client.enums import Result
from protos import common_pb2


class MagnetarError(Exception):
    result: Result = Result.UnknownError

    def __init__(self, message: str = "") -> None:
        super().__init__(message or self.result.name)


class UnknownError(MagnetarError):
    result = Result.UnknownError


class InvalidConfiguration(MagnetarError, ValueError):
    result = Result.InvalidConfiguration


class Timeout(MagnetarError):
    result = Result.Timeout


class LookupError(MagnetarError):
    result = Result.LookupError


class ConnectError(MagnetarError):
    result = Result.ConnectError


class TlsHandshakeError(ConnectError):
    """A ConnectError that trying again cannot cure: the broker's port speaks
    the other protocol (TLS or plaintext), or its certificate is not trusted
    or not for the name asked for. The message says which."""


class ReadError(MagnetarError):
    result = Result.ReadError


class AuthenticationError(MagnetarError):
    result = Result.AuthenticationError


class AuthorizationError(MagnetarError):
    result = Result.AuthorizationError


class BrokerMetadataError(MagnetarError):
    result = Result.BrokerMetadataError


class BrokerPersistenceError(MagnetarError):
    result = Result.BrokerPersistenceError


class ChecksumError(MagnetarError):
    result = Result.ChecksumError


class ConsumerBusy(MagnetarError):
    result = Result.ConsumerBusy


class NotConnected(MagnetarError):
    result = Result.NotConnected


class AlreadyClosed(MagnetarError):
    result = Result.AlreadyClosed


class InvalidMessage(MagnetarError):
    result = Result.InvalidMessage


class ProducerBusy(MagnetarError):
    result = Result.ProducerBusy


class InvalidTopicName(MagnetarError, ValueError):
    result = Result.InvalidTopicName


class InvalidUrl(MagnetarError, ValueError):
    result = Result.InvalidUrl


class ServiceUnitNotReady(MagnetarError):
    result = Result.ServiceUnitNotReady


class OperationNotSupported(MagnetarError):
    result = Result.OperationNotSupported


class ProducerBlockedQuotaExceededError(MagnetarError):
    result = Result.ProducerBlockedQuotaExceededError


class ProducerBlockedQuotaExceededException(MagnetarError):
    result = Result.ProducerBlockedQuotaExceededException


class ProducerQueueIsFull(MagnetarError):
    result = Result.ProducerQueueIsFull


class MessageTooBig(MagnetarError):
    result = Result.MessageTooBig


class TopicNotFound(MagnetarError):
    result = Result.TopicNotFound


class SubscriptionNotFound(MagnetarError):
    result = Result.SubscriptionNotFound


class ConsumerNotFound(MagnetarError):
    result = Result.ConsumerNotFound


class TopicTerminated(MagnetarError):
    result = Result.TopicTerminated


class IncompatibleSchema(MagnetarError):
    result = Result.IncompatibleSchema


class CumulativeAcknowledgementNotAllowedError(MagnetarError):
    result = Result.CumulativeAcknowledgementNotAllowedError


class ConsumerAssignError(MagnetarError):
    result = Result.ConsumerAssignError


class NotAllowedError(MagnetarError):
    result = Result.NotAllowedError


class ProducerFenced(MagnetarError):
    result = Result.ProducerFenced


class Interrupted(MagnetarError):
    result = Result.Interrupted


class ErrorGettingAuthenticationData(MagnetarError):
    result = Result.ErrorGettingAuthenticationData


class ConsumerNotInitialized(MagnetarError):
    result = Result.ConsumerNotInitialized


class ProducerNotInitialized(MagnetarError):
    result = Result.ProducerNotInitialized


class TooManyLookupRequestException(MagnetarError):
    result = Result.TooManyLookupRequestException


class UnsupportedVersionError(MagnetarError):
    result = Result.UnsupportedVersionError


class CryptoError(MagnetarError):
    result = Result.CryptoError


class TransactionCoordinatorNotFoundError(MagnetarError):
    result = Result.TransactionCoordinatorNotFoundError


class InvalidTxnStatusError(MagnetarError):
    result = Result.InvalidTxnStatusError


class TransactionConflict(MagnetarError):
    result = Result.TransactionConflict


class TransactionNotFound(MagnetarError):
    result = Result.TransactionNotFound


class MemoryBufferIsFull(MagnetarError):
    result = Result.MemoryBufferIsFull


# The official client's name of the base class.
PulsarException = MagnetarError


class AdminError(MagnetarError):
    """What the admin API answers beyond the client's results (pulsar-admin's
    HTTP statuses 404, 409 and 412); the base of the three below."""


class NotFound(AdminError):
    """The tenant, namespace, topic or subscription named does not exist."""


class Conflict(AdminError):
    """It already exists, or another administrator's change came first."""


class PreconditionFailed(AdminError):
    """It cannot be done now: not empty, or still in use."""


BY_RESULT: dict[Result, type[MagnetarError]] = {
    cls.result: cls for cls in MagnetarError.__subclasses__() if cls is not AdminError
}

_WIRE: dict[int, type[MagnetarError]] = {
    common_pb2.UNKNOWN_ERROR: UnknownError,
    common_pb2.INVALID_ARGUMENT: InvalidConfiguration,
    common_pb2.INVALID_TOPIC_NAME: InvalidTopicName,
    common_pb2.MESSAGE_TOO_BIG: MessageTooBig,
    common_pb2.CONSUMER_BUSY: ConsumerBusy,
    common_pb2.PRODUCER_BUSY: ProducerBusy,
    common_pb2.PRODUCER_FENCED: ProducerFenced,
    common_pb2.CONSUMER_ASSIGN_ERROR: ConsumerAssignError,
    common_pb2.NOT_OWNER: ServiceUnitNotReady,
    common_pb2.TOPIC_NOT_FOUND: TopicNotFound,
    common_pb2.SUBSCRIPTION_NOT_FOUND: SubscriptionNotFound,
    common_pb2.NOT_ALLOWED: NotAllowedError,
    common_pb2.ALREADY_CLOSED: AlreadyClosed,
    common_pb2.TIMEOUT: Timeout,
    common_pb2.SERVICE_NOT_READY: ServiceUnitNotReady,
    common_pb2.PERSISTENCE_ERROR: BrokerPersistenceError,
    common_pb2.CORRUPTED_MESSAGE: InvalidMessage,
    common_pb2.TOO_MANY_REQUESTS: NotAllowedError,
    common_pb2.UNAUTHORIZED: AuthorizationError,
    common_pb2.NOT_FOUND: NotFound,
    common_pb2.CONFLICT: Conflict,
    common_pb2.PRECONDITION_FAILED: PreconditionFailed,
    common_pb2.PRODUCER_BLOCKED_QUOTA_EXCEEDED: ProducerBlockedQuotaExceededException,
    common_pb2.TOPIC_TERMINATED: TopicTerminated,
    common_pb2.INCOMPATIBLE_SCHEMA: IncompatibleSchema,
}


def from_wire(err: common_pb2.Error) -> MagnetarError:
    """The exception for a broker's error message."""
    return _WIRE.get(err.code, UnknownError)(err.message)


def from_wire_or(exc: BaseException | None, what: str) -> MagnetarError:
    """``exc`` when it is already typed, else a ``ConnectError`` saying ``what``
    failed (a broken stream, a reconnection given up)."""
    if isinstance(exc, MagnetarError):
        return exc
    detail = f": {exc}" if exc is not None else ""
    return ConnectError(f"{what}{detail}")
