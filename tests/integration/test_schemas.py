"""The schema registry on real processes (issue 25, points 1-3): producers
and consumers register or are checked against a topic's versions, every
message carries its version, a consumer decodes messages of older versions
projected onto its own schema, the compatibility strategies and auto update
are namespace policies, and ``schemas get / upload / delete`` administer it.
Bad input is refused with a typed error and changes nothing."""

from __future__ import annotations

import itertools
import json

import pytest

from client import Client, InitialPosition, MessageId
from client.admin import Admin
from client.exceptions import (
    IncompatibleSchema,
    InvalidConfiguration,
    InvalidMessage,
    NotFound,
)
from client.schema import (
    AutoConsumeSchema,
    AvroSchema,
    BytesSchema,
    Double,
    Integer,
    JsonSchema,
    KeyValueEncoding,
    KeyValueSchema,
    Record,
    String,
    StringSchema,
)
from protos.schema_info import decode_version
from tests.harness import wait_for
from tests.tenancy import own_namespace

_n = itertools.count()


class UserV1(Record):
    name = String(required=True)
    age = Integer(required=True)


class UserV2(Record):  # v1 + a field with a default: BACKWARD and FORWARD compatible
    name = String(required=True)
    age = Integer(required=True)
    email = String(default="none@example.com", required_default=True)


class UserNeedsScore(Record):  # a required field with no default: not BACKWARD
    name = String(required=True)
    age = Integer(required=True)
    score = Double(required=True)


def _named(record: type[Record], name: str) -> type[Record]:
    """The same record under one Avro name (versions of one record type)."""
    return type(name, (record,), {"_avro_namespace": "test.users"})


@pytest.fixture
def admin(cluster):
    with Admin(cluster.service_url) as a:
        yield a


@pytest.fixture
def namespace(admin):
    with own_namespace(admin, "schema") as ns:
        yield ns


def _topic(namespace: str) -> str:
    return f"persistent://{namespace}/t{next(_n)}"


def _user(version: type[Record]) -> type[Record]:
    return type("User", (version,), {"_avro_namespace": "test.users"})


def _created(c: Client, topic: str, schema) -> bool:  # type: ignore[no-untyped-def]
    try:
        c.create_producer(topic, schema=schema).close()
    except IncompatibleSchema:
        return False
    return True


def _reader(c: Client, topic: str, schema):  # type: ignore[no-untyped-def]
    return c.create_reader(topic, MessageId.earliest, schema=schema)


@pytest.mark.parametrize("make", [JsonSchema, AvroSchema], ids=["json", "avro"])
def test_records_round_trip_with_their_version(cluster, admin, namespace, make):
    topic = _topic(namespace)
    User = _user(UserV1)
    with Client(cluster.service_url) as c:
        p = c.create_producer(topic, schema=make(User))
        p.send(User(name="ada", age=36))
        got = _reader(c, topic, make(User)).read_next(timeout_millis=10000)
        assert got.value() == User(name="ada", age=36)
        assert decode_version(got.schema_version()) == 0
    shown = admin.schemas.get(topic)
    assert shown["version"] == 0 and shown["type"] == make(User).schema_info().type.name
    assert json.loads(shown["data"])["name"] == "User"


def test_an_evolved_schema_registers_and_reads_old_messages_projected(cluster, admin, namespace):
    topic = _topic(namespace)
    V1, V2 = _user(UserV1), _user(UserV2)
    with Client(cluster.service_url) as c:
        c.create_producer(topic, schema=AvroSchema(V1)).send(V1(name="old", age=1))
        p2 = c.create_producer(topic, schema=AvroSchema(V2))  # BACKWARD: registered as 1
        p2.send(V2(name="new", age=2, email="n@example.com"))
        assert admin.schemas.get(topic)["version"] == 1
        # A v2 reader: the v1 message gets the default of the added field.
        r2 = _reader(c, topic, AvroSchema(V2))
        first, second = r2.read_next(timeout_millis=10000), r2.read_next(timeout_millis=10000)
        assert first.value() == V2(name="old", age=1, email="none@example.com")
        assert second.value() == V2(name="new", age=2, email="n@example.com")
        assert [decode_version(m.schema_version()) for m in (first, second)] == [0, 1]
        # A v1 reader drops the field it does not know.
        r1 = _reader(c, topic, AvroSchema(V1))
        values = [r1.read_next(timeout_millis=10000).value() for _ in range(2)]
        assert values == [V1(name="old", age=1), V1(name="new", age=2)]
        # AUTO_CONSUME decodes each message with its writer's schema.
        auto = _reader(c, topic, AutoConsumeSchema())
        assert auto.read_next(timeout_millis=10000).value() == {"name": "old", "age": 1}


def test_an_incompatible_producer_is_refused_naming_the_field(cluster, admin, namespace):
    topic = _topic(namespace)
    V1, Bad = _user(UserV1), _user(UserNeedsScore)
    with Client(cluster.service_url) as c:
        c.create_producer(topic, schema=AvroSchema(V1))
        with pytest.raises(IncompatibleSchema, match="score"):
            c.create_producer(topic, schema=AvroSchema(Bad))
        assert admin.schemas.get(topic)["version"] == 0  # nothing registered
        # Another type altogether is refused too.
        with pytest.raises(IncompatibleSchema, match="type changed"):
            c.create_producer(topic, schema=JsonSchema(V1))
        # ALWAYS_COMPATIBLE lets it in, once the owning broker applies it.
        admin.namespaces.set_policy(namespace, "schema-compatibility-strategy", "ALWAYS_COMPATIBLE")
        wait_for(lambda: _created(c, topic, AvroSchema(Bad)), 10, "ALWAYS_COMPATIBLE applied")
        assert admin.schemas.get(topic)["version"] == 1


def test_transitive_strategies_check_every_version(cluster, admin, namespace):
    class A(Record):
        x = Integer(required=True)

    class B(Record):  # x gains a default, y is added with one
        x = Integer(required=True, default=0, required_default=True)
        y = Integer(required=True, default=0, required_default=True)

    class C(Record):  # x dropped: B still reads C's data, A (x without default) does not
        y = Integer(required=True, default=0, required_default=True)

    a, b, c_ = (AvroSchema(_named(k, "Rec")) for k in (A, B, C))
    for strategy, third_registers in (("FORWARD", True), ("FORWARD_TRANSITIVE", False)):
        # Set before the topic is loaded, so its broker applies it from the start.
        admin.namespaces.set_policy(namespace, "schema-compatibility-strategy", strategy)
        topic = _topic(namespace)
        with Client(cluster.service_url) as c:
            c.create_producer(topic, schema=a)
            c.create_producer(topic, schema=b)
            if third_registers:
                c.create_producer(topic, schema=c_)
                assert admin.schemas.get(topic)["version"] == 2
            else:
                with pytest.raises(IncompatibleSchema, match=r"version 0.*'x'"):
                    c.create_producer(topic, schema=c_)
                assert admin.schemas.get(topic)["version"] == 1


def test_auto_update_off_refuses_new_and_schemaless_producers(cluster, admin, namespace):
    V1, V2 = _user(UserV1), _user(UserV2)
    admin.namespaces.set_policy(namespace, "is-allow-auto-update-schema", False)
    topic = _topic(namespace)  # loaded after the policy is set
    with Client(cluster.service_url) as c:
        with pytest.raises(IncompatibleSchema, match="is_allow_auto_update_schema is off"):
            c.create_producer(topic, schema=AvroSchema(V1))  # even the first schema
        with pytest.raises(NotFound):
            admin.schemas.get(topic)
        upload = {"type": "AVRO", "schema": json.dumps(V1.schema()), "properties": {}}
        assert admin.schemas.upload(topic, upload) == {"version": 0}
        c.create_producer(topic, schema=AvroSchema(V1)).send(V1(name="a", age=1))
        with pytest.raises(IncompatibleSchema, match="is_allow_auto_update_schema is off"):
            c.create_producer(topic, schema=AvroSchema(V2))
        # Garbage bytes under the AVRO schema: a BYTES producer is refused.
        with pytest.raises(IncompatibleSchema, match="auto update is off"):
            c.create_producer(topic)
        with pytest.raises(IncompatibleSchema):
            c.create_producer(topic, schema=BytesSchema())
        upload2 = {"type": "AVRO", "schema": json.dumps(V2.schema()), "properties": {}}
        assert admin.schemas.upload(topic, upload2) == {"version": 1}
        c.create_producer(topic, schema=AvroSchema(V2))  # identical to version 1 now
        assert admin.schemas.get(topic)["version"] == 1


def test_a_schemaless_producer_is_let_through_unless_validation_is_enforced(cluster, admin):
    with own_namespace(admin, "plain") as plain_ns, own_namespace(admin, "strict") as strict_ns:
        admin.namespaces.set_policy(strict_ns, "schema-validation-enforce", True)
        for ns, enforced in ((plain_ns, False), (strict_ns, True)):
            topic = _topic(ns)
            with Client(cluster.service_url) as c:
                c.create_producer(topic, schema=StringSchema()).send("typed")
                if enforced:
                    with pytest.raises(IncompatibleSchema, match="schema_validation_enforced"):
                        c.create_producer(topic)
                    continue
                c.create_producer(topic).send(b"raw")
                r = _reader(c, topic, StringSchema())
                assert r.read_next(timeout_millis=10000).value() == "typed"
                raw = r.read_next(timeout_millis=10000)
                assert raw.value() == "raw" and raw.schema_version() == b""


def test_a_consumer_must_read_the_topics_schema(cluster, namespace):
    topic = _topic(namespace)
    V1, Bad = _user(UserV1), _user(UserNeedsScore)
    with Client(cluster.service_url) as c:
        c.create_producer(topic, schema=AvroSchema(V1))
        with pytest.raises(IncompatibleSchema, match="score"):
            c.subscribe(topic, "s", schema=AvroSchema(Bad))
        c.subscribe(topic, "s", schema=AvroSchema(_user(UserV2))).close()


def test_a_value_that_does_not_fit_is_refused_at_send_and_nothing_is_sent(cluster, namespace):
    topic = _topic(namespace)
    V1 = _user(UserV1)
    with Client(cluster.service_url) as c:
        p = c.create_producer(topic, schema=JsonSchema(V1))
        with pytest.raises(InvalidMessage, match="age"):
            p.send({"name": "no age"})
        with pytest.raises(InvalidMessage):
            p.send(b"not a record")
        p.send(V1(name="ok", age=3))
        r = _reader(c, topic, JsonSchema(V1))
        assert r.read_next(timeout_millis=10000).value().name == "ok"
        assert not r.has_message_available()


def test_key_value_separated_and_a_tombstone(cluster, namespace):
    topic = _topic(namespace)
    V1 = _user(UserV1)
    kv = KeyValueSchema(StringSchema(), JsonSchema(V1), KeyValueEncoding.SEPARATED)
    with Client(cluster.service_url) as c:
        p = c.create_producer(topic, schema=kv)
        p.send(("k1", V1(name="kv", age=9)))
        p.send(None, partition_key="k1")  # a tombstone
        r = _reader(c, topic, kv)
        m = r.read_next(timeout_millis=10000)
        assert m.value() == ("k1", V1(name="kv", age=9)) and not m.has_null_value()
        t = r.read_next(timeout_millis=10000)
        assert t.has_null_value() and t.value() is None and t.partition_key() == "k1"
    inline = KeyValueSchema(StringSchema(), StringSchema())
    with Client(cluster.service_url) as c:
        topic2 = _topic(namespace)
        c.create_producer(topic2, schema=inline).send(("a", "b"))
        assert _reader(c, topic2, inline).read_next(timeout_millis=10000).value() == ("a", "b")


def test_schema_admin_bad_input_and_delete(cluster, admin, namespace):
    topic = _topic(namespace)
    with pytest.raises(NotFound):
        admin.schemas.get(topic)
    for bad, words in (
        ({"type": "NOPE", "schema": ""}, "unknown schema type"),
        ({"type": "AVRO", "schema": "{not json"}, "not a valid Avro schema"),
        ({"type": "AVRO", "schema": json.dumps({"type": "record", "name": "R"})}, "fields"),
        ({"schema": ""}, "type"),
    ):
        with pytest.raises(InvalidConfiguration, match=words):
            admin.schemas.upload(topic, bad)
    with pytest.raises(NotFound):
        admin.schemas.get(topic)  # nothing stored
    good = {"type": "STRING", "schema": "", "properties": {"k": "v"}}
    assert admin.schemas.upload(topic, good) == {"version": 0}
    assert admin.schemas.get(topic)["properties"] == {"k": "v"}
    assert admin.schemas.delete(topic) == {"version": 1}
    with pytest.raises(NotFound):
        admin.schemas.get(topic)
    assert admin.schemas.get(topic, 0)["type"] == "STRING"  # old messages keep theirs
    with Client(cluster.service_url) as c:  # after a deletion any schema may start over
        c.create_producer(topic, schema=JsonSchema(_user(UserV1)))
    assert admin.schemas.get(topic)["version"] == 2


def test_an_auto_consume_producer_is_refused(cluster, namespace):
    with Client(cluster.service_url) as c, pytest.raises(InvalidConfiguration, match="consumers"):
        c.create_producer(_topic(namespace), schema=AutoConsumeSchema())
    with Client(cluster.service_url) as c, pytest.raises(InvalidConfiguration, match="schema"):
        c.subscribe(
            _topic(namespace), "s", schema=object(), initial_position=InitialPosition.Latest
        )
