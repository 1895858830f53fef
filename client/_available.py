"""Whether a consumer or reader has a message left to take."""

from __future__ import annotations

from client._consumer import ConsumerEngine
from client._entry_decoder import unread_stored


async def has_available(engine: ConsumerEngine, timeout_s: float) -> bool:
    """Messages queued here, or stored past the last one read (whole entries)."""
    if engine.queued():
        return True
    return unread_stored(
        await engine.get_last_message_id(timeout_s),
        engine.last_dequeued,
        engine.opts.start_message_id,
        engine.opts.start_message_id_inclusive,
    )
