"""A request's answer on the consumer stream (client/_consumer_stream.py)
is acted on where it arrives, before the deliveries behind it.

The broker answers a seek and only then delivers from the new position, on
the same stream. The consumer drops what it queued before the answer; if it
dropped after its request returned (a later loop turn) it also dropped the
new position's first deliveries, which arrived in between, and they were
never delivered again (seen as a stats export that missed the first
records). The call here is a scripted transport: the stream's own
ordering is what is tested.
"""

from __future__ import annotations

import asyncio

import grpc

from client._consumer_stream import ConsumerStream
from protos import broker_pb2, common_pb2


class ScriptedCall:
    """Answers ``script`` once something was written, then ends the stream."""

    def __init__(self, script: list[broker_pb2.ConsumerResponse]) -> None:
        self.script = list(script)
        self.written = asyncio.Event()

    async def write(self, req: broker_pb2.ConsumerRequest) -> None:
        self.written.set()

    async def read(self):  # type: ignore[no-untyped-def]
        await self.written.wait()
        return self.script.pop(0) if self.script else grpc.aio.EOF


def _delivery(entry_id: int) -> broker_pb2.ConsumerResponse:
    resp = broker_pb2.ConsumerResponse()
    resp.deliveries.entry_ids.append(entry_id)
    return resp


def test_the_answer_hook_runs_before_the_deliveries_that_follow_it():
    events: list[str] = []

    async def run() -> None:
        stream = ConsumerStream(asyncio.get_running_loop(), -1)
        stream.call = ScriptedCall(  # type: ignore[assignment]
            [
                _delivery(7),  # from the old position
                broker_pb2.ConsumerResponse(seek_done=broker_pb2.SeekDone()),
                _delivery(0),  # from the new one
                _delivery(1),
            ]
        )
        reading = asyncio.create_task(
            stream.read_until_broken(lambda d: events.append(f"delivery {d.entry_ids[0]}"))
        )
        await stream.request(
            broker_pb2.ConsumerRequest(seek=broker_pb2.Seek(publish_time_ms=0)),
            5,
            lambda: None,
            lambda: events.append("answer"),
        )
        events.append("request returned")
        await asyncio.wait_for(reading, 5)

    asyncio.run(run())
    assert events.index("answer") == events.index("delivery 7") + 1
    assert events.index("answer") < events.index("delivery 0") < events.index("delivery 1")
    assert events.count("answer") == 1


def test_no_hook_runs_for_a_refused_request():
    events: list[str] = []

    async def run() -> None:
        stream = ConsumerStream(asyncio.get_running_loop(), -1)
        refused = broker_pb2.ConsumerResponse()
        refused.request_error.code = common_pb2.NOT_ALLOWED
        refused.request_error.message = "no"
        stream.call = ScriptedCall([refused])  # type: ignore[assignment]
        reading = asyncio.create_task(stream.read_until_broken(lambda d: None))
        try:
            await stream.request(
                broker_pb2.ConsumerRequest(seek=broker_pb2.Seek(publish_time_ms=0)),
                5,
                lambda: None,
                lambda: events.append("answer"),
            )
        except Exception as exc:
            events.append(type(exc).__name__)
        await asyncio.wait_for(reading, 5)

    asyncio.run(run())
    assert events and "answer" not in events
