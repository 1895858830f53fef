"""What the broker and the bookie measure (broker/meter.py) and how the
text format and the windowed summaries come out (protos/prometheus_text.py).
The clock of the meter is the test's."""

from __future__ import annotations

import math

import pytest
from prometheus_client.parser import text_string_to_metric_families

from broker import meter
from broker.meter import (
    ENTRY_SIZE_BOUNDS_BYTES,
    WRITE_LATENCY_BOUNDS_MS,
    Meter,
    StatsBuckets,
)
from protos.prometheus_text import Family, OpStats, escape, labels, render


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock()
    monkeypatch.setattr(meter.time, "monotonic", c)
    return c


def test_a_rate_is_the_growth_over_the_window(clock: Clock):
    m = Meter(window_s=60)
    m.add(0, 0)  # first sample at t=1000
    clock.now += 30
    m.add(300, 3000)
    assert m.rates() == (10.0, 100.0)  # 300 over the 30 s since the oldest sample
    clock.now += 30
    assert m.rates() == (5.0, 50.0)  # 300 over 60 s
    for _ in range(20):  # quiet for a while: the window moves past the traffic
        clock.now += 6
        m.rates()
    assert m.rates() == (0.0, 0.0)
    assert (m.msgs, m.bytes) == (300, 3000)  # totals never go back


def test_a_window_keeps_a_bounded_number_of_samples(clock: Clock):
    m = Meter(window_s=10)
    for _ in range(1000):
        clock.now += 0.5
        m.add(1, 1)
    assert len(m._samples) <= 12
    rate, _ = m.rates()
    assert 1.9 <= rate <= 2.2  # two per second (one add more than the span holds)


# Pulsar's bands: a value lands in the first band whose bound is >= it.
LATENCY_BANDS = [(0.1, 0), (0.5, 0), (0.6, 1), (1.0, 1), (4.9, 2), (1000, 8), (1000.5, 9)]


@pytest.mark.parametrize(("value", "band"), LATENCY_BANDS)
def test_write_latency_bands(value, band):
    b = StatsBuckets(WRITE_LATENCY_BOUNDS_MS)
    b.add(value)
    b.roll()
    assert b.counts.index(1) == band and b.count == 1


def test_buckets_show_the_last_complete_interval():
    b = StatsBuckets(ENTRY_SIZE_BOUNDS_BYTES)
    for size in (100, 200, 2000, 2_000_000):
        b.add(size)
    assert b.count == 0  # nothing shown until the interval ends
    b.roll()
    assert b.counts == [1, 1, 0, 1, 0, 0, 0, 0, 1] and b.count == 4 and b.sum == 2_002_300
    b.add(100)
    b.roll()
    assert b.counts == [1, 0, 0, 0, 0, 0, 0, 0, 0] and b.count == 1
    b.roll()
    assert b.count == 0 and b.sum == 0


def test_the_sum_may_count_in_another_unit():
    b = StatsBuckets(WRITE_LATENCY_BOUNDS_MS)
    b.add(2.5, 2500.0)  # banded in ms, summed in microseconds (as Pulsar)
    b.roll()
    assert b.counts[2] == 1 and b.sum == 2500.0


def test_summary_quantiles_are_within_ten_percent_of_the_window():
    s = OpStats()
    for v in range(1, 1001):  # 1..1000 ms
        s.record(float(v))
    assert all(math.isnan(q) for q in s.quantiles([0.5, 0.99]))  # nothing shown yet
    s.rotate()
    p0, p50, p99, p100 = s.quantiles([0.0, 0.5, 0.99, 1.0])
    assert 1.0 <= p0 <= 1.1
    assert 500 <= p50 <= 550
    assert 990 <= p99 <= 1000  # a band's bound, capped at the largest value seen
    assert p100 == 1000
    assert s.count == 1000 and s.sum == sum(range(1, 1001))
    s.rotate()  # an empty window shows NaN; count and sum keep growing
    assert math.isnan(s.quantiles([0.5])[0]) and s.count == 1000


def test_a_summary_records_many_observations_at_once():
    s = OpStats()
    s.record(2.0, times=500)
    s.record(50.0, times=500)
    s.rotate()
    assert s.count == 1000 and s.sum == 26_000
    p25, p75 = s.quantiles([0.25, 0.75])
    assert 2.0 <= p25 <= 2.2 and 50 <= p75 <= 55


# Label values with every character the text format escapes, and some it does not.
ODD_VALUES = [
    'quote " inside',
    "back\\slash",
    "new\nline",
    "unicode ✓ ünï",
    "braces {a=b}, commas, = signs",
    "",
]


@pytest.mark.parametrize("value", ODD_VALUES)
def test_label_values_survive_a_parser(value):
    f = Family("pulsar_x", "gauge", "x")
    f.add(labels((("cluster", "c"), ("subscription", value))), 7)
    f.add(labels((("cluster", "c"), ("subscription", "plain"))), 1.5)
    parsed = list(text_string_to_metric_families(render([f])))
    assert len(parsed) == 1 and parsed[0].type == "gauge"
    got = {s.labels["subscription"]: s.value for s in parsed[0].samples}
    assert got == {value: 7, "plain": 1.5}


def test_escaping_only_touches_what_must_be_escaped():
    assert escape('a"b\\c\nd') == 'a\\"b\\\\c\\nd'
    assert escape("persistent://t/ns/topic-partition-0") == "persistent://t/ns/topic-partition-0"


def test_a_summary_renders_as_the_text_format_wants():
    s = OpStats()
    s.record(3.0)
    s.rotate()
    f = Family("pulsar_broker_lookup", "summary", "Lookup latency (ms)")
    s.family_samples(f, 'cluster="c"', (0.5, 1.0))
    parsed = list(text_string_to_metric_families(render([f])))
    samples = {(x.name, x.labels.get("quantile")): x.value for x in parsed[0].samples}
    assert samples[("pulsar_broker_lookup_count", None)] == 1
    assert samples[("pulsar_broker_lookup", "1.0")] == 3.0
    empty = Family("nothing", "gauge", "no samples")
    assert render([empty]) == ""  # a family without samples is left out
