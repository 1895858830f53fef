"""Message and byte counters with sliding-window rates.

Every counter keeps at most ``_SAMPLES`` (time, total) samples, one per
second at most; a rate is the growth of the total since the oldest sample
within ``RATE_WINDOW_S`` divided by the time between them.
"""

from __future__ import annotations

import collections
import time

RATE_WINDOW_S = 10.0
_SAMPLES = 12


class Meter:
    """Monotonic message and byte totals with sliding-window rates."""

    __slots__ = ("_samples", "bytes", "msgs")

    def __init__(self) -> None:
        self.msgs = 0
        self.bytes = 0
        self._samples: collections.deque[tuple[float, int, int]] = collections.deque(
            maxlen=_SAMPLES
        )

    def add(self, msgs: int, size: int) -> None:
        self._sample()
        self.msgs += msgs
        self.bytes += size

    def _sample(self) -> None:
        now = time.monotonic()
        if not self._samples or now - self._samples[-1][0] >= 1.0:
            self._samples.append((now, self.msgs, self.bytes))

    def rates(self) -> tuple[float, float]:
        """(messages/s, bytes/s) over the last RATE_WINDOW_S seconds."""
        self._sample()
        now = time.monotonic()
        old = next((s for s in self._samples if now - s[0] <= RATE_WINDOW_S), None)
        if old is None or now - old[0] <= 0:
            return 0.0, 0.0
        span = now - old[0]
        return (self.msgs - old[1]) / span, (self.bytes - old[2]) / span
