"""Long passes over many topics on the event loop, paced so that traffic
keeps moving while they run.

Theory of operation. A pass (the stats snapshot, the load report) calls
:meth:`Pacer.step` once per item. After ``slice_s`` of work since its last
pause it pauses for ``pause_s`` on a timer, not for a bare loop turn: a
turn lets only what is ready at that instant run, and a new producer's way
through the broker is a few dozen such turns, each of which then waited for
the next slice (with 10,000 topics a snapshot in 2 ms slices made each new
producer take 80-160 ms). While the pass pauses, the loop serves every turn
of everyone else; so the pass takes at most ``slice_s / (slice_s +
pause_s)`` of the loop, and runs that much longer. Pure: the clock and the
sleep are given (tests/unit/test_pacing.py).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

# Work per slice, and the pause after it, of the passes below (half the loop).
SLICE_S = 0.002
PAUSE_S = 0.002


class Pacer:
    def __init__(
        self,
        slice_s: float = SLICE_S,
        pause_s: float = PAUSE_S,
        clock: Callable[[], float] = time.perf_counter,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.slice_s = slice_s
        self.pause_s = pause_s
        self.clock = clock
        self.sleep = sleep
        self.pauses = 0
        self._slice_ends = clock() + slice_s

    async def step(self) -> None:
        """One item done: pause if this slice has run its time."""
        if self.clock() < self._slice_ends:
            return
        self.pauses += 1
        await self.sleep(self.pause_s)  # a pacing timer, not synchronisation
        self._slice_ends = self.clock() + self.slice_s
