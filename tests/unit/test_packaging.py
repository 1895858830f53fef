"""The distribution ships every package of the source tree: setuptools
installs only the packages ``pyproject.toml`` lists, so a subpackage left
out works from a checkout and fails once installed (as in the image)."""

from __future__ import annotations

import tomllib

from tests.harness import ROOT


def test_every_package_with_an_init_is_listed_in_pyproject():
    listed = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    tops = {name.split(".")[0] for name in listed}
    found = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for top in tops
        for init in (ROOT / top).rglob("__init__.py")
    }
    assert found == listed, (
        f"not listed: {sorted(found - listed)}; not there: {sorted(listed - found)}"
    )
