"""The admin operations on tenants, namespaces and policies
(pulsar-admin's ``tenants``, ``namespaces`` and the topic-level policy
verbs), independent of any protocol: each answers a JSON-able document with
Pulsar's field names, or raises a typed error.

These change metastore records only. A policy change reaches the topics
through the metastore: every broker watches the policy records
(:mod:`broker.policy_watch`) and its loaded topics apply the change, so
the broker that took the call is no different from the others.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from bookie.ledger_client import LedgerClient
from broker.errors import BrokerError
from broker.namespaces import NamespacePolicies, Namespaces, applied_policies, parse_namespace
from broker.policies import (
    BY_ATTR,
    BacklogQuotaType,
    Persistence,
    Policies,
    PolicyField,
    field_by_verb,
)
from broker.policy_values import read_backlog_quota, read_bool, read_enum
from broker.tenants import TenantInfo, parse_tenant
from protos import common_pb2
from protos.topic_name import TopicName


def _names(value: Any, what: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise BrokerError(f"{what} = {value!r} is not a list of names", common_pb2.INVALID_ARGUMENT)
    return tuple(value)


class PolicyAdministration:
    def __init__(self, namespaces: Namespaces, ledgers: LedgerClient) -> None:
        self.namespaces = namespaces
        self.tenants = namespaces.tenants
        self.ledgers = ledgers

    # ------------------------------------------------------------ tenants

    async def tenants_list(self) -> list[str]:
        return await self.tenants.names()

    async def tenants_get(self, tenant: str) -> dict[str, Any]:
        info = await self.tenants.get(tenant)
        return {
            "adminRoles": list(info.admin_roles),
            "allowedClusters": list(info.allowed_clusters),
        }

    async def tenants_create(
        self, tenant: str, admin_roles: Any = None, allowed_clusters: Any = None
    ) -> dict[str, Any]:
        clusters = _names(allowed_clusters, "allowed clusters") or (
            self.namespaces.settings.cluster_name,
        )
        info = TenantInfo(_names(admin_roles, "admin roles"), clusters)
        await self.tenants.create(tenant, info)
        return await self.tenants_get(tenant)

    async def tenants_update(
        self, tenant: str, admin_roles: Any = None, allowed_clusters: Any = None
    ) -> dict[str, Any]:
        """Change what is given; what is not stays."""
        before = await self.tenants.get(tenant)
        info = replace(
            before,
            admin_roles=before.admin_roles
            if admin_roles is None
            else _names(admin_roles, "admin roles"),
            allowed_clusters=before.allowed_clusters
            if allowed_clusters is None
            else _names(allowed_clusters, "allowed clusters"),
        )
        await self.tenants.update(tenant, info)
        return await self.tenants_get(tenant)

    # ------------------------------------------------------------ namespaces

    async def namespaces_list(self, tenant: str) -> list[str]:
        return await self.namespaces.names(parse_tenant(tenant))

    async def namespaces_create(
        self, namespace: str, bundles: Any = None, clusters: Any = None
    ) -> dict[str, Any]:
        if bundles is not None and (isinstance(bundles, bool) or not isinstance(bundles, int)):
            raise BrokerError(
                f"bundles = {bundles!r} is not a whole number", common_pb2.INVALID_ARGUMENT
            )
        created = await self.namespaces.create(namespace, bundles, _names(clusters, "clusters"))
        return created.document()

    async def namespaces_policies(self, namespace: str) -> dict[str, Any]:
        ns = parse_namespace(namespace)
        return (await self.namespaces.policies(ns, common_pb2.NOT_FOUND)).document()

    # ------------------------------------------------------------ policies

    async def _topic_level(self, topic: str) -> tuple[TopicName, NamespacePolicies]:
        """A topic whose policies can be set (its namespace and the topic
        exist), and its namespace's policies."""
        name = TopicName.parse(topic).partitioned_topic_name
        ns = await self.namespaces.policies(name.namespace_name, common_pb2.NOT_FOUND)
        if not (
            await self.namespaces.partitions_of(name)
            or await self.namespaces.managed_ledger_exists(name)
        ):
            raise BrokerError(f"topic {name} does not exist", common_pb2.NOT_FOUND)
        return name, ns

    async def _check(self, f: PolicyField, value: Any) -> Any:
        """Read a new value (validated); persistence also needs enough writable bookies."""
        typed = f.read(value)
        if isinstance(typed, Persistence):
            writable = len(await self.ledgers.writable_bookies())
            if typed.ensemble > writable:
                raise BrokerError(
                    f"persistence E={typed.ensemble}: only {writable} bookie(s) are writable",
                    common_pb2.INVALID_ARGUMENT,
                )
        return typed

    async def get_policy(
        self, policy: str, namespace: str = "", topic: str = "", applied: Any = False
    ) -> Any:
        """One policy's value at the namespace or topic level (null when not
        set there), or with ``applied`` the value that level applies."""
        f = field_by_verb(policy, bool(topic))
        own = None
        if topic:
            name, ns = await self._topic_level(topic)
            where = name.namespace_name
            found = await self.namespaces.topic_policies(name)
            own = None if found is None else found[0]
        else:
            where = parse_namespace(namespace)
            ns = await self.namespaces.policies(where, common_pb2.NOT_FOUND)
        if read_bool(applied, "applied"):
            effective = applied_policies(where, own, ns.policies, self.namespaces.settings)
            return f.write(getattr(effective, f.attr))
        level = own if topic else ns.policies
        value = None if level is None else getattr(level, f.attr)
        return None if value is None else f.write(value)

    async def set_policy(
        self,
        policy: str,
        value: Any = None,
        namespace: str = "",
        topic: str = "",
        quota_type: Any = None,
    ) -> Any:
        """Set one policy (for ``backlog-quota``, the quota of ``quota_type``)."""
        return await self._change(policy, value, namespace, topic, quota_type, remove=False)

    async def remove_policy(
        self, policy: str, namespace: str = "", topic: str = "", quota_type: Any = None
    ) -> Any:
        """Remove one policy: the next level's value applies again."""
        return await self._change(policy, None, namespace, topic, quota_type, remove=True)

    async def _change(
        self, policy: str, value: Any, namespace: str, topic: str, quota_type: Any, remove: bool
    ) -> Any:
        """Set or remove one policy by compare-and-set on its level's record;
        the new value is computed inside the change, so a concurrent change
        of another policy (or another quota type) is never lost."""
        f = field_by_verb(policy, bool(topic))
        if f is BY_ATTR["backlog_quotas"]:
            kind = read_enum(
                BacklogQuotaType,
                quota_type or BacklogQuotaType.DESTINATION_STORAGE.value,
                "backlog quota type",
            )
            quota = None if remove else read_backlog_quota(value)

            def change(p: Policies) -> Policies:
                quotas = dict(p.backlog_quotas or {})
                if quota is None:
                    quotas.pop(kind, None)
                else:
                    quotas[kind] = quota
                return p.with_value(f.attr, quotas or None)

        else:
            typed = None if remove else await self._check(f, value)

            def change(p: Policies) -> Policies:
                return p.with_value(f.attr, typed)

        if topic:
            name, _ = await self._topic_level(topic)
            result = getattr(await self.namespaces.update_topic_policies(name, change), f.attr)
        else:
            ns = parse_namespace(namespace)
            after = await self.namespaces.update(
                ns, lambda p: replace(p, policies=change(p.policies)), common_pb2.NOT_FOUND
            )
            result = getattr(after.policies, f.attr)
        return None if result is None else f.write(result)
