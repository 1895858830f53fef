"""What a producer gives each message's callback: the ids of an entry's
messages (``entry_ids``, made without MessageId's conversions) and the
outcome given to a function or to an asyncio send's future (``settle``)."""

from __future__ import annotations

import asyncio

import pytest

from client.exceptions import Timeout
from client.message import PendingMessage, settle, settle_failed, settle_stored
from protos.message_id import MessageId, entry_ids

# (partition, ledger, entry, messages in the entry) -> the ids MessageId()
# gives: batch index -1 for an entry of one message, 0..n-1 for a batch.
ENTRY_IDS = [
    ((-1, 5, 6, 1), [MessageId(-1, 5, 6, -1)]),
    ((3, 5, 6, 1), [MessageId(3, 5, 6, -1)]),
    ((-1, 5, 6, 3), [MessageId(-1, 5, 6, i) for i in range(3)]),
    ((0, 2**62, 0, 2), [MessageId(0, 2**62, 0, 0), MessageId(0, 2**62, 0, 1)]),
    ((-1, 5, 6, 0), []),  # a chunk that is not the last carries no message
]


@pytest.mark.parametrize(("args", "expected"), ENTRY_IDS)
def test_entry_ids_are_the_ids_message_id_makes(args, expected):
    ids = entry_ids(*args)
    assert ids == expected
    for got, want in zip(ids, expected, strict=True):
        assert got.topic_name() is None
        assert (got.partition(), got.batch_index()) == (want.partition(), want.batch_index())
        assert hash(got) == hash(want) and str(got) == str(want)
        assert MessageId.deserialize(got.serialize()) == want


def _pending(callback):
    return PendingMessage(b"m", 0, callback)


def test_a_future_gets_the_id_or_the_error_and_a_cancelled_one_is_left_alone():
    async def run():
        loop = asyncio.get_running_loop()
        stored, failed, cancelled = (loop.create_future() for _ in range(3))
        cancelled.cancel()
        mid = MessageId(-1, 1, 2, -1)
        settle(stored, None, mid)
        settle(failed, Timeout("no receipt"), None)
        settle(cancelled, None, mid)  # no InvalidStateError
        settle_stored([_pending(cancelled)], [mid])
        settle_failed([_pending(cancelled)], Timeout("late"))
        assert stored.result() is mid
        assert isinstance(failed.exception(), Timeout)
        assert cancelled.cancelled()

    asyncio.run(run())


def test_a_function_gets_the_outcome_and_its_exception_stops_no_other():
    got: list[tuple] = []

    def record(exc, mid):
        got.append((exc, mid))

    def broken(exc, mid):
        raise RuntimeError("a user's callback failed")

    ids = entry_ids(-1, 1, 2, 3)
    settle_stored([_pending(record), _pending(broken), _pending(record)], ids)
    assert got == [(None, ids[0]), (None, ids[2])]
    got.clear()
    error = Timeout("no receipt")
    settle_failed([_pending(broken), _pending(record)], error)
    assert got == [(error, None)]


def test_a_loops_own_future_subclass_is_settled_too():
    """A loop whose create_future() makes a Future subclass: the engine's
    inline path takes only the base class, settle() the rest."""

    class LoopFuture(asyncio.Future):
        pass

    async def run():
        fut = LoopFuture()
        [mid] = entry_ids(-1, 1, 2, 1)
        settle_stored([_pending(fut)], [mid])
        assert fut.result() is mid

    asyncio.run(run())
