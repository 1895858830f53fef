from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ErrorCode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OK: _ClassVar[ErrorCode]
    UNKNOWN_ERROR: _ClassVar[ErrorCode]
    INVALID_ARGUMENT: _ClassVar[ErrorCode]
    INVALID_TOPIC_NAME: _ClassVar[ErrorCode]
    MESSAGE_TOO_BIG: _ClassVar[ErrorCode]
    CONSUMER_BUSY: _ClassVar[ErrorCode]
    PRODUCER_BUSY: _ClassVar[ErrorCode]
    TOPIC_NOT_FOUND: _ClassVar[ErrorCode]
    SUBSCRIPTION_NOT_FOUND: _ClassVar[ErrorCode]
    NOT_ALLOWED: _ClassVar[ErrorCode]
    ALREADY_CLOSED: _ClassVar[ErrorCode]
    TIMEOUT: _ClassVar[ErrorCode]
    SERVICE_NOT_READY: _ClassVar[ErrorCode]
    PERSISTENCE_ERROR: _ClassVar[ErrorCode]
    CORRUPTED_MESSAGE: _ClassVar[ErrorCode]
    TOO_MANY_REQUESTS: _ClassVar[ErrorCode]
    PRODUCER_FENCED: _ClassVar[ErrorCode]
    CONSUMER_ASSIGN_ERROR: _ClassVar[ErrorCode]
    NOT_OWNER: _ClassVar[ErrorCode]
    BAD_VERSION: _ClassVar[ErrorCode]
    KEY_NOT_FOUND: _ClassVar[ErrorCode]
    SESSION_EXPIRED: _ClassVar[ErrorCode]
    NOT_LEADER: _ClassVar[ErrorCode]
    VALUE_TOO_LARGE: _ClassVar[ErrorCode]
    INVALID_KEY: _ClassVar[ErrorCode]
    COMPACTED: _ClassVar[ErrorCode]
    NO_SUCH_ENTRY: _ClassVar[ErrorCode]
    NO_SUCH_LEDGER: _ClassVar[ErrorCode]
    DIGEST_MISMATCH: _ClassVar[ErrorCode]
    LEDGER_FENCED: _ClassVar[ErrorCode]
    UNAUTHORIZED: _ClassVar[ErrorCode]
    BOOKIE_READ_ONLY: _ClassVar[ErrorCode]
    NOT_FOUND: _ClassVar[ErrorCode]
    CONFLICT: _ClassVar[ErrorCode]
    PRECONDITION_FAILED: _ClassVar[ErrorCode]
    PRODUCER_BLOCKED_QUOTA_EXCEEDED: _ClassVar[ErrorCode]
    TOPIC_TERMINATED: _ClassVar[ErrorCode]
    INCOMPATIBLE_SCHEMA: _ClassVar[ErrorCode]

class CompressionType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NONE: _ClassVar[CompressionType]
    LZ4: _ClassVar[CompressionType]
    ZLIB: _ClassVar[CompressionType]
    ZSTD: _ClassVar[CompressionType]
    SNAPPY: _ClassVar[CompressionType]
OK: ErrorCode
UNKNOWN_ERROR: ErrorCode
INVALID_ARGUMENT: ErrorCode
INVALID_TOPIC_NAME: ErrorCode
MESSAGE_TOO_BIG: ErrorCode
CONSUMER_BUSY: ErrorCode
PRODUCER_BUSY: ErrorCode
TOPIC_NOT_FOUND: ErrorCode
SUBSCRIPTION_NOT_FOUND: ErrorCode
NOT_ALLOWED: ErrorCode
ALREADY_CLOSED: ErrorCode
TIMEOUT: ErrorCode
SERVICE_NOT_READY: ErrorCode
PERSISTENCE_ERROR: ErrorCode
CORRUPTED_MESSAGE: ErrorCode
TOO_MANY_REQUESTS: ErrorCode
PRODUCER_FENCED: ErrorCode
CONSUMER_ASSIGN_ERROR: ErrorCode
NOT_OWNER: ErrorCode
BAD_VERSION: ErrorCode
KEY_NOT_FOUND: ErrorCode
SESSION_EXPIRED: ErrorCode
NOT_LEADER: ErrorCode
VALUE_TOO_LARGE: ErrorCode
INVALID_KEY: ErrorCode
COMPACTED: ErrorCode
NO_SUCH_ENTRY: ErrorCode
NO_SUCH_LEDGER: ErrorCode
DIGEST_MISMATCH: ErrorCode
LEDGER_FENCED: ErrorCode
UNAUTHORIZED: ErrorCode
BOOKIE_READ_ONLY: ErrorCode
NOT_FOUND: ErrorCode
CONFLICT: ErrorCode
PRECONDITION_FAILED: ErrorCode
PRODUCER_BLOCKED_QUOTA_EXCEEDED: ErrorCode
TOPIC_TERMINATED: ErrorCode
INCOMPATIBLE_SCHEMA: ErrorCode
NONE: CompressionType
LZ4: CompressionType
ZLIB: CompressionType
ZSTD: CompressionType
SNAPPY: CompressionType

class Error(_message.Message):
    __slots__ = ("code", "message", "leader")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    code: ErrorCode
    message: str
    leader: str
    def __init__(self, code: _Optional[_Union[ErrorCode, str]] = ..., message: _Optional[str] = ..., leader: _Optional[str] = ...) -> None: ...

class SchemaData(_message.Message):
    __slots__ = ("type", "name", "schema", "properties")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    type: int
    name: str
    schema: bytes
    properties: _containers.RepeatedCompositeFieldContainer[KeyValue]
    def __init__(self, type: _Optional[int] = ..., name: _Optional[str] = ..., schema: _Optional[bytes] = ..., properties: _Optional[_Iterable[_Union[KeyValue, _Mapping]]] = ...) -> None: ...

class KeyValue(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: str
    def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class MessageMetadata(_message.Message):
    __slots__ = ("producer_name", "sequence_id", "publish_time", "properties", "replicated_from", "partition_key", "replicate_to", "compression", "uncompressed_size", "num_messages_in_batch", "event_time", "encryption_keys", "encryption_algo", "encryption_param", "schema_version", "partition_key_b64_encoded", "ordering_key", "deliver_at_time", "marker_type", "txnid_least_bits", "txnid_most_bits", "highest_sequence_id", "null_value", "uuid", "num_chunks_from_msg", "total_chunk_msg_size", "chunk_id", "null_partition_key")
    PRODUCER_NAME_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_ID_FIELD_NUMBER: _ClassVar[int]
    PUBLISH_TIME_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    REPLICATED_FROM_FIELD_NUMBER: _ClassVar[int]
    PARTITION_KEY_FIELD_NUMBER: _ClassVar[int]
    REPLICATE_TO_FIELD_NUMBER: _ClassVar[int]
    COMPRESSION_FIELD_NUMBER: _ClassVar[int]
    UNCOMPRESSED_SIZE_FIELD_NUMBER: _ClassVar[int]
    NUM_MESSAGES_IN_BATCH_FIELD_NUMBER: _ClassVar[int]
    EVENT_TIME_FIELD_NUMBER: _ClassVar[int]
    ENCRYPTION_KEYS_FIELD_NUMBER: _ClassVar[int]
    ENCRYPTION_ALGO_FIELD_NUMBER: _ClassVar[int]
    ENCRYPTION_PARAM_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    PARTITION_KEY_B64_ENCODED_FIELD_NUMBER: _ClassVar[int]
    ORDERING_KEY_FIELD_NUMBER: _ClassVar[int]
    DELIVER_AT_TIME_FIELD_NUMBER: _ClassVar[int]
    MARKER_TYPE_FIELD_NUMBER: _ClassVar[int]
    TXNID_LEAST_BITS_FIELD_NUMBER: _ClassVar[int]
    TXNID_MOST_BITS_FIELD_NUMBER: _ClassVar[int]
    HIGHEST_SEQUENCE_ID_FIELD_NUMBER: _ClassVar[int]
    NULL_VALUE_FIELD_NUMBER: _ClassVar[int]
    UUID_FIELD_NUMBER: _ClassVar[int]
    NUM_CHUNKS_FROM_MSG_FIELD_NUMBER: _ClassVar[int]
    TOTAL_CHUNK_MSG_SIZE_FIELD_NUMBER: _ClassVar[int]
    CHUNK_ID_FIELD_NUMBER: _ClassVar[int]
    NULL_PARTITION_KEY_FIELD_NUMBER: _ClassVar[int]
    producer_name: str
    sequence_id: int
    publish_time: int
    properties: _containers.RepeatedCompositeFieldContainer[KeyValue]
    replicated_from: str
    partition_key: str
    replicate_to: _containers.RepeatedScalarFieldContainer[str]
    compression: CompressionType
    uncompressed_size: int
    num_messages_in_batch: int
    event_time: int
    encryption_keys: _containers.RepeatedCompositeFieldContainer[EncryptionKeys]
    encryption_algo: str
    encryption_param: bytes
    schema_version: bytes
    partition_key_b64_encoded: bool
    ordering_key: bytes
    deliver_at_time: int
    marker_type: int
    txnid_least_bits: int
    txnid_most_bits: int
    highest_sequence_id: int
    null_value: bool
    uuid: str
    num_chunks_from_msg: int
    total_chunk_msg_size: int
    chunk_id: int
    null_partition_key: bool
    def __init__(self, producer_name: _Optional[str] = ..., sequence_id: _Optional[int] = ..., publish_time: _Optional[int] = ..., properties: _Optional[_Iterable[_Union[KeyValue, _Mapping]]] = ..., replicated_from: _Optional[str] = ..., partition_key: _Optional[str] = ..., replicate_to: _Optional[_Iterable[str]] = ..., compression: _Optional[_Union[CompressionType, str]] = ..., uncompressed_size: _Optional[int] = ..., num_messages_in_batch: _Optional[int] = ..., event_time: _Optional[int] = ..., encryption_keys: _Optional[_Iterable[_Union[EncryptionKeys, _Mapping]]] = ..., encryption_algo: _Optional[str] = ..., encryption_param: _Optional[bytes] = ..., schema_version: _Optional[bytes] = ..., partition_key_b64_encoded: _Optional[bool] = ..., ordering_key: _Optional[bytes] = ..., deliver_at_time: _Optional[int] = ..., marker_type: _Optional[int] = ..., txnid_least_bits: _Optional[int] = ..., txnid_most_bits: _Optional[int] = ..., highest_sequence_id: _Optional[int] = ..., null_value: _Optional[bool] = ..., uuid: _Optional[str] = ..., num_chunks_from_msg: _Optional[int] = ..., total_chunk_msg_size: _Optional[int] = ..., chunk_id: _Optional[int] = ..., null_partition_key: _Optional[bool] = ...) -> None: ...

class EncryptionKeys(_message.Message):
    __slots__ = ("key", "value", "metadata")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: bytes
    metadata: _containers.RepeatedCompositeFieldContainer[KeyValue]
    def __init__(self, key: _Optional[str] = ..., value: _Optional[bytes] = ..., metadata: _Optional[_Iterable[_Union[KeyValue, _Mapping]]] = ...) -> None: ...

class SingleMessageMetadata(_message.Message):
    __slots__ = ("properties", "partition_key", "payload_size", "compacted_out", "event_time", "partition_key_b64_encoded", "ordering_key", "sequence_id", "null_value", "null_partition_key")
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    PARTITION_KEY_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_SIZE_FIELD_NUMBER: _ClassVar[int]
    COMPACTED_OUT_FIELD_NUMBER: _ClassVar[int]
    EVENT_TIME_FIELD_NUMBER: _ClassVar[int]
    PARTITION_KEY_B64_ENCODED_FIELD_NUMBER: _ClassVar[int]
    ORDERING_KEY_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_ID_FIELD_NUMBER: _ClassVar[int]
    NULL_VALUE_FIELD_NUMBER: _ClassVar[int]
    NULL_PARTITION_KEY_FIELD_NUMBER: _ClassVar[int]
    properties: _containers.RepeatedCompositeFieldContainer[KeyValue]
    partition_key: str
    payload_size: int
    compacted_out: bool
    event_time: int
    partition_key_b64_encoded: bool
    ordering_key: bytes
    sequence_id: int
    null_value: bool
    null_partition_key: bool
    def __init__(self, properties: _Optional[_Iterable[_Union[KeyValue, _Mapping]]] = ..., partition_key: _Optional[str] = ..., payload_size: _Optional[int] = ..., compacted_out: _Optional[bool] = ..., event_time: _Optional[int] = ..., partition_key_b64_encoded: _Optional[bool] = ..., ordering_key: _Optional[bytes] = ..., sequence_id: _Optional[int] = ..., null_value: _Optional[bool] = ..., null_partition_key: _Optional[bool] = ...) -> None: ...

class MessageIdData(_message.Message):
    __slots__ = ("ledger_id", "entry_id", "partition", "batch_index", "ack_set", "batch_size", "first_chunk_message_id")
    LEDGER_ID_FIELD_NUMBER: _ClassVar[int]
    ENTRY_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    BATCH_INDEX_FIELD_NUMBER: _ClassVar[int]
    ACK_SET_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    FIRST_CHUNK_MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    ledger_id: int
    entry_id: int
    partition: int
    batch_index: int
    ack_set: _containers.RepeatedScalarFieldContainer[int]
    batch_size: int
    first_chunk_message_id: MessageIdData
    def __init__(self, ledger_id: _Optional[int] = ..., entry_id: _Optional[int] = ..., partition: _Optional[int] = ..., batch_index: _Optional[int] = ..., ack_set: _Optional[_Iterable[int]] = ..., batch_size: _Optional[int] = ..., first_chunk_message_id: _Optional[_Union[MessageIdData, _Mapping]] = ...) -> None: ...
