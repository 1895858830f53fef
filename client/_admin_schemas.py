"""``admin.schemas``: a topic's schema versions (docs/schemas.md), with
pulsar-admin's verbs. A version answers ``{"version", "type", "data",
"properties"}``; ``data`` is the definition (Avro JSON for AVRO and JSON)."""

from __future__ import annotations

from typing import Any

from client._admin_policies import AdminCalls


class SchemaVerbs:
    def __init__(self, admin: AdminCalls) -> None:
        self._admin = admin

    def get(self, topic: str, version: int | None = None) -> dict[str, Any]:
        """The latest live version, or ``version``."""
        return self._admin._op("schemas.get", topic=topic, version=version)  # type: ignore[no-any-return]

    def upload(self, topic: str, schema: dict[str, Any]) -> dict[str, Any]:
        """Register ``{"type", "schema", "properties"}`` (Pulsar's upload file)
        when the topic's compatibility strategy accepts it; ``{"version"}``."""
        return self._admin._op("schemas.upload", idempotent=False, topic=topic, schema=schema)  # type: ignore[no-any-return]

    def delete(self, topic: str) -> dict[str, Any]:
        """Delete every version (messages keep theirs); ``{"version"}`` of the deletion."""
        return self._admin._op("schemas.delete", idempotent=False, topic=topic)  # type: ignore[no-any-return]
