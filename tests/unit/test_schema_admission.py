"""Which version a producer, consumer or upload gets, and what is registered
(broker/schema_admission.py): one table per role over hand-made histories."""

from __future__ import annotations

import json

import pytest

from broker.schema_admission import (
    Admission,
    admit_consumer,
    admit_producer,
    admit_upload,
    live_versions,
)
from broker.schema_compatibility import Strategy
from protos.errors import InvalidArgumentError
from protos.schema_info import SchemaInfo, SchemaType


def avro(*fields: tuple[str, str, object]) -> SchemaInfo:
    """An AVRO record R with (name, type, default) fields (default ... = none)."""
    doc = {
        "type": "record",
        "name": "R",
        "fields": [
            {"name": n, "type": t, **({} if d is ... else {"default": d})} for n, t, d in fields
        ],
    }
    return SchemaInfo(SchemaType.AVRO, "R", json.dumps(doc).encode())


V1 = avro(("a", "int", ...))
V2 = avro(("a", "int", ...), ("b", "string", "x"))  # b added with a default
NEEDS_C = avro(("a", "int", ...), ("c", "long", ...))  # c added without one
STRING = SchemaInfo(SchemaType.STRING, "STRING")
BYTES = SchemaInfo(SchemaType.BYTES, "BYTES")
B, C = Strategy.BACKWARD, Strategy.ALWAYS_COMPATIBLE

# (case, history, new schema, strategy, auto update, validation enforced,
#  expected version, registered, refusal contains)
PRODUCER_CASES = [
    ("no schema on a topic without one", [], None, B, True, False, None, False, ""),
    ("BYTES counts as no schema", [], BYTES, B, True, False, None, False, ""),
    ("the first schema registers as 0", [], V1, B, True, False, 0, True, ""),
    ("an identical schema reuses its version", [V1, V2], V1, B, True, False, 0, False, ""),
    ("a compatible one registers next", [V1], V2, B, True, False, 1, True, ""),
    ("a field without a default is refused", [V1], NEEDS_C, B, True, False, None, False, "'c'"),
    ("ALWAYS_COMPATIBLE takes anything", [V1], NEEDS_C, C, True, False, 1, True, ""),
    ("a type change is refused", [V1], STRING, B, True, False, None, False, "type changed"),
    ("auto update off: new refused", [V1], V2, B, False, False, None, False, "auto_update"),
    ("auto update off: even the first", [], V1, B, False, False, None, False, "auto_update"),
    ("auto update off: registered ok", [V1], V1, B, False, False, 0, False, ""),
    ("no schema, topic has one: let in", [V1], None, B, True, False, None, False, ""),
    ("no schema, auto update off", [V1], None, B, False, False, None, False, "auto update"),
    ("no schema, validation enforced", [V1], BYTES, B, True, True, None, False, "enforced"),
    ("after a deletion anything starts", [V1, None], STRING, B, True, False, 2, True, ""),
    ("a deleted version is not reused", [V1, None], V1, B, True, False, 2, True, ""),
    ("numbers after a deletion", [STRING, None, V1], NEEDS_C, B, True, False, None, False, "2"),
]


@pytest.mark.parametrize(
    "history, new, strategy, auto, enforced, version, registered, refusal",
    [c[1:] for c in PRODUCER_CASES],
    ids=[c[0] for c in PRODUCER_CASES],
)
def test_producer_admission(history, new, strategy, auto, enforced, version, registered, refusal):
    got = admit_producer(history, new, strategy, auto, enforced)
    assert (got.version, got.register) == (version, registered)
    assert refusal in got.refusal if refusal else not got.refused


# (case, history, consumer schema, strategy, auto update, version, registered, refusal)
CONSUMER_CASES = [
    ("no schema reads anything", [V1], None, B, True, None, False, ""),
    (
        "AUTO_CONSUME reads anything",
        [V1],
        SchemaInfo(SchemaType.AUTO_CONSUME),
        B,
        True,
        None,
        False,
        "",
    ),
    ("its own version", [V1, V2], V2, B, True, 1, False, ""),
    ("a newer reader reads the latest", [V1], V2, B, True, None, False, ""),
    ("an older reader of the latest", [V2], V1, B, True, None, False, ""),
    ("a reader needing a field", [V1], NEEDS_C, B, True, None, False, "'c'"),
    ("first on the topic registers", [], V1, B, True, 0, True, ""),
    ("first, auto update off: nothing", [], V1, B, False, None, False, ""),
    ("forward strategies still read", [V1], NEEDS_C, Strategy.FORWARD, True, None, False, "'c'"),
]


@pytest.mark.parametrize(
    "history, new, strategy, auto, version, registered, refusal",
    [c[1:] for c in CONSUMER_CASES],
    ids=[c[0] for c in CONSUMER_CASES],
)
def test_consumer_admission(history, new, strategy, auto, version, registered, refusal):
    got = admit_consumer(history, new, strategy, auto)
    assert (got.version, got.register) == (version, registered)
    assert refusal in got.refusal if refusal else not got.refused


def test_an_upload_ignores_auto_update_but_not_the_strategy():
    assert admit_upload([V1], V2, B) == Admission(1, register=True)
    assert admit_upload([V1], V1, B) == Admission(0)
    assert "'c'" in admit_upload([V1], NEEDS_C, B).refusal


def test_an_invalid_definition_is_a_bad_request_not_an_incompatibility():
    broken = SchemaInfo(SchemaType.AVRO, "R", b"{not json")
    for call in (
        lambda: admit_producer([], broken, B, True, False),
        lambda: admit_consumer([V1], broken, B, True),
        lambda: admit_upload([], broken, B),
    ):
        with pytest.raises(InvalidArgumentError):
            call()


def test_live_versions_start_after_the_last_deletion():
    assert live_versions([V1, None, V2, STRING]) == (2, [V2, STRING])
    assert live_versions([V1, None]) == (2, [])
    assert live_versions([]) == (0, [])
