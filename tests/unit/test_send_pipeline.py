"""broker/send_pipeline.py: a producer's sends from request to answer, as
step tables. Each step acts on the pipeline or on the topic under it; the
answers the front-end heard are compared at the end, written short:
``ok 1,2`` (one receipt of sequence ids 1 and 2), ``failed 3 CODE``,
``end`` / ``end CODE``."""

from __future__ import annotations

import asyncio

import pytest

from broker.errors import BrokerError
from broker.managed_ledger import ManagedLedgerFencedError
from broker.producer import Producer
from broker.send_pipeline import Answer, Ended, Receipts, SendFailed, SendPipeline
from protos import common_pb2

LEDGER = 7


class _Topic:
    """What the pipeline uses of a topic: entries are stored when a step
    says so; ``waits`` sends them through the async publish, held until
    the gate opens."""

    name = "persistent://public/default/t"

    def __init__(self) -> None:
        self.closing = False
        self.waits = False
        self.gate = asyncio.Event()
        self.refused: set[int] = set()
        self.futures: dict[int, asyncio.Future] = {}
        self.published: list[int] = []
        self.removed: list[Producer] = []
        self.producers: dict[str, Producer] = {}

    def publish_waits(self) -> bool:
        return self.waits

    def publish_now(self, producer: Producer, seq: int, count: int, entry: bytes) -> asyncio.Future:
        if seq in self.refused:
            raise BrokerError(f"entry {seq} refused", common_pb2.INVALID_ARGUMENT)
        self.published.append(seq)
        fut = self.futures[seq] = asyncio.get_running_loop().create_future()
        return fut

    async def publish(self, producer: Producer, seq: int, count: int, entry: bytes):
        await self.gate.wait()
        return self.publish_now(producer, seq, count, entry)

    def remove_producer(self, producer: Producer) -> None:
        self.removed.append(producer)
        if self.producers.get(producer.name) is producer:
            del self.producers[producer.name]


def _short(answer: Answer) -> str:
    if isinstance(answer, Receipts):
        assert answer.ledger_ids == [LEDGER] * len(answer.sequence_ids)
        assert answer.entry_ids == answer.sequence_ids  # (stored at entry id = seq)
        return "ok " + ",".join(map(str, answer.sequence_ids))
    if isinstance(answer, SendFailed):
        return f"failed {answer.sequence_id} {common_pb2.ErrorCode.Name(answer.error.code)}"
    assert isinstance(answer, Ended)
    if answer.error is None:
        return "end"
    return f"end {common_pb2.ErrorCode.Name(answer.error.code)}"


async def _turns(n: int = 3) -> None:
    """Let the loop run the callbacks already scheduled (one turn each)."""
    for _ in range(n):
        await asyncio.sleep(0)


class _Run:
    def __init__(self, max_pending: int, topic: _Topic | None = None) -> None:
        self.topic = topic or _Topic()
        self.producer = Producer("p")
        self.topic.producers["p"] = self.producer
        self.answers: list[str] = []
        self.ends: list[Ended] = []
        self.taken = 0
        self.pipeline = SendPipeline(
            self.topic,  # type: ignore[arg-type]
            self.producer,
            max_pending,
            self._answer,
            self._took,
        )

    def _answer(self, answer: Answer) -> None:
        self.answers.append(_short(answer))
        if isinstance(answer, Ended):
            self.ends.append(answer)

    def _took(self, n: int) -> None:
        self.taken += n

    async def step(self, action: str, *args: int | Exception) -> None:
        if not self._on_topic(action, args):
            self._on_pipeline(action, [a for a in args if isinstance(a, int)])
        await _turns()

    def _on_topic(self, action: str, args: tuple) -> bool:
        topic = self.topic
        match action:
            case "store":
                for seq in args:
                    topic.futures[seq].set_result((LEDGER, seq))
            case "fail":
                topic.futures[args[0]].set_exception(args[1])
            case "refuse-at-topic":
                topic.refused.update(args)
            case "waits":
                topic.waits = True
            case "waits-no-more":  # (what waits already still waits for the gate)
                topic.waits = False
            case "open-gate":
                topic.gate.set()
            case "published":
                assert topic.published == list(args), topic.published
            case "topic-closing":
                topic.closing = True
            case _:
                return False
        return True

    def _on_pipeline(self, action: str, seqs: list[int]) -> None:
        pipeline = self.pipeline
        match action:
            case "send":
                pipeline.put_send(seqs, [1] * len(seqs), [b"x"] * len(seqs))
            case "mismatched":
                pipeline.put_send(seqs, [1], [b"x", b"y", b"z"])
            case "not-a-send":
                refusal = common_pb2.Error(code=common_pb2.INVALID_ARGUMENT, message="unexpected")
                pipeline.refuse(refusal)
            case "empty":
                pipeline.put_send([], [], [])
            case "close" | "put_close" | "fence" | "moved" | "abort":
                getattr(pipeline, action)()
            case _:
                raise AssertionError(action)


SCENARIOS: dict[str, tuple[list[tuple], list[str]]] = {
    "stored sends are answered in order, the ready ones in one receipt": (
        [("send", 1, 2, 3), ("store", 2, 3), ("store", 1)],
        ["ok 1,2,3"],
    ),
    "an answer waits for the sends before it": (
        [("send", 1), ("send", 2), ("store", 2), ("store", 1)],
        ["ok 1,2"],
    ),
    "a refused entry is answered in its turn, between receipts": (
        [("refuse-at-topic", 2), ("send", 1, 2, 3), ("store", 1, 3)],
        ["ok 1", "failed 2 INVALID_ARGUMENT", "ok 3"],
    ),
    "a failed write fails that send only": (
        [("send", 1, 2), ("fail", 1, RuntimeError("disk")), ("store", 2)],
        ["failed 1 UNKNOWN_ERROR", "ok 2"],
    ),
    "a request whose lists differ is refused whole, at its first sequence id": (
        [("send", 1), ("mismatched", 5), ("send", 6), ("store", 1, 6)],
        ["ok 1", "failed 5 INVALID_ARGUMENT", "ok 6"],
    ),
    "a request that is not a send is refused in its turn": (
        [("send", 1), ("not-a-send",), ("store", 1)],
        ["ok 1", "failed 0 INVALID_ARGUMENT"],
    ),
    "a close ends the stream once every send is answered": (
        [("send", 1, 2), ("close",), ("store", 1), ("store", 2)],
        ["ok 1", "ok 2", "end"],
    ),
    "nothing sent after a close is stored": (
        [("close",), ("send", 1)],
        ["end"],
    ),
    "a fenced producer is told at once, ahead of its sends in flight": (
        [("send", 1, 2), ("store", 1), ("send", 3), ("fence",), ("store", 2, 3)],
        ["ok 1", "end PRODUCER_FENCED"],
    ),
    "a ledger fenced under a send ends the stream after the receipts before it": (
        [("send", 1, 2, 3), ("store", 1), ("fail", 2, ManagedLedgerFencedError("fenced"))],
        ["ok 1", "end SERVICE_NOT_READY"],
    ),
    "a moved topic answers the sends taken, then ends with a retryable error": (
        [("send", 1, 2), ("moved",), ("send", 3), ("store", 1, 2)],
        ["ok 1,2", "end SERVICE_NOT_READY"],
    ),
    "a request reaching a closing topic is not taken; the stream ends, retryable": (
        [("send", 1), ("topic-closing",), ("send", 2), ("store", 1)],
        ["ok 1", "end SERVICE_NOT_READY"],
    ),
    "sends that must wait keep their order with those that need not": (
        [
            ("send", 1),
            ("waits",),
            ("send", 2),  # held at the gate
            ("send", 3),
            ("waits-no-more",),
            ("send", 4),  # could go at once, but not ahead of 2 and 3
            ("published", 1),
            ("open-gate",),
            ("published", 1, 2, 3, 4),
            ("store", 1, 2, 3, 4),
        ],
        ["ok 1,2,3,4"],
    ),
    "a producer moved while a send waits ends without waiting; the send is not stored": (
        [("send", 1), ("store", 1), ("waits",), ("send", 2), ("moved",), ("open-gate",)],
        ["ok 1", "end SERVICE_NOT_READY"],
    ),
    "a close request ends the stream like the end of the client's stream": (
        [("send", 1), ("put_close",), ("send", 2), ("store", 1)],
        ["ok 1", "end"],
    ),
    "an empty request is taken and answers nothing": (
        [("empty",), ("send", 1), ("store", 1), ("close",)],
        ["ok 1", "end"],
    ),
    "an aborted stream answers nothing more": (
        [("send", 1), ("abort",), ("store", 1), ("close",)],
        [],
    ),
}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_send_pipeline_scenarios(name: str) -> None:
    steps, expected = SCENARIOS[name]

    async def scenario() -> _Run:
        run = _Run(max_pending=100)
        for step in steps:
            await run.step(*step)
        return run

    run = asyncio.run(scenario())
    assert run.answers == expected
    assert run.topic.published == sorted(
        run.topic.published
    )  # entries reach the topic in send order
    ended = bool(run.answers) and run.answers[-1].startswith("end")
    aborted = ("abort",) in steps
    # The producer leaves its topic exactly when the stream is over.
    assert run.topic.removed == ([run.producer] if ended or aborted else [])
    if ended:
        assert run.producer.on_fenced is None and run.producer.on_topic_closed is None


def test_past_max_pending_requests_wait_and_are_taken_as_answers_make_room() -> None:
    async def scenario() -> None:
        run = _Run(max_pending=2)
        await run.step("send", 1)
        await run.step("send", 2)
        await run.step("send", 3)
        await run.step("send", 4)
        assert run.topic.published == [1, 2]
        assert run.taken == 2 and run.pipeline.waiting_requests == 2
        await run.step("store", 1)
        assert run.topic.published == [1, 2, 3]
        assert run.taken == 3 and run.answers == ["ok 1"]
        await run.step("store", 2, 3)
        assert run.topic.published == [1, 2, 3, 4] and run.taken == 4
        await run.step("close")
        await run.step("store", 4)
        assert run.answers == ["ok 1", "ok 2,3", "ok 4", "end"]

    asyncio.run(scenario())


@pytest.mark.parametrize(
    "ending",
    [
        [("moved",), ("store", 1)],
        [("fence",)],
        [("topic-closing",), ("store", 1)],
        [("put_close",), ("store", 1), ("store", 2), ("store", 3)],  # a close drops nothing
        [("abort",)],
        [("waits",), ("store", 1), ("moved",)],  # while one waits at the gate
        [("fail", 1, ManagedLedgerFencedError("fenced"))],
    ],
)
def test_every_request_read_is_counted_taken_once_however_the_stream_ends(ending) -> None:
    """The front-end's read-ahead depends on it: a request is taken when it
    is handed over, refused or dropped, and only once."""

    async def scenario() -> None:
        run = _Run(max_pending=1)
        reads = 0
        for seq in (1, 2, 3):
            await run.step("send", seq)
            reads += 1
        assert run.taken == 1  # 2 and 3 wait for room
        for step in ending:
            await run.step(*step)
            reads += step[0] == "put_close"
        assert run.pipeline.over
        await run.step("send", 4)  # after the end: dropped
        reads += 1
        assert run.taken == reads
        assert run.pipeline.waiting_requests == 0

    asyncio.run(scenario())


def test_a_ledger_fenced_under_a_send_ends_with_the_ledger_s_error() -> None:
    async def scenario() -> Ended:
        run = _Run(max_pending=10)
        await run.step("send", 1)
        await run.step("fail", 1, ManagedLedgerFencedError("ledger 9 was fenced by another broker"))
        return run.ends[0]

    end = asyncio.run(scenario())
    assert end.error is not None and "fenced by another broker" in end.error.message


@pytest.mark.parametrize(
    ("before", "expected"),
    [("fenced", "end PRODUCER_FENCED"), ("closing", "end SERVICE_NOT_READY")],
)
def test_a_producer_fenced_or_unloaded_while_it_was_created_is_told_at_once(before, expected):
    """Before its pipeline existed nobody heard the fence or the unload."""

    async def scenario() -> None:
        topic = _Topic()
        producer = Producer("p")
        if before == "closing":
            topic.producers["p"] = producer
            topic.closing = True
        # (fenced: a newer ExclusiveWithFencing producer removed it already)
        answers: list[str] = []
        pipeline = SendPipeline(
            topic,  # type: ignore[arg-type]
            producer,
            10,
            lambda a: answers.append(_short(a)),
            lambda n: None,
        )
        await _turns()
        assert pipeline.over and answers == [expected]
        assert "p" not in topic.producers

    asyncio.run(scenario())
