"""``magnetar-admin bookies``: the bookies and AutoRecovery
(docs/reliability.md). ``list-bookies`` is pulsar-admin's name for ``list``."""

from __future__ import annotations

import click

from client._cli_common import admin_call


@click.group()
def bookies() -> None:
    """Bookies and the re-replication of their ledgers (superuser)."""


@bookies.command("list")
@click.pass_obj
def bookies_list(service_url: str) -> None:
    """Every bookie: its state and how many ledgers name it."""
    admin_call(service_url, lambda a: a.bookies.list())


@bookies.command("list-bookies")
@click.pass_obj
def bookies_list_bookies(service_url: str) -> None:
    """The same as ``list`` (pulsar-admin's name)."""
    admin_call(service_url, lambda a: a.bookies.list())


@bookies.command("decommission")
@click.argument("bookie")
@click.pass_obj
def bookies_decommission(service_url: str, bookie: str) -> None:
    """Copy every replica off BOOKIE; stop it once `bookies list` says decommissioned."""
    admin_call(service_url, lambda a: a.bookies.decommission(bookie))


@bookies.command("recover")
@click.argument("bookie")
@click.option("--force", is_flag=True, help="Also when BOOKIE is still running.")
@click.pass_obj
def bookies_recover(service_url: str, bookie: str, force: bool) -> None:
    """Restore the replicas BOOKIE held from the other replicas, now."""
    admin_call(service_url, lambda a: a.bookies.recover(bookie, force=force))


@bookies.command("under-replicated")
@click.pass_obj
def bookies_under_replicated(service_url: str) -> None:
    """The ledgers AutoRecovery has yet to repair."""
    admin_call(service_url, lambda a: a.bookies.under_replicated())
