"""Tenants: their records (``/admin/tenants/{tenant}``, Pulsar's TenantInfo)
read and written here only.

A tenant exists when its record does. ``public`` (the default namespace's)
and ``magnetar`` (the system namespace's) are created by the first broker
that starts. A namespace can be created only under an existing tenant, and
a tenant is deleted only once it has no namespace left (the admin layer
deletes them first when forced). Changes are compare-and-set, so two
administrators never lose each other's change.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from broker.errors import BrokerError
from broker.policy_values import read_object
from broker.settings import BrokerSettings
from metastore.client import MetastoreClient
from protos import common_pb2, metadata_paths
from protos.errors import MagnetarServerError
from protos.topic_name import DEFAULT_TENANT, SYSTEM_NAMESPACE

SYSTEM_TENANT = SYSTEM_NAMESPACE.split("/")[0]
_NAME = re.compile(r"^[A-Za-z0-9_=:.\-]+$")  # as a topic name's tenant part


@dataclass(frozen=True)
class TenantInfo:
    """Pulsar's TenantInfo: ``adminRoles``, ``allowedClusters``."""

    admin_roles: tuple[str, ...] = ()
    allowed_clusters: tuple[str, ...] = ()
    stored: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def document(self) -> dict[str, Any]:
        doc = dict(self.stored)
        doc["adminRoles"] = list(self.admin_roles)
        doc["allowedClusters"] = list(self.allowed_clusters)
        return doc

    @classmethod
    def from_document(cls, value: Any) -> TenantInfo:
        doc = read_object(value, "tenant info")
        roles = doc.get("adminRoles", [])
        clusters = doc.get("allowedClusters", [])
        for what, items in (("adminRoles", roles), ("allowedClusters", clusters)):
            if not isinstance(items, list) or not all(isinstance(i, str) and i for i in items):
                raise invalid_tenant(f"tenant info: {what} = {items!r} is not a list of names")
        return cls(tuple(roles), tuple(clusters), doc)


def invalid_tenant(message: str) -> BrokerError:
    return BrokerError(message, common_pb2.INVALID_ARGUMENT)


def parse_tenant(name: str) -> str:
    if not _NAME.match(name or ""):
        raise BrokerError(
            f"tenant {name!r} is not a valid name (letters, digits and _ = : . -)",
            common_pb2.INVALID_ARGUMENT,
        )
    return name


def check_deletable(name: str) -> None:
    """``public`` and the system tenant are the cluster's own: NOT_ALLOWED."""
    if name in (DEFAULT_TENANT, SYSTEM_TENANT):
        raise BrokerError(
            f"tenant {name} is the cluster's own and cannot be deleted", common_pb2.NOT_ALLOWED
        )


def tenant_missing(name: str) -> BrokerError:
    return BrokerError(f"tenant {name} does not exist", common_pb2.NOT_FOUND)


class Tenants:
    def __init__(self, metastore: MetastoreClient, settings: BrokerSettings) -> None:
        self.metastore = metastore
        self.settings = settings

    def _check_clusters(self, clusters: Sequence[str]) -> None:
        unknown = [c for c in clusters if c != self.settings.cluster_name]
        if unknown:
            raise BrokerError(
                f"cluster(s) {', '.join(unknown)} do not exist; this cluster is "
                f"{self.settings.cluster_name!r}",
                common_pb2.PRECONDITION_FAILED,
            )

    async def read(self, name: str) -> tuple[TenantInfo, int] | None:
        stat = await self.metastore.get(metadata_paths.tenant(parse_tenant(name)))
        if stat is None:
            return None
        return TenantInfo.from_document(json.loads(stat.value)), stat.version

    async def get(self, name: str) -> TenantInfo:
        found = await self.read(name)
        if found is None:
            raise tenant_missing(name)
        return found[0]

    async def exists(self, name: str) -> bool:
        return await self.read(name) is not None

    async def names(self) -> list[str]:
        return sorted(await self.metastore.children(metadata_paths.TENANTS))

    async def create(self, name: str, info: TenantInfo) -> None:
        self._check_clusters(info.allowed_clusters)
        body = json.dumps(info.document()).encode()
        try:
            await self.metastore.put(
                metadata_paths.tenant(parse_tenant(name)), body, expected_version=-1
            )
        except MagnetarServerError as exc:
            if exc.code != common_pb2.BAD_VERSION:
                raise
            raise BrokerError(f"tenant {name} already exists", common_pb2.CONFLICT) from None

    async def update(self, name: str, info: TenantInfo) -> None:
        """Replace the tenant's info (compare-and-set on the version read)."""
        self._check_clusters(info.allowed_clusters)
        found = await self.read(name)
        if found is None:
            raise tenant_missing(name)
        body = json.dumps(info.document()).encode()
        try:
            await self.metastore.put(metadata_paths.tenant(name), body, expected_version=found[1])
        except MagnetarServerError as exc:
            if exc.code != common_pb2.BAD_VERSION:
                raise
            raise BrokerError(
                f"tenant {name} was changed by another administrator meanwhile; read it again",
                common_pb2.CONFLICT,
            ) from None

    async def delete(self, name: str) -> None:
        """Delete the record (the caller checked that no namespace is left)."""
        check_deletable(name)
        if not await self.metastore.delete(metadata_paths.tenant(parse_tenant(name))):
            raise tenant_missing(name)

    async def ensure_default(self) -> None:
        """``public`` and the system tenant, allowed in this cluster."""
        info = TenantInfo(allowed_clusters=(self.settings.cluster_name,))
        for name in (DEFAULT_TENANT, SYSTEM_TENANT):
            try:
                await self.create(name, info)
            except BrokerError as exc:
                if exc.code != common_pb2.CONFLICT:
                    raise
