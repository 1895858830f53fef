"""The Prometheus text format (0.0.4), written fast, and the windowed
summaries Pulsar and BookKeeper export.

Why not prometheus-client's own writer: it formats ~18 µs per sample here,
so a broker with 1,000 topics (some 40,000 samples) would spend most of a
second per scrape. Label strings are escaped once (a topic's labels when
the topic is first seen) and every sample is one f-string.

:class:`OpStats` is the latency (or value) summary of BookKeeper's
``OpStatsLogger`` and Pulsar's ``pulsar_broker_*`` summaries: ``_count`` and
``_sum`` grow forever, the quantiles describe the last complete window
(:meth:`OpStats.rotate`, once per stats interval). Quantiles come from
log-spaced bands (each 10 % wider than the last, from 0.001 to 3.6e7: in
milliseconds, 1 µs to 10 hours),
so a quantile is within 10 % of the true value; the band's upper bound is
reported.
"""

from __future__ import annotations

import bisect
import math
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def escape(value: str) -> str:
    """A label value as the text format wants it (backslash, quote, newline)."""
    if "\\" in value or '"' in value or "\n" in value:
        value = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return value


def labels(pairs: Iterable[tuple[str, str]]) -> str:
    """``k1="v1",k2="v2"`` with the values escaped (no braces)."""
    return ",".join(f'{k}="{escape(v)}"' for k, v in pairs)


def join(*parts: str) -> str:
    """Label strings joined, empty ones left out."""
    return ",".join(p for p in parts if p)


def value_text(v: float) -> str:
    if isinstance(v, int):
        return str(v)
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return repr(v)


Row = tuple[str, Sequence[float]]  # (label string, values)


def gauge(name: str, help_text: str, value: float, label_str: str = "") -> Family:
    """A family of one gauge sample."""
    family = Family(name, "gauge", help_text)
    family.add(label_str, value)
    return family


def counter(
    name: str, help_text: str, value: float, label_str: str = "", suffix: str = "_total"
) -> Family:
    """A family of one counter sample, written ``name`` + ``suffix``
    (prometheus-client's ``_total``; BookKeeper's counters have none)."""
    family = Family(name, "counter", help_text)
    family.add(label_str, value, suffix)
    return family


@dataclass
class Family:
    """One metric family: its HELP and TYPE, its samples, each (name
    suffix, label string, value), and its *tables*: rows of (label string,
    values) of which column ``i`` belongs to this family, with labels to
    add to each (a topic's row holds all of its gauges; each family reads
    its column, with no per-sample objects made)."""

    name: str
    type: str
    help: str
    samples: list[tuple[str, str, float]] = field(default_factory=list)
    tables: list[tuple[Sequence[Row], int, str, str]] = field(default_factory=list)

    def add(self, label_str: str, value: float, suffix: str = "") -> None:
        self.samples.append((suffix, label_str, value))

    def add_table(
        self, rows: Sequence[Row], column: int, extra_labels: str = "", spec: str = ""
    ) -> None:
        """Rows' values must be finite numbers (ints, floats), written with
        the format ``spec`` ("": Python's own)."""
        self.tables.append((rows, column, extra_labels, spec))


def render(families: Iterable[Family]) -> str:
    out: list[str] = []
    for f in families:
        if not f.samples and not any(rows for rows, _, _, _ in f.tables):
            continue
        out.append(f"# HELP {f.name} {f.help}\n# TYPE {f.name} {f.type}\n")
        name = f.name
        out.extend(
            f"{name}{suffix}{{{lab}}} {value_text(v)}\n"
            if lab
            else f"{name}{suffix} {value_text(v)}\n"
            for suffix, lab, v in f.samples
        )
        for rows, i, extra, spec in f.tables:  # list comprehensions: twice a generator's speed
            tail = f",{extra}}} " if extra else "} "
            out.append("".join([f"{name}{{{lab}{tail}{v[i]:{spec}}\n" for lab, v in rows]))
    return "".join(out)


# Log-spaced bands of OpStats: 1e-3 * 1.1**i.
_BAND_RATIO = 1.1
_BANDS = tuple(1e-3 * _BAND_RATIO**i for i in range(256))

BOOKKEEPER_QUANTILES = (0.5, 0.75, 0.95, 0.99, 0.999, 0.9999, 1.0)


class OpStats:
    """A summary over a rotating window (module docstring). Thread-safe:
    the bookie's journal thread records into it while a scrape reads it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._current = [0] * (len(_BANDS) + 1)
        self._shown = [0] * (len(_BANDS) + 1)
        self._shown_max = math.nan
        self._current_max = -math.inf
        self.count = 0
        self.sum = 0.0

    def record(self, value: float, times: int = 1) -> None:
        """``times`` observations of ``value`` (an add request of N entries
        counts N entries of its latency, in O(1))."""
        band = bisect.bisect_left(_BANDS, value)
        with self._lock:
            self._current[band] += times
            self.count += times
            self.sum += value * times
            if value > self._current_max:
                self._current_max = value

    def rotate(self) -> None:
        """The window ended: its quantiles are shown until the next rotation."""
        with self._lock:
            self._shown, self._current = self._current, [0] * (len(_BANDS) + 1)
            self._shown_max = self._current_max if self._current_max > -math.inf else math.nan
            self._current_max = -math.inf

    def quantiles(self, qs: Sequence[float]) -> list[float]:
        """The given quantiles of the last complete window (NaN when it was empty)."""
        with self._lock:
            counts, top = list(self._shown), self._shown_max
        total = sum(counts)
        if total == 0:
            return [math.nan] * len(qs)
        out = []
        for q in qs:
            if q >= 1.0:
                out.append(top)
                continue
            rank = max(1, math.ceil(q * total))
            seen = 0
            for band, n in enumerate(counts):
                seen += n
                if seen >= rank:
                    bound = _BANDS[band] if band < len(_BANDS) else top
                    out.append(min(bound, top))
                    break
        return out

    def family(self, name: str, help_text: str, qs: Sequence[float], label_str: str = "") -> Family:
        """A summary family of this one (quantiles ``qs``)."""
        family = Family(name, "summary", help_text)
        self.family_samples(family, label_str, qs)
        return family

    def family_samples(
        self, family: Family, label_str: str, qs: Sequence[float], scale: float = 1.0
    ) -> None:
        """Add this summary's quantile, ``_count`` and ``_sum`` samples to
        ``family`` (values times ``scale``)."""
        for q, v in zip(qs, self.quantiles(qs), strict=True):
            family.add(join(label_str, f'quantile="{q}"'), v * scale)
        family.add(label_str, self.count, "_count")
        family.add(label_str, self.sum * scale, "_sum")
