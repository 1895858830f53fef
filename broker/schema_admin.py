"""``schemas get / upload / delete`` (pulsar-admin's verbs) over the schema
registry. Answers use Pulsar's field names: ``{"version", "type",
"timestamp", "data", "properties"}`` for a version (``data`` is the
definition; for KEY_VALUE a JSON object of its key and value parts)."""

from __future__ import annotations

from typing import Any

from broker.errors import BrokerError
from broker.namespaces import Namespaces
from broker.schema_compatibility import validate
from broker.schema_registry import SchemaRegistry
from protos import common_pb2
from protos.schema_info import SchemaInfo, schema_type_of
from protos.topic_name import TopicName


def _invalid(message: str) -> BrokerError:
    return BrokerError(message, common_pb2.INVALID_ARGUMENT)


def schema_from_upload(doc: Any) -> SchemaInfo:
    """The ``schemas upload`` file: ``{"type", "schema", "properties"}``
    (Pulsar's PostSchemaPayload); anything else is a typed error naming it."""
    if not isinstance(doc, dict):
        raise _invalid(f"a schema upload is a JSON object, not {type(doc).__name__}")
    unknown = set(doc) - {"type", "schema", "properties"}
    if unknown:
        raise _invalid(f"unknown fields in the schema upload: {', '.join(sorted(unknown))}")
    if "type" not in doc:
        raise _invalid("the schema upload has no 'type'")
    definition = doc.get("schema", "")
    if not isinstance(definition, str):
        raise _invalid("'schema' is the definition as a string (Avro JSON for AVRO and JSON)")
    props = doc.get("properties") or {}
    if not isinstance(props, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in props.items()
    ):
        raise _invalid("'properties' is an object of strings")
    kind = schema_type_of(doc["type"])
    info = SchemaInfo(kind, kind.name, definition.encode(), dict(props))
    validate(info, "the uploaded schema")
    return info


def _answer(version: int, info: SchemaInfo) -> dict[str, Any]:
    shown = info.to_json()
    return {
        "version": version,
        "type": shown["type"],
        "data": shown["schema"],
        "properties": shown["properties"],
    }


class SchemaAdministration:
    def __init__(self, registry: SchemaRegistry, namespaces: Namespaces) -> None:
        self.registry = registry
        self.namespaces = namespaces

    async def get(self, topic: str, version: int | None = None) -> dict[str, Any]:
        found, info = await self.registry.get(
            TopicName.parse(topic), -1 if version is None else version
        )
        return _answer(found, info)

    async def upload(self, topic: str, schema: Any) -> dict[str, Any]:
        """Register ``schema`` when the topic's compatibility strategy accepts it
        (auto update does not apply to administrators)."""
        name = TopicName.parse(topic)
        info = schema_from_upload(schema)
        policies = await self.namespaces.applied_to(name)
        version = await self.registry.upload(name, info, policies)
        return {"version": version}

    async def delete(self, topic: str) -> dict[str, Any]:
        """Every live version deleted (a tombstone version; old messages keep
        theirs). NOT_FOUND when the topic has none."""
        name = TopicName.parse(topic)
        version = await self.registry.delete(name)
        if version is None:
            raise BrokerError(f"{name} has no schema", common_pb2.NOT_FOUND)
        return {"version": version}
