"""The receiver queue and its flow permits (client/_receiver_queue.py): a
consumer grants the broker more permits once half its queue is free."""

from __future__ import annotations

import random

from client._receiver_queue import ReceiverQueue

# receiver_queue_size = 5: permits go back 2 at a time (5 // 2).
# (step, argument, permits granted by the step, queued after, freed after)
RECEIVER_QUEUE_STEPS = [
    ("receive", 5, 0, 5, 0),  # the broker used the 5 permits of the subscribe
    ("take", None, 0, 4, 1),
    ("take", None, 2, 3, 0),  # half the queue taken: one Flow of 2
    ("release", 1, 0, 3, 1),  # an acknowledged batch index skipped: freed, not queued
    ("take", None, 2, 2, 0),
    ("receive", 2, 0, 4, 0),
    ("release", 3, 3, 4, 0),  # a dead-lettered batch of 3: over half, all 3 go back
    ("drop_all", None, 4, 0, 0),  # seek / redeliver: the queue's permits back at once
    ("receive", 3, 0, 3, 0),
    ("take", None, 0, 2, 1),
    ("restart", None, 0, 0, 0),  # a new subscription grants the whole queue again
    ("receive", 5, 0, 5, 0),
    ("take", None, 0, 4, 1),  # counted from zero after the restart
]


def _step(queue: ReceiverQueue[int], step: str, arg: int | None) -> int:
    if step == "receive":
        assert arg is not None
        queue.put(range(arg))
        return 0
    if step == "take":
        return queue.take()[1]
    if step == "release":
        assert arg is not None
        return queue.release(arg)
    if step == "drop_all":
        return queue.drop_all()
    if step == "want_one":
        return queue.want_one()
    assert step == "restart", step
    queue.restart()
    return 0


def test_permits_follow_the_step_table():
    queue: ReceiverQueue[int] = ReceiverQueue(receiver_queue_size=5)
    for i, (step, arg, granted, queued, freed) in enumerate(RECEIVER_QUEUE_STEPS):
        assert (_step(queue, step, arg), len(queue), queue.freed) == (granted, queued, freed), (
            i,
            step,
        )


# receiver_queue_size = 0 (zero-prefetch): no permits at subscribe; a receive
# that finds the queue empty asks for one, once, and nothing taken gives any back.
ZERO_PREFETCH_STEPS = [
    ("want_one", None, 1, 0, 0),  # an empty queue: ask for one message
    ("want_one", None, 0, 0, 0),  # still waiting: not twice
    ("receive", 1, 0, 1, 0),
    ("want_one", None, 0, 1, 0),  # a message is here: nothing to ask
    ("take", None, 0, 0, 0),  # taking gives no permit back
    ("want_one", None, 1, 0, 0),
    ("release", 1, 0, 0, 0),  # the asked-for message never reached the queue
    ("want_one", None, 1, 0, 0),  # so the receive asks again
    ("receive", 1, 0, 1, 0),
    ("drop_all", None, 0, 0, 0),  # a seek drops it: no permit given back either
    ("want_one", None, 1, 0, 0),
    ("restart", None, 0, 0, 0),  # a new subscription: nothing outstanding
    ("want_one", None, 1, 0, 0),
]


def test_zero_prefetch_follows_its_step_table():
    queue: ReceiverQueue[int] = ReceiverQueue(receiver_queue_size=0)
    assert queue.initial_permits == 0
    for i, (step, arg, granted, queued, freed) in enumerate(ZERO_PREFETCH_STEPS):
        assert (_step(queue, step, arg), len(queue), queue.freed) == (granted, queued, freed), (
            i,
            step,
        )


def test_a_prefetching_queue_never_asks_one_by_one():
    queue: ReceiverQueue[int] = ReceiverQueue(receiver_queue_size=3)
    assert queue.initial_permits == 3 and queue.want_one() == 0


def test_messages_come_out_in_arrival_order():
    queue: ReceiverQueue[str] = ReceiverQueue(receiver_queue_size=10)
    queue.put(["a", "b"])
    queue.put(["c"])
    assert [queue.take()[0] for _ in range(3)] == ["a", "b", "c"]
    assert not queue


def test_a_queue_of_one_grants_every_permit_at_once():
    queue: ReceiverQueue[int] = ReceiverQueue(receiver_queue_size=1)
    queue.put([7])
    assert queue.take() == (7, 1)
    assert queue.release(1) == 1


def test_every_permit_is_with_the_broker_queued_or_freed():
    """Permits are conserved: the queue never holds more than the consumer
    granted, and every freed permit goes back once half the queue is free."""
    rng = random.Random(18)
    size = 100
    queue: ReceiverQueue[int] = ReceiverQueue(size)
    at_broker = size  # the permits of the subscribe
    for _ in range(10_000):
        if at_broker and rng.random() < 0.5:
            sent = rng.randint(1, at_broker)  # the broker sends against its permits
            skipped = rng.randint(0, sent)  # acked batch indexes, held chunks, ...
            at_broker -= sent
            queue.put(range(sent - skipped))
            at_broker += queue.release(skipped)
        elif queue:
            at_broker += queue.take()[1]
        assert at_broker + len(queue) + queue.freed == size
        assert queue.freed < queue.flow_threshold == size // 2
