from __future__ import annotations

import itertools
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


@pytest.fixture(scope="session")
def spark_session() -> Iterator[Any]:
    """One SparkSession for every Spark test of the run (a session costs
    seconds to start): local[2], small shuffles, no UI. Spark needs Java:
    without it the Spark tests skip with one line (CI installs it)."""
    if shutil.which("java") is None:
        pytest.skip("Spark needs Java 17 (apt-get install openjdk-17-jre-headless)")
    from spark import session

    s = session.start(
        "local[2]",
        "magnetar-tests",
        {
            "spark.sql.shuffle.partitions": "2",
            "spark.ui.enabled": "false",
            "spark.driver.memory": "1g",
        },
    )
    yield s
    s.stop()
