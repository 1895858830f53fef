"""The SDK's schemas (client/schema): the Record DSL's rules, every schema's
round trip and refusals, reading data written under an older definition,
KEY_VALUE in both encodings, PROTOBUF_NATIVE, and AUTO_CONSUME reading any
writer from its SchemaInfo alone."""

from __future__ import annotations

import base64
import enum
import io
import json
import math
import struct
from typing import Any

import fastavro
import pytest
from google.protobuf import descriptor_pb2

import client.schema as schema_pkg
from client.exceptions import (
    IncompatibleSchema,
    InvalidConfiguration,
    InvalidMessage,
    OperationNotSupported,
)
from client.schema import (
    Array,
    AutoConsumeSchema,
    AvroSchema,
    Boolean,
    BooleanSchema,
    Bytes,
    BytesSchema,
    CustomEnum,
    Double,
    DoubleSchema,
    Float,
    FloatSchema,
    Int8Schema,
    Int16Schema,
    Int32Schema,
    Int64Schema,
    Integer,
    JsonSchema,
    KeyValueEncoding,
    KeyValueSchema,
    Long,
    Map,
    Null,
    ProtobufNativeSchema,
    Record,
    Schema,
    SchemaInfo,
    SchemaType,
    String,
    StringSchema,
)
from protos import common_pb2, metastore_pb2
from protos.schema_info import join_key_value

# ---------------------------------------------------------------- records


class Color(enum.Enum):
    RED = 1
    GREEN = 2


class Address(Record):
    street = String(required=True)
    zip = Integer()


class Person(Record):
    name = String(required=True)
    age = Integer(default=30, required_default=True)
    score = Double()
    ratio = Float()
    big = Long()
    ok = Boolean()
    data = Bytes()
    tags = Array(String())
    counts = Map(Long())
    color = Color
    home = Address
    work = Address(required=True)
    past = Array(Address)
    nothing = Null()


def _person() -> Person:
    return Person(
        name="Ada",
        score=2.5,
        ratio=0.5,
        big=2**40,
        ok=True,
        data=b"\x00\xff",
        tags=["a", "b"],
        counts={"x": 1},
        color=Color.GREEN,
        home={"street": "Home St"},
        work=Address(street="Work St", zip=12345),
        past=[Address(street="Old St")],
    )


# Versions of one record (the same Avro name): v2 adds a defaulted field
# (email) and drops one (nickname); v3 adds a field with no default.
class V1:
    class User(Record):
        name = String(required=True)
        age = Integer()
        nickname = String()


class V2:
    class User(Record):
        name = String(required=True)
        age = Integer()
        email = String(default="nobody@example.com", required_default=True)


class V3:
    class User(Record):
        name = String(required=True)
        level = Integer(required=True)


# ---------------------------------------------------------------- primitives

# (schema, value, payload)
PRIMITIVE_ROUND_TRIPS: list[tuple[Schema, Any, bytes]] = [
    (BytesSchema(), b"\x00raw", b"\x00raw"),
    (StringSchema(), "héllo", "héllo".encode()),
    (BooleanSchema(), True, b"\x01"),
    (BooleanSchema(), False, b"\x00"),
    (Int8Schema(), -128, b"\x80"),
    (Int8Schema(), 127, b"\x7f"),
    (Int16Schema(), -2, b"\xff\xfe"),
    (Int32Schema(), 2**31 - 1, b"\x7f\xff\xff\xff"),
    (Int64Schema(), -(2**63), b"\x80" + b"\x00" * 7),
    (FloatSchema(), 1.5, struct.pack(">f", 1.5)),
    (DoubleSchema(), -2.25, struct.pack(">d", -2.25)),
]


@pytest.mark.parametrize(("schema", "value", "payload"), PRIMITIVE_ROUND_TRIPS)
def test_primitive_schemas_encode_as_pulsar_and_round_trip(
    schema: Schema, value: Any, payload: bytes
) -> None:
    assert schema.encode(value) == payload
    assert schema.decode(payload) == value
    info = schema.schema_info()
    assert (info.name, info.schema, info.properties) == (info.type.name, b"", {})


# (schema, value the schema refuses)
PRIMITIVE_REFUSALS: list[tuple[Schema, Any]] = [
    (BytesSchema(), "text"),
    (StringSchema(), b"bytes"),
    (BooleanSchema(), 1),
    (Int8Schema(), 128),
    (Int8Schema(), True),
    (Int16Schema(), -(2**15) - 1),
    (Int32Schema(), 2**31),
    (Int64Schema(), 2**63),
    (Int64Schema(), 1.0),
    (FloatSchema(), "1.0"),
    (FloatSchema(), 1e39),
    (DoubleSchema(), None),
]


@pytest.mark.parametrize(("schema", "value"), PRIMITIVE_REFUSALS)
def test_primitive_schemas_refuse_wrong_types_and_out_of_range(schema: Schema, value: Any) -> None:
    with pytest.raises(InvalidMessage, match=schema.schema_info().type.name):
        schema.encode(value)


# (schema, payload that is no value of it)
PRIMITIVE_GARBAGE: list[tuple[Schema, bytes]] = [
    (StringSchema(), b"\xff\xfe"),
    (BooleanSchema(), b""),
    (Int8Schema(), b"\x00\x00"),
    (Int32Schema(), b"\x00\x00\x00"),
    (Int64Schema(), b"\x00" * 9),
    (DoubleSchema(), b"\x00" * 4),
]


@pytest.mark.parametrize(("schema", "payload"), PRIMITIVE_GARBAGE)
def test_primitive_schemas_refuse_undecodable_payloads(schema: Schema, payload: bytes) -> None:
    with pytest.raises(InvalidMessage, match=f"cannot decode {schema.schema_info().type.name}"):
        schema.decode(payload)


def test_float_schema_keeps_32_bits_of_precision() -> None:
    assert FloatSchema().decode(FloatSchema().encode(0.1)) == pytest.approx(0.1, rel=1e-7)
    assert FloatSchema().encode(3) == struct.pack(">f", 3.0)


def test_schemas_are_equal_by_schema_info_which_is_cached() -> None:
    assert BytesSchema() == BytesSchema() and hash(BytesSchema()) == hash(BytesSchema())
    assert AvroSchema(Person) == AvroSchema(Person)
    assert AvroSchema(Person) != JsonSchema(Person)
    assert AvroSchema(Person) != AvroSchema(Address)
    schema = AvroSchema(Person)
    assert schema.schema_info() is schema.schema_info()


def test_decode_with_writer_checks_the_writers_type() -> None:
    with pytest.raises(IncompatibleSchema, match="INT32"):
        StringSchema().decode_with_writer(b"x", SchemaInfo(SchemaType.INT32, "INT32"))
    assert StringSchema().decode_with_writer(b"x", StringSchema().schema_info()) == "x"
    assert BytesSchema().decode_with_writer(b"x", SchemaInfo(SchemaType.NONE)) == b"x"


def test_a_custom_schema_subclasses_schema() -> None:
    class Upper(Schema):
        def encode(self, obj: Any) -> bytes:
            return str(obj).upper().encode()

        def decode(self, data: bytes) -> Any:
            return data.decode().lower()

        def schema_info(self) -> SchemaInfo:
            return SchemaInfo(SchemaType.STRING, "upper")

    upper = Upper()
    assert upper.decode(upper.encode("abc")) == "abc"
    assert upper.decode_with_writer(b"ABC", StringSchema().schema_info()) == "abc"
    with pytest.raises(TypeError):
        Schema()  # type: ignore[abstract]


# ---------------------------------------------------------------- Record DSL


def test_record_schema_is_the_exact_avro_record() -> None:
    class Point(Record):
        x = Integer(required=True)
        y = Double()
        label = String(default="origin", required_default=True)

    assert Point.schema() == {
        "type": "record",
        "name": "Point",
        "fields": [
            {"name": "x", "type": "int"},
            {"name": "y", "type": ["null", "double"], "default": None},
            {"name": "label", "type": ["string", "null"], "default": "origin"},
        ],
    }


def test_record_namespace_and_sorted_fields() -> None:
    class Zed(Record):
        _avro_namespace = "com.example"
        _sorted_fields = True
        b = Long(required=True)
        a = Boolean(required=True, required_default=True)

    assert Zed.schema() == {
        "type": "record",
        "name": "Zed",
        "namespace": "com.example",
        "fields": [
            {"name": "a", "type": "boolean", "default": False},
            {"name": "b", "type": "long"},
        ],
    }
    assert list(Zed._fields) == ["b", "a"]  # values keep declaration order


def test_nested_records_enums_arrays_and_maps_make_a_valid_avro_schema() -> None:
    definition = Person.schema()
    fields = {f["name"]: f["type"] for f in definition["fields"]}
    assert fields["home"][1]["name"] == "Address"  # first use defines it
    assert fields["work"] == "Address"  # later uses name it
    assert fields["past"] == ["null", {"type": "array", "items": "Address"}]
    assert fields["color"] == [
        "null",
        {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN"]},
    ]
    assert fields["counts"] == ["null", {"type": "map", "values": "long"}]
    assert fields["nothing"] == "null"
    fastavro.parse_schema(definition)  # valid Avro


def test_a_type_used_again_under_another_namespace_is_named_in_full() -> None:
    class Mid(Record):
        _avro_namespace = "b"
        again = Address(required=True)
        color = CustomEnum(Color, required=True)

    class Outer(Record):
        _avro_namespace = "a"
        first = Address(required=True)
        color = CustomEnum(Color, required=True)
        mid = Mid(required=True)

    mid = Outer.schema()["fields"][2]["type"]
    assert [f["type"] for f in mid["fields"]] == ["a.Address", "a.Color"]
    schema = AvroSchema(Outer)  # fastavro resolves the names
    value = Outer(
        first=Address(street="1"),
        color=Color.RED,
        mid=Mid(again=Address(street="2"), color="GREEN"),
    )
    assert schema.decode(schema.encode(value)) == value


def test_two_types_of_one_name_in_a_schema_are_refused() -> None:
    class Both(Record):
        one = V1.User
        two = V2.User

    with pytest.raises(TypeError, match="two different types are named User"):
        Both.schema()


def test_record_values_get_defaults_and_keep_what_is_given() -> None:
    p = Person(name="x", work=Address(street="s"))
    assert (p.age, p.ok, p.tags, p.home, p.color) == (30, False, None, None, None)

    class Bag(Record):
        items = Array(Integer(), default=[])

    first, second = Bag(), Bag()
    first.items.append(1)
    assert second.items == []  # a default is never shared


def test_records_compare_by_value_and_have_a_useful_repr() -> None:
    assert _person() == _person()
    other = _person()
    other.tags = ["c"]
    assert other != _person()
    assert repr(Address(street="s")) == "Address(street='s', zip=None)"


def test_undeclared_attributes_raise_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no field 'nme'"):
        Address(nme="x")
    a = Address(street="s")
    with pytest.raises(AttributeError, match="its fields: street, zip"):
        a.city = "x"


# (field, value of the wrong type or out of range)
DSL_WRONG_VALUES: list[tuple[Any, Any]] = [
    (Integer(), "1"),
    (Integer(), True),
    (Integer(), 2**31),
    (Long(), 2**63),
    (Float(), "1.0"),
    (Double(), [1.0]),
    (String(), 1),
    (Boolean(), 0),
    (Bytes(), "text"),
    (Array(String()), "abc"),
    (Array(String()), ["a", 1]),
    (Array(String()), ["a", None]),
    (Map(String()), {1: "a"}),
    (Map(String()), {"a": None}),
    (CustomEnum(Color), "BLUE"),
    (CustomEnum(Color), 1),
    (Null(), 0),
    (Address, V1.User(name="x")),
]


@pytest.mark.parametrize(("field", "value"), DSL_WRONG_VALUES)
def test_wrong_values_raise_type_error_at_construction_and_assignment(
    field: Any, value: Any
) -> None:
    class Holder(Record):
        slot = field

    with pytest.raises(TypeError, match=r"Holder\.slot"):
        Holder(slot=value)
    holder = Holder()
    with pytest.raises(TypeError):
        holder.slot = value


def test_field_definitions_are_checked_when_declared() -> None:
    with pytest.raises(TypeError):
        Integer(default="x")
    with pytest.raises(TypeError, match="needs a default"):
        String(required=True, required_default=True)
    with pytest.raises(TypeError):
        CustomEnum(int)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Array(42)


def test_enums_and_records_written_in_a_body_are_types_not_fields() -> None:
    class Order(Record):
        class Status(enum.Enum):
            NEW = "n"
            DONE = "d"

        status = Status
        state = CustomEnum(Status, default=Status.NEW)

    assert list(Order._fields) == ["status", "state"]
    order = Order(status="DONE")  # a member's name stands for the member
    assert order.status is Order.Status.DONE and order.state is Order.Status.NEW


def test_record_subclasses_inherit_their_parents_fields_first() -> None:
    class Employee(Address):
        salary = Long()

    assert list(Employee._fields) == ["street", "zip", "salary"]


# ---------------------------------------------------------------- AVRO


def test_avro_round_trips_every_field_type() -> None:
    schema = AvroSchema(Person)
    decoded = schema.decode(schema.encode(_person()))
    assert decoded == _person()
    assert isinstance(decoded.home, Address) and isinstance(decoded.past[0], Address)
    info = schema.schema_info()
    assert (info.type, info.name) == (SchemaType.AVRO, "AVRO")
    assert json.loads(info.schema) == Person.schema()


def test_avro_is_plain_binary_avro() -> None:
    payload = AvroSchema(Address).encode(Address(street="s", zip=7))
    parsed = fastavro.parse_schema(Address.schema())
    assert fastavro.schemaless_reader(io.BytesIO(payload), parsed, None) == {
        "street": "s",
        "zip": 7,
    }


def test_avro_takes_a_dict_of_the_fields_and_a_definition_without_a_class() -> None:
    by_class = AvroSchema(Address)
    assert by_class.decode(by_class.encode({"street": "s"})) == Address(street="s")
    generic = AvroSchema(None, Address.schema())
    assert generic == by_class
    assert generic.decode(by_class.encode(Address(street="s", zip=1))) == {"street": "s", "zip": 1}
    assert generic.encode({"street": "s", "zip": 1}) == by_class.encode(Address(street="s", zip=1))


# (record class or None for a dict schema, value, words the error must have)
AVRO_REFUSALS: list[tuple[type[Record] | None, Any, str]] = [
    (Address, Address(), "street: required"),
    (Address, {"zip": 1}, "street: required"),
    (Address, {"street": "s", "city": "x"}, "city: not a field"),
    (Address, V1.User(name="x"), "is not a Address"),
    (Person, {"name": "x", "work": {"zip": 1}}, "work.street: required"),
    (None, {"zip": 1}, "Address.street"),
    (None, {"street": "s", "zip": "one"}, "Address.zip"),
    (None, "not a dict", "AVRO"),
]


@pytest.mark.parametrize(("record_cls", "value", "words"), AVRO_REFUSALS)
def test_avro_refuses_values_that_do_not_fit_naming_the_field(
    record_cls: type[Record] | None, value: Any, words: str
) -> None:
    schema = AvroSchema(record_cls, None if record_cls else Address.schema())
    with pytest.raises(InvalidMessage, match=words):
        schema.encode(value)


@pytest.mark.parametrize("payload", [b"\x02", b"\xff\xff\xff\xff\x0f", b"\x02s\x00trailing"])
def test_avro_refuses_garbage_bytes(payload: bytes) -> None:
    with pytest.raises(InvalidMessage, match="cannot decode AVRO"):
        AvroSchema(Address).decode(payload)


def test_avro_constructor_refuses_bad_arguments() -> None:
    with pytest.raises(InvalidConfiguration):
        AvroSchema(None)
    with pytest.raises(InvalidConfiguration):
        AvroSchema(Address, {"type": "record", "name": "Other", "fields": []})
    with pytest.raises(InvalidConfiguration, match="not an Avro schema"):
        AvroSchema(None, {"type": "no-such-type"})


def test_avro_reads_an_older_version_with_schema_resolution() -> None:
    old, new = AvroSchema(V1.User), AvroSchema(V2.User)
    payload = old.encode(V1.User(name="ann", age=7, nickname="a"))
    user = new.decode_with_writer(payload, old.schema_info())
    assert user == V2.User(name="ann", age=7, email="nobody@example.com")
    # and the newer version's data read by the older reader drops email
    back = old.decode_with_writer(new.encode(user), new.schema_info())
    assert back == V1.User(name="ann", age=7)


def test_avro_refuses_a_writer_it_cannot_resolve() -> None:
    payload = AvroSchema(V1.User).encode(V1.User(name="ann"))
    with pytest.raises(IncompatibleSchema, match="No default value for field level"):
        AvroSchema(V3.User).decode_with_writer(payload, AvroSchema(V1.User).schema_info())
    with pytest.raises(IncompatibleSchema):
        AvroSchema(V1.User).decode_with_writer(payload, JsonSchema(V1.User).schema_info())


# ---------------------------------------------------------------- JSON


def test_json_round_trips_and_the_payload_is_the_fields_as_json() -> None:
    schema = JsonSchema(Person)
    payload = schema.encode(_person())
    assert schema.decode(payload) == _person()
    fields = json.loads(payload)
    assert fields["work"] == {"street": "Work St", "zip": 12345}
    assert fields["color"] == "GREEN" and fields["data"] == "\u0000\u00ff"
    info = schema.schema_info()
    assert (info.type, json.loads(info.schema)) == (SchemaType.JSON, Person.schema())


# (value, words the error must have)
JSON_REFUSALS: list[tuple[Any, str]] = [
    ({"zip": 1}, "street: required"),
    ({"street": "s", "zip": "1"}, "zip"),
    ({"street": "s", "city": "x"}, "city: not a field"),
    (42, "is not a Address"),
]


@pytest.mark.parametrize(("value", "words"), JSON_REFUSALS)
def test_json_refuses_values_that_do_not_fit(value: Any, words: str) -> None:
    with pytest.raises(InvalidMessage, match=words):
        JsonSchema(Address).encode(value)


def test_json_refuses_nan_which_json_cannot_hold() -> None:
    with pytest.raises(InvalidMessage, match="JSON"):
        JsonSchema(Person).encode({"name": "x", "work": {"street": "s"}, "score": math.nan})


@pytest.mark.parametrize(
    "payload", [b"{not json", b"\xff", b"[1, 2]", b'{"street": 5}', b'{"street": "s", "x": 1}']
)
def test_json_refuses_undecodable_payloads(payload: bytes) -> None:
    with pytest.raises(InvalidMessage, match="cannot decode JSON"):
        JsonSchema(Address).decode(payload)


def test_json_reads_an_older_version_keeping_the_readers_fields() -> None:
    old, new = JsonSchema(V1.User), JsonSchema(V2.User)
    payload = old.encode(V1.User(name="ann", age=7, nickname="a"))
    user = new.decode_with_writer(payload, old.schema_info())
    assert user == V2.User(name="ann", age=7, email="nobody@example.com")
    with pytest.raises(InvalidMessage, match="nickname"):
        new.decode(payload)  # a plain decode is strict
    with pytest.raises(InvalidMessage, match="level: required"):
        JsonSchema(V3.User).decode_with_writer(payload, old.schema_info())


# ---------------------------------------------------------------- KEY_VALUE


def test_key_value_inline_joins_the_parts_and_describes_both_schemas() -> None:
    kv = KeyValueSchema(StringSchema(), AvroSchema(Address))
    pair = ("k1", Address(street="s"))
    payload = kv.encode(pair)
    assert payload == join_key_value(b"k1", AvroSchema(Address).encode(pair[1]))
    assert kv.decode(payload) == pair and not kv.is_separated()
    info = kv.schema_info()
    assert info.type is SchemaType.KEY_VALUE
    assert info.schema == join_key_value(b"", AvroSchema(Address).schema_info().schema)
    assert info.properties == {
        "key.schema.name": "STRING",
        "key.schema.type": "STRING",
        "key.schema.properties": "{}",
        "value.schema.name": "AVRO",
        "value.schema.type": "AVRO",
        "value.schema.properties": "{}",
        "kv.encoding.type": "INLINE",
    }


def test_key_value_separated_encodes_the_parts_apart() -> None:
    kv = KeyValueSchema(Int32Schema(), JsonSchema(Address), KeyValueEncoding.SEPARATED)
    assert kv.is_separated()
    assert kv.schema_info().properties["kv.encoding.type"] == "SEPARATED"
    pair = (7, Address(street="s"))
    key_bytes, value_bytes = kv.encode_separated(pair)
    assert key_bytes == b"\x00\x00\x00\x07"
    assert kv.decode_separated(key_bytes, value_bytes) == pair
    with pytest.raises(OperationNotSupported, match="encode_separated"):
        kv.encode(pair)
    with pytest.raises(OperationNotSupported, match="decode_separated"):
        kv.decode(value_bytes)


# (value or payload, words the error must have)
KEY_VALUE_REFUSALS: list[tuple[str, Any, str]] = [
    ("encode", "not a pair", "not a \\(key, value\\) tuple"),
    ("encode", ("k",), "not a \\(key, value\\) tuple"),
    ("encode", (1, Address(street="s")), "KEY_VALUE key: cannot encode as STRING"),
    ("encode", ("k", Address()), "KEY_VALUE value: .*street: required"),
    ("decode", b"\x00\x00", "cannot decode KEY_VALUE"),
    ("decode", join_key_value(b"\xff", b""), "KEY_VALUE key: cannot decode STRING"),
]


@pytest.mark.parametrize(("call", "value", "words"), KEY_VALUE_REFUSALS)
def test_key_value_refusals_name_the_part(call: str, value: Any, words: str) -> None:
    kv = KeyValueSchema(StringSchema(), AvroSchema(Address))
    with pytest.raises(InvalidMessage, match=words):
        getattr(kv, call)(value)


def test_key_value_reads_older_parts_with_each_parts_writer() -> None:
    old = KeyValueSchema(StringSchema(), AvroSchema(V1.User))
    new = KeyValueSchema(StringSchema(), AvroSchema(V2.User))
    payload = old.encode(("k", V1.User(name="ann", nickname="a")))
    key, user = new.decode_with_writer(payload, old.schema_info())
    assert (key, user) == ("k", V2.User(name="ann", email="nobody@example.com"))
    separated = KeyValueSchema(StringSchema(), AvroSchema(V2.User), KeyValueEncoding.SEPARATED)
    with pytest.raises(IncompatibleSchema, match="INLINE"):
        separated.decode_separated(b"k", b"", old.schema_info())


def test_key_value_constructor_refuses_what_is_not_a_schema_to_write_with() -> None:
    with pytest.raises(InvalidConfiguration):
        KeyValueSchema(StringSchema(), "bytes")  # type: ignore[arg-type]
    with pytest.raises(InvalidConfiguration):
        KeyValueSchema(AutoConsumeSchema(), StringSchema())
    with pytest.raises(InvalidConfiguration):
        KeyValueSchema(StringSchema(), StringSchema(), "INLINE")  # type: ignore[arg-type]


# ---------------------------------------------------------------- PROTOBUF_NATIVE


def _get_response() -> metastore_pb2.GetResponse:
    return metastore_pb2.GetResponse(
        found=True,
        revision=42,
        record=metastore_pb2.KeyRecord(key="/a", value=b"v", version=3),
        error=common_pb2.Error(code=common_pb2.TIMEOUT, message="slow"),
    )


def test_protobuf_native_definition_holds_the_file_and_its_imports() -> None:
    info = ProtobufNativeSchema(metastore_pb2.GetResponse).schema_info()
    assert (info.type, info.name) == (SchemaType.PROTOBUF_NATIVE, "PROTOBUF_NATIVE")
    definition = json.loads(info.schema)
    assert definition["rootMessageTypeName"] == "magnetar.GetResponse"
    assert definition["rootFileDescriptorName"] == "protos/metastore.proto"
    files = descriptor_pb2.FileDescriptorSet.FromString(
        base64.b64decode(definition["fileDescriptorSet"])
    )
    assert [f.name for f in files.file] == ["protos/common.proto", "protos/metastore.proto"]


@pytest.mark.parametrize(
    "message",
    [
        _get_response(),
        common_pb2.MessageMetadata(producer_name="p", sequence_id=0, publish_time=9),
    ],
)
def test_protobuf_native_round_trips_and_auto_consume_rebuilds_the_class(message: Any) -> None:
    schema = ProtobufNativeSchema(type(message))
    payload = schema.encode(message)
    assert payload == message.SerializeToString()
    assert schema.decode(payload) == message
    generic = AutoConsumeSchema().decode_with_writer(payload, schema.schema_info())
    assert type(generic) is not type(message)  # built from the SchemaInfo alone
    assert generic.DESCRIPTOR.full_name == message.DESCRIPTOR.full_name
    assert generic.SerializeToString() == payload


def test_auto_consume_reads_nested_protobuf_fields_by_name() -> None:
    info = ProtobufNativeSchema(metastore_pb2.GetResponse).schema_info()
    generic = AutoConsumeSchema().decode_with_writer(_get_response().SerializeToString(), info)
    assert (generic.revision, generic.record.key, generic.error.message) == (42, "/a", "slow")


def test_protobuf_native_refuses_other_types_and_garbage() -> None:
    schema = ProtobufNativeSchema(metastore_pb2.GetResponse)
    with pytest.raises(InvalidMessage, match=r"is not a magnetar\.GetResponse"):
        schema.encode(common_pb2.Error())
    with pytest.raises(InvalidMessage, match="cannot decode PROTOBUF_NATIVE"):
        schema.decode(b"\xff\xff\xff")
    with pytest.raises(InvalidConfiguration):
        ProtobufNativeSchema(dict)  # type: ignore[arg-type]
    bad_definition = SchemaInfo(SchemaType.PROTOBUF_NATIVE, "x", b'{"fileDescriptorSet": "!"}')
    with pytest.raises(IncompatibleSchema):
        AutoConsumeSchema().decode_with_writer(b"", bad_definition)


# ---------------------------------------------------------------- AUTO_CONSUME

# (the writer's schema, a value it writes, what AUTO_CONSUME reads back)
AUTO_CONSUME_READS: list[tuple[Schema, Any, Any]] = [
    (AvroSchema(Address), Address(street="s", zip=1), {"street": "s", "zip": 1}),
    (JsonSchema(Address), Address(street="s"), {"street": "s", "zip": None}),
    (StringSchema(), "text", "text"),
    (BooleanSchema(), True, True),
    (Int16Schema(), -5, -5),
    (Int64Schema(), 2**40, 2**40),
    (DoubleSchema(), 0.25, 0.25),
    (BytesSchema(), b"raw", b"raw"),
    (
        KeyValueSchema(StringSchema(), AvroSchema(Address)),
        ("k", Address(street="s")),
        ("k", {"street": "s", "zip": None}),
    ),
]


@pytest.mark.parametrize(("writer", "value", "expected"), AUTO_CONSUME_READS)
def test_auto_consume_reads_any_writer_generically(
    writer: Schema, value: Any, expected: Any
) -> None:
    payload = writer.encode(value)
    assert AutoConsumeSchema().decode_with_writer(payload, writer.schema_info()) == expected


def test_auto_consume_without_a_writer_and_for_writing() -> None:
    auto = AutoConsumeSchema()
    assert auto.decode(b"\x01\x02") == b"\x01\x02"
    assert auto.decode_with_writer(b"x", SchemaInfo(SchemaType.NONE)) == b"x"
    assert auto.schema_info().type is SchemaType.AUTO_CONSUME
    with pytest.raises(OperationNotSupported):
        auto.encode(b"x")
    with pytest.raises(OperationNotSupported, match="PROTOBUF"):
        auto.decode_with_writer(b"", SchemaInfo(SchemaType.PROTOBUF, "p", b"{}"))


def test_auto_consume_reads_separated_key_value_from_both_parts() -> None:
    kv = KeyValueSchema(StringSchema(), JsonSchema(Address), KeyValueEncoding.SEPARATED)
    key_bytes, value_bytes = kv.encode_separated(("k", Address(street="s")))
    auto = AutoConsumeSchema()
    pair = auto.decode_separated(key_bytes, value_bytes, kv.schema_info())
    assert pair == ("k", {"street": "s", "zip": None})
    with pytest.raises(OperationNotSupported, match="decode_separated"):
        auto.decode_with_writer(value_bytes, kv.schema_info())


@pytest.mark.parametrize("payload", [b"\x02", b"\x02s\x00extra", b"\x80"])
def test_auto_consume_refuses_garbage_under_an_avro_writer(payload: bytes) -> None:
    with pytest.raises(InvalidMessage, match="cannot decode AVRO"):
        AutoConsumeSchema().decode_with_writer(payload, AvroSchema(Address).schema_info())


# ---------------------------------------------------------------- public names


def test_the_package_exports_its_public_names() -> None:
    for name in schema_pkg.__all__:
        assert hasattr(schema_pkg, name), name
    wanted = {
        "Record", "Null", "Boolean", "Integer", "Long", "Float", "Double", "Bytes", "String",
        "Array", "Map", "CustomEnum", "Schema", "BytesSchema", "StringSchema", "BooleanSchema",
        "Int8Schema", "Int16Schema", "Int32Schema", "Int64Schema", "FloatSchema",
        "DoubleSchema", "JsonSchema", "AvroSchema", "ProtobufNativeSchema", "KeyValueSchema",
        "KeyValueEncoding", "AutoConsumeSchema", "SchemaType", "SchemaInfo",
    }  # fmt: skip
    assert wanted <= set(schema_pkg.__all__)
