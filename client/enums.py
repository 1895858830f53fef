"""Enums with the Pulsar Python client's members and values (API.md)."""

from __future__ import annotations

from enum import Enum, IntEnum


class Result(IntEnum):
    Ok = 0
    UnknownError = 1
    InvalidConfiguration = 2
    Timeout = 3
    LookupError = 4
    ConnectError = 5
    ReadError = 6
    AuthenticationError = 7
    AuthorizationError = 8
    ErrorGettingAuthenticationData = 9
    BrokerMetadataError = 10
    BrokerPersistenceError = 11
    ChecksumError = 12
    ConsumerBusy = 13
    NotConnected = 14
    AlreadyClosed = 15
    InvalidMessage = 16
    ConsumerNotInitialized = 17
    ProducerNotInitialized = 18
    ProducerBusy = 19
    TooManyLookupRequestException = 20
    InvalidTopicName = 21
    InvalidUrl = 22
    ServiceUnitNotReady = 23
    OperationNotSupported = 24
    ProducerBlockedQuotaExceededError = 25
    ProducerBlockedQuotaExceededException = 26
    ProducerQueueIsFull = 27
    MessageTooBig = 28
    TopicNotFound = 29
    SubscriptionNotFound = 30
    ConsumerNotFound = 31
    UnsupportedVersionError = 32
    TopicTerminated = 33
    CryptoError = 34
    IncompatibleSchema = 35
    ConsumerAssignError = 36
    CumulativeAcknowledgementNotAllowedError = 37
    TransactionCoordinatorNotFoundError = 38
    InvalidTxnStatusError = 39
    NotAllowedError = 40
    TransactionConflict = 41
    TransactionNotFound = 42
    ProducerFenced = 43
    MemoryBufferIsFull = 44
    Interrupted = 45


class ConsumerType(IntEnum):
    Exclusive = 0
    Shared = 1
    Failover = 2
    KeyShared = 3


class InitialPosition(IntEnum):
    Latest = 0
    Earliest = 1


class CompressionType(IntEnum):
    NONE = 0
    LZ4 = 1
    ZLib = 2
    ZSTD = 3
    SNAPPY = 4


class PartitionsRoutingMode(IntEnum):
    UseSinglePartition = 0
    RoundRobinDistribution = 1
    CustomPartition = 2


class BatchingType(IntEnum):
    Default = 0
    KeyBased = 1


class ProducerAccessMode(IntEnum):
    Shared = 0
    Exclusive = 1
    WaitForExclusive = 2
    ExclusiveWithFencing = 3


class KeySharedMode(IntEnum):
    AutoSplit = 0
    Sticky = 1


class RegexSubscriptionMode(IntEnum):
    PersistentOnly = 0
    NonPersistentOnly = 1
    AllTopics = 2


class HashingScheme(IntEnum):
    JavaStringHash = 0
    Murmur3_32Hash = 1


class SubscriptionMode(Enum):
    Durable = "Durable"
    NonDurable = "NonDurable"


class ConsumerCryptoFailureAction(IntEnum):
    """The official client's enum; only FAIL (its default) is accepted, as
    Magnetar has no end-to-end encryption."""

    FAIL = 0
    DISCARD = 1
    CONSUME = 2
