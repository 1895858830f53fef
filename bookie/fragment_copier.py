"""Copying one replica of a closed fragment (AutoRecovery's worker step).

The entries that the repaired ensemble index holds are read from the other
replicas of each entry's write set (their digests checked; records keep the
writer's LAC and digest, so the copy is byte for byte what the writer
sent), written to the target bookie as recovery adds (they pass a fence, as
the ledger is usually closed), at most ``rereplication_rate_bytes_per_s``,
and then, for a replaced bookie, the target takes its place in that
fragment's ensemble by compare-and-set. The swap is made only if the
fragment still has the same bounds and the same bookie at that index;
otherwise nothing changes and the worker plans again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Collection, Iterator
from dataclasses import dataclass

import grpc

from bookie.ledger_client import LedgerClient
from bookie.ledger_metadata import BKError, LedgerMetadata, master_key
from bookie.metrics import RecoveryCounts
from bookie.quorum import write_set
from bookie.replication_rules import Repair, entries_held, fragments, read_sources
from protos import bookie_pb2, common_pb2
from protos.digest import encode_record, entry_digest

log = logging.getLogger(__name__)

_Row = tuple[int, int, int, bytes]  # entry id, lac, digest, payload


class Throttle:
    """Paces bytes to a rate (0 = unpaced), allowing one second of burst."""

    def __init__(self, rate_bytes_per_s: int) -> None:
        self.rate = rate_bytes_per_s
        self._free_at = time.monotonic()

    async def take(self, size: int) -> float:
        """Wait until ``size`` more bytes fit the rate; the seconds waited."""
        if self.rate <= 0:
            return 0.0
        now = time.monotonic()
        self._free_at = max(self._free_at, now - 1.0) + size / self.rate
        wait = self._free_at - now
        if wait > 0:
            await asyncio.sleep(wait)
            return wait
        return 0.0


@dataclass(frozen=True)
class CopySettings:
    batch_entries: int  # entries read and written per round trip
    batch_bytes: int  # payload bytes per add request at most
    timeout_s: float


def _batches(ids: Iterator[int], size: int) -> Iterator[list[int]]:
    batch: list[int] = []
    for entry_id in ids:
        batch.append(entry_id)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


class FragmentCopier:
    def __init__(
        self,
        client: LedgerClient,
        settings: CopySettings,
        throttle: Throttle,
        counts: RecoveryCounts,
    ) -> None:
        self.client = client
        self.settings = settings
        self.throttle = throttle
        self.counts = counts

    async def copy(
        self, md: LedgerMetadata, repair: Repair, target: str, replaced: Collection[str]
    ) -> bool:
        """Copy the replica to ``target`` (for holes: the same bookie) and,
        for a replaced bookie, swap ``target`` in. False when the metadata
        changed under the copy (plan again)."""
        fragment = repair.fragment
        await self.client.resolve([*fragment.ensemble, target])
        ids = entries_held(fragment, repair.index, md.ensemble_size, md.write_quorum)
        copied = 0
        for batch in _batches(ids, self.settings.batch_entries):
            rows = await self._read(md, fragment.ensemble, batch, target, replaced)
            await self._write(md, target, rows)
            copied += len(rows)
        if repair.replace and not await self._swap(md.ledger_id, repair, target):
            return False
        log.info(
            "ledger %d: entries %d..%d of %s %s on %s (%d entries)",
            md.ledger_id,
            fragment.first,
            fragment.last,
            repair.bookie,
            "re-replicated" if repair.replace else "refilled",
            target,
            copied,
        )
        return True

    async def _read(
        self,
        md: LedgerMetadata,
        ensemble: tuple[str, ...],
        ids: list[int],
        target: str,
        replaced: Collection[str],
    ) -> list[_Row]:
        """The rows of ``ids``, each from the first of its replicas
        (:func:`~bookie.replication_rules.read_sources`) that has it intact."""
        sources = {
            e: read_sources(
                [ensemble[i] for i in write_set(e, md.ensemble_size, md.write_quorum)],
                target,
                replaced,
            )
            for e in ids
        }
        got: dict[int, _Row] = {}
        problems: dict[int, list[str]] = {}
        attempt = 0
        while len(got) < len(ids):
            asks: dict[str, list[int]] = {}
            for e in ids:
                if e in got:
                    continue
                if attempt >= len(sources[e]):
                    raise BKError(
                        f"ledger {md.ledger_id} entry {e}: no replica could be read "
                        f"({'; '.join(problems.get(e, ['none left']))})",
                        common_pb2.NO_SUCH_ENTRY,
                    )
                asks.setdefault(sources[e][attempt], []).append(e)
            answers = await asyncio.gather(
                *(self._ask(md.ledger_id, b, batch) for b, batch in asks.items())
            )
            for (bookie, batch), answer in zip(asks.items(), answers, strict=True):
                self._take(md.ledger_id, bookie, batch, answer, got, problems)
            attempt += 1
        self.counts.entries_read += len(ids)
        self.counts.bytes_read += sum(len(r[3]) for r in got.values())
        return [got[e] for e in ids]

    async def _ask(
        self, ledger_id: int, bookie: str, ids: list[int]
    ) -> tuple[list[_Row], list[int]] | Exception:
        try:
            return await self.client.connection(bookie).read_entries(ledger_id, ids)
        except (BKError, grpc.aio.AioRpcError, KeyError) as exc:
            return exc

    @staticmethod
    def _take(
        ledger_id: int,
        bookie: str,
        batch: list[int],
        answer: tuple[list[_Row], list[int]] | Exception,
        got: dict[int, _Row],
        problems: dict[int, list[str]],
    ) -> None:
        if isinstance(answer, Exception):
            for e in batch:
                problems.setdefault(e, []).append(f"{bookie}: {answer}")
            return
        rows, _missing = answer
        wanted = set(batch)
        for row in rows:
            eid, lac, digest, payload = row
            if eid in wanted and entry_digest(ledger_id, eid, lac, payload) == digest:
                got[eid] = row
        for e in batch:
            if e not in got:
                problems.setdefault(e, []).append(f"{bookie}: missing or bad digest")

    async def _write(self, md: LedgerMetadata, target: str, rows: list[_Row]) -> None:
        key = master_key(md.password)
        start = 0
        while start < len(rows):
            end, size = start, 0
            while end < len(rows) and (end == start or size < self.settings.batch_bytes):
                size += len(rows[end][3])
                end += 1
            self.counts.throttled_s += await self.throttle.take(size)
            req = bookie_pb2.AddRequest(
                ledger_id=md.ledger_id,
                master_key=key,
                entries=b"".join(encode_record(*row) for row in rows[start:end]),
                recovery=True,
            )
            try:
                resp = await asyncio.wait_for(
                    self.client.connection(target).send_add(req), self.settings.timeout_s
                )
            except (grpc.aio.AioRpcError, KeyError, TimeoutError) as exc:
                raise BKError(f"ledger {md.ledger_id}: writing to {target} failed: {exc}") from exc
            if resp.error.code != common_pb2.OK:
                raise BKError(
                    f"ledger {md.ledger_id}: {target} refused the copy: {resp.error.message}"
                )
            self.counts.entries_written += end - start
            self.counts.bytes_written += size
            start = end

    async def _swap(self, ledger_id: int, repair: Repair, target: str) -> bool:
        swapped = False

        def change(m: LedgerMetadata) -> bool:
            nonlocal swapped
            swapped = False
            now = fragments(m)
            s = repair.fragment.segment
            if s >= len(now):
                return False
            frag = now[s]
            same = (frag.first, frag.last, frag.open) == (
                repair.fragment.first,
                repair.fragment.last,
                False,
            )
            if not same or frag.ensemble[repair.index] != repair.bookie or target in frag.ensemble:
                return False
            m.ensembles[s][1][repair.index] = target
            swapped = True
            return True

        await self.client.update_metadata(ledger_id, change)
        return swapped
