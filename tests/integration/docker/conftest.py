"""Tests on a real Docker engine (tests/integration/docker): every test here carries the
``docker`` marker. When no engine answers they are deselected and the run
ends with one line saying so; when the image is absent and cannot be built
they skip, with one reason. ``.ci/run`` starts an engine and
builds the images (deploy/build-image.sh) before ``make test``.

Images are never built with testcontainers' DockerImage: its cleanup removes
the image by id, which can take other tags with it. Testcontainers runs with
``TESTCONTAINERS_RYUK_DISABLED=true`` (Ryuk's image would come from a
registry); every fixture removes what it started.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.integration.docker.engine import IMAGE, PROMETHEUS_IMAGE, ROOT, image_exists

HERE = Path(__file__).resolve().parent
os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")


NO_ENGINE = "no Docker engine answers `docker info`: the docker tests did not run"
_no_engine: list[int] = []


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    mine = [item for item in items if HERE in Path(str(item.path)).resolve().parents]
    for item in mine:
        item.add_marker(pytest.mark.docker)
    if mine and not _engine_answers():
        config.hook.pytest_deselected(items=mine)
        items[:] = [item for item in items if item not in mine]
        _no_engine.append(len(mine))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _no_engine:
        terminalreporter.write_line(f"{NO_ENGINE} ({_no_engine[0]} deselected)")


def _engine_answers() -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _build_images() -> str:
    """Build the images from this checkout; '' when that worked, else why not."""
    local = shutil.which("debootstrap") is not None
    cmd = [str(ROOT / "deploy" / "build-image.sh"), *(["--local-base"] if local else [])]
    try:
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        return "deploy/build-image.sh took over 600 s"
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return f"deploy/build-image.sh failed: {last}"
    return ""


@pytest.fixture(scope="session")
def docker_images() -> str:
    """The app image's tag, once an engine answers and the images exist."""
    if not _engine_answers():
        pytest.skip(NO_ENGINE)
    if not (image_exists(IMAGE) and image_exists(PROMETHEUS_IMAGE)):
        why = _build_images()
        if why:
            pytest.skip(f"image {IMAGE} is absent and could not be built ({why})")
    return IMAGE
