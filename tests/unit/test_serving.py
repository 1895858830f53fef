"""Process-wide helpers of protos/serving.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from protos import serving


def test_tune_malloc_applies_on_glibc():
    import platform

    if platform.libc_ver()[0] != "glibc":
        pytest.skip("not glibc")
    assert serving.tune_malloc(128)
    assert serving.tune_malloc(0)  # 0 changes nothing


def test_free_ports_are_below_the_ephemeral_range_and_not_repeated():
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    ports = [serving.free_port() for _ in range(200)]
    assert len(set(ports)) == len(ports)
    if low > 11000:
        assert all(p < low for p in ports)
