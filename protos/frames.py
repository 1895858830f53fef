"""Frames of the ``ProduceMany`` stream, written by hand.

A ``ProducerRequestFrames`` (client to broker) or ``ProducerResponseFrames``
(broker to client) message is its frames' encodings one after another, so
frames are encoded alone and a message is their concatenation. Each frame is
the stream id, the serialised request or response, and the end flag; the
two directions number these fields alike (asserted below). Building the
frames through the generated classes copies each request or response into
its frame and each frame into the message: several µs per frame.
"""

from __future__ import annotations

from protos import broker_pb2
from protos.add_request import varint
from protos.wire import VARINT, tag

_REQUEST, _ANSWER = broker_pb2.ProducerRequestFrame, broker_pb2.ProducerResponseFrame
assert [tag(_REQUEST, f, VARINT) for f in ("id", "request", "end")] == [
    tag(_ANSWER, f, VARINT) for f in ("id", "response", "end")
]
assert tag(broker_pb2.ProducerRequestFrames, "frames") == tag(
    broker_pb2.ProducerResponseFrames, "frames"
)
ID_TAG = tag(_REQUEST, "id", VARINT)
BODY_TAG = tag(_REQUEST, "request")
END = tag(_REQUEST, "end", VARINT) + b"\x01"
FRAMES_TAG = tag(broker_pb2.ProducerRequestFrames, "frames")


def encode_frame(stream_id: int, body: bytes | None, end: bool = False) -> bytes:
    """One frame as an element of the frames message: ``body`` is the
    serialised request (or response) it carries, if any."""
    if body is None:
        return b"".join(frame_parts(stream_id, None, 0, end))
    return b"".join(frame_parts(stream_id, [body], len(body), end))


def frame_parts(
    stream_id: int, body: list[bytes] | None, body_size: int, end: bool = False
) -> list[bytes]:
    """``encode_frame``'s pieces around a body given as pieces of
    ``body_size`` bytes in all, for the caller to join once."""
    head = [ID_TAG, varint(stream_id)]
    if body is not None:
        head += (BODY_TAG, varint(body_size))
    tail = [END] if end else []
    size = sum(map(len, head)) + (body_size if body is not None else 0) + sum(map(len, tail))
    return [FRAMES_TAG, varint(size), *head, *(body or ()), *tail]
