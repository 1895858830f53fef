"""What the broker measures as traffic passes: counters with sliding-window
rates (:class:`Meter`) and Pulsar's bucketed figures (:class:`StatsBuckets`).

A meter keeps at most ``_SAMPLES`` (time, total) samples, one per tenth of
its window at most; a rate is the growth of the total since the oldest
sample within the window divided by the time between them. The window is
the broker's ``stats_update_frequency_in_secs``: ``topics stats``, the load
reports and the Prometheus rates all read the same meters, so they agree.

Stats buckets count values per band (not cumulatively, as Pulsar's
``StatsBuckets``) and show the counts of the last complete stats interval:
:meth:`StatsBuckets.roll` is called once per interval.
"""

from __future__ import annotations

import bisect
import time
from typing import NamedTuple

DEFAULT_WINDOW_S = 60.0
_SAMPLES = 12


class Meter:
    """Monotonic message and byte totals with sliding-window rates."""

    __slots__ = ("_samples", "_spacing_s", "bytes", "msgs", "window_s")

    def __init__(self, window_s: float = DEFAULT_WINDOW_S) -> None:
        assert window_s > 0, window_s
        self.window_s = window_s
        self._spacing_s = window_s / (_SAMPLES - 2)
        self.msgs = 0
        self.bytes = 0
        # A list, not a deque: an empty list is 56 bytes, a deque over 600,
        # and a broker holds several meters per idle topic.
        self._samples: list[tuple[float, int, int]] = []

    def add(self, msgs: int, size: int) -> None:
        self._sample(time.monotonic())
        self.msgs += msgs
        self.bytes += size

    def _sample(self, now: float) -> None:
        samples = self._samples
        if not samples or now - samples[-1][0] >= self._spacing_s:
            samples.append((now, self.msgs, self.bytes))
            if len(samples) > _SAMPLES:
                del samples[0]

    def rates(self) -> tuple[float, float]:
        """(messages/s, bytes/s) over the last ``window_s`` seconds."""
        samples = self._samples
        if not samples or (samples[0][1] == self.msgs and samples[0][2] == self.bytes):
            return 0.0, 0.0  # nothing since the oldest sample: nothing in any window
        now = time.monotonic()
        self._sample(now)
        since = now - self.window_s
        for t, msgs, size in samples:
            if t >= since:
                span = now - t
                if span <= 0:
                    return 0.0, 0.0
                return (self.msgs - msgs) / span, (self.bytes - size) / span
        return 0.0, 0.0


# Pulsar's bands: storage write latency in milliseconds, entry size in bytes.
WRITE_LATENCY_BOUNDS_MS = (0.5, 1, 5, 10, 20, 50, 100, 200, 1000)
ENTRY_SIZE_BOUNDS_BYTES = (128, 512, 1024, 2048, 4096, 16384, 102400, 1048576)


class Shown(NamedTuple):
    """A StatsBuckets' last complete interval."""

    counts: list[int]
    sum: float
    observed: int  # values in all bands


class StatsBuckets:
    """Counts of values per band over the last complete stats interval.

    Band i holds values in (bounds[i-1], bounds[i]]; the last band holds
    everything over the last bound (Pulsar's overflow). ``sum`` is in the
    unit :meth:`add` is given.
    """

    __slots__ = ("_count", "_counts", "_sum", "bounds", "count", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        assert list(bounds) == sorted(bounds), bounds
        self.bounds = bounds
        self._counts = [0] * (len(bounds) + 1)
        self._sum = 0.0
        self._count = 0
        # The last complete interval: what is shown.
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0
        self.count = 0

    def add(self, value: float, sum_value: float | None = None) -> None:
        """Count ``value`` in its band; ``sum_value`` (default ``value``) is
        what the sum adds (Pulsar sums latencies in microseconds)."""
        self._counts[bisect.bisect_left(self.bounds, value)] += 1
        self._sum += value if sum_value is None else sum_value
        self._count += 1

    def shown(self) -> Shown:
        """What is shown (the last complete interval), as one value: a roll
        replaces the counts list rather than changing it."""
        return Shown(self.counts, self.sum, self.count)

    def roll(self) -> None:
        """The interval ended: show its counts, start the next from zero."""
        self.counts, self._counts = self._counts, [0] * (len(self.bounds) + 1)
        self.sum, self._sum = self._sum, 0.0
        self.count, self._count = self._count, 0
