"""The namespace policy cache (broker/policy_cache.py) and the max-topics
count rule (broker.namespaces.must_list_topics), against a metastore that
counts its reads (an in-memory table: these are the modules' own rules, the
real metastore is in tests/integration/test_topic_loading.py)."""

from __future__ import annotations

import asyncio

import pytest

from broker.namespaces import TOPIC_COUNT_EXACT_WITHIN, TOPIC_COUNT_MAX_AGE_S, must_list_topics
from broker.policy_cache import PolicyCache
from metastore.client import Stat


class CountingStore:
    """``get`` of a dict, counting reads; ``hold`` makes reads wait (and
    ``holding`` says one does)."""

    def __init__(self) -> None:
        self.values: dict[str, bytes] = {}
        self.reads = 0
        self.hold: asyncio.Event | None = None
        self.holding = asyncio.Event()

    async def get(self, key: str) -> Stat | None:
        self.reads += 1
        value = self.values.get(key)  # read before any hold: a read in flight
        if self.hold is not None:
            self.holding.set()
            await self.hold.wait()
        return None if value is None else Stat(value, 0, 0, 0)

    async def held_read(self, cache: PolicyCache, key: str) -> asyncio.Task:
        """A read of ``key`` through ``cache``, in flight (held) on return."""
        self.hold = asyncio.Event()
        reading = asyncio.create_task(cache.get(key))
        await asyncio.wait_for(self.holding.wait(), 5)
        return reading

    async def release(self, reading: asyncio.Task) -> None:
        assert self.hold is not None
        self.hold.set()
        await reading
        self.hold = None


def _cache(store: CountingStore, max_entries: int = 10) -> PolicyCache:
    return PolicyCache(store, max_entries)  # type: ignore[arg-type]


def test_nothing_is_kept_until_the_watch_runs_nor_after_it_ends():
    async def run() -> list[int]:
        store = CountingStore()
        store.values["/a"] = b"1"
        cache = _cache(store)
        reads = []
        await cache.get("/a")
        await cache.get("/a")
        reads.append(store.reads)  # not live: both read
        cache.start()
        await cache.get("/a")
        await cache.get("/a")
        reads.append(store.reads)  # live: one more read
        cache.stop()
        await cache.get("/a")
        reads.append(store.reads)  # stopped: reads again
        return reads

    assert asyncio.run(run()) == [2, 3, 4]


def test_peek_shows_the_kept_copy_without_reading():
    async def run() -> list[bytes | None]:
        store = CountingStore()
        store.values["/a"] = b"1"
        cache = _cache(store)
        seen: list[bytes | None] = [None if cache.peek("/a") is None else b"?"]  # nothing kept
        cache.start()
        await cache.get("/a")
        copy = cache.peek("/a")
        seen.append(None if copy is None else copy.value)
        cache.changed("/a")
        seen.append(None if cache.peek("/a") is None else b"?")  # dropped by the change
        await cache.get("/a")
        cache.stop()
        seen.append(None if cache.peek("/a") is None else b"?")  # no watch: nothing to trust
        assert store.reads == 2
        return seen

    assert asyncio.run(run()) == [None, b"1", None, None]


def test_a_change_drops_its_record_and_a_missing_record_is_not_kept():
    async def run() -> tuple[Stat | None, Stat | None, int]:
        store = CountingStore()
        cache = _cache(store)
        cache.start()
        missing = await cache.get("/ns")
        await cache.get("/ns")  # not kept: read again
        store.values["/ns"] = b"made"
        made = await cache.get("/ns")
        await cache.get("/ns")  # kept
        store.values["/ns"] = b"changed"
        cache.changed("/ns")
        changed = await cache.get("/ns")
        assert changed is not None and changed.value == b"changed"
        return missing, made, store.reads

    missing, made, reads = asyncio.run(run())
    assert missing is None and made is not None and made.value == b"made" and reads == 4


def test_a_read_in_flight_across_a_change_is_not_kept():
    async def run() -> tuple[bytes, int]:
        store = CountingStore()
        store.values["/ns"] = b"old"
        cache = _cache(store)
        cache.start()
        reading = await store.held_read(cache, "/ns")
        store.values["/ns"] = b"new"
        cache.changed("/ns")  # the event of the change arrives mid-read
        await store.release(reading)
        stat = await cache.get("/ns")
        assert stat is not None
        return stat.value, store.reads

    assert asyncio.run(run()) == (b"new", 2)


def test_a_read_in_flight_when_the_watch_ends_or_restarts_is_not_kept():
    async def run(interrupt: str) -> int:
        store = CountingStore()
        store.values["/ns"] = b"v"
        cache = _cache(store)
        cache.start()
        reading = await store.held_read(cache, "/ns")
        if interrupt == "stop":
            cache.stop()
        cache.start()  # a new watch: what the old one may have missed is unknown
        await store.release(reading)
        await cache.get("/ns")
        return store.reads

    assert asyncio.run(run("stop")) == 2
    assert asyncio.run(run("restart")) == 2


def test_at_most_max_entries_are_kept_oldest_out_first():
    async def run() -> int:
        store = CountingStore()
        cache = _cache(store, max_entries=2)
        cache.start()
        for key in ("/a", "/b", "/c"):
            store.values[key] = key.encode()
            await cache.get(key)
        before = store.reads
        await cache.get("/b")
        await cache.get("/c")  # kept
        await cache.get("/a")  # dropped first
        return store.reads - before

    assert asyncio.run(run()) == 1


AGE = TOPIC_COUNT_MAX_AGE_S
NEAR = TOPIC_COUNT_EXACT_WITHIN


@pytest.mark.parametrize(
    ("kept", "now", "limit", "listed"),
    [
        (None, 0.0, 1_000_000, True),  # nothing kept yet
        ((10, 0.0), 1.0, 1_000_000, False),  # far below the limit, fresh
        ((10, 0.0), AGE, 1_000_000, True),  # too old
        ((499_999, 0.0), 1.0, 1_000_000, False),  # below half
        ((500_000, 0.0), 1.0, 1_000_000, True),  # half full
        ((10, 0.0), 1.0, 20, True),  # half full of a small limit
        ((5, 0.0), 1.0, 20, True),  # within NEAR of the limit
        ((100, 0.0), 1.0, 100 + NEAR, True),  # exactly NEAR below it
        ((100, 0.0), 1.0, 100 + 2 * NEAR + 1, False),  # more than NEAR below, under half
    ],
)
def test_when_the_max_topics_check_lists_the_namespace(kept, now, limit, listed):
    assert must_list_topics(kept, now, limit) is listed
