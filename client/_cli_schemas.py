"""``magnetar-admin schemas``: pulsar-admin's ``schemas get / upload /
delete`` (docs/schemas.md)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from client._cli_common import admin_call


@click.group()
def schemas() -> None:
    """A topic's schema versions."""


@schemas.command("get")
@click.argument("topic")
@click.option("--version", "-v", type=int, default=None, help="This version, not the latest.")
@click.pass_obj
def schemas_get(service_url: str, topic: str, version: int | None) -> None:
    """The latest live schema of TOPIC (or --version)."""
    admin_call(service_url, lambda a: a.schemas.get(topic, version))


@schemas.command("upload")
@click.argument("topic")
@click.option(
    "--filename",
    "-f",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help='JSON file: {"type": "AVRO", "schema": "<definition>", "properties": {}}.',
)
@click.pass_obj
def schemas_upload(service_url: str, topic: str, filename: Path) -> None:
    """Register a schema version on TOPIC (checked against its compatibility strategy)."""
    try:
        doc = json.loads(filename.read_text())
    except ValueError as exc:
        raise click.BadParameter(
            f"{filename} is not JSON: {exc}", param_hint="--filename"
        ) from None
    admin_call(service_url, lambda a: a.schemas.upload(topic, doc))


@schemas.command("delete")
@click.argument("topic")
@click.pass_obj
def schemas_delete(service_url: str, topic: str) -> None:
    """Delete TOPIC's schema (every version; messages keep theirs)."""
    admin_call(service_url, lambda a: a.schemas.delete(topic))
