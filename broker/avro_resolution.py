"""Avro schema resolution: can a reader holding schema R decode data written
with schema W? (No I/O.)

Theory of operation. The Avro specification ("Schema Resolution") decodes
data with both schemas at hand: the writer's says what the bytes are, the
reader's what the application wants. Resolution succeeds when:

* primitives: the same type, or the writer's is promoted to the reader's
  (int to long, float or double; long to float or double; float to double;
  string to bytes and bytes to string);
* records with the same full name (or the writer's name is one of the
  reader's aliases): every reader field is found in the writer, by its name
  or by one of its aliases, with a readable type, or else has a default.
  Writer fields the reader lacks are skipped;
* enums with the same name: every writer symbol is a reader symbol, unless
  the reader's enum has a default (unknown symbols decode as it);
* fixed: the same name and size; arrays and maps: their items or values;
* a writer union: each of its branches (the data may hold any of them);
* a reader union against anything else: the reader branch that matches the
  writer's type (the same type or name first, else the first one the
  writer's promotes to) must read it. The spec picks that one branch and
  never tries another, so the check never backtracks;
* logical types are ignored: the underlying types are resolved.

Named types are parsed into one object per full name, so a type used again
by name is the same object and a recursive record is a cycle. The check
assumes a (reader record, writer record) pair it has entered reads fine:
checking it again would loop forever. That is sound because the check never
backtracks: a real mismatch is still met on the first path that reaches it,
and each pair of records is checked once.

``fastavro.parse_schema`` validates a definition first (unknown types,
defaults that do not match their type, enum symbols); the parser here adds
the rules fastavro lets through (a record without fields, a field name used
twice, names that are not Avro names, unions within unions or with two
branches of one type). Both bound their recursion by :data:`DEPTH_MAX`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from enum import Enum

import fastavro
from fastavro.schema import SchemaParseException, UnknownType

from protos.errors import InvalidArgumentError

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
# writer type -> the reader types it is promoted to
PROMOTIONS: dict[str, frozenset[str]] = {
    "int": frozenset({"long", "float", "double"}),
    "long": frozenset({"float", "double"}),
    "float": frozenset({"double"}),
    "string": frozenset({"bytes"}),
    "bytes": frozenset({"string"}),
}
# Nesting levels (records, arrays, maps, unions) the parser and the check
# follow; deeper definitions are refused rather than risk the interpreter's
# recursion limit on a request.
DEPTH_MAX = 128

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Field:
    name: str
    type: AvroType
    has_default: bool
    aliases: tuple[str, ...] = ()


@dataclass(eq=False)
class RecordSchema:
    name: str  # full name
    aliases: frozenset[str]
    fields: list[Field] = field(default_factory=list, repr=False)  # filled after naming


@dataclass(frozen=True)
class EnumSchema:
    name: str
    aliases: frozenset[str]
    symbols: tuple[str, ...]
    has_default: bool


@dataclass(frozen=True)
class FixedSchema:
    name: str
    aliases: frozenset[str]
    size: int


@dataclass(frozen=True)
class ArraySchema:
    items: AvroType


@dataclass(frozen=True)
class MapSchema:
    values: AvroType


@dataclass(frozen=True)
class UnionSchema:
    branches: tuple[AvroType, ...]


NamedSchema = RecordSchema | EnumSchema | FixedSchema
# A primitive is its name ("int"); every other type is one of the classes.
AvroType = str | NamedSchema | ArraySchema | MapSchema | UnionSchema


class MismatchKind(Enum):
    TYPE = "TYPE"  # the writer's type cannot be read as the reader's
    MISSING_FIELD = "MISSING_FIELD"  # a reader field the writer lacks, without default
    MISSING_SYMBOL = "MISSING_SYMBOL"  # a writer enum symbol the reader lacks, no default
    TOO_DEEP = "TOO_DEEP"  # the check stopped at DEPTH_MAX


@dataclass(frozen=True)
class Mismatch:
    """Why the reader cannot read the writer's data. ``path`` is the reader's
    field path (``address.zip``; ``[]`` marks array items, ``{}`` map
    values; empty at the top). For TYPE, ``writer`` and ``reader`` describe
    the two types; for MISSING_SYMBOL, ``writer`` is the symbol and
    ``reader`` the reader's enum."""

    path: str
    kind: MismatchKind
    writer: str = ""
    reader: str = ""


def parse(definition: bytes, what: str = "the schema") -> AvroType:
    """The parsed Avro definition (JSON text); anything that is not a valid
    Avro schema raises :class:`InvalidArgumentError` naming ``what`` and the
    problem."""
    prefix = f"{what} is not a valid Avro schema"
    try:
        document = json.loads(definition.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise InvalidArgumentError(f"{prefix}: not JSON text ({exc})") from None
    except RecursionError:
        raise InvalidArgumentError(f"{prefix}: nested too deeply") from None
    try:
        fastavro.parse_schema(document)
    except (SchemaParseException, UnknownType, ValueError) as exc:
        raise InvalidArgumentError(f"{prefix}: {exc}") from None
    except (TypeError, KeyError, AttributeError) as exc:
        # fastavro's way of meeting a missing or mistyped attribute
        raise InvalidArgumentError(f"{prefix}: bad or missing attribute ({exc!r})") from None
    except RecursionError:
        raise InvalidArgumentError(f"{prefix}: nested too deeply") from None
    return _Parser(prefix).type_of(document, "", 0)


class _Parser:
    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.named: dict[str, NamedSchema] = {}

    def error(self, problem: str) -> InvalidArgumentError:
        return InvalidArgumentError(f"{self.prefix}: {problem}")

    def type_of(self, node: object, namespace: str, depth: int) -> AvroType:
        if depth > DEPTH_MAX:
            raise self.error(f"it nests deeper than {DEPTH_MAX} levels")
        if isinstance(node, str):
            return self.reference(node, namespace)
        if isinstance(node, list):
            return self.union(node, namespace, depth)
        if not isinstance(node, dict):
            raise self.error(f"{node!r} is not a type")
        kind = node.get("type")
        if kind in ("record", "error"):
            return self.record(node, namespace, depth)
        if kind == "enum":
            return self.enum(node, namespace)
        if kind == "fixed":
            return self.fixed(node, namespace)
        if kind == "array":
            return ArraySchema(self.type_of(node.get("items"), namespace, depth + 1))
        if kind == "map":
            return MapSchema(self.type_of(node.get("values"), namespace, depth + 1))
        # {"type": "int", "logicalType": ...}, {"type": "SomeRecord"}, ...
        return self.type_of(kind, namespace, depth + 1)

    def enum(self, node: dict, namespace: str) -> EnumSchema:
        name, _, aliases = self.define(node, namespace)
        symbols = tuple(node.get("symbols", ()))
        self.named[name] = schema = EnumSchema(name, aliases, symbols, "default" in node)
        return schema

    def fixed(self, node: dict, namespace: str) -> FixedSchema:
        name, _, aliases = self.define(node, namespace)
        size = node.get("size")
        if not isinstance(size, int) or size < 0:
            raise self.error(f"fixed {name!r} needs a size in bytes, got {size!r}")
        self.named[name] = schema = FixedSchema(name, aliases, size)
        return schema

    def reference(self, name: str, namespace: str) -> AvroType:
        if name in PRIMITIVES:
            return name
        found = self.named.get(_qualify(name, namespace)) or self.named.get(name)
        if found is None:
            raise self.error(f"type {name!r} is not defined before its use")
        return found

    def define(self, node: dict, namespace: str) -> tuple[str, str, frozenset[str]]:
        """The full name, namespace and qualified aliases of a named type."""
        name = node.get("name")
        if not isinstance(name, str) or not _is_full_name(name) or name in PRIMITIVES:
            raise self.error(f"{name!r} is not a valid name for a {node.get('type')}")
        own = node.get("namespace")
        if "." in name:
            namespace = name.rpartition(".")[0]
        elif own is not None:
            if not isinstance(own, str) or (own and not _is_full_name(own)):
                raise self.error(f"{own!r} is not a valid namespace for {name!r}")
            namespace = own
        full = _qualify(name, namespace)
        if full in self.named:
            raise self.error(f"type {full!r} is defined twice")
        aliases = node.get("aliases", [])
        if not isinstance(aliases, list) or not all(
            isinstance(a, str) and _is_full_name(a) for a in aliases
        ):
            raise self.error(f"aliases of {full!r} must be a list of names, got {aliases!r}")
        return full, namespace, frozenset(_qualify(a, namespace) for a in aliases)

    def record(self, node: dict, namespace: str, depth: int) -> RecordSchema:
        name, namespace, aliases = self.define(node, namespace)
        fields = node.get("fields")
        if not isinstance(fields, list):
            raise self.error(f"record {name!r} has no 'fields' list")
        record = RecordSchema(name, aliases)
        self.named[name] = record  # before its fields: they may refer to it
        for spec in fields:
            if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
                raise self.error(f"a field of record {name!r} is not an object with a name")
            field_name = spec["name"]
            if not _NAME.fullmatch(field_name):
                raise self.error(f"{field_name!r} of record {name!r} is not a valid field name")
            if any(f.name == field_name for f in record.fields):
                raise self.error(f"record {name!r} has two fields named {field_name!r}")
            if "type" not in spec:
                raise self.error(f"field {field_name!r} of record {name!r} has no type")
            field_type = self.type_of(spec["type"], namespace, depth + 1)
            aliases_of = tuple(a for a in spec.get("aliases", ()) if isinstance(a, str))
            record.fields.append(Field(field_name, field_type, "default" in spec, aliases_of))
        return record

    def union(self, node: list, namespace: str, depth: int) -> UnionSchema:
        branches = tuple(self.type_of(b, namespace, depth + 1) for b in node)
        seen: set[str] = set()
        for branch in branches:
            if isinstance(branch, UnionSchema):
                raise self.error("a union may not hold another union directly")
            key = _kind_key(branch)
            if key in seen:
                raise self.error(f"a union holds two branches of type {key!r}")
            seen.add(key)
        return UnionSchema(branches)


def _is_full_name(name: str) -> bool:
    return all(_NAME.fullmatch(part) for part in name.split("."))


def _qualify(name: str, namespace: str) -> str:
    return name if "." in name or not namespace else f"{namespace}.{name}"


def _kind_key(schema: AvroType) -> str:
    """What a union may hold once: one of each primitive, array and map, and
    each named type once by name."""
    if isinstance(schema, str):
        return schema
    if isinstance(schema, ArraySchema):
        return "array"
    if isinstance(schema, MapSchema):
        return "map"
    if isinstance(schema, UnionSchema):
        return "union"
    return schema.name


def describe(schema: AvroType) -> str:
    """A type as people read it in a message."""
    if isinstance(schema, str):
        return schema
    if isinstance(schema, ArraySchema):
        return f"array<{describe(schema.items)}>"
    if isinstance(schema, MapSchema):
        return f"map<{describe(schema.values)}>"
    if isinstance(schema, UnionSchema):
        return "[" + ", ".join(describe(b) for b in schema.branches) + "]"
    if isinstance(schema, FixedSchema):
        return f"{schema.name} (fixed, {schema.size} bytes)"
    return schema.name


def reader_mismatch(reader: AvroType, writer: AvroType) -> Mismatch | None:
    """None when data written with ``writer`` can be read with ``reader``;
    otherwise the first thing that breaks it."""
    return _Resolution().mismatch(reader, writer, "", 0)


def can_read(reader: AvroType, writer: AvroType) -> bool:
    return reader_mismatch(reader, writer) is None


def _names_match(reader: NamedSchema, writer: NamedSchema) -> bool:
    return reader.name == writer.name or writer.name in reader.aliases


def _matches(reader: AvroType, writer: AvroType) -> bool:
    """The shallow match that picks a reader union's branch: promotable
    primitives, or the same kind of type with a matching name."""
    if isinstance(reader, str) and isinstance(writer, str):
        return reader == writer or reader in PROMOTIONS.get(writer, ())
    if isinstance(reader, str) or isinstance(writer, str):
        return False
    if type(reader) is not type(writer):
        return False
    if isinstance(reader, RecordSchema | EnumSchema | FixedSchema):
        assert isinstance(writer, RecordSchema | EnumSchema | FixedSchema)
        return _names_match(reader, writer)
    return True


def _branch_for(reader: UnionSchema, writer: AvroType) -> AvroType | None:
    key = _kind_key(writer)
    exact = [b for b in reader.branches if _kind_key(b) == key and _matches(b, writer)]
    if exact:
        return exact[0]
    return next((b for b in reader.branches if _matches(b, writer)), None)


class _Resolution:
    """One reader/writer check; remembers the record pairs it has entered."""

    def __init__(self) -> None:
        self.entered: set[tuple[str, str]] = set()

    def mismatch(
        self, reader: AvroType, writer: AvroType, path: str, depth: int
    ) -> Mismatch | None:
        if depth > DEPTH_MAX:
            return Mismatch(path, MismatchKind.TOO_DEEP)
        if isinstance(writer, UnionSchema):
            for branch in writer.branches:
                found = self.mismatch(reader, branch, path, depth + 1)
                if found is not None:
                    return found
            return None
        if isinstance(reader, UnionSchema):
            chosen = _branch_for(reader, writer)
            if chosen is None:
                return Mismatch(path, MismatchKind.TYPE, describe(writer), describe(reader))
            return self.mismatch(chosen, writer, path, depth + 1)
        if not _matches(reader, writer):
            return Mismatch(path, MismatchKind.TYPE, describe(writer), describe(reader))
        return self.inside(reader, writer, path, depth)

    def inside(self, reader: AvroType, writer: AvroType, path: str, depth: int) -> Mismatch | None:
        """Two types of the same kind (:func:`_matches`): what they hold."""
        if isinstance(reader, ArraySchema) and isinstance(writer, ArraySchema):
            return self.mismatch(reader.items, writer.items, f"{path}[]", depth + 1)
        if isinstance(reader, MapSchema) and isinstance(writer, MapSchema):
            return self.mismatch(reader.values, writer.values, f"{path}{{}}", depth + 1)
        if isinstance(reader, RecordSchema) and isinstance(writer, RecordSchema):
            return self.record_mismatch(reader, writer, path, depth)
        if isinstance(reader, EnumSchema) and isinstance(writer, EnumSchema):
            return _enum_mismatch(reader, writer, path)
        if (
            isinstance(reader, FixedSchema)
            and isinstance(writer, FixedSchema)
            and reader.size != writer.size
        ):
            return Mismatch(path, MismatchKind.TYPE, describe(writer), describe(reader))
        return None

    def record_mismatch(
        self, reader: RecordSchema, writer: RecordSchema, path: str, depth: int
    ) -> Mismatch | None:
        pair = (reader.name, writer.name)
        if pair in self.entered:
            return None  # being checked (recursion) or checked already
        self.entered.add(pair)
        by_name = {f.name: f for f in writer.fields}
        for wanted in reader.fields:
            here = f"{path}.{wanted.name}" if path else wanted.name
            names = (wanted.name, *wanted.aliases)
            source = next((by_name[n] for n in names if n in by_name), None)
            if source is None:
                if not wanted.has_default:
                    return Mismatch(here, MismatchKind.MISSING_FIELD)
                continue
            found = self.mismatch(wanted.type, source.type, here, depth + 1)
            if found is not None:
                return found
        return None


def _enum_mismatch(reader: EnumSchema, writer: EnumSchema, path: str) -> Mismatch | None:
    if reader.has_default:
        return None
    for symbol in writer.symbols:
        if symbol not in reader.symbols:
            return Mismatch(path, MismatchKind.MISSING_SYMBOL, symbol, reader.name)
    return None
