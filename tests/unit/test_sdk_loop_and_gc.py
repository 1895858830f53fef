"""The SDK's process-wide helpers: cross-thread calls into the client's
event loop (client/_connection.py call_in_loop), its GC threshold and its
malloc tuning (client/_gc.py)."""

from __future__ import annotations

import asyncio
import functools
import gc
import os
import subprocess
import sys
import threading

import pytest

from client import _gc
from client._connection import call_in_loop
from client._gc import CPYTHON_DEFAULT, YOUNG_THRESHOLD, tune_gc


class _CountingLoop(asyncio.SelectorEventLoop):
    wakes = 0

    def call_soon_threadsafe(self, *args, **kwargs):  # type: ignore[no-untyped-def,override]
        self.wakes += 1
        return super().call_soon_threadsafe(*args, **kwargs)


def test_calls_from_another_thread_run_in_order_with_one_wake_per_turn():
    loop = _CountingLoop()
    ran: list[int] = []
    all_posted = threading.Event()

    def post() -> None:
        for i in range(200):
            call_in_loop(loop, functools.partial(ran.append, i))
        all_posted.set()

    async def main() -> None:
        # The loop is kept busy (not turning) while the other thread posts.
        thread = threading.Thread(target=post)
        thread.start()
        assert all_posted.wait(10)
        thread.join()
        while len(ran) < 200:
            await asyncio.sleep(0)

    loop.run_until_complete(asyncio.wait_for(main(), 10))
    loop.close()
    assert ran == list(range(200))
    assert loop.wakes == 1  # not 200


def test_a_call_on_the_loop_itself_runs_at_once():
    async def main() -> list[str]:
        seen: list[str] = []
        call_in_loop(asyncio.get_running_loop(), lambda: seen.append("now"))
        seen.append("after")
        return seen

    assert asyncio.run(main()) == ["now", "after"]


# (threshold the application left, MAGNETAR_SDK_GC, raised?, young threshold after)
GC_CASES = [
    ("cpython-default", CPYTHON_DEFAULT, None, True, YOUNG_THRESHOLD),
    ("application-chose-its-own", 1000, None, False, 1000),
    ("turned-off", CPYTHON_DEFAULT, "0", False, CPYTHON_DEFAULT),
    ("explicitly-on", CPYTHON_DEFAULT, "1", True, YOUNG_THRESHOLD),
]


@pytest.mark.parametrize(
    "young, env, raised, after", [pytest.param(*c[1:], id=c[0]) for c in GC_CASES]
)
def test_the_sdk_raises_the_young_gc_threshold_only_when_left_at_the_default(
    monkeypatch, young, env, raised, after
):
    before = gc.get_threshold()
    try:
        gc.set_threshold(young, before[1], before[2])
        if env is None:
            monkeypatch.delenv("MAGNETAR_SDK_GC", raising=False)
        else:
            monkeypatch.setenv("MAGNETAR_SDK_GC", env)
        assert tune_gc() is raised
        assert gc.get_threshold() == (after, before[1], before[2])
    finally:
        gc.set_threshold(*before)


# (environment, tuned?): the SDK tunes glibc's malloc once per process,
# unless told not to or the application set glibc's own variables.
MALLOC_CASES = [
    ("default", {}, True),
    ("turned-off", {"MAGNETAR_SDK_MALLOC": "0"}, False),
    ("explicitly-on", {"MAGNETAR_SDK_MALLOC": "1"}, True),
    ("application-mmap-threshold", {"MALLOC_MMAP_THRESHOLD_": "65536"}, False),
    ("application-trim-threshold", {"MALLOC_TRIM_THRESHOLD_": "0"}, False),
    ("application-top-pad", {"MALLOC_TOP_PAD_": "0"}, False),
    ("application-tunables", {"GLIBC_TUNABLES": "glibc.malloc.arena_max=2"}, False),
]


@pytest.mark.parametrize("env, tuned", [pytest.param(*c[1:], id=c[0]) for c in MALLOC_CASES])
def test_the_sdk_tunes_malloc_once_unless_the_application_chose(monkeypatch, env, tuned):
    calls: list[int] = []

    def record(trim_threshold_mb: int) -> bool:
        calls.append(trim_threshold_mb)
        return True

    monkeypatch.setattr(_gc, "_tune_malloc", record)
    monkeypatch.setattr(_gc, "_malloc_done", False)
    for name in ("MAGNETAR_SDK_MALLOC", *_gc.GLIBC_VARIABLES, "GLIBC_TUNABLES"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert _gc.tune_malloc() is tuned
    assert _gc.tune_malloc() is False  # once per process
    assert calls == ([_gc.SDK_TRIM_THRESHOLD_MB] if tuned else [])


def test_the_sdk_malloc_tuning_applies_on_glibc():
    """The real mallopt calls succeed here (glibc), in a process of its own."""
    code = "from client import _gc; import sys; sys.exit(0 if _gc.tune_malloc() else 1)"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MALLOC_", "GLIBC_"))}
    env.pop("MAGNETAR_SDK_MALLOC", None)
    assert subprocess.run([sys.executable, "-c", code], env=env, timeout=60).returncode == 0
