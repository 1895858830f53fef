"""A ledger writer process for the recovery tests (killed with -9 mid-stream).

    python -m tests.ledger_writer METASTORE E QW QA [LAST]

Prints ``ledger <id>``, then ``ok <entry id>`` for every confirmed entry
(payload of entry i: ``entry-<i>``), with 100 adds in flight: forever, or
with LAST up to entry LAST, after which it prints ``done`` and waits to be
killed, adding nothing more (so the bookies' LAC stays below LAST: the LAC
travels with the adds).
"""

from __future__ import annotations

import asyncio
import sys

from bookie.ledger_client import LedgerClient
from metastore.client import MetastoreClient


async def main(metastore: str, e: int, qw: int, qa: int, last: int | None) -> None:
    client = LedgerClient(MetastoreClient(metastore))
    writer = await client.create_ledger(e, qw, qa, password=b"pw")
    print(f"ledger {writer.ledger_id}", flush=True)
    inflight: set[asyncio.Future] = set()
    i = 0
    while last is None or i <= last:  # bounded by LAST, or by the test, which kills this
        while len(inflight) < 100 and (last is None or i <= last):
            fut = writer.add(f"entry-{i}".encode())
            fut.add_done_callback(lambda f: print(f"ok {f.result()}", flush=True))
            inflight.add(fut)
            fut.add_done_callback(inflight.discard)
            i += 1
        await asyncio.wait(inflight, return_when=asyncio.FIRST_COMPLETED)
    if inflight:
        await asyncio.wait(inflight)
    print("done", flush=True)
    await asyncio.Event().wait()  # killed by the test


if __name__ == "__main__":
    last = int(sys.argv[5]) if len(sys.argv) > 5 else None
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), last))
