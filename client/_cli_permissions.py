"""pulsar-admin's permission verbs of ``magnetar-admin namespaces`` and
``topics`` (grant-permission, revoke-permission, permissions, and the
subscription-level grant-subscription-permission and
revoke-subscription-permission of namespaces)."""

from __future__ import annotations

import click

from client._cli_common import admin_call, names

_ACTIONS_HELP = "Comma-separated actions: produce, consume (functions, sources, sinks, packages)."


@click.command("permissions")
@click.argument("namespace", metavar="TENANT/NAMESPACE")
@click.pass_obj
def ns_permissions(service_url: str, namespace: str) -> None:
    """Roles and the actions granted to them on NAMESPACE."""
    admin_call(service_url, lambda a: a.namespaces.get_permissions(namespace))


@click.command("grant-permission")
@click.argument("namespace", metavar="TENANT/NAMESPACE")
@click.option("--role", required=True, help="The role granted.")
@click.option("--actions", required=True, help=_ACTIONS_HELP)
@click.pass_obj
def ns_grant(service_url: str, namespace: str, role: str, actions: str) -> None:
    """ROLE may do exactly ACTIONS on every topic of NAMESPACE."""
    admin_call(
        service_url,
        lambda a: a.namespaces.grant_permission_on_namespace(namespace, role, names(actions) or []),
    )


@click.command("revoke-permission")
@click.argument("namespace", metavar="TENANT/NAMESPACE")
@click.option("--role", required=True, help="The role whose grant goes.")
@click.pass_obj
def ns_revoke(service_url: str, namespace: str, role: str) -> None:
    """ROLE's grant on NAMESPACE goes (its connected clients are closed)."""
    admin_call(service_url, lambda a: a.namespaces.revoke_permissions_on_namespace(namespace, role))


@click.command("grant-subscription-permission")
@click.argument("namespace", metavar="TENANT/NAMESPACE")
@click.option("--subscription", "-s", required=True, help="The subscription.")
@click.option("--roles", required=True, help="Comma-separated roles (r1,r2).")
@click.pass_obj
def ns_grant_subscription(service_url: str, namespace: str, subscription: str, roles: str) -> None:
    """Only ROLES (with consume) may use SUBSCRIPTION on NAMESPACE's topics."""
    admin_call(
        service_url,
        lambda a: a.namespaces.grant_permission_on_subscription(
            namespace, subscription, names(roles) or []
        ),
    )


@click.command("revoke-subscription-permission")
@click.argument("namespace", metavar="TENANT/NAMESPACE")
@click.option("--subscription", "-s", required=True, help="The subscription.")
@click.option("--role", required=True, help="The role that may no longer use it.")
@click.pass_obj
def ns_revoke_subscription(service_url: str, namespace: str, subscription: str, role: str) -> None:
    """ROLE may no longer use SUBSCRIPTION (when no role is left, it is open again)."""
    admin_call(
        service_url,
        lambda a: a.namespaces.revoke_permission_on_subscription(namespace, subscription, role),
    )


@click.command("permissions")
@click.argument("topic")
@click.pass_obj
def topic_permissions(service_url: str, topic: str) -> None:
    """Roles and their actions on TOPIC (its namespace's grants and its own)."""
    admin_call(service_url, lambda a: a.topics.get_permissions(topic))


@click.command("grant-permission")
@click.argument("topic")
@click.option("--role", required=True, help="The role granted.")
@click.option("--actions", required=True, help=_ACTIONS_HELP)
@click.pass_obj
def topic_grant(service_url: str, topic: str, role: str, actions: str) -> None:
    """ROLE may do exactly ACTIONS on TOPIC (all its partitions)."""
    admin_call(service_url, lambda a: a.topics.grant_permission(topic, role, names(actions) or []))


@click.command("revoke-permission")
@click.argument("topic")
@click.option("--role", required=True, help="The role whose grant on TOPIC goes.")
@click.pass_obj
def topic_revoke(service_url: str, topic: str, role: str) -> None:
    """ROLE's grant on TOPIC itself goes."""
    admin_call(service_url, lambda a: a.topics.revoke_permissions(topic, role))


def add_permission_commands(namespaces: click.Group, topics: click.Group) -> None:
    for command in (
        ns_permissions,
        ns_grant,
        ns_revoke,
        ns_grant_subscription,
        ns_revoke_subscription,
    ):
        namespaces.add_command(command)
    for command in (topic_permissions, topic_grant, topic_revoke):
        topics.add_command(command)
