"""Schemas: how a producer turns values into payload bytes and a consumer
turns them back, with the names of Pulsar's Python client (``pulsar.schema``)
plus the schemas its Java client adds (BOOLEAN, INT8..INT64, FLOAT, DOUBLE,
KEY_VALUE, AUTO_CONSUME).

Theory of operation. A schema is a pure value converter; it never touches
the network. It has three faces:

* ``encode(obj) -> bytes`` and ``decode(bytes) -> obj``: the payload of one
  message under this schema's own definition;
* ``schema_info() -> SchemaInfo``: what the topic's schema registry stores
  (type, name, definition bytes, properties; ``protos.schema_info``), worked
  out once per schema. Two schemas are equal when their SchemaInfo are;
* ``decode_with_writer(bytes, writer)``: the payload as written under
  another version (the writer's SchemaInfo, fetched from the registry by
  the message's schema version), projected onto this reader's definition.
  AVRO uses Avro's schema resolution, JSON keeps the reader's fields and
  fills defaults, KEY_VALUE does both parts, the rest only check the
  writer's type. ``AutoConsumeSchema`` reads any writer generically.

Records. ``Record`` subclasses declare an Avro record with field classes
(``String()``, ``Integer(required=True)``, ``Array(String())``, an Enum
class, a nested Record); ``Record.schema()`` is the Avro definition that
both AVRO and JSON register (``_record.py`` states the DSL's rules).

Errors. Misusing the DSL is ``TypeError`` / ``AttributeError``, as in
Pulsar. A value that does not fit the schema when encoded, and bytes that
are not a value of it when decoded, are ``InvalidMessage`` (the message
names the schema type and what was wrong). Data whose writer schema this
reader cannot read is ``IncompatibleSchema``; a schema built with bad
arguments is ``InvalidConfiguration`` (a ``ValueError``); a call a schema
does not offer (``encode`` on AUTO_CONSUME or a SEPARATED KEY_VALUE) is
``OperationNotSupported``.

Module map: ``_base`` (Schema, shared errors), ``_fields`` and ``_record``
(the Record DSL), ``_primitive``, ``_avro``, ``_json``, ``_protobuf``,
``_key_value``, ``_auto``.
"""

from client.schema._auto import AutoConsumeSchema
from client.schema._avro import AvroSchema
from client.schema._base import Schema
from client.schema._fields import (
    Boolean,
    Bytes,
    CustomEnum,
    Double,
    Field,
    Float,
    Integer,
    Long,
    Null,
    String,
)
from client.schema._json import JsonSchema
from client.schema._key_value import KeyValueEncoding, KeyValueSchema
from client.schema._primitive import (
    BooleanSchema,
    BytesSchema,
    DoubleSchema,
    FloatSchema,
    Int8Schema,
    Int16Schema,
    Int32Schema,
    Int64Schema,
    StringSchema,
)
from client.schema._protobuf import ProtobufNativeSchema
from client.schema._record import Array, Map, Record
from protos.schema_info import SchemaInfo, SchemaType

__all__ = [
    "Array",
    "AutoConsumeSchema",
    "AvroSchema",
    "Boolean",
    "BooleanSchema",
    "Bytes",
    "BytesSchema",
    "CustomEnum",
    "Double",
    "DoubleSchema",
    "Field",
    "Float",
    "FloatSchema",
    "Int8Schema",
    "Int16Schema",
    "Int32Schema",
    "Int64Schema",
    "Integer",
    "JsonSchema",
    "KeyValueEncoding",
    "KeyValueSchema",
    "Long",
    "Map",
    "Null",
    "ProtobufNativeSchema",
    "Record",
    "Schema",
    "SchemaInfo",
    "SchemaType",
    "String",
    "StringSchema",
]
