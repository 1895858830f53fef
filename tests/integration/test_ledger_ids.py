"""New ledgers' ids taken a block at a time (bookie.ledger_ids) and the
registered bookies kept for a while (bookie.bookie_list), on a real
metastore and bookie: ids stay unique across clients, a managed ledger's
ledger ids keep growing when its topic moves to a broker holding an older
block, and a list kept too short for an ensemble is read again."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from bookie.client_context import LedgerClientSettings
from bookie.ledger_client import LedgerClient
from broker.managed_ledger import EntryCache, ManagedLedger
from metastore.client import Compare, MetastoreClient, Op
from protos.topic_name import TopicName


def _client(ms: MetastoreClient, block: int, max_age_s: float = 0.0) -> LedgerClient:
    return LedgerClient(
        ms, LedgerClientSettings(ledger_id_block=block, bookie_list_max_age_s=max_age_s)
    )


def _ledger(name: TopicName, ms: MetastoreClient, ledgers: LedgerClient) -> ManagedLedger:
    return ManagedLedger(
        name,
        ms,
        ledgers,
        ensemble_size=1,
        write_quorum=1,
        ack_quorum=1,
        cache=EntryCache(1 << 20),
        max_outstanding_adds=100,
    )


@asynccontextmanager
async def _two_brokers(cluster) -> AsyncIterator[tuple[list[MetastoreClient], list[LedgerClient]]]:
    """Two brokers' clients (blocks of 64); the second reserved its block
    first, so its ids are the lower ones."""
    clients = [MetastoreClient(cluster.endpoints["metastore"]) for _ in range(2)]
    ledgers = [_client(ms, 64) for ms in clients]
    try:
        held = await ledgers[1].create_ledger(1, 1, 1)
        await held.close()
        yield clients, ledgers
    finally:
        for lc in ledgers:
            await lc.close()
        for ms in clients:
            await ms.close()


def test_ids_come_a_block_per_metastore_write_and_are_unique_across_clients(cluster):
    async def main() -> None:
        ms = MetastoreClient(cluster.endpoints["metastore"])
        a, b = _client(ms, 8), _client(ms, 8)
        ids = []
        for _ in range(10):  # interleaved: each client hands out its own block
            for lc in (a, b):
                writer = await lc.create_ledger(1, 1, 1)
                ids.append(writer.ledger_id)
                await writer.close()
        assert len(set(ids)) == len(ids) == 20
        assert a.ledger_ids.reserved == b.ledger_ids.reserved == 2  # 10 ids: two blocks of 8
        assert ids[0::2] == sorted(ids[0::2]) and ids[1::2] == sorted(ids[1::2])
        for lc in (a, b):
            await lc.close()
        await ms.close()

    asyncio.run(main())


def test_a_ledger_listed_after_a_higher_id_skips_the_rest_of_its_block(cluster, topic):
    async def main() -> None:
        ms = MetastoreClient(cluster.endpoints["metastore"])
        old, new = _client(ms, 64), _client(ms, 64)
        first = await old.create_ledger(1, 1, 1)  # old's block holds the lower ids
        second = await new.create_ledger(1, 1, 1)
        assert second.ledger_id > first.ledger_id + 1  # old still holds ids below it
        key = f"/test/{topic}/list"

        def listing(ledger_id: int) -> tuple[Compare, Op]:
            return Compare(key, version=-1), Op(key, str(ledger_id).encode())

        third = await old.create_ledger_listed((1, 1, 1), listing, after=second.ledger_id)
        assert third is not None and third.ledger_id > second.ledger_id
        assert old.ledger_ids.reserved == 2  # the rest of its first block was dropped
        for w in (first, second, third):
            await w.close()
        for lc in (old, new):
            await lc.close()
        await ms.close()

    asyncio.run(main())


def test_a_topic_moved_to_a_broker_holding_an_older_block_keeps_its_ledger_ids_growing(
    cluster, topic
):
    async def main() -> None:
        name = TopicName.parse(f"persistent://public/default/{topic}")
        async with _two_brokers(cluster) as (clients, ledgers):
            first = _ledger(name, clients[0], ledgers[0])
            await first.open()
            before = await first.add_entry(b"on the first owner")
            await first.close()
            moved = _ledger(name, clients[1], ledgers[1])
            await moved.open()  # a new ledger after the first owner's
            after = await moved.add_entry(b"on the second owner")
            assert moved.ledger_ids == sorted(moved.ledger_ids) and len(moved.ledger_ids) == 2
            assert after > before  # positions, and so message ids, keep their order
            await moved.close()

    asyncio.run(main())


def test_a_topic_reopened_from_an_empty_ledger_takes_an_id_above_every_one_handed_out(
    cluster, topic
):
    """Its empty ledger is deleted at open, yet a cursor may point at it
    ((ledger, -1)): the next ledger must still be above it."""

    async def main() -> None:
        name = TopicName.parse(f"persistent://public/default/{topic}")
        async with _two_brokers(cluster) as (clients, ledgers):
            first = _ledger(name, clients[0], ledgers[0])  # the higher block
            await first.open()
            empty = first.ledger_ids[-1]
            mark = first.next_position(first.before_first())  # where a new cursor would start
            await first.close()
            moved = _ledger(name, clients[1], ledgers[1])
            await moved.open()  # deletes the empty ledger, makes a new one
            assert moved.ledger_ids[-1] > empty
            assert await moved.add_entry(b"after the move") >= mark
            await moved.close()

    asyncio.run(main())


def test_a_kept_bookie_list_serves_new_ledgers_and_is_read_again_when_too_short(cluster):
    async def main() -> None:
        ms = MetastoreClient(cluster.endpoints["metastore"])
        lc = _client(ms, 1, max_age_s=600)
        for _ in range(3):
            writer = await lc.create_ledger(1, 1, 1)
            await writer.close()
        assert lc.bookie_list.reads == 1  # one read served all three
        # The standalone has one bookie: an ensemble of two reads the list
        # afresh before giving up (a bookie that just joined is not missed).
        try:
            await lc.create_ledger(2, 2, 2)
        except Exception as exc:
            assert "needs 2 writable bookies" in str(exc)
        else:
            raise AssertionError("an ensemble of two on one bookie")
        assert lc.bookie_list.reads == 2
        await lc.writable_bookies()  # every other caller reads afresh
        assert lc.bookie_list.reads == 3
        await lc.close()
        await ms.close()

    asyncio.run(main())
