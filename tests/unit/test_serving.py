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


_COUNT_ARENAS = """
import ctypes, sys, threading
sys.path.insert(0, {root!r})
from protos import serving
assert serving.tune_malloc(128, {arenas})
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
go = threading.Barrier(4)
def grab():
    go.wait()  # all allocate at once, as gRPC's threads do
    libc.malloc(1 << 20)
threads = [threading.Thread(target=grab) for _ in range(4)]
for t in threads: t.start()
for t in threads: t.join()
libc.malloc_stats()  # one "Arena N:" block per arena, on stderr
"""


@pytest.mark.parametrize("arenas", [1, 0])
def test_one_malloc_arena_serves_every_thread(arenas):
    import platform
    import subprocess
    import sys

    if platform.libc_ver()[0] != "glibc":
        pytest.skip("not glibc")
    root = str(Path(__file__).resolve().parents[2])
    out = subprocess.run(
        [sys.executable, "-c", _COUNT_ARENAS.format(root=root, arenas=arenas)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    count = out.stderr.count("Arena ")
    if arenas:
        assert count == 1, out.stderr
    else:
        assert count > 1, out.stderr  # glibc's default: threads get their own
