"""How producers and consumers use their schema (``client.schema``): the
schema they register, the bytes ``send(value)`` writes, and how a received
message's ``value()`` is decoded.

A producer's schema goes with its creation; the broker's registry answers
with its version, which every entry then carries (``schema_version``). A
``KeyValueSchema`` with SEPARATED encoding puts the key in the message key
(base64, ``partition_key_b64_encoded``), as Pulsar does. ``send(None)`` is a
tombstone whatever the schema.

A consumer decodes a message written under its own version (or under none)
with its schema; one written under another version is decoded against that
writer's schema, which the consumer fetches from the broker the first time
it meets the version (``GetSchema``) and keeps in a cache of at most
``WRITER_SCHEMAS_MAX`` versions per consumer — fetched before the messages
are queued, so ``Message.value()`` never waits on the network.
"""

from __future__ import annotations

import base64
import collections
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from client.exceptions import InvalidConfiguration, from_wire
from client.schema import AutoConsumeSchema, KeyValueSchema, Schema
from protos import broker_pb2, common_pb2
from protos.schema_info import SchemaInfo, SchemaType, decode_version, from_data, to_data

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from client._connection import Connection
    from client.message import Message

# Writer schemas one consumer remembers (a topic's versions; the broker
# bounds them with max_schema_versions_per_topic).
WRITER_SCHEMAS_MAX = 1000
SCHEMA_FETCH_TIMEOUT_S = 10  # one GetSchema call
# Readers that need the writer's definition to decode another version.
_NEEDS_WRITER = frozenset(
    {
        SchemaType.AVRO,
        SchemaType.JSON,
        SchemaType.KEY_VALUE,
        SchemaType.AUTO_CONSUME,
        SchemaType.PROTOBUF_NATIVE,
    }
)


def check_schema(schema: Any, producer: bool) -> None:
    if schema is None:
        return
    if not isinstance(schema, Schema):
        raise InvalidConfiguration(
            f"schema must be a client.schema schema (BytesSchema(), AvroSchema(Record), ...), "
            f"not {type(schema).__name__}"
        )
    if producer and isinstance(schema, AutoConsumeSchema):
        raise InvalidConfiguration("AutoConsumeSchema is for consumers and readers, not producers")


def schema_data(schema: Schema | None) -> common_pb2.SchemaData | None:
    """What a producer or consumer registers (None: no schema)."""
    return None if schema is None else to_data(schema.schema_info())


def encode_value(schema: Schema | None, content: Any, kwargs: dict[str, Any]) -> Any:
    """The payload ``send(content)`` stores (``kwargs`` gains the message key
    of a SEPARATED KEY_VALUE value); a value that does not fit the schema
    raises ``InvalidMessage`` and nothing is sent."""
    if schema is None or content is None:
        return content
    if isinstance(schema, KeyValueSchema) and schema.is_separated():
        key, value = schema.encode_separated(content)
        kwargs["partition_key"] = base64.b64encode(key).decode()
        kwargs["key_b64"] = True
        return value
    return schema.encode(content)


class WriterSchemas:
    """The writer schemas of one consumer's topic, by version (bounded LRU)."""

    def __init__(self, schema: Schema | None) -> None:
        self.schema = schema
        self.own_version: int | None = None
        self._known: collections.OrderedDict[int, SchemaInfo] = collections.OrderedDict()

    def missing(self, messages: Iterable[Message]) -> set[int]:
        """Versions these messages need fetched before they can be decoded."""
        if self.schema is None or self.schema.schema_info().type not in _NEEDS_WRITER:
            return set()
        out = set()
        for m in messages:
            version = decode_version(m.schema_version())
            if version is not None and version != self.own_version and version not in self._known:
                out.add(version)
        return out

    async def fetch(self, conn: Connection, topic: str, versions: set[int]) -> None:
        """Learn these versions' schemas; one that cannot be fetched is
        logged, and its messages decode with the consumer's own schema."""
        for version in sorted(versions):
            try:
                resp = await conn.stub.GetSchema(
                    broker_pb2.GetSchemaRequest(topic=topic, version=version),
                    timeout=SCHEMA_FETCH_TIMEOUT_S,
                )
                if resp.error.code:
                    raise from_wire(resp.error)
            except Exception as exc:
                log.warning("%s: fetching schema version %d failed: %s", topic, version, exc)
                continue
            self._known[version] = from_data(resp.schema)
            while len(self._known) > WRITER_SCHEMAS_MAX:
                self._known.popitem(last=False)

    def attach(self, messages: Iterable[Message]) -> None:
        """Give each message what its ``value()`` decodes with."""
        if self.schema is None:
            return
        for m in messages:
            version = decode_version(m.schema_version())
            writer = None
            if version is not None and version != self.own_version:
                writer = self._known.get(version)
                if writer is not None:
                    self._known.move_to_end(version)
            m.use_schema(self.schema, writer)
