"""pulsar-admin's suffixed values: times like ``10s``, ``10m``, ``3h``, ``7d``,
``1w`` and sizes like ``10K``, ``10M``, ``2G``, ``1T`` (K = 1024).

A value is a whole number with at most one suffix; a bare number is in the
flag's base unit (``bare``); ``-1`` stays ``-1`` (Pulsar's "no limit"),
whatever the unit. The answer is a whole number of ``unit``: a value that is
not (``90s`` as minutes) is refused rather than rounded. Anything else raises
:class:`ValueError` naming the value and what is allowed (the CLI shows it as
a bad parameter: exit 2).
"""

from __future__ import annotations

import re

# Time suffixes (lower case, as pulsar-admin writes them) in seconds.
TIME_UNITS: dict[str, int] = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
TIME_NAMES = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}

# Size suffixes (either case) in bytes; "B" is the bare unit.
SIZE_UNITS: dict[str, int] = {"B": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}
SIZE_NAMES = {"B": "bytes", "K": "KB", "M": "MB", "G": "GB", "T": "TB"}

UNLIMITED = -1

_VALUE = re.compile(r"(\d+)([A-Za-z]?)")


def _split(text: str) -> tuple[int, str] | None:
    """(number, suffix) of ``text``, or None when it is not one number with
    at most one letter after it."""
    match = _VALUE.fullmatch(text.strip())
    if match is None:
        return None
    return int(match.group(1)), match.group(2)


def _whole(amount: int, per_unit: int, text: str, unit_name: str, bare_name: str) -> int:
    if amount % per_unit:
        bare = "" if text.strip()[-1].isalpha() else f" (a bare number is {bare_name})"
        raise ValueError(f"{text!r}{bare} is not a whole number of {unit_name}")
    return amount // per_unit


def parse_time(text: str, unit: str = "s", bare: str | None = None) -> int:
    """``text`` (``10m``, ``3h``, a bare number of ``bare``, default ``unit``,
    or -1) as a whole number of ``unit`` (one of s, m, h, d, w)."""
    bare = bare or unit
    if text.strip() == "-1":
        return UNLIMITED
    parts = _split(text)
    if parts is None or (parts[1] and parts[1] not in TIME_UNITS):
        raise ValueError(
            f"{text!r} is not a time: give a whole number with an optional suffix "
            f"s, m, h, d or w (e.g. 30s, 10m, 3h, 7d, 1w; a bare number is "
            f"{TIME_NAMES[bare]}), or -1 for no limit"
        )
    number, suffix = parts
    seconds = number * TIME_UNITS[suffix or bare]
    return _whole(seconds, TIME_UNITS[unit], text, TIME_NAMES[unit], TIME_NAMES[bare])


def parse_size(text: str, unit: str = "B") -> int:
    """``text`` (``10K``, ``2G``, a bare number of bytes, or -1) as a whole
    number of ``unit`` (one of B, K, M, G, T)."""
    if text.strip() == "-1":
        return UNLIMITED
    parts = _split(text)
    if parts is None or (parts[1] and parts[1].upper() not in SIZE_UNITS):
        raise ValueError(
            f"{text!r} is not a size: give a whole number with an optional suffix "
            "K, M, G or T (1K = 1024 bytes; e.g. 512K, 10M, 2G, 1T; a bare number "
            "is bytes), or -1 for no limit"
        )
    number, suffix = parts
    size = number * SIZE_UNITS[suffix.upper() or "B"]
    return _whole(size, SIZE_UNITS[unit], text, SIZE_NAMES[unit], "bytes")
