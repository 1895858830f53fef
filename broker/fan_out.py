"""Work on many items with a bounded number under way at once.

A broker closes or deletes topics in bulk (a released bundle, shutdown, a
deleted namespace). One at a time, each waits out its own metastore writes
in turn (a namespace of 150 topics took 8-10 s to delete); all at once, a
namespace of ten thousand would start ten thousand closes together. So
``limit`` workers share one iterator, each taking the next item as it is
free. After a failure no further item starts; the items under way finish,
and the first failure is raised. Pure asyncio (tests/unit/test_fan_out.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

T = TypeVar("T")


async def for_each(items: Sequence[T], limit: int, action: Callable[[T], Awaitable[None]]) -> None:
    """``action(item)`` for each item, at most ``limit`` (≥ 1) at once."""
    if limit < 1:
        raise ValueError(f"limit is {limit}; it must be at least 1")
    pending = iter(items)
    failures: list[BaseException] = []

    async def worker() -> None:
        for item in pending:
            try:
                await action(item)
            except Exception as exc:
                failures.append(exc)
            if failures:
                return

    await asyncio.gather(*(worker() for _ in range(min(limit, len(items)))))
    if failures:
        raise failures[0]
