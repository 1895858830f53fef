"""The contract between Magnetar processes.

The .proto files and their generated modules (``make protos``), plus the
value types every side shares: :class:`TopicName`, :class:`MessageId`, the
hash functions, entry digests, the entry format and the error codes.
"""

from protos.errors import ErrorCode, InvalidTopicNameError, MagnetarServerError
from protos.hashing import java_string_hash, murmur3_32, topic_crc32
from protos.message_id import MessageId
from protos.topic_name import TopicName

__all__ = [
    "ErrorCode",
    "InvalidTopicNameError",
    "MagnetarServerError",
    "MessageId",
    "TopicName",
    "java_string_hash",
    "murmur3_32",
    "topic_crc32",
]
