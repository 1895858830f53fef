"""A ledger writer process for the recovery tests (killed with -9 mid-stream).

    python -m tests.ledger_writer METASTORE E QW QA

Prints ``ledger <id>``, then ``ok <entry id>`` for every confirmed entry,
forever (payload of entry i: ``entry-<i>``), with 100 adds in flight.
"""

from __future__ import annotations

import asyncio
import sys

from bookie.ledger_client import LedgerClient
from metastore.client import MetastoreClient


async def main(metastore: str, e: int, qw: int, qa: int) -> None:
    client = LedgerClient(MetastoreClient(metastore))
    writer = await client.create_ledger(e, qw, qa, password=b"pw")
    print(f"ledger {writer.ledger_id}", flush=True)
    inflight: set[asyncio.Future] = set()
    i = 0
    while True:  # bounded by the test, which kills this process
        while len(inflight) < 100:
            fut = writer.add(f"entry-{i}".encode())
            fut.add_done_callback(lambda f: print(f"ok {f.result()}", flush=True))
            inflight.add(fut)
            fut.add_done_callback(inflight.discard)
            i += 1
        await asyncio.wait(inflight, return_when=asyncio.FIRST_COMPLETED)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])))
