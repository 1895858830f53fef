from protos import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TopicDomainMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PERSISTENT_ONLY: _ClassVar[TopicDomainMode]
    NON_PERSISTENT_ONLY: _ClassVar[TopicDomainMode]
    ALL_DOMAINS: _ClassVar[TopicDomainMode]

class ProducerAccessMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ACCESS_SHARED: _ClassVar[ProducerAccessMode]
    ACCESS_EXCLUSIVE: _ClassVar[ProducerAccessMode]
    ACCESS_WAIT_FOR_EXCLUSIVE: _ClassVar[ProducerAccessMode]
    ACCESS_EXCLUSIVE_WITH_FENCING: _ClassVar[ProducerAccessMode]

class SubType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EXCLUSIVE: _ClassVar[SubType]
    SHARED: _ClassVar[SubType]
    FAILOVER: _ClassVar[SubType]
    KEY_SHARED: _ClassVar[SubType]

class InitialPositionType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    LATEST: _ClassVar[InitialPositionType]
    EARLIEST: _ClassVar[InitialPositionType]

class KeySharedMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    AUTO_SPLIT: _ClassVar[KeySharedMode]
    STICKY: _ClassVar[KeySharedMode]

class AckType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    INDIVIDUAL: _ClassVar[AckType]
    CUMULATIVE: _ClassVar[AckType]
PERSISTENT_ONLY: TopicDomainMode
NON_PERSISTENT_ONLY: TopicDomainMode
ALL_DOMAINS: TopicDomainMode
ACCESS_SHARED: ProducerAccessMode
ACCESS_EXCLUSIVE: ProducerAccessMode
ACCESS_WAIT_FOR_EXCLUSIVE: ProducerAccessMode
ACCESS_EXCLUSIVE_WITH_FENCING: ProducerAccessMode
EXCLUSIVE: SubType
SHARED: SubType
FAILOVER: SubType
KEY_SHARED: SubType
LATEST: InitialPositionType
EARLIEST: InitialPositionType
AUTO_SPLIT: KeySharedMode
STICKY: KeySharedMode
INDIVIDUAL: AckType
CUMULATIVE: AckType

class GetSchemaRequest(_message.Message):
    __slots__ = ("topic", "version")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    topic: str
    version: int
    def __init__(self, topic: _Optional[str] = ..., version: _Optional[int] = ...) -> None: ...

class GetSchemaResponse(_message.Message):
    __slots__ = ("error", "schema", "version")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.Error
    schema: _common_pb2.SchemaData
    version: int
    def __init__(self, error: _Optional[_Union[_common_pb2.Error, _Mapping]] = ..., schema: _Optional[_Union[_common_pb2.SchemaData, _Mapping]] = ..., version: _Optional[int] = ...) -> None: ...

class LookupRequest(_message.Message):
    __slots__ = ("topic", "authoritative")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    AUTHORITATIVE_FIELD_NUMBER: _ClassVar[int]
    topic: str
    authoritative: bool
    def __init__(self, topic: _Optional[str] = ..., authoritative: _Optional[bool] = ...) -> None: ...

class LookupResponse(_message.Message):
    __slots__ = ("error", "broker_url", "redirect", "authoritative", "broker_url_tls")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    BROKER_URL_FIELD_NUMBER: _ClassVar[int]
    REDIRECT_FIELD_NUMBER: _ClassVar[int]
    AUTHORITATIVE_FIELD_NUMBER: _ClassVar[int]
    BROKER_URL_TLS_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.Error
    broker_url: str
    redirect: bool
    authoritative: bool
    broker_url_tls: str
    def __init__(self, error: _Optional[_Union[_common_pb2.Error, _Mapping]] = ..., broker_url: _Optional[str] = ..., redirect: _Optional[bool] = ..., authoritative: _Optional[bool] = ..., broker_url_tls: _Optional[str] = ...) -> None: ...

class PartitionedTopicMetadataRequest(_message.Message):
    __slots__ = ("topic",)
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    topic: str
    def __init__(self, topic: _Optional[str] = ...) -> None: ...

class PartitionedTopicMetadata(_message.Message):
    __slots__ = ("error", "partitions", "topic")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.Error
    partitions: int
    topic: str
    def __init__(self, error: _Optional[_Union[_common_pb2.Error, _Mapping]] = ..., partitions: _Optional[int] = ..., topic: _Optional[str] = ...) -> None: ...

class TopicsOfNamespaceRequest(_message.Message):
    __slots__ = ("namespace", "mode", "include_system_topic")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_SYSTEM_TOPIC_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    mode: TopicDomainMode
    include_system_topic: bool
    def __init__(self, namespace: _Optional[str] = ..., mode: _Optional[_Union[TopicDomainMode, str]] = ..., include_system_topic: _Optional[bool] = ...) -> None: ...

class TopicsOfNamespace(_message.Message):
    __slots__ = ("error", "topics")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.Error
    topics: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, error: _Optional[_Union[_common_pb2.Error, _Mapping]] = ..., topics: _Optional[_Iterable[str]] = ...) -> None: ...

class CreateProducer(_message.Message):
    __slots__ = ("topic", "producer_name", "properties", "access_mode", "schema")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_NAME_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    ACCESS_MODE_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    topic: str
    producer_name: str
    properties: _containers.RepeatedCompositeFieldContainer[_common_pb2.KeyValue]
    access_mode: ProducerAccessMode
    schema: _common_pb2.SchemaData
    def __init__(self, topic: _Optional[str] = ..., producer_name: _Optional[str] = ..., properties: _Optional[_Iterable[_Union[_common_pb2.KeyValue, _Mapping]]] = ..., access_mode: _Optional[_Union[ProducerAccessMode, str]] = ..., schema: _Optional[_Union[_common_pb2.SchemaData, _Mapping]] = ...) -> None: ...

class SendEntries(_message.Message):
    __slots__ = ("sequence_ids", "num_messages", "entries")
    SEQUENCE_IDS_FIELD_NUMBER: _ClassVar[int]
    NUM_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    sequence_ids: _containers.RepeatedScalarFieldContainer[int]
    num_messages: _containers.RepeatedScalarFieldContainer[int]
    entries: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, sequence_ids: _Optional[_Iterable[int]] = ..., num_messages: _Optional[_Iterable[int]] = ..., entries: _Optional[_Iterable[bytes]] = ...) -> None: ...

class CloseProducer(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ProducerRequest(_message.Message):
    __slots__ = ("create", "send", "close")
    CREATE_FIELD_NUMBER: _ClassVar[int]
    SEND_FIELD_NUMBER: _ClassVar[int]
    CLOSE_FIELD_NUMBER: _ClassVar[int]
    create: CreateProducer
    send: SendEntries
    close: CloseProducer
    def __init__(self, create: _Optional[_Union[CreateProducer, _Mapping]] = ..., send: _Optional[_Union[SendEntries, _Mapping]] = ..., close: _Optional[_Union[CloseProducer, _Mapping]] = ...) -> None: ...

class ProducerCreated(_message.Message):
    __slots__ = ("producer_name", "last_sequence_id", "max_message_size", "topic", "schema_version")
    PRODUCER_NAME_FIELD_NUMBER: _ClassVar[int]
    LAST_SEQUENCE_ID_FIELD_NUMBER: _ClassVar[int]
    MAX_MESSAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    producer_name: str
    last_sequence_id: int
    max_message_size: int
    topic: str
    schema_version: bytes
    def __init__(self, producer_name: _Optional[str] = ..., last_sequence_id: _Optional[int] = ..., max_message_size: _Optional[int] = ..., topic: _Optional[str] = ..., schema_version: _Optional[bytes] = ...) -> None: ...

class SendReceipts(_message.Message):
    __slots__ = ("sequence_ids", "ledger_ids", "entry_ids")
    SEQUENCE_IDS_FIELD_NUMBER: _ClassVar[int]
    LEDGER_IDS_FIELD_NUMBER: _ClassVar[int]
    ENTRY_IDS_FIELD_NUMBER: _ClassVar[int]
    sequence_ids: _containers.RepeatedScalarFieldContainer[int]
    ledger_ids: _containers.RepeatedScalarFieldContainer[int]
    entry_ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, sequence_ids: _Optional[_Iterable[int]] = ..., ledger_ids: _Optional[_Iterable[int]] = ..., entry_ids: _Optional[_Iterable[int]] = ...) -> None: ...

class SendError(_message.Message):
    __slots__ = ("sequence_id", "error")
    SEQUENCE_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    sequence_id: int
    error: _common_pb2.Error
    def __init__(self, sequence_id: _Optional[int] = ..., error: _Optional[_Union[_common_pb2.Error, _Mapping]] = ...) -> None: ...

class ProducerResponse(_message.Message):
    __slots__ = ("created", "receipts", "send_error", "error")
    CREATED_FIELD_NUMBER: _ClassVar[int]
    RECEIPTS_FIELD_NUMBER: _ClassVar[int]
    SEND_ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    created: ProducerCreated
    receipts: SendReceipts
    send_error: SendError
    error: _common_pb2.Error
    def __init__(self, created: _Optional[_Union[ProducerCreated, _Mapping]] = ..., receipts: _Optional[_Union[SendReceipts, _Mapping]] = ..., send_error: _Optional[_Union[SendError, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.Error, _Mapping]] = ...) -> None: ...

class ProducerRequestFrame(_message.Message):
    __slots__ = ("id", "request", "end")
    ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    id: int
    request: ProducerRequest
    end: bool
    def __init__(self, id: _Optional[int] = ..., request: _Optional[_Union[ProducerRequest, _Mapping]] = ..., end: _Optional[bool] = ...) -> None: ...

class ProducerRequestFrames(_message.Message):
    __slots__ = ("frames",)
    FRAMES_FIELD_NUMBER: _ClassVar[int]
    frames: _containers.RepeatedCompositeFieldContainer[ProducerRequestFrame]
    def __init__(self, frames: _Optional[_Iterable[_Union[ProducerRequestFrame, _Mapping]]] = ...) -> None: ...

class ProducerResponseFrame(_message.Message):
    __slots__ = ("id", "response", "end")
    ID_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    id: int
    response: ProducerResponse
    end: bool
    def __init__(self, id: _Optional[int] = ..., response: _Optional[_Union[ProducerResponse, _Mapping]] = ..., end: _Optional[bool] = ...) -> None: ...

class ProducerResponseFrames(_message.Message):
    __slots__ = ("frames",)
    FRAMES_FIELD_NUMBER: _ClassVar[int]
    frames: _containers.RepeatedCompositeFieldContainer[ProducerResponseFrame]
    def __init__(self, frames: _Optional[_Iterable[_Union[ProducerResponseFrame, _Mapping]]] = ...) -> None: ...

class Subscribe(_message.Message):
    __slots__ = ("topic", "subscription", "sub_type", "initial_position", "consumer_name", "durable", "priority_level", "start_message_id", "start_message_id_inclusive", "key_shared", "properties", "schema", "read_compacted")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIPTION_FIELD_NUMBER: _ClassVar[int]
    SUB_TYPE_FIELD_NUMBER: _ClassVar[int]
    INITIAL_POSITION_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_NAME_FIELD_NUMBER: _ClassVar[int]
    DURABLE_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_LEVEL_FIELD_NUMBER: _ClassVar[int]
    START_MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    START_MESSAGE_ID_INCLUSIVE_FIELD_NUMBER: _ClassVar[int]
    KEY_SHARED_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    READ_COMPACTED_FIELD_NUMBER: _ClassVar[int]
    topic: str
    subscription: str
    sub_type: SubType
    initial_position: InitialPositionType
    consumer_name: str
    durable: bool
    priority_level: int
    start_message_id: _common_pb2.MessageIdData
    start_message_id_inclusive: bool
    key_shared: KeySharedMeta
    properties: _containers.RepeatedCompositeFieldContainer[_common_pb2.KeyValue]
    schema: _common_pb2.SchemaData
    read_compacted: bool
    def __init__(self, topic: _Optional[str] = ..., subscription: _Optional[str] = ..., sub_type: _Optional[_Union[SubType, str]] = ..., initial_position: _Optional[_Union[InitialPositionType, str]] = ..., consumer_name: _Optional[str] = ..., durable: _Optional[bool] = ..., priority_level: _Optional[int] = ..., start_message_id: _Optional[_Union[_common_pb2.MessageIdData, _Mapping]] = ..., start_message_id_inclusive: _Optional[bool] = ..., key_shared: _Optional[_Union[KeySharedMeta, _Mapping]] = ..., properties: _Optional[_Iterable[_Union[_common_pb2.KeyValue, _Mapping]]] = ..., schema: _Optional[_Union[_common_pb2.SchemaData, _Mapping]] = ..., read_compacted: _Optional[bool] = ...) -> None: ...

class KeySharedMeta(_message.Message):
    __slots__ = ("mode", "allow_out_of_order_delivery", "range_starts", "range_ends")
    MODE_FIELD_NUMBER: _ClassVar[int]
    ALLOW_OUT_OF_ORDER_DELIVERY_FIELD_NUMBER: _ClassVar[int]
    RANGE_STARTS_FIELD_NUMBER: _ClassVar[int]
    RANGE_ENDS_FIELD_NUMBER: _ClassVar[int]
    mode: KeySharedMode
    allow_out_of_order_delivery: bool
    range_starts: _containers.RepeatedScalarFieldContainer[int]
    range_ends: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, mode: _Optional[_Union[KeySharedMode, str]] = ..., allow_out_of_order_delivery: _Optional[bool] = ..., range_starts: _Optional[_Iterable[int]] = ..., range_ends: _Optional[_Iterable[int]] = ...) -> None: ...

class Flow(_message.Message):
    __slots__ = ("permits",)
    PERMITS_FIELD_NUMBER: _ClassVar[int]
    permits: int
    def __init__(self, permits: _Optional[int] = ...) -> None: ...

class Ack(_message.Message):
    __slots__ = ("ack_type", "ledger_ids", "entry_ids", "batch_acks")
    ACK_TYPE_FIELD_NUMBER: _ClassVar[int]
    LEDGER_IDS_FIELD_NUMBER: _ClassVar[int]
    ENTRY_IDS_FIELD_NUMBER: _ClassVar[int]
    BATCH_ACKS_FIELD_NUMBER: _ClassVar[int]
    ack_type: AckType
    ledger_ids: _containers.RepeatedScalarFieldContainer[int]
    entry_ids: _containers.RepeatedScalarFieldContainer[int]
    batch_acks: _containers.RepeatedCompositeFieldContainer[BatchIndexAck]
    def __init__(self, ack_type: _Optional[_Union[AckType, str]] = ..., ledger_ids: _Optional[_Iterable[int]] = ..., entry_ids: _Optional[_Iterable[int]] = ..., batch_acks: _Optional[_Iterable[_Union[BatchIndexAck, _Mapping]]] = ...) -> None: ...

class BatchIndexAck(_message.Message):
    __slots__ = ("ledger_id", "entry_id", "batch_size", "indexes")
    LEDGER_ID_FIELD_NUMBER: _ClassVar[int]
    ENTRY_ID_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    INDEXES_FIELD_NUMBER: _ClassVar[int]
    ledger_id: int
    entry_id: int
    batch_size: int
    indexes: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, ledger_id: _Optional[int] = ..., entry_id: _Optional[int] = ..., batch_size: _Optional[int] = ..., indexes: _Optional[_Iterable[int]] = ...) -> None: ...

class CloseConsumer(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ConsumerRequest(_message.Message):
    __slots__ = ("subscribe", "flow", "ack", "close", "redeliver", "unsubscribe", "seek", "get_last_message_id")
    SUBSCRIBE_FIELD_NUMBER: _ClassVar[int]
    FLOW_FIELD_NUMBER: _ClassVar[int]
    ACK_FIELD_NUMBER: _ClassVar[int]
    CLOSE_FIELD_NUMBER: _ClassVar[int]
    REDELIVER_FIELD_NUMBER: _ClassVar[int]
    UNSUBSCRIBE_FIELD_NUMBER: _ClassVar[int]
    SEEK_FIELD_NUMBER: _ClassVar[int]
    GET_LAST_MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    subscribe: Subscribe
    flow: Flow
    ack: Ack
    close: CloseConsumer
    redeliver: RedeliverUnacknowledged
    unsubscribe: Unsubscribe
    seek: Seek
    get_last_message_id: GetLastMessageId
    def __init__(self, subscribe: _Optional[_Union[Subscribe, _Mapping]] = ..., flow: _Optional[_Union[Flow, _Mapping]] = ..., ack: _Optional[_Union[Ack, _Mapping]] = ..., close: _Optional[_Union[CloseConsumer, _Mapping]] = ..., redeliver: _Optional[_Union[RedeliverUnacknowledged, _Mapping]] = ..., unsubscribe: _Optional[_Union[Unsubscribe, _Mapping]] = ..., seek: _Optional[_Union[Seek, _Mapping]] = ..., get_last_message_id: _Optional[_Union[GetLastMessageId, _Mapping]] = ...) -> None: ...

class Seek(_message.Message):
    __slots__ = ("message_id", "publish_time_ms", "inclusive")
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    PUBLISH_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    INCLUSIVE_FIELD_NUMBER: _ClassVar[int]
    message_id: _common_pb2.MessageIdData
    publish_time_ms: int
    inclusive: bool
    def __init__(self, message_id: _Optional[_Union[_common_pb2.MessageIdData, _Mapping]] = ..., publish_time_ms: _Optional[int] = ..., inclusive: _Optional[bool] = ...) -> None: ...

class GetLastMessageId(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RedeliverUnacknowledged(_message.Message):
    __slots__ = ("ledger_ids", "entry_ids")
    LEDGER_IDS_FIELD_NUMBER: _ClassVar[int]
    ENTRY_IDS_FIELD_NUMBER: _ClassVar[int]
    ledger_ids: _containers.RepeatedScalarFieldContainer[int]
    entry_ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, ledger_ids: _Optional[_Iterable[int]] = ..., entry_ids: _Optional[_Iterable[int]] = ...) -> None: ...

class Unsubscribe(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Subscribed(_message.Message):
    __slots__ = ("consumer_name", "topic", "schema_version")
    CONSUMER_NAME_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    consumer_name: str
    topic: str
    schema_version: bytes
    def __init__(self, consumer_name: _Optional[str] = ..., topic: _Optional[str] = ..., schema_version: _Optional[bytes] = ...) -> None: ...

class Deliveries(_message.Message):
    __slots__ = ("ledger_ids", "entry_ids", "redelivery_counts", "entries", "acked_batch_indexes")
    LEDGER_IDS_FIELD_NUMBER: _ClassVar[int]
    ENTRY_IDS_FIELD_NUMBER: _ClassVar[int]
    REDELIVERY_COUNTS_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    ACKED_BATCH_INDEXES_FIELD_NUMBER: _ClassVar[int]
    ledger_ids: _containers.RepeatedScalarFieldContainer[int]
    entry_ids: _containers.RepeatedScalarFieldContainer[int]
    redelivery_counts: _containers.RepeatedScalarFieldContainer[int]
    entries: _containers.RepeatedScalarFieldContainer[bytes]
    acked_batch_indexes: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, ledger_ids: _Optional[_Iterable[int]] = ..., entry_ids: _Optional[_Iterable[int]] = ..., redelivery_counts: _Optional[_Iterable[int]] = ..., entries: _Optional[_Iterable[bytes]] = ..., acked_batch_indexes: _Optional[_Iterable[bytes]] = ...) -> None: ...

class ConsumerResponse(_message.Message):
    __slots__ = ("subscribed", "deliveries", "error", "ack_error", "unsubscribed", "request_error", "seek_done", "last_message_id")
    SUBSCRIBED_FIELD_NUMBER: _ClassVar[int]
    DELIVERIES_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ACK_ERROR_FIELD_NUMBER: _ClassVar[int]
    UNSUBSCRIBED_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ERROR_FIELD_NUMBER: _ClassVar[int]
    SEEK_DONE_FIELD_NUMBER: _ClassVar[int]
    LAST_MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    subscribed: Subscribed
    deliveries: Deliveries
    error: _common_pb2.Error
    ack_error: _common_pb2.Error
    unsubscribed: Unsubscribed
    request_error: _common_pb2.Error
    seek_done: SeekDone
    last_message_id: LastMessageId
    def __init__(self, subscribed: _Optional[_Union[Subscribed, _Mapping]] = ..., deliveries: _Optional[_Union[Deliveries, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.Error, _Mapping]] = ..., ack_error: _Optional[_Union[_common_pb2.Error, _Mapping]] = ..., unsubscribed: _Optional[_Union[Unsubscribed, _Mapping]] = ..., request_error: _Optional[_Union[_common_pb2.Error, _Mapping]] = ..., seek_done: _Optional[_Union[SeekDone, _Mapping]] = ..., last_message_id: _Optional[_Union[LastMessageId, _Mapping]] = ...) -> None: ...

class SeekDone(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class LastMessageId(_message.Message):
    __slots__ = ("message_id", "terminated")
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    TERMINATED_FIELD_NUMBER: _ClassVar[int]
    message_id: _common_pb2.MessageIdData
    terminated: bool
    def __init__(self, message_id: _Optional[_Union[_common_pb2.MessageIdData, _Mapping]] = ..., terminated: _Optional[bool] = ...) -> None: ...

class Unsubscribed(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class AdminCallRequest(_message.Message):
    __slots__ = ("operation", "arguments", "forwarded")
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_FIELD_NUMBER: _ClassVar[int]
    FORWARDED_FIELD_NUMBER: _ClassVar[int]
    operation: str
    arguments: str
    forwarded: bool
    def __init__(self, operation: _Optional[str] = ..., arguments: _Optional[str] = ..., forwarded: _Optional[bool] = ...) -> None: ...

class SplitBundleRequest(_message.Message):
    __slots__ = ("namespace", "bundle", "unload")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    BUNDLE_FIELD_NUMBER: _ClassVar[int]
    UNLOAD_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    bundle: str
    unload: bool
    def __init__(self, namespace: _Optional[str] = ..., bundle: _Optional[str] = ..., unload: _Optional[bool] = ...) -> None: ...

class LeaderBrokerRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class UnloadRequest(_message.Message):
    __slots__ = ("namespace", "bundle")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    BUNDLE_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    bundle: str
    def __init__(self, namespace: _Optional[str] = ..., bundle: _Optional[str] = ...) -> None: ...

class ListBrokersRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class NamespaceBundlesRequest(_message.Message):
    __slots__ = ("namespace",)
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    def __init__(self, namespace: _Optional[str] = ...) -> None: ...

class CreateSubscriptionRequest(_message.Message):
    __slots__ = ("topic", "subscription", "earliest")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIPTION_FIELD_NUMBER: _ClassVar[int]
    EARLIEST_FIELD_NUMBER: _ClassVar[int]
    topic: str
    subscription: str
    earliest: bool
    def __init__(self, topic: _Optional[str] = ..., subscription: _Optional[str] = ..., earliest: _Optional[bool] = ...) -> None: ...

class CreatePartitionedTopicRequest(_message.Message):
    __slots__ = ("topic", "partitions")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partitions: int
    def __init__(self, topic: _Optional[str] = ..., partitions: _Optional[int] = ...) -> None: ...

class KeySharedLookupRequest(_message.Message):
    __slots__ = ("topic", "subscription", "key", "hash")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIPTION_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    HASH_FIELD_NUMBER: _ClassVar[int]
    topic: str
    subscription: str
    key: str
    hash: int
    def __init__(self, topic: _Optional[str] = ..., subscription: _Optional[str] = ..., key: _Optional[str] = ..., hash: _Optional[int] = ...) -> None: ...

class JsonResponse(_message.Message):
    __slots__ = ("error", "json")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    JSON_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.Error
    json: str
    def __init__(self, error: _Optional[_Union[_common_pb2.Error, _Mapping]] = ..., json: _Optional[str] = ...) -> None: ...
