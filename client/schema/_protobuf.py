"""PROTOBUF_NATIVE: protobuf messages as their own wire format.

The definition is Pulsar's: JSON text with ``fileDescriptorSet`` (base64 of
a ``FileDescriptorSet`` holding the message's ``.proto`` file and every file
it imports, imports first), ``rootMessageTypeName`` (the message's full
name) and ``rootFileDescriptorName`` (its file's name). That is enough to
rebuild the message class without the generated module:
:func:`message_class_of` loads the files into a fresh descriptor pool (never
the default one, where the same file names may already stand for other
versions) and asks protobuf's message factory for the class. Rebuilt
classes are kept in a bounded cache (``MESSAGE_CLASSES_MAX``, least
recently used dropped).
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
from collections.abc import Iterable
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message, message_factory
from google.protobuf.descriptor import Descriptor, FileDescriptor

from client.exceptions import IncompatibleSchema, InvalidConfiguration
from client.schema._base import (
    FixedInfoSchema,
    decode_error,
    definition_text,
    encode_error,
    short,
    type_name_of,
)
from protos.schema_info import SchemaInfo, SchemaType

MESSAGE_CLASSES_MAX = 64


def _files_imports_first(root: FileDescriptor) -> list[FileDescriptor]:
    """``root`` and every file it imports, each after the files it imports
    (the order a descriptor pool can load them in)."""
    ordered: list[FileDescriptor] = []
    seen: set[str] = set()

    def visit(file: FileDescriptor) -> None:
        if file.name in seen:
            return
        seen.add(file.name)
        for dependency in file.dependencies:
            visit(dependency)
        ordered.append(file)

    visit(root)
    return ordered


def protobuf_native_definition(descriptor: Descriptor) -> bytes:
    """The PROTOBUF_NATIVE definition of the message ``descriptor`` describes."""
    file_set = descriptor_pb2.FileDescriptorSet()
    for file in _files_imports_first(descriptor.file):
        file.CopyToProto(file_set.file.add())
    return definition_text(
        {
            "fileDescriptorSet": base64.b64encode(file_set.SerializeToString()).decode("ascii"),
            "rootMessageTypeName": descriptor.full_name,
            "rootFileDescriptorName": descriptor.file.name,
        }
    )


def _load_imports_first(
    pool: descriptor_pool.DescriptorPool, files: Iterable[descriptor_pb2.FileDescriptorProto]
) -> None:
    """Add ``files`` to ``pool`` whatever their order in the set (another
    client may list them in any order): each round adds every file whose
    imports are in, so the loop ends within one round per file."""
    pending = {file.name: file for file in files}
    while pending:
        ready = [f for f in pending.values() if all(d not in pending for d in f.dependency)]
        if not ready:
            raise ValueError(f"the files {sorted(pending)} import each other in a circle")
        for file in ready:
            pool.Add(file)
            del pending[file.name]


@functools.lru_cache(maxsize=MESSAGE_CLASSES_MAX)
def message_class_of(definition: bytes) -> type[message.Message]:
    """The message class a PROTOBUF_NATIVE definition describes;
    ``IncompatibleSchema`` when the definition cannot be read."""
    try:
        fields = json.loads(definition)
        file_set = descriptor_pb2.FileDescriptorSet.FromString(
            base64.b64decode(fields["fileDescriptorSet"], validate=True)
        )
        pool = descriptor_pool.DescriptorPool()
        _load_imports_first(pool, file_set.file)
        descriptor = pool.FindMessageTypeByName(fields["rootMessageTypeName"])
        return message_factory.GetMessageClass(descriptor)  # type: ignore[no-any-return]
    except (binascii.Error, message.DecodeError, KeyError, TypeError, ValueError) as exc:
        raise IncompatibleSchema(
            f"the writer's PROTOBUF_NATIVE definition cannot be read: {short(exc)}"
        ) from None


def parse_message(message_cls: type[message.Message], data: bytes) -> message.Message:
    parsed = message_cls()
    try:
        parsed.ParseFromString(bytes(data))
    except message.DecodeError as exc:
        raise decode_error(
            SchemaType.PROTOBUF_NATIVE, f"not a {message_cls.DESCRIPTOR.full_name} ({exc})"
        ) from None
    return parsed


class ProtobufNativeSchema(FixedInfoSchema):
    """Messages of ``pb_message_cls`` (a generated protobuf message class)."""

    def __init__(self, pb_message_cls: type[message.Message]) -> None:
        if not (isinstance(pb_message_cls, type) and issubclass(pb_message_cls, message.Message)):
            raise InvalidConfiguration(
                f"ProtobufNativeSchema takes a protobuf message class, not {pb_message_cls!r}"
            )
        self._message_cls = pb_message_cls
        definition = protobuf_native_definition(pb_message_cls.DESCRIPTOR)
        super().__init__(SchemaInfo(SchemaType.PROTOBUF_NATIVE, "PROTOBUF_NATIVE", definition))

    def encode(self, obj: Any) -> bytes:
        if not isinstance(obj, self._message_cls):
            raise encode_error(
                SchemaType.PROTOBUF_NATIVE,
                f"a {type_name_of(obj)} is not a {self._message_cls.DESCRIPTOR.full_name}",
            )
        try:
            return obj.SerializeToString()
        except message.EncodeError as exc:  # a proto2 required field not set
            raise encode_error(SchemaType.PROTOBUF_NATIVE, exc) from None

    def decode(self, data: bytes) -> Any:
        return parse_message(self._message_cls, data)
