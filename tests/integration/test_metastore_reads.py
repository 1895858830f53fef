"""Reads made together go to a real metastore as one Read call, and each
caller gets what its own Get or List would have answered (issue 26;
metastore/read_batcher.py, metastore/batch_read.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from metastore.client import InvalidKeyError, MetastoreClient
from tests.harness import MetastoreCluster
from tests.metrics_scrape import scrape


async def _together(ms: MetastoreClient, keys: list[str], prefixes: list[str]) -> list[Any]:
    """Every get and list at once, as a topic load does; errors as values."""
    return await asyncio.gather(
        *(ms.get(k) for k in keys),
        *(ms.list_prefix(p) for p in prefixes),
        return_exceptions=True,
    )


def _plain(results: list[Any]) -> list[Any]:
    """Comparable: a list's revision differs between two reads of it."""
    out: list[Any] = []
    for r in results:
        if isinstance(r, tuple):
            out.append(r[0])
        elif isinstance(r, Exception):
            out.append((type(r), str(r)))
        else:
            out.append(r)
    return out


def _calls(cluster: Any) -> dict[str, float]:
    s = scrape(int(cluster.endpoints["metrics"]["metastore"]))
    name = "pulsar_metadata_store_ops_latency_ms_count"
    return {k: s.get(name, type=k, status="success") or 0.0 for k in ("get", "list", "read")}


def test_reads_made_together_are_one_call_with_each_callers_own_answer(cluster, topic):
    async def main() -> None:
        batched = MetastoreClient(cluster.endpoints["metastore"])
        alone = MetastoreClient(cluster.endpoints["metastore"], read_batch_max=0)
        base = f"/test/reads/{topic}"
        for i in range(6):
            await alone.put(f"{base}/k{i}", f"value {i}".encode())
        keys = [f"{base}/k{i}" for i in range(6)] + [f"{base}/missing", "/bad//key"]
        prefixes = [f"{base}/", f"{base}/nothing/"]
        before = _calls(cluster)
        got = await _together(batched, keys, prefixes)
        spent = {k: v - before[k] for k, v in _calls(cluster).items()}
        expected = await _together(alone, keys, prefixes)
        assert _plain(got) == _plain(expected)
        assert [s.value for s in got[:6]] == [f"value {i}".encode() for i in range(6)]
        assert got[6] is None and isinstance(got[7], InvalidKeyError)
        assert [len(r[0]) for r in got[8:]] == [6, 0]
        # One Read for all ten; one by one they were ten calls. (The
        # cluster's own background adds a few calls: load reports, the auditor.)
        assert spent["read"] >= 1, spent
        assert spent["get"] + spent["list"] < 10, spent
        await batched.close()
        await alone.close()

    asyncio.run(main())


@pytest.mark.parametrize(
    "settings",
    [
        # Each answer stops after ~100 bytes of records: asked again for the rest.
        ["max_read_response_bytes=100"],
        # Fewer items per call than the client sends: each read alone.
        ["max_reads_per_call=2"],
    ],
)
def test_a_metastore_that_bounds_its_read_answers_still_answers_every_read(
    tmp_path: Path, settings: list[str]
):
    ms_cluster = MetastoreCluster(tmp_path, 1, settings).start_all()
    try:

        async def main() -> None:
            ms = MetastoreClient(ms_cluster.addresses)
            keys = [f"/test/bounded/k{i}" for i in range(12)]
            for i, key in enumerate(keys):
                await ms.put(key, bytes([i]) * 60)
            got = await asyncio.wait_for(_together(ms, keys, ["/test/bounded/"]), 30)
            assert [s.value for s in got[:12]] == [bytes([i]) * 60 for i in range(12)]
            assert [r.key for r in got[12][0]] == sorted(keys)
            await ms.close()

        asyncio.run(main())
    finally:
        ms_cluster.stop_all()
