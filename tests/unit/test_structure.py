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


# Collects every test once and prints each id with whether it carries the
# integration marker (what ``-m integration`` selects on).
_MARKED = """
import sys, pytest
class Marked:
    @pytest.hookimpl(trylast=True)  # after tests/integration/conftest.py marks them
    def pytest_collection_modifyitems(self, items):
        for item in items:
            print("MARKED", int(item.get_closest_marker("integration") is not None), item.nodeid)
sys.exit(pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider"], plugins=[Marked()]))
"""


def test_integration_tests_carry_the_integration_marker():
    out = subprocess.run(
        [sys.executable, "-c", _MARKED], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    rows = [
        line.split(" ", 2)[1:] for line in out.stdout.splitlines() if line.startswith("MARKED ")
    ]
    fast = [test for marked, test in rows if marked == "0"]
    slow = [test for marked, test in rows if marked == "1"]
    assert out.returncode == 0 and fast and slow, out.stdout[-2000:] + out.stderr[-2000:]
    assert all(t.startswith("tests/unit/") for t in fast)
    assert all(t.startswith("tests/integration/") for t in slow)
