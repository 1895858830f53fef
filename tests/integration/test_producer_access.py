"""Producer access modes (seed: Access mode)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from client import (
    AlreadyClosed,
    Client,
    InitialPosition,
    ProducerAccessMode,
    ProducerBusy,
    ProducerFenced,
    aio,
)
from tests.harness import wait_for


def test_exclusive_producer_is_the_only_writer(cluster, topic):
    with Client(cluster.service_url) as c:
        shared = c.create_producer(topic)
        with pytest.raises(ProducerBusy):
            c.create_producer(topic, access_mode=ProducerAccessMode.Exclusive)
        shared.close()
        exclusive = c.create_producer(topic, access_mode=ProducerAccessMode.Exclusive)
        for mode in (ProducerAccessMode.Shared, ProducerAccessMode.Exclusive):
            with pytest.raises(ProducerBusy):
                c.create_producer(topic, access_mode=mode)
        exclusive.send(b"only")
        exclusive.close()
        c.create_producer(topic).send(b"shared again")


def test_wait_for_exclusive_is_pending_until_it_is_the_only_producer(cluster, topic):
    with Client(cluster.service_url) as c:
        first = c.create_producer(topic, access_mode=ProducerAccessMode.Exclusive)
        created: list = []

        def wait() -> None:
            created.append(
                c.create_producer(topic, access_mode=ProducerAccessMode.WaitForExclusive)
            )

        t = threading.Thread(target=wait, daemon=True)
        t.start()
        with pytest.raises(AssertionError, match="timed out"):  # it must stay pending
            wait_for(lambda: created, 1.0, "the waiting producer")
        first.send(b"from first")
        first.close()
        wait_for(lambda: created, 10, "the waiting producer to get exclusive access")
        t.join(timeout=5)
        leader = created[0]
        leader.send(b"from leader")
        with pytest.raises(ProducerBusy):
            c.create_producer(topic)
        sub = c.subscribe(topic, "s", initial_position=InitialPosition.Earliest)
        assert [sub.receive(timeout_millis=5000).data() for _ in range(2)] == [
            b"from first",
            b"from leader",
        ]


def test_exclusive_with_fencing_fences_the_old_producers(cluster, topic):
    with Client(cluster.service_url) as c:
        old = c.create_producer(topic, access_mode=ProducerAccessMode.Exclusive)
        old.send(b"before")
        new = c.create_producer(topic, access_mode=ProducerAccessMode.ExclusiveWithFencing)
        with pytest.raises(ProducerFenced):
            for _ in range(50):  # bounded: the fence reaches the old stream at once
                old.send(b"after the fence")
        new.send(b"from the new one")
        sub = c.subscribe(topic, "s", initial_position=InitialPosition.Earliest)
        got = [sub.receive(timeout_millis=5000).data() for _ in range(2)]
        assert got == [b"before", b"from the new one"]


def test_closing_the_client_ends_a_producer_still_being_created(cluster, topic):
    """A WaitForExclusive producer still pending when its client closes is
    refused with AlreadyClosed, at once, and leaves nothing running on the
    client's loop (before, its thread waited forever and the pending
    creation was collected after the loop had closed)."""
    holder = Client(cluster.service_url)
    try:
        holder.create_producer(topic, access_mode=ProducerAccessMode.Exclusive)
        c = Client(cluster.service_url)
        outcome: list = []

        def wait() -> None:
            try:
                c.create_producer(topic, access_mode=ProducerAccessMode.WaitForExclusive)
                outcome.append("created")
            except Exception as exc:  # what the waiting caller is told
                outcome.append(exc)

        t = threading.Thread(target=wait, daemon=True)
        t.start()
        with pytest.raises(AssertionError, match="timed out"):  # it must stay pending
            wait_for(lambda: outcome, 1.0, "the waiting producer")
        runner = c._runner
        c.close()
        wait_for(lambda: outcome, 10, "the pending creation to end with the client")
        assert isinstance(outcome[0], AlreadyClosed), outcome
        assert runner.loop.is_closed()
    finally:
        holder.close()


def test_closing_an_asyncio_client_ends_a_producer_still_being_created(cluster, topic):
    async def scenario() -> None:
        async with aio.Client(cluster.service_url) as holder:
            await holder.create_producer(topic, access_mode=ProducerAccessMode.Exclusive)
            c = aio.Client(cluster.service_url)
            pending = asyncio.ensure_future(
                c.create_producer(topic, access_mode=ProducerAccessMode.WaitForExclusive)
            )
            done, _ = await asyncio.wait([pending], timeout=1.0)
            assert not done  # it must stay pending
            await asyncio.wait_for(c.close(), 10)
            with pytest.raises(AlreadyClosed):
                await asyncio.wait_for(pending, 10)

    asyncio.run(scenario())
