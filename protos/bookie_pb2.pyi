from protos import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AddRequest(_message.Message):
    __slots__ = ("request_id", "ledger_id", "master_key", "entries", "recovery")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    LEDGER_ID_FIELD_NUMBER: _ClassVar[int]
    MASTER_KEY_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    RECOVERY_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    ledger_id: int
    master_key: bytes
    entries: bytes
    recovery: bool
    def __init__(self, request_id: _Optional[int] = ..., ledger_id: _Optional[int] = ..., master_key: _Optional[bytes] = ..., entries: _Optional[bytes] = ..., recovery: _Optional[bool] = ...) -> None: ...

class AddResponse(_message.Message):
    __slots__ = ("request_id", "error", "ledger_id")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    LEDGER_ID_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    error: _common_pb2.Error
    ledger_id: int
    def __init__(self, request_id: _Optional[int] = ..., error: _Optional[_Union[_common_pb2.Error, _Mapping]] = ..., ledger_id: _Optional[int] = ...) -> None: ...

class AddBatch(_message.Message):
    __slots__ = ("requests",)
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    requests: _containers.RepeatedCompositeFieldContainer[AddRequest]
    def __init__(self, requests: _Optional[_Iterable[_Union[AddRequest, _Mapping]]] = ...) -> None: ...

class AddResponses(_message.Message):
    __slots__ = ("responses",)
    RESPONSES_FIELD_NUMBER: _ClassVar[int]
    responses: _containers.RepeatedCompositeFieldContainer[AddResponse]
    def __init__(self, responses: _Optional[_Iterable[_Union[AddResponse, _Mapping]]] = ...) -> None: ...

class ReadEntryRequest(_message.Message):
    __slots__ = ("ledger_id", "entry_id")
    LEDGER_ID_FIELD_NUMBER: _ClassVar[int]
    ENTRY_ID_FIELD_NUMBER: _ClassVar[int]
    ledger_id: int
    entry_id: int
    def __init__(self, ledger_id: _Optional[int] = ..., entry_id: _Optional[int] = ...) -> None: ...

class ReadEntryResponse(_message.Message):
    __slots__ = ("error", "entry_id", "lac", "digest", "payload")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ENTRY_ID_FIELD_NUMBER: _ClassVar[int]
    LAC_FIELD_NUMBER: _ClassVar[int]
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.Error
    entry_id: int
    lac: int
    digest: int
    payload: bytes
    def __init__(self, error: _Optional[_Union[_common_pb2.Error, _Mapping]] = ..., entry_id: _Optional[int] = ..., lac: _Optional[int] = ..., digest: _Optional[int] = ..., payload: _Optional[bytes] = ...) -> None: ...

class ReadRangeRequest(_message.Message):
    __slots__ = ("ledger_id", "first_entry_id", "last_entry_id", "max_entries_per_response")
    LEDGER_ID_FIELD_NUMBER: _ClassVar[int]
    FIRST_ENTRY_ID_FIELD_NUMBER: _ClassVar[int]
    LAST_ENTRY_ID_FIELD_NUMBER: _ClassVar[int]
    MAX_ENTRIES_PER_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    ledger_id: int
    first_entry_id: int
    last_entry_id: int
    max_entries_per_response: int
    def __init__(self, ledger_id: _Optional[int] = ..., first_entry_id: _Optional[int] = ..., last_entry_id: _Optional[int] = ..., max_entries_per_response: _Optional[int] = ...) -> None: ...

class ReadRangeResponse(_message.Message):
    __slots__ = ("error", "entry_ids", "lacs", "digests", "payloads", "missing_entry_ids", "sizes")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ENTRY_IDS_FIELD_NUMBER: _ClassVar[int]
    LACS_FIELD_NUMBER: _ClassVar[int]
    DIGESTS_FIELD_NUMBER: _ClassVar[int]
    PAYLOADS_FIELD_NUMBER: _ClassVar[int]
    MISSING_ENTRY_IDS_FIELD_NUMBER: _ClassVar[int]
    SIZES_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.Error
    entry_ids: _containers.RepeatedScalarFieldContainer[int]
    lacs: _containers.RepeatedScalarFieldContainer[int]
    digests: _containers.RepeatedScalarFieldContainer[int]
    payloads: _containers.RepeatedScalarFieldContainer[bytes]
    missing_entry_ids: _containers.RepeatedScalarFieldContainer[int]
    sizes: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, error: _Optional[_Union[_common_pb2.Error, _Mapping]] = ..., entry_ids: _Optional[_Iterable[int]] = ..., lacs: _Optional[_Iterable[int]] = ..., digests: _Optional[_Iterable[int]] = ..., payloads: _Optional[_Iterable[bytes]] = ..., missing_entry_ids: _Optional[_Iterable[int]] = ..., sizes: _Optional[_Iterable[int]] = ...) -> None: ...

class ReadEntriesRequest(_message.Message):
    __slots__ = ("ledger_id", "entry_ids", "sizes_only")
    LEDGER_ID_FIELD_NUMBER: _ClassVar[int]
    ENTRY_IDS_FIELD_NUMBER: _ClassVar[int]
    SIZES_ONLY_FIELD_NUMBER: _ClassVar[int]
    ledger_id: int
    entry_ids: _containers.RepeatedScalarFieldContainer[int]
    sizes_only: bool
    def __init__(self, ledger_id: _Optional[int] = ..., entry_ids: _Optional[_Iterable[int]] = ..., sizes_only: _Optional[bool] = ...) -> None: ...

class DeleteLedgerRequest(_message.Message):
    __slots__ = ("ledger_id", "master_key")
    LEDGER_ID_FIELD_NUMBER: _ClassVar[int]
    MASTER_KEY_FIELD_NUMBER: _ClassVar[int]
    ledger_id: int
    master_key: bytes
    def __init__(self, ledger_id: _Optional[int] = ..., master_key: _Optional[bytes] = ...) -> None: ...

class DeleteLedgerResponse(_message.Message):
    __slots__ = ("error", "existed")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    EXISTED_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.Error
    existed: bool
    def __init__(self, error: _Optional[_Union[_common_pb2.Error, _Mapping]] = ..., existed: _Optional[bool] = ...) -> None: ...

class StatsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class StatsResponse(_message.Message):
    __slots__ = ("bookie_id", "ledgers", "entries", "bytes", "disk_used_bytes", "disk_free_bytes", "read_only")
    BOOKIE_ID_FIELD_NUMBER: _ClassVar[int]
    LEDGERS_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    DISK_USED_BYTES_FIELD_NUMBER: _ClassVar[int]
    DISK_FREE_BYTES_FIELD_NUMBER: _ClassVar[int]
    READ_ONLY_FIELD_NUMBER: _ClassVar[int]
    bookie_id: str
    ledgers: int
    entries: int
    bytes: int
    disk_used_bytes: int
    disk_free_bytes: int
    read_only: bool
    def __init__(self, bookie_id: _Optional[str] = ..., ledgers: _Optional[int] = ..., entries: _Optional[int] = ..., bytes: _Optional[int] = ..., disk_used_bytes: _Optional[int] = ..., disk_free_bytes: _Optional[int] = ..., read_only: _Optional[bool] = ...) -> None: ...

class ReadLacRequest(_message.Message):
    __slots__ = ("ledger_id", "fence", "master_key")
    LEDGER_ID_FIELD_NUMBER: _ClassVar[int]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    MASTER_KEY_FIELD_NUMBER: _ClassVar[int]
    ledger_id: int
    fence: bool
    master_key: bytes
    def __init__(self, ledger_id: _Optional[int] = ..., fence: _Optional[bool] = ..., master_key: _Optional[bytes] = ...) -> None: ...

class ReadLacResponse(_message.Message):
    __slots__ = ("error", "lac", "last_entry_id", "fenced")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    LAC_FIELD_NUMBER: _ClassVar[int]
    LAST_ENTRY_ID_FIELD_NUMBER: _ClassVar[int]
    FENCED_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.Error
    lac: int
    last_entry_id: int
    fenced: bool
    def __init__(self, error: _Optional[_Union[_common_pb2.Error, _Mapping]] = ..., lac: _Optional[int] = ..., last_entry_id: _Optional[int] = ..., fenced: _Optional[bool] = ...) -> None: ...
