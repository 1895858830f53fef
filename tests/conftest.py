from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness import StandaloneCluster

_names = itertools.count()


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    """One standalone cluster shared by the tests that do not restart it."""
    c = StandaloneCluster(tmp_path_factory.mktemp("standalone"))
    c.start()
    yield c
    c.stop()


@pytest.fixture
def fresh_cluster(tmp_path: Path) -> Iterator[StandaloneCluster]:
    """A cluster of this test's own, for tests that stop or kill it."""
    c = StandaloneCluster(tmp_path / "data")
    yield c
    if c.proc is not None and c.proc.poll() is None:
        c.kill9()


@pytest.fixture
def topic(request: pytest.FixtureRequest) -> str:
    return f"t-{request.node.name[:40]}-{next(_names)}".replace("[", "-").replace("]", "")
