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

class KeyValue(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: str
    def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class MessageMetadata(_message.Message):
    __slots__ = ("producer_name", "sequence_id", "publish_time", "properties", "partition_key", "ordering_key", "event_time", "compression", "uncompressed_size", "num_messages_in_batch", "highest_sequence_id", "deliver_at_time", "schema_version", "uuid", "num_chunks_from_msg", "total_chunk_msg_size", "chunk_id", "null_value")
    PRODUCER_NAME_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_ID_FIELD_NUMBER: _ClassVar[int]
    PUBLISH_TIME_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    PARTITION_KEY_FIELD_NUMBER: _ClassVar[int]
    ORDERING_KEY_FIELD_NUMBER: _ClassVar[int]
    EVENT_TIME_FIELD_NUMBER: _ClassVar[int]
    COMPRESSION_FIELD_NUMBER: _ClassVar[int]
    UNCOMPRESSED_SIZE_FIELD_NUMBER: _ClassVar[int]
    NUM_MESSAGES_IN_BATCH_FIELD_NUMBER: _ClassVar[int]
    HIGHEST_SEQUENCE_ID_FIELD_NUMBER: _ClassVar[int]
    DELIVER_AT_TIME_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    UUID_FIELD_NUMBER: _ClassVar[int]
    NUM_CHUNKS_FROM_MSG_FIELD_NUMBER: _ClassVar[int]
    TOTAL_CHUNK_MSG_SIZE_FIELD_NUMBER: _ClassVar[int]
    CHUNK_ID_FIELD_NUMBER: _ClassVar[int]
    NULL_VALUE_FIELD_NUMBER: _ClassVar[int]
    producer_name: str
    sequence_id: int
    publish_time: int
    properties: _containers.RepeatedCompositeFieldContainer[KeyValue]
    partition_key: str
    ordering_key: bytes
    event_time: int
    compression: CompressionType
    uncompressed_size: int
    num_messages_in_batch: int
    highest_sequence_id: int
    deliver_at_time: int
    schema_version: bytes
    uuid: str
    num_chunks_from_msg: int
    total_chunk_msg_size: int
    chunk_id: int
    null_value: bool
    def __init__(self, producer_name: _Optional[str] = ..., sequence_id: _Optional[int] = ..., publish_time: _Optional[int] = ..., properties: _Optional[_Iterable[_Union[KeyValue, _Mapping]]] = ..., partition_key: _Optional[str] = ..., ordering_key: _Optional[bytes] = ..., event_time: _Optional[int] = ..., compression: _Optional[_Union[CompressionType, str]] = ..., uncompressed_size: _Optional[int] = ..., num_messages_in_batch: _Optional[int] = ..., highest_sequence_id: _Optional[int] = ..., deliver_at_time: _Optional[int] = ..., schema_version: _Optional[bytes] = ..., uuid: _Optional[str] = ..., num_chunks_from_msg: _Optional[int] = ..., total_chunk_msg_size: _Optional[int] = ..., chunk_id: _Optional[int] = ..., null_value: _Optional[bool] = ...) -> None: ...

class SingleMessageMetadata(_message.Message):
    __slots__ = ("properties", "partition_key", "ordering_key", "payload_size", "event_time", "sequence_id", "null_value")
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    PARTITION_KEY_FIELD_NUMBER: _ClassVar[int]
    ORDERING_KEY_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_SIZE_FIELD_NUMBER: _ClassVar[int]
    EVENT_TIME_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_ID_FIELD_NUMBER: _ClassVar[int]
    NULL_VALUE_FIELD_NUMBER: _ClassVar[int]
    properties: _containers.RepeatedCompositeFieldContainer[KeyValue]
    partition_key: str
    ordering_key: bytes
    payload_size: int
    event_time: int
    sequence_id: int
    null_value: bool
    def __init__(self, properties: _Optional[_Iterable[_Union[KeyValue, _Mapping]]] = ..., partition_key: _Optional[str] = ..., ordering_key: _Optional[bytes] = ..., payload_size: _Optional[int] = ..., event_time: _Optional[int] = ..., sequence_id: _Optional[int] = ..., null_value: _Optional[bool] = ...) -> None: ...

class MessageIdData(_message.Message):
    __slots__ = ("ledger_id", "entry_id", "partition", "batch_index")
    LEDGER_ID_FIELD_NUMBER: _ClassVar[int]
    ENTRY_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    BATCH_INDEX_FIELD_NUMBER: _ClassVar[int]
    ledger_id: int
    entry_id: int
    partition: int
    batch_index: int
    def __init__(self, ledger_id: _Optional[int] = ..., entry_id: _Optional[int] = ..., partition: _Optional[int] = ..., batch_index: _Optional[int] = ...) -> None: ...
