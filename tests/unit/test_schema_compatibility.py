"""Schema compatibility (broker/schema_compatibility.py) and Avro schema
resolution (broker/avro_resolution.py), as tables: a strategy, the topic's
registered definitions, the new definition, and the expected answer with a
piece of its reason."""

from __future__ import annotations

import itertools
import json
from typing import Any, NamedTuple

import pytest

from broker import avro_resolution
from broker.schema_compatibility import (
    DEFAULT_STRATEGY,
    LEGACY_NAMES,
    Compatibility,
    SchemaCompatibilityStrategy,
    check,
    find_identical,
    strategy_of,
)
from protos.errors import InvalidArgumentError
from protos.schema_info import SchemaInfo, SchemaType, join_key_value

S = SchemaCompatibilityStrategy
NO_DEFAULT = object()


def fld(name: str, type_: Any, default: Any = NO_DEFAULT, aliases: tuple[str, ...] = ()) -> dict:
    out: dict[str, Any] = {"name": name, "type": type_}
    if default is not NO_DEFAULT:
        out["default"] = default
    if aliases:
        out["aliases"] = list(aliases)
    return out


def record(*fields: dict, name: str = "User", **extra: Any) -> dict:
    return {
        "type": "record",
        "name": name,
        "namespace": "com.example",
        "fields": list(fields),
        **extra,
    }


def avro(
    *fields: dict, name: str = "User", type_: SchemaType = SchemaType.AVRO, **extra: Any
) -> SchemaInfo:
    definition = json.dumps(record(*fields, name=name, **extra)).encode()
    return SchemaInfo(type_, "user", definition)


def raw(
    type_: SchemaType, definition: bytes = b"", properties: dict[str, str] | None = None
) -> SchemaInfo:
    return SchemaInfo(type_, "", definition, properties or {})


def key_value(key: SchemaInfo, value: SchemaInfo, encoding: str = "INLINE") -> SchemaInfo:
    props = {
        "key.schema.type": key.type.name,
        "key.schema.name": key.name,
        "key.schema.properties": "{}",
        "value.schema.type": value.type.name,
        "value.schema.name": value.name,
        "value.schema.properties": "{}",
        "kv.encoding.type": encoding,
    }
    return SchemaInfo(SchemaType.KEY_VALUE, "kv", join_key_value(key.schema, value.schema), props)


NAME = fld("name", "string")
AGE = fld("age", "int")
AGE_0 = fld("age", "int", default=0)
AGE_LONG = fld("age", "long")
V_NAME = avro(NAME)
V_AGE = avro(NAME, AGE)
V_AGE_0 = avro(NAME, AGE_0)
V_AGE_LONG = avro(NAME, AGE_LONG)


def color(*symbols: str, **extra: Any) -> SchemaInfo:
    return avro(
        NAME, fld("color", {"type": "enum", "name": "Color", "symbols": list(symbols), **extra})
    )


def address(zip_type: str) -> SchemaInfo:
    home = {
        "type": "record",
        "name": "Address",
        "fields": [fld("street", "string"), fld("zip", zip_type)],
    }
    return avro(NAME, fld("home", home), fld("work", "Address"))


def email(type_: Any, default: Any = NO_DEFAULT) -> SchemaInfo:
    return avro(NAME, fld("email", type_, default))


def node(value_type: str, *more: dict) -> SchemaInfo:
    """A record that holds itself (a list and a tree of Nodes)."""
    return avro(
        fld("value", value_type),
        fld("next", ["null", "Node"], default=None),
        fld("children", {"type": "array", "items": "Node"}, default=[]),
        *more,
        name="Node",
    )


class Case(NamedTuple):
    name: str
    strategy: S
    existing: list[SchemaInfo]
    new: SchemaInfo
    compatible: bool
    reason: str = ""  # a piece of the reason


ADDED = "field 'age' was added without a default"
REMOVED = "field 'age' was removed but has no default in version 0"
NEW_READS = "the new schema cannot read data written with"
OLD_READS = "version 0 cannot read data written with the new schema"

CASES = [
    # Adding a field: a default makes it readable both ways.
    Case("add with default, BACKWARD", S.BACKWARD, [V_NAME], V_AGE_0, True),
    Case("add with default, FORWARD", S.FORWARD, [V_NAME], V_AGE_0, True),
    Case("add with default, FULL", S.FULL, [V_NAME], V_AGE_0, True),
    Case("add without default, BACKWARD", S.BACKWARD, [V_NAME], V_AGE, False, ADDED),
    Case("add without default, FORWARD", S.FORWARD, [V_NAME], V_AGE, True),
    Case("add without default, FULL", S.FULL, [V_NAME], V_AGE, False, ADDED),
    # Removing a field: old readers need a default for it.
    Case("remove with default, BACKWARD", S.BACKWARD, [V_AGE_0], V_NAME, True),
    Case("remove with default, FORWARD", S.FORWARD, [V_AGE_0], V_NAME, True),
    Case("remove with default, FULL", S.FULL, [V_AGE_0], V_NAME, True),
    Case("remove without default, BACKWARD", S.BACKWARD, [V_AGE], V_NAME, True),
    Case("remove without default, FORWARD", S.FORWARD, [V_AGE], V_NAME, False, REMOVED),
    Case("remove without default, FULL", S.FULL, [V_AGE], V_NAME, False, OLD_READS),
    # Promotion goes one way: int widens to long, long does not narrow.
    Case("int to long, BACKWARD", S.BACKWARD, [V_AGE], V_AGE_LONG, True),
    Case(
        "int to long, FORWARD",
        S.FORWARD,
        [V_AGE],
        V_AGE_LONG,
        False,
        "field 'age': writer type 'long' cannot be read as 'int'",
    ),
    Case(
        "long to int, BACKWARD",
        S.BACKWARD,
        [V_AGE_LONG],
        V_AGE,
        False,
        "'long' cannot be read as 'int'",
    ),
    Case("long to int, FORWARD", S.FORWARD, [V_AGE_LONG], V_AGE, True),
    Case("int to long, FULL", S.FULL, [V_AGE], V_AGE_LONG, False, OLD_READS),
    # Enums: readers must know every symbol unless their enum has a default.
    Case("enum symbol added, BACKWARD", S.BACKWARD, [color("RED")], color("RED", "BLUE"), True),
    Case(
        "enum symbol added, FORWARD",
        S.FORWARD,
        [color("RED")],
        color("RED", "BLUE"),
        False,
        "field 'color': symbol 'BLUE' was added to enum 'com.example.Color', which has no default in version 0",
    ),
    Case(
        "enum symbol removed, BACKWARD",
        S.BACKWARD,
        [color("RED", "BLUE")],
        color("RED"),
        False,
        "field 'color': symbol 'BLUE' was removed from enum 'com.example.Color'",
    ),
    Case(
        "enum symbol removed, the new enum has a default",
        S.BACKWARD,
        [color("RED", "BLUE")],
        color("RED", default="RED"),
        True,
    ),
    # A nested record (used again by name): the path names the field.
    Case(
        "nested field changes type",
        S.BACKWARD,
        [address("string")],
        address("int"),
        False,
        "field 'home.zip': writer type 'string' cannot be read as 'int'",
    ),
    Case("nested field promoted", S.BACKWARD, [address("int")], address("long"), True),
    # Unions: a writer union's every branch must be readable.
    Case(
        "null branch added, BACKWARD",
        S.BACKWARD,
        [email("string")],
        email(["null", "string"], None),
        True,
    ),
    Case(
        "null branch added, FORWARD",
        S.FORWARD,
        [email("string")],
        email(["null", "string"], None),
        False,
        "field 'email': writer type 'null' cannot be read as 'string'",
    ),
    Case(
        "null branch removed, BACKWARD",
        S.BACKWARD,
        [email(["null", "string"], None)],
        email("string"),
        False,
        "writer type 'null' cannot be read as 'string'",
    ),
    Case(
        "union branch dropped",
        S.BACKWARD,
        [email(["null", "string", "int"], None)],
        email(["null", "string"], None),
        False,
        "field 'email': writer type 'int' cannot be read as '[null, string]'",
    ),
    Case(
        "union reads a promoted branch",
        S.BACKWARD,
        [email("int")],
        email(["null", "long"], None),
        True,
    ),
    # Transitive: v0 -> v1 and v1 -> v2 are fine, v0 -> v2 is not.
    Case("BACKWARD checks the latest only", S.BACKWARD, [V_NAME, V_AGE_0], V_AGE, True),
    Case(
        "BACKWARD_TRANSITIVE checks every version",
        S.BACKWARD_TRANSITIVE,
        [V_NAME, V_AGE_0],
        V_AGE,
        False,
        f"{NEW_READS} version 0: {ADDED}",
    ),
    Case("FORWARD checks the latest only", S.FORWARD, [V_AGE, V_AGE_0], V_NAME, True),
    Case(
        "FORWARD_TRANSITIVE checks every version",
        S.FORWARD_TRANSITIVE,
        [V_AGE, V_AGE_0],
        V_NAME,
        False,
        REMOVED,
    ),
    Case("FULL checks the latest only", S.FULL, [V_NAME, V_AGE_0], V_AGE, True),
    Case(
        "FULL_TRANSITIVE checks every version",
        S.FULL_TRANSITIVE,
        [V_NAME, V_AGE_0],
        V_AGE,
        False,
        ADDED,
    ),
    Case(
        "transitive and every version fine", S.FULL_TRANSITIVE, [V_NAME, V_AGE_0], avro(NAME), True
    ),
    # ALWAYS_*: no field checks; an identical schema is never new.
    Case("ALWAYS_COMPATIBLE takes a breaking change", S.ALWAYS_COMPATIBLE, [V_NAME], V_AGE, True),
    Case(
        "ALWAYS_COMPATIBLE takes a type change",
        S.ALWAYS_COMPATIBLE,
        [V_NAME],
        raw(SchemaType.STRING),
        True,
    ),
    Case(
        "ALWAYS_INCOMPATIBLE refuses a compatible change",
        S.ALWAYS_INCOMPATIBLE,
        [V_NAME],
        V_AGE_0,
        False,
        "ALWAYS_INCOMPATIBLE",
    ),
    Case(
        "ALWAYS_INCOMPATIBLE takes an identical schema",
        S.ALWAYS_INCOMPATIBLE,
        [V_NAME, V_AGE],
        V_NAME,
        True,
    ),
    Case("ALWAYS_INCOMPATIBLE takes the first schema", S.ALWAYS_INCOMPATIBLE, [], V_AGE, True),
    Case("no version yet", S.FULL_TRANSITIVE, [], V_AGE, True),
    # A type change is refused by every checking strategy.
    Case(
        "AVRO to JSON",
        S.BACKWARD,
        [V_NAME],
        avro(NAME, type_=SchemaType.JSON),
        False,
        "schema type changed from AVRO (version 0) to JSON",
    ),
    Case(
        "STRING to BYTES",
        S.FULL,
        [raw(SchemaType.STRING)],
        raw(SchemaType.BYTES),
        False,
        "schema type changed from STRING (version 0) to BYTES",
    ),
    Case(
        "type change against an older version, transitive",
        S.BACKWARD_TRANSITIVE,
        [raw(SchemaType.STRING), V_NAME],
        V_AGE_0,
        False,
        "schema type changed from STRING (version 0) to AVRO",
    ),
    Case(
        "type change against an older version",
        S.BACKWARD,
        [raw(SchemaType.STRING), V_NAME],
        V_AGE_0,
        True,
    ),
    Case(
        "JSON resolves like AVRO",
        S.BACKWARD,
        [avro(NAME, type_=SchemaType.JSON)],
        avro(NAME, AGE, type_=SchemaType.JSON),
        False,
        ADDED,
    ),
    # Types without a field-level check: only the same definition.
    Case("STRING again", S.BACKWARD, [raw(SchemaType.STRING)], raw(SchemaType.STRING), True),
    Case(
        "same primitive, other properties",
        S.FULL,
        [raw(SchemaType.INT64)],
        raw(SchemaType.INT64, b"", {"__charset": "UTF-8"}),
        True,
    ),
    Case(
        "primitive with another definition",
        S.BACKWARD,
        [raw(SchemaType.STRING, b"a")],
        raw(SchemaType.STRING, b"b"),
        False,
        "no field-level compatibility check",
    ),
    Case(
        "PROTOBUF_NATIVE changed",
        S.FORWARD,
        [raw(SchemaType.PROTOBUF_NATIVE, b"descriptor-1")],
        raw(SchemaType.PROTOBUF_NATIVE, b"descriptor-2"),
        False,
        "the PROTOBUF_NATIVE definition changed from version 0",
    ),
    Case(
        "PROTOBUF changed, transitive",
        S.FULL_TRANSITIVE,
        [raw(SchemaType.PROTOBUF, b"p1"), raw(SchemaType.PROTOBUF, b"p2")],
        raw(SchemaType.PROTOBUF, b"p3"),
        False,
        "definition changed from version 1",
    ),
    # KEY_VALUE: each part by its own type.
    Case(
        "KEY_VALUE breaking value",
        S.BACKWARD,
        [key_value(raw(SchemaType.STRING), V_NAME)],
        key_value(raw(SchemaType.STRING), V_AGE),
        False,
        f"value: {NEW_READS} version 0: {ADDED}",
    ),
    Case(
        "KEY_VALUE compatible value",
        S.FULL,
        [key_value(raw(SchemaType.STRING), V_NAME)],
        key_value(raw(SchemaType.STRING), V_AGE_0),
        True,
    ),
    Case(
        "KEY_VALUE key type changed",
        S.BACKWARD,
        [key_value(raw(SchemaType.STRING), V_NAME)],
        key_value(raw(SchemaType.INT32), V_NAME),
        False,
        "key: schema type changed from STRING (version 0) to INT32",
    ),
    Case(
        "KEY_VALUE Avro key, FORWARD",
        S.FORWARD,
        [key_value(V_AGE, raw(SchemaType.STRING))],
        key_value(V_NAME, raw(SchemaType.STRING)),
        False,
        f"key: {OLD_READS}: {REMOVED}",
    ),
    Case(
        "KEY_VALUE encoding changed",
        S.FULL,
        [key_value(raw(SchemaType.STRING), V_NAME)],
        key_value(raw(SchemaType.STRING), V_NAME, "SEPARATED"),
        True,
    ),
    # Aliases: a reader field (or record) may name what the writer called it.
    Case(
        "field renamed with an alias",
        S.BACKWARD,
        [V_AGE],
        avro(NAME, fld("years", "int", aliases=("age",))),
        True,
    ),
    Case(
        "field renamed without an alias",
        S.BACKWARD,
        [V_AGE],
        avro(NAME, fld("years", "int")),
        False,
        "field 'years' was added without a default",
    ),
    Case(
        "aliases are the reader's: old readers do not know them",
        S.FORWARD,
        [V_AGE],
        avro(NAME, fld("years", "int", aliases=("age",))),
        False,
        REMOVED,
    ),
    Case(
        "record renamed",
        S.BACKWARD,
        [V_NAME],
        avro(NAME, name="Person"),
        False,
        "the top-level type: writer type 'com.example.User' cannot be read as 'com.example.Person'",
    ),
    Case(
        "record renamed with an alias",
        S.BACKWARD,
        [V_NAME],
        avro(NAME, name="Person", aliases=["User"]),
        True,
    ),
    # Recursive records end.
    Case(
        "recursive record, compatible",
        S.FULL,
        [node("int")],
        node("int", fld("label", "string", default="")),
        True,
    ),
    Case("recursive record, promoted", S.BACKWARD, [node("int")], node("long"), True),
    Case(
        "recursive record, breaking",
        S.FORWARD,
        [node("int")],
        node("long"),
        False,
        "field 'value': writer type 'long' cannot be read as 'int'",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_check(case: Case) -> None:
    result = check(case.strategy, case.new, case.existing)
    assert result.compatible is case.compatible, result.reason
    if case.compatible:
        assert result == Compatibility(True)
    else:
        assert case.reason in result.reason
        assert result.version is not None


def test_every_strategy_has_a_case() -> None:
    assert {c.strategy for c in CASES} == set(S)


@pytest.mark.parametrize(
    ("strategy", "existing", "new", "version"),
    [
        (S.BACKWARD_TRANSITIVE, [V_NAME, V_AGE_0], V_AGE, 0),  # v1 is fine, v0 breaks
        # v2 is fine; v1 and v0 (long) both break: the newest is named.
        (
            S.FULL_TRANSITIVE,
            [V_AGE_LONG, avro(NAME, fld("age", "long", default=0)), V_AGE_0],
            avro(NAME, fld("age", "int", default=1)),
            1,
        ),
        (S.FULL, [V_NAME, V_AGE], V_AGE_LONG, 1),
        (S.ALWAYS_INCOMPATIBLE, [V_NAME, V_AGE], V_AGE_0, 1),
    ],
)
def test_the_version_it_breaks_against(strategy, existing, new, version) -> None:
    assert check(strategy, new, existing).version == version


@pytest.mark.parametrize(
    ("new", "existing", "expected"),
    [
        (V_NAME, [V_NAME, V_AGE], 0),
        (V_AGE, [V_NAME, V_AGE], 1),
        (V_AGE_0, [V_NAME, V_AGE], None),
        (V_NAME, [], None),
        (avro(NAME, type_=SchemaType.JSON), [V_NAME], None),  # same bytes, other type
        (
            raw(SchemaType.STRING, b"", {"k": "v"}),
            [raw(SchemaType.STRING)],
            0,
        ),  # properties do not count
        (raw(SchemaType.BYTES), [raw(SchemaType.STRING)], None),
        (V_NAME, [V_NAME, V_AGE, V_NAME], 2),  # the newest of two
        # KEY_VALUE: the part types count (both parts empty here) ...
        (
            key_value(raw(SchemaType.INT32), raw(SchemaType.STRING)),
            [key_value(raw(SchemaType.STRING), raw(SchemaType.STRING))],
            None,
        ),
        # ... and so does the encoding, which changes how the bytes are read.
        (
            key_value(raw(SchemaType.STRING), V_NAME, "SEPARATED"),
            [key_value(raw(SchemaType.STRING), V_NAME)],
            None,
        ),
        (key_value(raw(SchemaType.STRING), V_NAME), [key_value(raw(SchemaType.STRING), V_NAME)], 0),
    ],
)
def test_find_identical(new, existing, expected) -> None:
    assert find_identical(new, existing) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        *[(s.name, s) for s in S],
        *[(s.name.lower(), s) for s in S],
        (" backward_transitive ", S.BACKWARD_TRANSITIVE),
        *LEGACY_NAMES.items(),
        ("autoupdatedisabled", S.ALWAYS_INCOMPATIBLE),
        ("FULLTRANSITIVE", S.FULL_TRANSITIVE),
    ],
)
def test_strategy_of(text, expected) -> None:
    assert strategy_of(text) is expected


@pytest.mark.parametrize("text", ["", "BACKWARDS", "UNDEFINED", "full-transitive"])
def test_unknown_strategy_names_the_strategies(text) -> None:
    with pytest.raises(InvalidArgumentError) as err:
        strategy_of(text)
    assert "BACKWARD_TRANSITIVE" in err.value.message and "AutoUpdateDisabled" in err.value.message


def test_pulsar_default_is_backward() -> None:
    assert DEFAULT_STRATEGY is S.BACKWARD


def _avro_text(text: str) -> SchemaInfo:
    return SchemaInfo(SchemaType.AVRO, "", text.encode())


def _deep_arrays(levels: int) -> SchemaInfo:
    inner: Any = "int"
    for _ in range(levels):
        inner = {"type": "array", "items": inner}
    return avro(fld("deep", inner))


GOOD_KV = key_value(raw(SchemaType.STRING), V_NAME)
INVALID = [
    ("not JSON", _avro_text("{nope"), "not JSON text"),
    ("not UTF-8", SchemaInfo(SchemaType.AVRO, "", b"\xff\xfe"), "not JSON text"),
    ("empty", _avro_text(""), "not JSON text"),
    ("unknown type", avro(fld("a", "strin")), "strin"),
    ("type used before its definition", avro(fld("a", "Later")), "Later"),
    ("record without fields", _avro_text('{"type": "record", "name": "A"}'), "no 'fields' list"),
    ("field twice", avro(AGE, AGE), "two fields named 'age'"),
    ("field without a type", avro({"name": "a"}), "missing 'type'"),
    ("bad default", avro(fld("a", "int", default="x")), "Default value"),
    ("enum default not a symbol", color("RED", default="BLUE"), "enum"),
    ("bad record name", avro(NAME, name="1User"), "not a valid name"),
    ("bad field name", avro(fld("my-field", "int")), "not a valid field name"),
    ("union in a union", avro(fld("a", ["null", ["int", "long"]])), "another union"),
    (
        "union with two strings",
        avro(fld("a", ["string", "string"])),
        "two branches of type 'string'",
    ),
    ("fixed without size", avro(fld("a", {"type": "fixed", "name": "F"})), "size"),
    ("not a type", _avro_text("42"), "not a valid Avro schema"),
    ("JSON too", avro(fld("a", "strin"), type_=SchemaType.JSON), "strin"),
    ("nested too deeply", _deep_arrays(avro_resolution.DEPTH_MAX + 5), "deeper than"),
    ("KEY_VALUE cut short", raw(SchemaType.KEY_VALUE, b"\x00\x00\x00\x09abc"), "cut short"),
    ("KEY_VALUE trailing bytes", raw(SchemaType.KEY_VALUE, GOOD_KV.schema + b"x"), "past its end"),
    (
        "KEY_VALUE invalid value part",
        key_value(raw(SchemaType.STRING), _avro_text("{nope")),
        "the new schema (value) is not a valid Avro schema",
    ),
    (
        "KEY_VALUE unknown part type",
        SchemaInfo(
            SchemaType.KEY_VALUE,
            "",
            GOOD_KV.schema,
            {**GOOD_KV.properties, "key.schema.type": "TEXT"},
        ),
        "unknown schema type 'TEXT'",
    ),
    (
        "KEY_VALUE unknown encoding",
        SchemaInfo(
            SchemaType.KEY_VALUE,
            "",
            GOOD_KV.schema,
            {**GOOD_KV.properties, "kv.encoding.type": "BOTH"},
        ),
        "kv.encoding.type is 'BOTH'",
    ),
    ("AUTO_CONSUME", raw(SchemaType.AUTO_CONSUME), "only clients use"),
]


@pytest.mark.parametrize(("name", "new", "problem"), INVALID, ids=[i[0] for i in INVALID])
@pytest.mark.parametrize("strategy", [S.BACKWARD, S.ALWAYS_COMPATIBLE])
@pytest.mark.parametrize("existing", [[], [V_NAME]], ids=["first", "next"])
def test_an_invalid_definition_is_a_bad_request(name, new, problem, strategy, existing) -> None:
    with pytest.raises(InvalidArgumentError) as err:
        check(strategy, new, existing)
    assert problem in err.value.message


def test_a_broken_registered_version_is_incompatible_not_a_bad_request() -> None:
    result = check(S.BACKWARD, V_NAME, [_avro_text("{nope")])
    assert not result.compatible
    assert "version 0 is not a valid Avro schema" in result.reason


def test_key_value_without_part_types_reads_as_bytes() -> None:
    # Pulsar's schemas from before the part properties: both parts are BYTES.
    old = SchemaInfo(SchemaType.KEY_VALUE, "", join_key_value(b"", b""))
    assert check(
        S.BACKWARD, key_value(raw(SchemaType.BYTES), raw(SchemaType.BYTES)), [old]
    ).compatible
    result = check(S.BACKWARD, key_value(raw(SchemaType.STRING), raw(SchemaType.BYTES)), [old])
    assert "key: schema type changed from BYTES (version 0) to STRING" in result.reason


# Avro resolution on its own.


@pytest.mark.parametrize(
    ("writer", "reader"), list(itertools.product(sorted(avro_resolution.PRIMITIVES), repeat=2))
)
def test_primitives_read_the_same_type_or_a_promotion(writer, reader) -> None:
    expected = writer == reader or (writer, reader) in {
        ("int", "long"),
        ("int", "float"),
        ("int", "double"),
        ("long", "float"),
        ("long", "double"),
        ("float", "double"),
        ("string", "bytes"),
        ("bytes", "string"),
    }
    assert avro_resolution.can_read(reader, writer) is expected


def _parse(schema: Any) -> avro_resolution.AvroType:
    return avro_resolution.parse(json.dumps(schema).encode())


def _fixed(size: int, name: str = "Hash") -> dict:
    return {"type": "fixed", "name": name, "size": size}


RESOLUTION = [
    (
        "arrays by items",
        {"type": "array", "items": "int"},
        {"type": "array", "items": "long"},
        None,
    ),
    (
        "array items narrowed",
        {"type": "array", "items": "long"},
        {"type": "array", "items": "int"},
        ("[]", "TYPE", "long", "int"),
    ),
    (
        "map values narrowed",
        {"type": "map", "values": "double"},
        {"type": "map", "values": "float"},
        ("{}", "TYPE", "double", "float"),
    ),
    ("fixed the same", _fixed(16), _fixed(16), None),
    (
        "fixed resized",
        _fixed(16),
        _fixed(32),
        ("", "TYPE", "Hash (fixed, 16 bytes)", "Hash (fixed, 32 bytes)"),
    ),
    (
        "fixed renamed",
        _fixed(16),
        _fixed(16, "Digest"),
        ("", "TYPE", "Hash (fixed, 16 bytes)", "Digest (fixed, 16 bytes)"),
    ),
    (
        "array is not a map",
        {"type": "array", "items": "int"},
        {"type": "map", "values": "int"},
        ("", "TYPE", "array<int>", "map<int>"),
    ),
    ("logical types are ignored", {"type": "int", "logicalType": "date"}, "int", None),
    ("writer union into a wider union", ["null", "int"], ["null", "long", "string"], None),
    (
        "writer union loses a branch",
        ["null", "int", "string"],
        ["null", "int"],
        ("", "TYPE", "string", "[null, int]"),
    ),
    (
        "union picks the branch by name",
        ["null", record(fld("a", "int"), name="A")],
        ["null", record(fld("a", "long"), name="B"), record(fld("a", "string"), name="A")],
        ("a", "TYPE", "int", "string"),
    ),
    (
        "array of records: the path goes through the items",
        {"type": "array", "items": record(fld("price", "string"), name="Line")},
        {"type": "array", "items": record(fld("price", "double"), name="Line")},
        ("[].price", "TYPE", "string", "double"),
    ),
    (
        "enum without the writer's symbol",
        {"type": "enum", "name": "E", "symbols": ["A", "B"]},
        {"type": "enum", "name": "E", "symbols": ["A"]},
        ("", "MISSING_SYMBOL", "B", "E"),
    ),
    (
        "a record that holds itself directly",
        record(fld("self", "User"), fld("n", "int")),
        record(fld("self", "User"), fld("n", "long")),
        None,
    ),
]


@pytest.mark.parametrize(
    ("name", "writer", "reader", "expected"), RESOLUTION, ids=[r[0] for r in RESOLUTION]
)
def test_resolution(name, writer, reader, expected) -> None:
    found = avro_resolution.reader_mismatch(_parse(reader), _parse(writer))
    got = None if found is None else (found.path, found.kind.name, found.writer, found.reader)
    assert got == expected


def test_a_long_chain_of_records_stops_at_the_depth_bound() -> None:
    """Each link of the chain is defined in a defaulted field the other side
    lacks, so the definitions stay shallow while the check goes one record
    deeper per link."""
    links = avro_resolution.DEPTH_MAX + 10

    def chain(prefix: str) -> dict:
        fields = []
        for i in range(links):
            link = record(fld("next", f"R{i - 1}" if i else "int"), name=f"R{i}")
            fields.append(fld(f"{prefix}{i}", ["null", link], default=None))
        return record(*fields, fld("top", f"R{links - 1}"), name="Top")

    found = avro_resolution.reader_mismatch(_parse(chain("reader")), _parse(chain("writer")))
    assert found is not None and found.kind is avro_resolution.MismatchKind.TOO_DEEP
    assert found.path.startswith("top.next.next.next")
