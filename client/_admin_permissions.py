"""pulsar-admin's permission verbs as methods of ``admin.namespaces`` and
``admin.topics`` (PulsarAdmin's names in snake_case). Actions are
``"produce"``, ``"consume"`` (and Pulsar's ``functions``, ``sources``,
``sinks``, ``packages``, stored but unused); answers map role → actions.
Only a superuser or an admin of the tenant may call them (docs/security.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from client._admin_policies import AdminCalls


def _names(values: Iterable[str] | str) -> list[str]:
    if isinstance(values, str):
        return [v.strip() for v in values.split(",") if v.strip()]
    return list(values)


class NamespacePermissionVerbs:
    _admin: AdminCalls

    def get_permissions(self, namespace: str) -> dict[str, list[str]]:
        """role -> actions granted on the namespace (``namespaces permissions``)."""
        return self._admin._op("namespaces.permissions", namespace=namespace)  # type: ignore[no-any-return]

    def grant_permission_on_namespace(
        self, namespace: str, role: str, actions: Iterable[str] | str
    ) -> dict[str, list[str]]:
        """``role`` may do exactly ``actions`` on every topic of the namespace."""
        return self._admin._op(  # type: ignore[no-any-return]
            "namespaces.grant-permission", namespace=namespace, role=role, actions=_names(actions)
        )

    def revoke_permissions_on_namespace(self, namespace: str, role: str) -> dict[str, list[str]]:
        return self._admin._op(  # type: ignore[no-any-return]
            "namespaces.revoke-permission", namespace=namespace, role=role
        )

    def grant_permission_on_subscription(
        self, namespace: str, subscription: str, roles: Iterable[str] | str
    ) -> dict[str, list[str]]:
        """Only ``roles`` (with consume) may use ``subscription`` on the namespace's topics."""
        return self._admin._op(  # type: ignore[no-any-return]
            "namespaces.grant-subscription-permission",
            namespace=namespace,
            subscription=subscription,
            roles=_names(roles),
        )

    def revoke_permission_on_subscription(
        self, namespace: str, subscription: str, role: str
    ) -> dict[str, list[str]]:
        return self._admin._op(  # type: ignore[no-any-return]
            "namespaces.revoke-subscription-permission",
            namespace=namespace,
            subscription=subscription,
            role=role,
        )


class TopicPermissionVerbs:
    _admin: AdminCalls

    def get_permissions(self, topic: str) -> dict[str, list[str]]:
        """role -> actions on the topic (its namespace's grants and its own)."""
        return self._admin._op("topics.permissions", topic=topic)  # type: ignore[no-any-return]

    def grant_permission(
        self, topic: str, role: str, actions: Iterable[str] | str
    ) -> dict[str, Any]:
        """``role`` may do exactly ``actions`` on the topic (all its partitions)."""
        return self._admin._op(  # type: ignore[no-any-return]
            "topics.grant-permission", topic=topic, role=role, actions=_names(actions)
        )

    def revoke_permissions(self, topic: str, role: str) -> dict[str, Any]:
        return self._admin._op("topics.revoke-permission", topic=topic, role=role)  # type: ignore[no-any-return]
