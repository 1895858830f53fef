"""``magnetar-admin tenants``: pulsar-admin's tenant verbs (docs/admin.md)."""

from __future__ import annotations

import click

from client._cli_common import admin_call, names

_ROLES_HELP = "Comma-separated admin roles (r1,r2); stored and shown, not enforced yet."
_CLUSTERS_HELP = "Comma-separated clusters the tenant may use (default: this cluster)."


@click.group()
def tenants() -> None:
    """Tenants: the top of the naming tree (tenant/namespace/topic)."""


@tenants.command("list")
@click.pass_obj
def tenants_list(service_url: str) -> None:
    """Names of every tenant."""
    admin_call(service_url, lambda a: a.tenants.get_tenants())


@tenants.command("get")
@click.argument("tenant")
@click.pass_obj
def tenants_get(service_url: str, tenant: str) -> None:
    """TENANT's info: {"adminRoles": [...], "allowedClusters": [...]}."""
    admin_call(service_url, lambda a: a.tenants.get_tenant_info(tenant))


@tenants.command("create")
@click.argument("tenant")
@click.option("--admin-roles", "-r", default=None, help=_ROLES_HELP)
@click.option("--allowed-clusters", "-c", default=None, help=_CLUSTERS_HELP)
@click.pass_obj
def tenants_create(
    service_url: str, tenant: str, admin_roles: str | None, allowed_clusters: str | None
) -> None:
    """Create TENANT (refused when it exists); prints its info."""
    admin_call(
        service_url,
        lambda a: a.tenants.create_tenant(tenant, names(admin_roles), names(allowed_clusters)),
    )


@tenants.command("update")
@click.argument("tenant")
@click.option("--admin-roles", "-r", default=None, help=_ROLES_HELP + " Default: unchanged.")
@click.option(
    "--allowed-clusters", "-c", default=None, help="Comma-separated clusters; default: unchanged."
)
@click.pass_obj
def tenants_update(
    service_url: str, tenant: str, admin_roles: str | None, allowed_clusters: str | None
) -> None:
    """Change TENANT's admin roles and/or allowed clusters (what is not given stays)."""
    admin_call(
        service_url,
        lambda a: a.tenants.update_tenant(tenant, names(admin_roles), names(allowed_clusters)),
    )


@tenants.command("delete")
@click.argument("tenant")
@click.option("--force", "-f", is_flag=True, help="Delete its namespaces and their topics too.")
@click.pass_obj
def tenants_delete(service_url: str, tenant: str, force: bool) -> None:
    """Delete TENANT; refused while it has namespaces unless --force."""
    admin_call(service_url, lambda a: a.tenants.delete_tenant(tenant, force))
