"""pulsar-admin's suffixed times and sizes (client/_units.py), row by row."""

from __future__ import annotations

import pytest

from client._units import parse_size, parse_time

# (text, unit, bare, expected): times in seconds unless the row says.
TIMES = [
    ("10", "s", None, 10),
    ("10s", "s", None, 10),
    ("10m", "s", None, 600),
    ("3h", "s", None, 10800),
    ("7d", "s", None, 604800),
    ("1w", "s", None, 604800),
    ("0", "s", None, 0),
    ("-1", "s", None, -1),
    (" 3h ", "s", None, 10800),
    # retention: minutes, a bare number is seconds (pulsar-admin's -t)
    ("3h", "m", "s", 180),
    ("120", "m", "s", 2),
    ("1w", "m", "s", 10080),
    ("-1", "m", "s", -1),
    # subscription expiration: minutes, a bare number is minutes
    ("1440", "m", None, 1440),
    ("12h", "m", None, 720),
    ("600s", "m", None, 10),
]

# (text, unit, expected): sizes in bytes unless the row says.
SIZES = [
    ("4096", "B", 4096),
    ("10K", "B", 10240),
    ("10k", "B", 10240),
    ("10M", "B", 10 * 1024**2),
    ("2G", "B", 2 * 1024**3),
    ("2g", "B", 2 * 1024**3),
    ("1T", "B", 1024**4),
    ("0", "B", 0),
    ("-1", "B", -1),
    # retention: MB
    ("10G", "M", 10240),
    ("512M", "M", 512),
    ("1048576", "M", 1),
    ("-1", "M", -1),
    ("0", "M", 0),
]

# (text, unit, bare, words the message has)
BAD_TIMES = [
    ("", "s", None, "is not a time"),
    ("h", "s", None, "is not a time"),
    ("10x", "s", None, "s, m, h, d or w"),
    ("3H", "s", None, "is not a time"),
    ("1.5h", "s", None, "is not a time"),
    ("-2", "s", None, "or -1 for no limit"),
    ("-1h", "s", None, "is not a time"),
    ("10mm", "s", None, "is not a time"),
    ("90", "m", "s", "'90' (a bare number is seconds) is not a whole number of minutes"),
    ("30s", "m", "s", "'30s' is not a whole number of minutes"),
]

BAD_SIZES = [
    ("", "B", "is not a size"),
    ("10X", "B", "K, M, G or T"),
    ("1.5G", "B", "is not a size"),
    ("-5", "B", "is not a size"),
    ("10 M", "B", "is not a size"),
    ("1000", "M", "'1000' (a bare number is bytes) is not a whole number of MB"),
    ("1K", "M", "'1K' is not a whole number of MB"),
]


@pytest.mark.parametrize("text, unit, bare, expected", TIMES)
def test_times(text, unit, bare, expected):
    assert parse_time(text, unit, bare) == expected


@pytest.mark.parametrize("text, unit, expected", SIZES)
def test_sizes(text, unit, expected):
    assert parse_size(text, unit) == expected


@pytest.mark.parametrize("text, unit, bare, words", BAD_TIMES)
def test_bad_times_name_the_value_and_what_is_allowed(text, unit, bare, words):
    with pytest.raises(ValueError) as caught:
        parse_time(text, unit, bare)
    assert words in str(caught.value) and repr(text) in str(caught.value)


@pytest.mark.parametrize("text, unit, words", BAD_SIZES)
def test_bad_sizes_name_the_value_and_what_is_allowed(text, unit, words):
    with pytest.raises(ValueError) as caught:
        parse_size(text, unit)
    assert words in str(caught.value) and repr(text) in str(caught.value)
