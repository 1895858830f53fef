"""Terminating a topic (pulsar-admin's ``topics terminate``): it takes no
more messages, and readers see its end once they have read up to its last
message.

A terminated topic refuses publishes and new producers with
``TOPIC_TERMINATED`` (:attr:`broker.topic.TopicBase.terminated_at`, checked
by a publish after its last wait, right before the store). Its last
position is recorded at ``/terminated/...`` so the topic stays sealed
through reloads, bundle moves and restarts; consumers learn it with the
last message id (``LastMessageId.terminated``). Concurrent terminates share
one; a terminate whose record could not be written leaves the topic open
and raises.
"""

from __future__ import annotations

import asyncio
import json

from broker.topic import Topic
from protos import metadata_paths

Position = tuple[int, int]


async def terminate(topic: Topic) -> Position:
    """Seal ``topic``; its last position (the same answer every time)."""
    running = topic.termination
    failed = running is not None and running.done() and (running.cancelled() or running.exception())
    if running is None or failed:
        running = topic.termination = asyncio.ensure_future(_terminate(topic))
    return await asyncio.shield(running)  # type: ignore[no-any-return]


async def _terminate(topic: Topic) -> Position:
    topic.terminated_at = topic.ledger.last_confirmed  # publishes are refused from now on
    try:
        if topic.last_store is not None:  # stores complete in order: the last waits for all
            await asyncio.gather(asyncio.shield(topic.last_store), return_exceptions=True)
        last = topic.ledger.last_confirmed
        body = json.dumps({"ledgerId": last[0], "entryId": last[1]}).encode()
        await topic.metastore.put(metadata_paths.terminated(topic.name), body)
    except BaseException:
        topic.terminated_at = None  # not recorded: the topic stays open
        raise
    topic.terminated_at = last
    return last


async def load_termination(topic: Topic) -> None:
    """A loading topic that was terminated stays so."""
    stat = await topic.metastore.get(metadata_paths.terminated(topic.name))
    if stat is not None:
        doc = json.loads(stat.value)
        last = (int(doc["ledgerId"]), int(doc["entryId"]))
        topic.terminated_at = last
        done: asyncio.Future = asyncio.get_running_loop().create_future()
        done.set_result(last)
        topic.termination = done
