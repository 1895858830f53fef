"""The broker's authorization: which :class:`broker.permissions.Need` each
admin operation has (:data:`OPERATION_RULES`; a test checks it against
:class:`broker.administration.Administration`), what a call is about
(:class:`broker.permissions.Target`), and the records the decision reads.
The RPCs' own table is in the front-end, ``broker/access_rules.py``.

The decision reads the namespace's grants and its tenant's admin roles.
They are remembered per namespace (a bounded map,
``authorization_cache_max_namespaces``) and forgotten when the policy watch
sees either record change (``broker/policy_watch.py``), which also makes the
broker judge its connected producers and consumers again
(:meth:`BrokerAuthorizer.recheck`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from broker.namespaces import Namespaces
from broker.permissions import AuthPolicies, Need, Target, decide
from broker.topic import TopicBase
from protos.topic_name import TopicName


def topic_target(topic: str, subscription: str = "") -> Target:
    name = TopicName.parse(topic)
    return Target(
        tenant=name.tenant,
        namespace=name.namespace_name,
        topics=tuple(dict.fromkeys((name.full_name, name.partitioned_topic_name.full_name))),
        subscription=subscription,
    )


def namespace_target(namespace: str) -> Target:
    tenant, sep, ns = namespace.partition("/")
    if not sep or not tenant or not ns or "/" in ns:
        raise ValueError(f"namespace {namespace!r} is not tenant/namespace")
    return Target(tenant=tenant, namespace=namespace)


def arguments_target(arguments: dict[str, Any]) -> Target:
    """What an admin operation is about: its topic, else its namespace, else its tenant."""
    topic, namespace, tenant = (arguments.get(k) for k in ("topic", "namespace", "tenant"))
    subscription = arguments.get("subscription") or ""
    if not isinstance(subscription, str):
        subscription = ""
    if isinstance(topic, str) and topic:
        return topic_target(topic, subscription)
    if isinstance(namespace, str) and namespace:
        return namespace_target(namespace)
    if isinstance(tenant, str) and tenant:
        return Target(tenant=tenant)
    raise ValueError("the call names no topic, namespace or tenant")


# Admin operations (Call) by name. Listing and reading what a role may
# reach follows Pulsar: stats need lookup, subscription work needs consume.
_TENANT_ADMIN = Need.TENANT_ADMIN
OPERATION_RULES: dict[str, Need] = {
    "tenants.list": Need.SUPERUSER,
    "tenants.get": _TENANT_ADMIN,
    "tenants.create": Need.SUPERUSER,
    "tenants.update": Need.SUPERUSER,
    "tenants.delete": Need.SUPERUSER,
    "namespaces.list": _TENANT_ADMIN,
    "namespaces.create": _TENANT_ADMIN,
    "namespaces.policies": _TENANT_ADMIN,
    "namespaces.topics": Need.NAMESPACE_LOOKUP,
    "namespaces.delete": _TENANT_ADMIN,
    "namespaces.clear-backlog": _TENANT_ADMIN,
    "namespaces.unsubscribe": _TENANT_ADMIN,
    "namespaces.permissions": _TENANT_ADMIN,
    "namespaces.grant-permission": _TENANT_ADMIN,
    "namespaces.revoke-permission": _TENANT_ADMIN,
    "namespaces.grant-subscription-permission": _TENANT_ADMIN,
    "namespaces.revoke-subscription-permission": _TENANT_ADMIN,
    "policies.get": _TENANT_ADMIN,
    "policies.set": _TENANT_ADMIN,
    "policies.remove": _TENANT_ADMIN,
    "topics.delete": _TENANT_ADMIN,
    "topics.permissions": _TENANT_ADMIN,
    "topics.grant-permission": _TENANT_ADMIN,
    "topics.revoke-permission": _TENANT_ADMIN,
    "topics.unsubscribe": Need.CONSUME,
    "topics.clear-backlog": Need.CONSUME,
    "topics.stats": Need.LOOKUP,
    "topics.peek-messages": Need.CONSUME,
    "topics.skip": Need.CONSUME,
    "topics.stats-internal": Need.LOOKUP,
    "topics.reset-cursor": Need.CONSUME,
    "topics.reset-cursor-here": Need.CONSUME,
    "topics.partitioned-stats": Need.LOOKUP,
    "topics.last-message-id": Need.CONSUME,
    "topics.terminate": _TENANT_ADMIN,
    "topics.compact": _TENANT_ADMIN,
    "topics.compaction-status": Need.LOOKUP,
    "topics.expire-messages": Need.CONSUME,
    "topics.expire-messages-all-subscriptions": Need.CONSUME,
    "schemas.get": Need.LOOKUP,
    "schemas.upload": _TENANT_ADMIN,
    "schemas.delete": _TENANT_ADMIN,
    "bookies.list": Need.SUPERUSER,
    "bookies.decommission": Need.SUPERUSER,
    "bookies.recover": Need.SUPERUSER,
    "bookies.under-replicated": Need.SUPERUSER,
}


@dataclass(frozen=True)
class NamespaceAccess:
    tenant_admins: frozenset[str]
    auth: AuthPolicies


class BrokerAuthorizer:
    """Judges a role's need on a target from the records (protocol-free;
    ``broker/access_rules.py`` turns RPCs into needs and targets)."""

    def __init__(
        self,
        namespaces: Namespaces,
        superusers: frozenset[str],
        max_cached: int,
        enabled: bool = True,
    ) -> None:
        self.enabled = enabled  # authorization_enabled: else recheck closes nothing
        self.namespaces = namespaces
        self.superusers = superusers
        self.max_cached = max(0, max_cached)
        self._cache: dict[str, NamespaceAccess] = {}
        self._generation = 0  # bumped by forget(): fills begun before it are not kept

    # ------------------------------------------------------------ records

    async def access_of(self, target: Target) -> NamespaceAccess:
        """The grants and tenant admins that judge ``target`` (remembered per namespace)."""
        key = target.namespace or f"{target.tenant}/"
        found = self._cache.get(key)
        if found is not None:
            return found
        generation = self._generation
        info = await self.namespaces.tenants.read(target.tenant) if target.tenant else None
        admins = frozenset(info[0].admin_roles) if info is not None else frozenset()
        record = await self.namespaces.read(target.namespace) if target.namespace else None
        auth = record[0].auth if record is not None else AuthPolicies()
        found = NamespaceAccess(admins, auth)
        # A record that changed while these reads were out may be older than
        # what forget() was told: use it for this call, do not remember it.
        if self.max_cached and generation == self._generation:
            if len(self._cache) >= self.max_cached:
                del self._cache[next(iter(self._cache))]
            self._cache[key] = found
        return found

    def forget(self, namespace: str | None = None, tenant: str | None = None) -> None:
        """Records changed: a namespace's, a tenant's (all its namespaces), or all (None, None)."""
        self._generation += 1
        if namespace is None and tenant is None:
            self._cache.clear()
        elif namespace is not None:
            self._cache.pop(namespace, None)
        else:
            prefix = f"{tenant}/"
            for key in [k for k in self._cache if k.startswith(prefix)]:
                del self._cache[key]

    # ------------------------------------------------------------ judging

    async def still_allowed(self, role: str, topic: str, subscription: str) -> bool:
        """A producer (no ``subscription``) or consumer just created may keep
        what it was admitted for (a grant may have gone meanwhile)."""
        need = Need.CONSUME if subscription else Need.PRODUCE
        return (await self.allowed(role, need, topic_target(topic, subscription)))[0]

    async def allowed(self, role: str, need: Need, target: Target | None) -> tuple[bool, str]:
        if role in self.superusers:
            return True, "superuser"
        if target is None:
            verdict = decide(role, need, Target(), self.superusers, frozenset(), AuthPolicies())
            return verdict.allowed, verdict.why
        access = await self.access_of(target)
        verdict = decide(role, need, target, self.superusers, access.tenant_admins, access.auth)
        return verdict.allowed, verdict.why

    async def recheck(
        self, topics: Iterable[TopicBase], namespace: str | None = None, tenant: str | None = None
    ) -> int:
        """Judge the connected producers and consumers of the topics in
        ``namespace`` (or ``tenant``, or all) again: one that may no longer
        produce or consume is closed (its client's reconnection is then
        refused with AuthorizationError). Returns how many were closed."""
        if not self.enabled:
            return 0
        closed = 0
        for topic in list(topics):
            name = topic.name
            if (namespace and name.namespace_name != namespace) or (
                tenant and name.tenant != tenant
            ):
                continue
            closed += await self._recheck_producers(topic)
            closed += await self._recheck_consumers(topic)
        return closed

    async def _recheck_producers(self, topic: TopicBase) -> int:
        closed = 0
        target = topic_target(topic.name.full_name)
        for producer in list(topic.producers.values()):
            if producer.role is None or producer.on_topic_closed is None:
                continue
            if not (await self.allowed(producer.role, Need.PRODUCE, target))[0]:
                producer.on_topic_closed()
                closed += 1
        return closed

    async def _recheck_consumers(self, topic: TopicBase) -> int:
        closed = 0
        for sub in list(topic.subscriptions.values()):
            target = topic_target(topic.name.full_name, sub.name)
            for consumer in list(sub.consumers):
                if consumer.role is None or consumer.closed:
                    continue
                if not (await self.allowed(consumer.role, Need.CONSUME, target))[0]:
                    consumer.close()
                    closed += 1
        return closed
