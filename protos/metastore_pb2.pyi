from protos import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

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
    __slots__ = ("key", "value", "expected_version", "session_id")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_VERSION_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: bytes
    expected_version: int
    session_id: int
    def __init__(self, key: _Optional[str] = ..., value: _Optional[bytes] = ..., expected_version: _Optional[int] = ..., session_id: _Optional[int] = ...) -> None: ...

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
    __slots__ = ("key", "expected_version")
    KEY_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_VERSION_FIELD_NUMBER: _ClassVar[int]
    key: str
    expected_version: int
    def __init__(self, key: _Optional[str] = ..., expected_version: _Optional[int] = ...) -> None: ...

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
    __slots__ = ("key", "delta")
    KEY_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    key: str
    delta: int
    def __init__(self, key: _Optional[str] = ..., delta: _Optional[int] = ...) -> None: ...

class IncrementResponse(_message.Message):
    __slots__ = ("error", "value")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.Error
    value: int
    def __init__(self, error: _Optional[_Union[_common_pb2.Error, _Mapping]] = ..., value: _Optional[int] = ...) -> None: ...

class CreateSessionRequest(_message.Message):
    __slots__ = ("ttl_ms",)
    TTL_MS_FIELD_NUMBER: _ClassVar[int]
    ttl_ms: int
    def __init__(self, ttl_ms: _Optional[int] = ...) -> None: ...

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
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: int
    def __init__(self, session_id: _Optional[int] = ...) -> None: ...

class CloseSessionResponse(_message.Message):
    __slots__ = ("error",)
    ERROR_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.Error
    def __init__(self, error: _Optional[_Union[_common_pb2.Error, _Mapping]] = ...) -> None: ...
