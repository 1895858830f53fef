"""Message ids: (ledger id, entry id, partition index, batch index).

Ordered by ledger, then entry, then partition, then batch index, so a
non-batched id (batch index -1) sorts before the messages of a batch in the
same entry. ``serialize()`` gives the protobuf ``MessageIdData`` bytes,
Pulsar's own encoding (:func:`id_data`). Accessors are methods, as in the
Pulsar Python client.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from protos import common_pb2
from protos.errors import InvalidArgumentError

_INT64_MAX = (1 << 63) - 1
_UINT64_MASK = (1 << 64) - 1


def _signed64(value: int) -> int:
    return value - (1 << 64) if value > _INT64_MAX else value


def id_data(
    ledger_id: int, entry_id: int, partition: int = -1, batch_index: int = -1
) -> common_pb2.MessageIdData:
    """Pulsar's ``MessageIdData``: ledger and entry ids as the uint64 two's
    complement of their signed value (so -1 is what Pulsar's Java client
    writes for its earliest id); partition and batch index only when >= 0."""
    data = common_pb2.MessageIdData(
        ledger_id=ledger_id & _UINT64_MASK, entry_id=entry_id & _UINT64_MASK
    )
    if partition >= 0:
        data.partition = partition
    if batch_index >= 0:
        data.batch_index = batch_index
    return data


def id_fields(data: common_pb2.MessageIdData) -> tuple[int, int, int, int]:
    """(ledger id, entry id, partition, batch index) of a ``MessageIdData``,
    signed, with -1 for an absent partition or batch index."""
    return (
        _signed64(data.ledger_id),
        _signed64(data.entry_id),
        data.partition if data.HasField("partition") else -1,
        data.batch_index if data.HasField("batch_index") else -1,
    )


class MessageId:
    __slots__ = ("_key", "_topic")

    earliest: ClassVar[MessageId]
    latest: ClassVar[MessageId]

    def __init__(
        self,
        partition: int = -1,
        ledger_id: int = -1,
        entry_id: int = -1,
        batch_index: int = -1,
        *,
        topic: str | None = None,
    ) -> None:
        # The official client's argument order (partition first), so a
        # positional call means the same thing in both; str() prints
        # (ledger,entry,partition,batch) as it does.
        self._key = (int(ledger_id), int(entry_id), int(partition), int(batch_index))
        # The topic a consumer received it from (routes acks of multi-topic
        # consumers); not part of equality or of serialize().
        self._topic = topic

    @classmethod
    def from_data(cls, data: common_pb2.MessageIdData, topic: str | None = None) -> MessageId:
        ledger_id, entry_id, partition, batch_index = id_fields(data)
        return cls(partition, ledger_id, entry_id, batch_index, topic=topic)

    @classmethod
    def wrap(cls, msg_id: MessageId) -> MessageId:
        """The official client's wrapper constructor; here there is one type."""
        if not isinstance(msg_id, MessageId):
            raise InvalidArgumentError(
                f"MessageId.wrap takes a MessageId, not {type(msg_id).__name__}"
            )
        return msg_id

    def topic_name(self) -> str | None:
        return self._topic

    def ledger_id(self) -> int:
        return self._key[0]

    def entry_id(self) -> int:
        return self._key[1]

    def partition(self) -> int:
        return self._key[2]

    def batch_index(self) -> int:
        return self._key[3]

    @property
    def position(self) -> tuple[int, int]:
        """The (ledger id, entry id) of the entry that holds the message."""
        return self._key[0], self._key[1]

    def serialize(self) -> bytes:
        return id_data(*self._key).SerializeToString()

    @classmethod
    def deserialize(cls, data: bytes, topic: str | None = None) -> MessageId:
        if not isinstance(data, bytes | bytearray | memoryview):
            raise InvalidArgumentError(
                f"MessageId.deserialize takes bytes, not {type(data).__name__}"
            )
        msg = common_pb2.MessageIdData()
        try:
            msg.ParseFromString(bytes(data))
        except Exception as exc:  # protobuf raises DecodeError and friends
            raise InvalidArgumentError(f"not a serialized MessageId: {exc}") from None
        return cls.from_data(msg, topic)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MessageId) and self._key == other._key

    def __lt__(self, other: MessageId) -> bool:
        return self._key < other._key

    def __le__(self, other: MessageId) -> bool:
        return self._key <= other._key

    def __gt__(self, other: MessageId) -> bool:
        return self._key > other._key

    def __ge__(self, other: MessageId) -> bool:
        return self._key >= other._key

    def __hash__(self) -> int:
        return hash(self._key)

    def __str__(self) -> str:
        return "({},{},{},{})".format(*self._key)

    def __repr__(self) -> str:
        ledger_id, entry_id, partition, batch_index = self._key
        return (
            f"MessageId(partition={partition}, ledger_id={ledger_id}, "
            f"entry_id={entry_id}, batch_index={batch_index})"
        )


MessageId.earliest = MessageId(ledger_id=-1, entry_id=-1)
MessageId.latest = MessageId(ledger_id=_INT64_MAX, entry_id=_INT64_MAX)

_new = object.__new__


def entry_ids(partition: int, ledger_id: int, entry_id: int, count: int) -> list[MessageId]:
    """The ids of the ``count`` messages of one entry (batch index -1 when it
    holds one), made without ``__init__``'s conversions: the producer makes
    one per message sent, from ints it already holds."""
    if count == 1:
        keys: Iterable[tuple[int, int, int, int]] = ((ledger_id, entry_id, partition, -1),)
    else:
        keys = ((ledger_id, entry_id, partition, i) for i in range(count))
    out = []
    for key in keys:
        mid = _new(MessageId)
        mid._key = key
        mid._topic = None
        out.append(mid)
    return out
