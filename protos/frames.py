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

_LENGTH_DELIMITED, _VARINT = 2, 0
_FRAME = broker_pb2.ProducerRequestFrame.DESCRIPTOR.fields_by_name
_ANSWER = broker_pb2.ProducerResponseFrame.DESCRIPTOR.fields_by_name
assert [_FRAME[f].number for f in ("id", "request", "end")] == [
    _ANSWER[f].number for f in ("id", "response", "end")
]
assert (
    broker_pb2.ProducerRequestFrames.DESCRIPTOR.fields_by_name["frames"].number
    == broker_pb2.ProducerResponseFrames.DESCRIPTOR.fields_by_name["frames"].number
)
ID_TAG = bytes([(_FRAME["id"].number << 3) | _VARINT])
BODY_TAG = bytes([(_FRAME["request"].number << 3) | _LENGTH_DELIMITED])
END = bytes([(_FRAME["end"].number << 3) | _VARINT, 1])
FRAMES_TAG = bytes(
    [
        (broker_pb2.ProducerRequestFrames.DESCRIPTOR.fields_by_name["frames"].number << 3)
        | _LENGTH_DELIMITED
    ]
)


def encode_frame(stream_id: int, body: bytes | None, end: bool = False) -> bytes:
    """One frame as an element of the frames message: ``body`` is the
    serialised request (or response) it carries, if any."""
    parts = [ID_TAG, varint(stream_id)]
    if body is not None:
        parts += (BODY_TAG, varint(len(body)), body)
    if end:
        parts.append(END)
    inner = b"".join(parts)
    return b"".join((FRAMES_TAG, varint(len(inner)), inner))
