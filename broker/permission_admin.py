"""pulsar-admin's permission verbs: grants on namespaces, topics and
subscriptions, kept in the namespace's ``auth_policies``
(``broker/permissions.py``) and changed by compare-and-set like any other
policy. Every broker notices the change through its policy watch."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from broker.errors import BrokerError
from broker.namespaces import NamespacePolicies, Namespaces, parse_namespace
from broker.permissions import AuthPolicies, read_actions, read_roles
from protos import common_pb2
from protos.topic_name import TopicName


def _role(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise BrokerError(f"role {value!r}: give a role name", common_pb2.INVALID_ARGUMENT)
    return value.strip()


def _subscription(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise BrokerError(
            f"subscription {value!r}: give a subscription name", common_pb2.INVALID_ARGUMENT
        )
    return value


def _grants_doc(auth: AuthPolicies, topic: str = "") -> dict[str, list[str]]:
    """role -> actions on the namespace, or (with ``topic``) on the topic:
    what its namespace grants plus what the topic itself grants, as
    ``topics permissions`` answers in Pulsar."""
    roles = set(auth.namespace_auth) | (
        set(auth.destination_auth.get(topic, {})) if topic else set()
    )
    return {
        role: sorted(a.value for a in auth.actions_of(role, (topic,) if topic else ()))
        for role in sorted(roles)
    }


class PermissionAdministration:
    def __init__(self, namespaces: Namespaces) -> None:
        self.namespaces = namespaces

    async def _change_auth(self, namespace: str, change: Any) -> AuthPolicies:
        def apply(p: NamespacePolicies) -> NamespacePolicies:
            return replace(p, auth=change(p.auth))

        after = await self.namespaces.update(namespace, apply, common_pb2.NOT_FOUND)
        return after.auth

    # ------------------------------------------------------------ namespaces

    async def namespace_permissions(self, namespace: str) -> dict[str, list[str]]:
        ns = await self.namespaces.policies(parse_namespace(namespace), common_pb2.NOT_FOUND)
        return _grants_doc(ns.auth)

    async def grant_namespace(self, namespace: str, role: Any, actions: Any) -> dict[str, Any]:
        who, what = _role(role), read_actions(actions)
        auth = await self._change_auth(parse_namespace(namespace), lambda a: a.granted(who, what))
        return _grants_doc(auth)

    async def revoke_namespace(self, namespace: str, role: Any) -> dict[str, Any]:
        who = _role(role)
        auth = await self._change_auth(parse_namespace(namespace), lambda a: a.revoked(who))
        return _grants_doc(auth)

    async def grant_subscription(
        self, namespace: str, subscription: Any, roles: Any
    ) -> dict[str, list[str]]:
        sub, who = _subscription(subscription), read_roles(roles)
        auth = await self._change_auth(
            parse_namespace(namespace), lambda a: a.subscription_roles_set(sub, who)
        )
        return {s: sorted(r) for s, r in sorted(auth.subscription_auth_roles.items())}

    async def revoke_subscription(
        self, namespace: str, subscription: Any, role: Any
    ) -> dict[str, list[str]]:
        sub, who = _subscription(subscription), _role(role)
        auth = await self._change_auth(
            parse_namespace(namespace), lambda a: a.subscription_role_removed(sub, who)
        )
        return {s: sorted(r) for s, r in sorted(auth.subscription_auth_roles.items())}

    # ------------------------------------------------------------ topics

    @staticmethod
    def _topic(topic: str) -> TopicName:
        """Grants are kept on the partitioned topic's name: they cover its partitions."""
        return TopicName.parse(topic).partitioned_topic_name

    async def topic_permissions(self, topic: str) -> dict[str, list[str]]:
        name = self._topic(topic)
        ns = await self.namespaces.policies(name.namespace_name, common_pb2.NOT_FOUND)
        return _grants_doc(ns.auth, name.full_name)

    async def grant_topic(self, topic: str, role: Any, actions: Any) -> dict[str, Any]:
        name, who, what = self._topic(topic), _role(role), read_actions(actions)
        auth = await self._change_auth(
            name.namespace_name, lambda a: a.granted(who, what, name.full_name)
        )
        return _grants_doc(auth, name.full_name)

    async def revoke_topic(self, topic: str, role: Any) -> dict[str, Any]:
        name, who = self._topic(topic), _role(role)

        def change(auth: AuthPolicies) -> AuthPolicies:
            if who not in auth.destination_auth.get(name.full_name, {}):
                raise BrokerError(
                    f"role {who!r} has no permission set on topic {name} itself "
                    "(a namespace grant is revoked on the namespace)",
                    common_pb2.PRECONDITION_FAILED,
                )
            return auth.revoked(who, name.full_name)

        auth = await self._change_auth(name.namespace_name, change)
        return _grants_doc(auth, name.full_name)
