"""The schema registry: each topic's schema versions in the metastore, and
the shell that applies :mod:`broker.schema_admission`'s decisions.

A version is one key (``protos.metadata_paths.schema_version``) written once
with ``expected_version=-1``; two brokers registering at the same moment
race on that key, and the loser reads the history again and decides again
(at most ``SCHEMA_REGISTER_ATTEMPTS`` times). A deletion is a tombstone
version, so numbers never repeat. The partitions of a partitioned topic
share their topic's versions. How many versions a topic may have is bounded
by ``max_schema_versions_per_topic``.
"""

from __future__ import annotations

import base64
import json
import time
from typing import Any

from broker.errors import BrokerError
from broker.policies import AppliedPolicies
from broker.schema_admission import (
    Admission,
    History,
    admit_consumer,
    admit_producer,
    admit_upload,
    live_versions,
)
from metastore.client import MetastoreClient
from protos import common_pb2, metadata_paths
from protos.errors import MagnetarServerError
from protos.schema_info import SchemaInfo, schema_type_of
from protos.topic_name import TopicName

SCHEMA_REGISTER_ATTEMPTS = 3


def _document(info: SchemaInfo | None) -> bytes:
    now_ms = int(time.time() * 1000)
    if info is None:
        return json.dumps({"deleted": True, "timestamp": now_ms}).encode()
    return json.dumps(
        {
            "type": info.type.name,
            "name": info.name,
            "schema": base64.b64encode(info.schema).decode(),
            "properties": info.properties,
            "timestamp": now_ms,
        }
    ).encode()


def _info(value: bytes) -> SchemaInfo | None:
    doc = json.loads(value)
    if doc.get("deleted"):
        return None
    return SchemaInfo(
        schema_type_of(doc["type"]),
        doc.get("name", ""),
        base64.b64decode(doc.get("schema", "")),
        dict(doc.get("properties", {})),
    )


def incompatible(reason: str) -> BrokerError:
    return BrokerError(reason, common_pb2.INCOMPATIBLE_SCHEMA)


class SchemaRegistry:
    def __init__(self, metastore: MetastoreClient, max_versions_per_topic: int) -> None:
        self.metastore = metastore
        self.max_versions_per_topic = max_versions_per_topic

    async def history(self, topic: TopicName) -> list[SchemaInfo | None]:
        """Every version of ``topic``, oldest first (None: a deletion)."""
        records, _ = await self.metastore.list_prefix(metadata_paths.schemas(topic) + "/")
        return [_info(r.value) for r in records]

    async def get(self, topic: TopicName, version: int = -1) -> tuple[int, SchemaInfo]:
        """A version (-1: the latest live one); NOT_FOUND when there is none.
        A given version is one key read (consumers ask for writers' schemas)."""
        if version < 0:
            first, live = live_versions(await self.history(topic))
            if not live:
                raise BrokerError(f"{topic} has no schema", common_pb2.NOT_FOUND)
            return first + len(live) - 1, live[-1]
        stat = await self.metastore.get(metadata_paths.schema_version(topic, version))
        info = _info(stat.value) if stat is not None else None
        if info is None:
            raise BrokerError(
                f"{topic} has no schema version {version} (never registered, or a deletion)",
                common_pb2.NOT_FOUND,
            )
        return version, info

    async def admit_producer(
        self,
        topic: TopicName,
        info: SchemaInfo | None,
        policies: AppliedPolicies,
        history: History | None = None,
    ) -> int | None:
        """The schema version of a new producer (None: none); registers a
        new version when that is what the topic's policies allow. ``history``:
        the topic's, if the caller read it (while loading the topic)."""
        return await self._admit(
            topic,
            info,
            lambda history: admit_producer(
                history,
                info,
                policies.schema_compatibility_strategy,
                policies.is_allow_auto_update_schema,
                policies.schema_validation_enforced,
            ),
            history,
        )

    async def admit_consumer(
        self, topic: TopicName, info: SchemaInfo | None, policies: AppliedPolicies
    ) -> int | None:
        return await self._admit(
            topic,
            info,
            lambda history: admit_consumer(
                history,
                info,
                policies.schema_compatibility_strategy,
                policies.is_allow_auto_update_schema,
            ),
        )

    async def upload(self, topic: TopicName, info: SchemaInfo, policies: AppliedPolicies) -> int:
        version = await self._admit(
            topic,
            info,
            lambda history: admit_upload(history, info, policies.schema_compatibility_strategy),
        )
        assert version is not None
        return version

    async def delete(self, topic: TopicName) -> int | None:
        """Mark every live version deleted; the tombstone's version, or
        None when there was nothing live."""
        for _ in range(SCHEMA_REGISTER_ATTEMPTS):
            history = await self.history(topic)
            if not live_versions(history)[1]:
                return None
            if await self._store(topic, len(history), None):
                return len(history)
        raise self._gave_up(topic)

    async def _admit(
        self, topic: TopicName, info: SchemaInfo | None, decide: Any, read: History | None = None
    ) -> int | None:
        for _ in range(SCHEMA_REGISTER_ATTEMPTS):
            history: History = read if read is not None else await self.history(topic)
            read = None  # a retry follows a write another broker made: read again
            decision: Admission = decide(history)
            if decision.refused:
                raise incompatible(f"{topic}: {decision.refusal}")
            if not decision.register:
                return decision.version
            assert info is not None and decision.version is not None
            if await self._store(topic, decision.version, info):
                return decision.version
        raise self._gave_up(topic)

    async def _store(self, topic: TopicName, version: int, info: SchemaInfo | None) -> bool:
        """Write ``version`` once; False when another broker wrote it first."""
        if version >= self.max_versions_per_topic:
            raise BrokerError(
                f"{topic} has {version} schema versions; at most "
                f"{self.max_versions_per_topic} (max_schema_versions_per_topic)",
                common_pb2.NOT_ALLOWED,
            )
        key = metadata_paths.schema_version(topic, version)
        try:
            await self.metastore.put(key, _document(info), expected_version=-1)
        except MagnetarServerError as exc:
            if exc.code != common_pb2.BAD_VERSION:
                raise
            return False
        return True

    @staticmethod
    def _gave_up(topic: TopicName) -> BrokerError:
        return BrokerError(
            f"the schemas of {topic} kept changing; gave up after "
            f"{SCHEMA_REGISTER_ATTEMPTS} attempts",
            common_pb2.CONFLICT,
        )
