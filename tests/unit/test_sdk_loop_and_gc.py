"""The SDK's process-wide helpers: cross-thread calls into the client's
event loop (client/_connection.py call_in_loop) and its GC threshold
(client/_gc.py)."""

from __future__ import annotations

import asyncio
import functools
import gc
import threading

import pytest

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
