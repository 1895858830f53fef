"""The SDK loads no server runtime: importing the client (sync, asyncio,
admin and the ``magnetar-admin`` CLI) brings in neither the servers'
libraries (Prometheus, the gRPC health service) nor a server package.
A fresh interpreter, so nothing another test imported counts."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.harness import ROOT

SDK_MODULES = ("client", "client.aio", "client.admin", "client.admin_cli")
SERVER_ONLY = ("prometheus_client", "grpc_health", "broker", "bookie", "metastore")

_PROBE = """
import importlib, json, sys
for name in {modules!r}:
    importlib.import_module(name)
print(json.dumps(sorted(sys.modules)))
"""


def _loaded_after_importing(modules: tuple[str, ...]) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE.format(modules=modules)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def _server_only(name: str) -> bool:
    # ``import grpc`` itself imports the top-level ``grpc_health`` package
    # when it is installed, to alias it as ``grpc.health``; that package's
    # ``__init__`` is empty. The health service is ``grpc_health.v1``.
    if name == "grpc_health":
        return False
    return name.split(".")[0] in SERVER_ONLY


def test_the_sdk_imports_no_server_runtime():
    loaded = _loaded_after_importing(SDK_MODULES)
    assert set(SDK_MODULES) <= set(loaded)  # the probe did import them
    assert [m for m in loaded if _server_only(m)] == []


def test_the_probe_sees_the_server_runtime_when_it_is_loaded():
    loaded = _loaded_after_importing(("protos.serving", "metastore.metrics"))
    assert {"prometheus_client", "grpc_health.v1.health"} <= {m for m in loaded if _server_only(m)}


def test_the_servers_channel_options_are_the_sdks():
    from protos import channel, serving

    assert serving.grpc_options is channel.grpc_options
    assert serving.MAX_GRPC_MESSAGE_BYTES == channel.MAX_GRPC_MESSAGE_BYTES
