"""What the policy tests share: a namespace in a tenant of its own for each
test (deleted with everything in it afterwards), and a standalone started
with broker settings of a test module's own (check intervals shortened
through the TOML file, as the issue asks)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from client.admin import Admin
from tests.harness import StandaloneCluster

_n = itertools.count()


@contextmanager
def own_namespace(admin: Admin, prefix: str, bundles: int = 1) -> Iterator[str]:
    """``{prefix}-N/ns`` in a new tenant; the tenant goes (forced) afterwards."""
    tenant = f"{prefix}-{next(_n)}"
    admin.tenants.create_tenant(tenant)
    ns = f"{tenant}/ns"
    admin.namespaces.create_namespace(ns, bundles=bundles)
    try:
        yield ns
    finally:
        admin.tenants.delete_tenant(tenant, force=True)


@contextmanager
def standalone_with(data: Path, broker_settings: str) -> Iterator[StandaloneCluster]:
    """A standalone whose ``[broker]`` section holds ``broker_settings``."""
    config = data / "magnetar.toml"
    config.write_text(f"[broker]\n{broker_settings}")
    cluster = StandaloneCluster(data / "data")
    cluster.extra_args = ["--config", str(config)]
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()
