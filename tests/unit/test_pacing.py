"""The pacing of long passes over topics (broker/pacing.py): a pause on a
timer after each slice of work, on a given clock."""

from __future__ import annotations

import asyncio

import pytest

from broker.pacing import Pacer


# (slice, each step's work) -> pauses taken (pauses of 3 ms on a given clock)
@pytest.mark.parametrize(
    ("slice_s", "step_costs", "pauses"),
    [
        (0.002, [0.0003] * 6, 0),  # 1.8 ms of work in all: one slice, no pause
        (0.002, [0.0003] * 7, 1),  # the seventh step ends past the slice
        (0.002, [0.0015] * 7, 3),  # a pause after every second step
        (0.002, [0.010], 1),  # one long item: a pause right after it
        (0.002, [0.010, 0.0], 1),  # and a new slice after the pause
        (0.0, [0.0] * 3, 3),  # no slice at all: a pause at every step
    ],
)
def test_a_pass_pauses_once_each_slice_has_run_its_time(slice_s, step_costs, pauses):
    now = [0.0]
    slept: list[float] = []

    async def sleep(s: float) -> None:
        slept.append(s)
        now[0] += s

    async def run() -> Pacer:
        pacer = Pacer(slice_s, 0.003, clock=lambda: now[0], sleep=sleep)
        for cost in step_costs:
            now[0] += cost
            await pacer.step()
        return pacer

    pacer = asyncio.run(run())
    assert pacer.pauses == pauses and slept == [0.003] * pauses


def test_while_a_pass_pauses_other_work_runs():
    order: list[str] = []

    async def other() -> None:
        order.append("other")

    async def run() -> None:
        pacer = Pacer(slice_s=0.0, pause_s=0.0)
        task = asyncio.create_task(other())
        for i in range(3):
            order.append(f"pass {i}")
            await pacer.step()
        await task

    asyncio.run(run())
    assert order.index("other") < order.index("pass 2")
