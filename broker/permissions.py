"""Who may do what with a tenant's namespaces, topics and subscriptions:
Pulsar's authorization model as plain values and one decision function.

Theory of operation. A role may do everything when it is a *superuser*
(``superuser_roles``). Within a tenant, the tenant's *admin roles*
(``TenantInfo.adminRoles``) may do everything too: administer its
namespaces and topics, and produce and consume (Pulsar lets a tenant admin
through before any grant is looked at). Anyone else needs a *grant*, kept
in the namespace's policies record under Pulsar's ``auth_policies``:

- ``namespace_auth``: role → actions, for every topic of the namespace;
- ``destination_auth``: topic → role → actions (a grant on a partitioned
  topic covers its partitions);
- ``subscription_auth_roles``: subscription → roles. A subscription listed
  here may be used only by those roles (and they still need ``consume``);
  a subscription not listed is open to every role with ``consume``.

What each call needs is a :class:`Need`: ``produce``; ``consume`` (with the
subscription, when the call names one); ``lookup`` (finding where a topic
is served, its partitions and stats: ``produce`` or ``consume``);
``namespace lookup`` (listing a namespace's topics: a namespace-level
``produce`` or ``consume``); ``tenant admin``; ``superuser``. The decision
is :func:`decide`, with no I/O: the broker reads the records
(``broker/authorizer.py``) and this module judges.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from broker.errors import BrokerError
from protos import common_pb2


class AuthAction(enum.StrEnum):
    """Pulsar's ``AuthAction`` values (the last four are accepted and stored;
    Magnetar has no functions, sources, sinks or packages to use them on)."""

    PRODUCE = "produce"
    CONSUME = "consume"
    FUNCTIONS = "functions"
    SOURCES = "sources"
    SINKS = "sinks"
    PACKAGES = "packages"


class Need(enum.Enum):
    PRODUCE = "produce"
    CONSUME = "consume"
    LOOKUP = "lookup"
    NAMESPACE_LOOKUP = "namespace lookup"
    TENANT_ADMIN = "tenant admin"
    SUPERUSER = "superuser"


Grants = Mapping[str, frozenset[AuthAction]]  # role -> actions


def read_actions(value: Any) -> frozenset[AuthAction]:
    """Actions from a list of names (or one comma-separated string); INVALID_ARGUMENT otherwise."""
    if isinstance(value, str):
        value = [v for v in value.split(",") if v.strip()]
    if not isinstance(value, list | tuple) or not value:
        raise BrokerError(
            f"actions {value!r}: give a non-empty list of {', '.join(a.value for a in AuthAction)}",
            common_pb2.INVALID_ARGUMENT,
        )
    try:
        return frozenset(AuthAction(str(v).strip()) for v in value)
    except ValueError:
        raise BrokerError(
            f"actions {value!r}: each must be one of {', '.join(a.value for a in AuthAction)}",
            common_pb2.INVALID_ARGUMENT,
        ) from None


def read_roles(value: Any, what: str = "roles") -> frozenset[str]:
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    if (
        not isinstance(value, list | tuple)
        or not value
        or not all(isinstance(v, str) and v.strip() for v in value)
    ):
        raise BrokerError(
            f"{what} {value!r}: give one or more role names", common_pb2.INVALID_ARGUMENT
        )
    return frozenset(v.strip() for v in value)


def _grants_from(doc: Any) -> dict[str, frozenset[AuthAction]]:
    if not isinstance(doc, dict):
        return {}
    out = {}
    for role, actions in doc.items():
        known = [a for a in actions or () if a in AuthAction._value2member_map_]
        out[str(role)] = frozenset(AuthAction(a) for a in known)
    return out


def _grants_doc(grants: Grants) -> dict[str, list[str]]:
    return {role: sorted(a.value for a in actions) for role, actions in sorted(grants.items())}


@dataclass(frozen=True)
class AuthPolicies:
    """A namespace's grants (Pulsar's ``auth_policies`` document)."""

    namespace_auth: Grants = field(default_factory=dict)
    destination_auth: Mapping[str, Grants] = field(default_factory=dict)
    subscription_auth_roles: Mapping[str, frozenset[str]] = field(default_factory=dict)

    @classmethod
    def from_document(cls, doc: Any) -> AuthPolicies:
        if not isinstance(doc, dict):
            return cls()
        topics = doc.get("destination_auth") or {}
        subs = doc.get("subscription_auth_roles") or {}
        return cls(
            namespace_auth=_grants_from(doc.get("namespace_auth")),
            destination_auth={
                str(t): _grants_from(g) for t, g in topics.items() if isinstance(topics, dict)
            },
            subscription_auth_roles={
                str(s): frozenset(str(r) for r in roles or ())
                for s, roles in (subs.items() if isinstance(subs, dict) else ())
            },
        )

    def document(self) -> dict[str, Any]:
        return {
            "namespace_auth": _grants_doc(self.namespace_auth),
            "destination_auth": {
                t: _grants_doc(g) for t, g in sorted(self.destination_auth.items()) if g
            },
            "subscription_auth_roles": {
                s: sorted(r) for s, r in sorted(self.subscription_auth_roles.items()) if r
            },
        }

    def is_empty(self) -> bool:
        return not (self.namespace_auth or self.destination_auth or self.subscription_auth_roles)

    # ------------------------------------------------------------ changes

    def granted(self, role: str, actions: frozenset[AuthAction], topic: str = "") -> AuthPolicies:
        """``role`` holds exactly ``actions`` on the namespace (or on ``topic``)."""
        if not topic:
            return replace(self, namespace_auth={**self.namespace_auth, role: actions})
        grants = {**self.destination_auth.get(topic, {}), role: actions}
        return replace(self, destination_auth={**self.destination_auth, topic: grants})

    def revoked(self, role: str, topic: str = "") -> AuthPolicies:
        """``role`` holds nothing on the namespace (or on ``topic``)."""
        if not topic:
            return replace(
                self, namespace_auth={r: a for r, a in self.namespace_auth.items() if r != role}
            )
        grants = {r: a for r, a in self.destination_auth.get(topic, {}).items() if r != role}
        topics = {t: g for t, g in self.destination_auth.items() if t != topic}
        if grants:
            topics[topic] = grants
        return replace(self, destination_auth=topics)

    def subscription_roles_set(self, subscription: str, roles: Iterable[str]) -> AuthPolicies:
        """Only ``roles`` (among those with consume) may use ``subscription``."""
        return replace(
            self,
            subscription_auth_roles={
                **self.subscription_auth_roles,
                subscription: frozenset(self.subscription_auth_roles.get(subscription, ()))
                | frozenset(roles),
            },
        )

    def subscription_role_removed(self, subscription: str, role: str) -> AuthPolicies:
        roles = self.subscription_auth_roles.get(subscription, frozenset()) - {role}
        subs = {s: r for s, r in self.subscription_auth_roles.items() if s != subscription}
        if roles:
            subs[subscription] = roles
        return replace(self, subscription_auth_roles=subs)

    # ------------------------------------------------------------ reads

    def actions_of(self, role: str, topics: Iterable[str]) -> frozenset[AuthAction]:
        """What ``role`` may do on a topic known by ``topics`` (its own name and,
        for a partition, its partitioned topic's): namespace grants plus topic grants."""
        actions = set(self.namespace_auth.get(role, ()))
        for topic in topics:
            actions |= self.destination_auth.get(topic, {}).get(role, frozenset())
        return frozenset(actions)


@dataclass(frozen=True)
class Target:
    """What a call is about, as far as authorization cares."""

    tenant: str = ""
    namespace: str = ""
    topics: tuple[str, ...] = ()  # the topic's name and its partitioned topic's
    subscription: str = ""


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    why: str  # for a refusal: what the role lacks


def decide(
    role: str,
    need: Need,
    target: Target,
    superusers: frozenset[str],
    tenant_admins: frozenset[str],
    auth: AuthPolicies,
) -> Verdict:
    """Whether ``role`` may make a call that needs ``need`` on ``target``."""
    if role in superusers:
        return Verdict(True, "superuser")
    if need is Need.SUPERUSER:
        return Verdict(False, f"role {role!r} is not a superuser")
    if target.tenant and role in tenant_admins:
        return Verdict(True, "tenant admin")
    where = target.topics[0] if target.topics else (target.namespace or target.tenant)
    if need is Need.TENANT_ADMIN:
        return Verdict(False, f"role {role!r} is not an admin of tenant {target.tenant!r}")
    if need is Need.NAMESPACE_LOOKUP:
        held = auth.namespace_auth.get(role, frozenset())
        ok = bool(held & {AuthAction.PRODUCE, AuthAction.CONSUME})
        return Verdict(ok, "" if ok else f"role {role!r} has no produce or consume on {where}")
    held = auth.actions_of(role, target.topics)
    if need is Need.PRODUCE:
        ok = AuthAction.PRODUCE in held
        return Verdict(ok, "" if ok else f"role {role!r} may not produce on {where}")
    if need is Need.LOOKUP:
        ok = bool(held & {AuthAction.PRODUCE, AuthAction.CONSUME})
        return Verdict(ok, "" if ok else f"role {role!r} has no produce or consume on {where}")
    assert need is Need.CONSUME
    allowed_roles = auth.subscription_auth_roles.get(target.subscription)
    if target.subscription and allowed_roles and role not in allowed_roles:
        return Verdict(
            False, f"role {role!r} may not use subscription {target.subscription!r} of {where}"
        )
    ok = AuthAction.CONSUME in held
    return Verdict(ok, "" if ok else f"role {role!r} may not consume from {where}")
