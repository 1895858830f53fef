"""The code's shape (tests/check_structure.py, also run by ``make lint``):
layers one way, no import circles, a protocol-independent broker core, an
SDK without server runtime, and the size bounds; and the integration marker
that splits the fast suite from the slow one."""

from __future__ import annotations

import subprocess
import sys

from tests import check_structure
from tests.harness import ROOT


def test_the_code_keeps_its_shape():
    assert check_structure.findings() == []


def test_the_checker_sees_a_circle_a_layer_breach_and_a_protocol_leak():
    edges = {
        "broker.topic": {"broker.dispatcher", "protos.broker_pb2"},
        "broker.dispatcher": {"broker.topic"},
        "client.aio": {"broker.topic"},
    }
    assert check_structure.find_cycles(edges) == [["broker.dispatcher", "broker.topic"]]
    assert any(
        "client.aio imports broker.topic" in f for f in check_structure.layer_findings(edges)
    )
    assert check_structure.core_findings(edges) == [
        "core: broker.topic imports protos.broker_pb2 (only the front-ends speak the client protocol)"
    ]


def test_integration_tests_carry_the_integration_marker():
    def collected(marker: str) -> list[str]:
        command = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
        out = subprocess.run(
            [*command, "-m", marker],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        return [line for line in out.stdout.splitlines() if "::" in line]

    fast = collected("not integration")
    slow = collected("integration")
    assert fast and slow
    assert all(t.startswith("tests/unit/") for t in fast)
    assert all(t.startswith("tests/integration/") for t in slow)
