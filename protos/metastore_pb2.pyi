from protos import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class EventType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PUT: _ClassVar[EventType]
    DELETE: _ClassVar[EventType]
PUT: EventType
DELETE: EventType

class KeyRecord(_message.Message):
    __slots__ = ("key", "value", "version", "create_revision", "mod_revision", "session_id")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    CREATE_REVISION_FIELD_NUMBER: _ClassVar[int]
    MOD_REVISION_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: bytes
    version: int
    create_revision: int
    mod_revision: int
    session_id: int
    def __init__(self, key: _Optional[str] = ..., value: _Optional[bytes] = ..., version: _Optional[int] = ..., create_revision: _Optional[int] = ..., mod_revision: _Optional[int] = ..., session_id: _Optional[int] = ...) -> None: ...

class GetRequest(_message.Message):
    __slots__ = ("key",)
    KEY_FIELD_NUMBER: _ClassVar[int]
    key: str
    def __init__(self, key: _Optional[str] = ...) -> None: ...

class GetResponse(_message.Message):
    __slots__ = ("error", "found", "record", "revision")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    FOUND_FIELD_NUMBER: _ClassVar[int]
    RECORD_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.Error
    found: bool
    record: KeyRecord
    revision: int
    def __init__(self, error: _Optional[_Union[_common_pb2.Error, _Mapping]] = ..., found: _Optional[bool] = ..., record: _Optional[_Union[KeyRecord, _Mapping]] = ..., revision: _Optional[int] = ...) -> None: ...

class PutRequest(_message.Message):
    __slots__ = ("key", "value", "expected_version", "session_id", "request_id")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_VERSION_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: bytes
    expected_version: int
    session_id: int
    request_id: bytes
    def __init__(self, key: _Optional[str] = ..., value: _Optional[bytes] = ..., expected_version: _Optional[int] = ..., session_id: _Optional[int] = ..., request_id: _Optional[bytes] = ...) -> None: ...

class PutResponse(_message.Message):
    __slots__ = ("error", "version", "revision")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.Error
    version: int
    revision: int
    def __init__(self, error: _Optional[_Union[_common_pb2.Error, _Mapping]] = ..., version: _Optional[int] = ..., revision: _Optional[int] = ...) -> None: ...

class DeleteRequest(_message.Message):
    __slots__ = ("key", "expected_version", "request_id")
    KEY_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_VERSION_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    key: str
    expected_version: int
    request_id: bytes
    def __init__(self, key: _Optional[str] = ..., expected_version: _Optional[int] = ..., request_id: _Optional[bytes] = ...) -> None: ...

class DeleteResponse(_message.Message):
    __slots__ = ("error", "deleted", "revision")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.Error
    deleted: bool
    revision: int
    def __init__(self, error: _Optional[_Union[_common_pb2.Error, _Mapping]] = ..., deleted: _Optional[bool] = ..., revision: _Optional[int] = ...) -> None: ...

class ChildrenRequest(_message.Message):
    __slots__ = ("path",)
    PATH_FIELD_NUMBER: _ClassVar[int]
    path: str
    def __init__(self, path: _Optional[str] = ...) -> None: ...

class ChildrenResponse(_message.Message):
    __slots__ = ("error", "names")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    NAMES_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.Error
    names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, error: _Optional[_Union[_common_pb2.Error, _Mapping]] = ..., names: _Optional[_Iterable[str]] = ...) -> None: ...

class IncrementRequest(_message.Message):
    __slots__ = ("key", "delta", "request_id")
    KEY_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    key: str
    delta: int
    request_id: bytes
    def __init__(self, key: _Optional[str] = ..., delta: _Optional[int] = ..., request_id: _Optional[bytes] = ...) -> None: ...

class IncrementResponse(_message.Message):
    __slots__ = ("error", "value")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.Error
    value: int
    def __init__(self, error: _Optional[_Union[_common_pb2.Error, _Mapping]] = ..., value: _Optional[int] = ...) -> None: ...

class CreateSessionRequest(_message.Message):
    __slots__ = ("ttl_ms", "request_id")
    TTL_MS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    ttl_ms: int
    request_id: bytes
    def __init__(self, ttl_ms: _Optional[int] = ..., request_id: _Optional[bytes] = ...) -> None: ...

class CreateSessionResponse(_message.Message):
    __slots__ = ("error", "session_id", "ttl_ms")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TTL_MS_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.Error
    session_id: int
    ttl_ms: int
    def __init__(self, error: _Optional[_Union[_common_pb2.Error, _Mapping]] = ..., session_id: _Optional[int] = ..., ttl_ms: _Optional[int] = ...) -> None: ...

class KeepAliveRequest(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: int
    def __init__(self, session_id: _Optional[int] = ...) -> None: ...

class KeepAliveResponse(_message.Message):
    __slots__ = ("error", "session_id", "alive")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    ALIVE_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.Error
    session_id: int
    alive: bool
    def __init__(self, error: _Optional[_Union[_common_pb2.Error, _Mapping]] = ..., session_id: _Optional[int] = ..., alive: _Optional[bool] = ...) -> None: ...

class CloseSessionRequest(_message.Message):
    __slots__ = ("session_id", "request_id")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: int
    request_id: bytes
    def __init__(self, session_id: _Optional[int] = ..., request_id: _Optional[bytes] = ...) -> None: ...

class CloseSessionResponse(_message.Message):
    __slots__ = ("error",)
    ERROR_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.Error
    def __init__(self, error: _Optional[_Union[_common_pb2.Error, _Mapping]] = ...) -> None: ...

class ListRequest(_message.Message):
    __slots__ = ("prefix", "limit")
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    prefix: str
    limit: int
    def __init__(self, prefix: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class ListResponse(_message.Message):
    __slots__ = ("error", "records", "revision", "more")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    MORE_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.Error
    records: _containers.RepeatedCompositeFieldContainer[KeyRecord]
    revision: int
    more: bool
    def __init__(self, error: _Optional[_Union[_common_pb2.Error, _Mapping]] = ..., records: _Optional[_Iterable[_Union[KeyRecord, _Mapping]]] = ..., revision: _Optional[int] = ..., more: _Optional[bool] = ...) -> None: ...

class ReadItem(_message.Message):
    __slots__ = ("get", "list")
    GET_FIELD_NUMBER: _ClassVar[int]
    LIST_FIELD_NUMBER: _ClassVar[int]
    get: str
    list: ListRequest
    def __init__(self, get: _Optional[str] = ..., list: _Optional[_Union[ListRequest, _Mapping]] = ...) -> None: ...

class ReadRequest(_message.Message):
    __slots__ = ("items",)
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[ReadItem]
    def __init__(self, items: _Optional[_Iterable[_Union[ReadItem, _Mapping]]] = ...) -> None: ...

class ReadResult(_message.Message):
    __slots__ = ("get", "list")
    GET_FIELD_NUMBER: _ClassVar[int]
    LIST_FIELD_NUMBER: _ClassVar[int]
    get: GetResponse
    list: ListResponse
    def __init__(self, get: _Optional[_Union[GetResponse, _Mapping]] = ..., list: _Optional[_Union[ListResponse, _Mapping]] = ...) -> None: ...

class ReadResponse(_message.Message):
    __slots__ = ("error", "results")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.Error
    results: _containers.RepeatedCompositeFieldContainer[ReadResult]
    def __init__(self, error: _Optional[_Union[_common_pb2.Error, _Mapping]] = ..., results: _Optional[_Iterable[_Union[ReadResult, _Mapping]]] = ...) -> None: ...

class Compare(_message.Message):
    __slots__ = ("key", "target", "version", "value")
    class Target(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        VERSION: _ClassVar[Compare.Target]
        VALUE: _ClassVar[Compare.Target]
    VERSION: Compare.Target
    VALUE: Compare.Target
    KEY_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    target: Compare.Target
    version: int
    value: bytes
    def __init__(self, key: _Optional[str] = ..., target: _Optional[_Union[Compare.Target, str]] = ..., version: _Optional[int] = ..., value: _Optional[bytes] = ...) -> None: ...

class TxnOp(_message.Message):
    __slots__ = ("kind", "key", "value", "session_id")
    class Kind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        PUT: _ClassVar[TxnOp.Kind]
        DELETE: _ClassVar[TxnOp.Kind]
    PUT: TxnOp.Kind
    DELETE: TxnOp.Kind
    KIND_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    kind: TxnOp.Kind
    key: str
    value: bytes
    session_id: int
    def __init__(self, kind: _Optional[_Union[TxnOp.Kind, str]] = ..., key: _Optional[str] = ..., value: _Optional[bytes] = ..., session_id: _Optional[int] = ...) -> None: ...

class TxnRequest(_message.Message):
    __slots__ = ("compares", "ops", "request_id")
    COMPARES_FIELD_NUMBER: _ClassVar[int]
    OPS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    compares: _containers.RepeatedCompositeFieldContainer[Compare]
    ops: _containers.RepeatedCompositeFieldContainer[TxnOp]
    request_id: bytes
    def __init__(self, compares: _Optional[_Iterable[_Union[Compare, _Mapping]]] = ..., ops: _Optional[_Iterable[_Union[TxnOp, _Mapping]]] = ..., request_id: _Optional[bytes] = ...) -> None: ...

class TxnResponse(_message.Message):
    __slots__ = ("error", "succeeded", "failed_compare", "revision")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    SUCCEEDED_FIELD_NUMBER: _ClassVar[int]
    FAILED_COMPARE_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.Error
    succeeded: bool
    failed_compare: str
    revision: int
    def __init__(self, error: _Optional[_Union[_common_pb2.Error, _Mapping]] = ..., succeeded: _Optional[bool] = ..., failed_compare: _Optional[str] = ..., revision: _Optional[int] = ...) -> None: ...

class Event(_message.Message):
    __slots__ = ("type", "key", "value", "version", "revision", "session_id")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    type: EventType
    key: str
    value: bytes
    version: int
    revision: int
    session_id: int
    def __init__(self, type: _Optional[_Union[EventType, str]] = ..., key: _Optional[str] = ..., value: _Optional[bytes] = ..., version: _Optional[int] = ..., revision: _Optional[int] = ..., session_id: _Optional[int] = ...) -> None: ...

class WatchRequest(_message.Message):
    __slots__ = ("prefix", "from_revision")
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    FROM_REVISION_FIELD_NUMBER: _ClassVar[int]
    prefix: str
    from_revision: int
    def __init__(self, prefix: _Optional[str] = ..., from_revision: _Optional[int] = ...) -> None: ...

class WatchResponse(_message.Message):
    __slots__ = ("error", "events", "revision")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.Error
    events: _containers.RepeatedCompositeFieldContainer[Event]
    revision: int
    def __init__(self, error: _Optional[_Union[_common_pb2.Error, _Mapping]] = ..., events: _Optional[_Iterable[_Union[Event, _Mapping]]] = ..., revision: _Optional[int] = ...) -> None: ...

class StatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class StatusResponse(_message.Message):
    __slots__ = ("node_id", "is_leader", "leader", "term", "commit_index", "applied_index", "revision", "sessions")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    IS_LEADER_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    COMMIT_INDEX_FIELD_NUMBER: _ClassVar[int]
    APPLIED_INDEX_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    is_leader: bool
    leader: str
    term: int
    commit_index: int
    applied_index: int
    revision: int
    sessions: int
    def __init__(self, node_id: _Optional[str] = ..., is_leader: _Optional[bool] = ..., leader: _Optional[str] = ..., term: _Optional[int] = ..., commit_index: _Optional[int] = ..., applied_index: _Optional[int] = ..., revision: _Optional[int] = ..., sessions: _Optional[int] = ...) -> None: ...
