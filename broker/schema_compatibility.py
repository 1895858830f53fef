"""Whether a new schema may be registered on a topic, as Pulsar's schema
registry decides it (no I/O).

Theory of operation. A topic's schemas are versions 0, 1, … oldest first.
Producers and consumers on different versions share the topic, so a new
version must be *compatible* under the topic's
:class:`SchemaCompatibilityStrategy`. :func:`check` decides in this order:

1. The new definition must be valid (Avro for AVRO and JSON, a well-formed
   KEY_VALUE pair); if not, the request is bad: :class:`InvalidArgumentError`,
   whatever the strategy.
2. No version yet: compatible.
3. A schema identical to a registered version (:func:`find_identical`) is not
   new: compatible under every strategy, ALWAYS_INCOMPATIBLE included (the
   registry hands back that version).
4. ALWAYS_COMPATIBLE: compatible; ALWAYS_INCOMPATIBLE: incompatible.
5. The other strategies compare against the latest version, or against every
   version (newest first) for the _TRANSITIVE forms (:data:`RULES`):

   * a different schema type is incompatible;
   * AVRO and JSON resolve the definitions (``broker.avro_resolution``):
     BACKWARD — the new schema reads data written with the old one (consumers
     upgrade first); FORWARD — the old one reads data written with the new
     (producers upgrade first); FULL — both;
   * KEY_VALUE checks its key part and its value part each, by their own
     types (the ``key.schema.type`` / ``value.schema.type`` properties;
     BYTES when absent, as Pulsar reads schemas from before those
     properties); the encoding (INLINE / SEPARATED) may change;
   * every other type (primitives, PROTOBUF, PROTOBUF_NATIVE) has no
     field-level check (Pulsar's default checker): only the same definition
     bytes are compatible.

A version already registered whose definition no longer parses is
incompatible with anything new (the reason says why), not a bad request.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from broker import avro_resolution
from broker.avro_resolution import Mismatch, MismatchKind
from protos.errors import InvalidArgumentError
from protos.schema_info import (
    AVRO_DEFINED,
    KV_ENCODING,
    KV_ENCODINGS,
    STORABLE,
    SchemaInfo,
    SchemaType,
    schema_type_of,
    split_key_value,
)

# The parts of a KEY_VALUE schema; Pulsar keeps each part's type, name and
# properties (as JSON) under ``<part>.schema.type``, ``.name``, ``.properties``.
KV_PARTS = ("key", "value")


class SchemaCompatibilityStrategy(Enum):
    """Pulsar's names (``SchemaCompatibilityStrategy``)."""

    ALWAYS_INCOMPATIBLE = "ALWAYS_INCOMPATIBLE"
    ALWAYS_COMPATIBLE = "ALWAYS_COMPATIBLE"
    BACKWARD = "BACKWARD"
    FORWARD = "FORWARD"
    FULL = "FULL"
    BACKWARD_TRANSITIVE = "BACKWARD_TRANSITIVE"
    FORWARD_TRANSITIVE = "FORWARD_TRANSITIVE"
    FULL_TRANSITIVE = "FULL_TRANSITIVE"


Strategy = SchemaCompatibilityStrategy
DEFAULT_STRATEGY = Strategy.BACKWARD

# The older namespace policy (``SchemaAutoUpdateCompatibilityStrategy``).
LEGACY_NAMES: dict[str, Strategy] = {
    "AutoUpdateDisabled": Strategy.ALWAYS_INCOMPATIBLE,
    "AlwaysCompatible": Strategy.ALWAYS_COMPATIBLE,
    "Backward": Strategy.BACKWARD,
    "Forward": Strategy.FORWARD,
    "Full": Strategy.FULL,
    "BackwardTransitive": Strategy.BACKWARD_TRANSITIVE,
    "ForwardTransitive": Strategy.FORWARD_TRANSITIVE,
    "FullTransitive": Strategy.FULL_TRANSITIVE,
}
_BY_NAME = {s.name: s for s in Strategy} | {k.upper(): v for k, v in LEGACY_NAMES.items()}


def strategy_of(text: str) -> Strategy:
    """A strategy from Pulsar's name or its older one, in any case."""
    found = _BY_NAME.get(text.strip().upper())
    if found is None:
        raise InvalidArgumentError(
            f"unknown schema compatibility strategy {text!r}; the strategies are "
            f"{', '.join(s.name for s in Strategy)} (or the older names "
            f"{', '.join(LEGACY_NAMES)})"
        )
    return found


@dataclass(frozen=True)
class Rule:
    new_reads_old: bool  # BACKWARD: the new schema reads what old producers wrote
    old_reads_new: bool  # FORWARD: old consumers read what the new schema writes
    transitive: bool  # against every version, not only the latest


RULES: dict[Strategy, Rule] = {
    Strategy.BACKWARD: Rule(new_reads_old=True, old_reads_new=False, transitive=False),
    Strategy.FORWARD: Rule(new_reads_old=False, old_reads_new=True, transitive=False),
    Strategy.FULL: Rule(new_reads_old=True, old_reads_new=True, transitive=False),
    Strategy.BACKWARD_TRANSITIVE: Rule(new_reads_old=True, old_reads_new=False, transitive=True),
    Strategy.FORWARD_TRANSITIVE: Rule(new_reads_old=False, old_reads_new=True, transitive=True),
    Strategy.FULL_TRANSITIVE: Rule(new_reads_old=True, old_reads_new=True, transitive=True),
}


@dataclass(frozen=True)
class Compatibility:
    compatible: bool
    reason: str = ""  # empty when compatible
    version: int | None = None  # the registered version it breaks against


COMPATIBLE = Compatibility(True)


def check(
    strategy: Strategy,
    new: SchemaInfo,
    existing: Sequence[SchemaInfo],
    first_version: int = 0,
) -> Compatibility:
    """Whether ``new`` may be registered on a topic whose versions are
    ``existing`` (oldest first, numbered from ``first_version``); see the
    module doc for the order of rules."""
    validate(new)
    if not existing or find_identical(new, existing) is not None:
        return COMPATIBLE
    latest = len(existing) - 1
    if strategy is Strategy.ALWAYS_COMPATIBLE:
        return COMPATIBLE
    if strategy is Strategy.ALWAYS_INCOMPATIBLE:
        reason = (
            "the topic's schema compatibility strategy is ALWAYS_INCOMPATIBLE: "
            "no schema other than a registered one is accepted"
        )
        return Compatibility(False, reason, first_version + latest)
    rule = RULES[strategy]
    for index in range(latest, -1, -1) if rule.transitive else (latest,):
        version = first_version + index
        reason = _against(rule, new, existing[index], version)
        if reason:
            return Compatibility(False, reason, version)
    return COMPATIBLE


def find_identical(new: SchemaInfo, existing: Sequence[SchemaInfo]) -> int | None:
    """The newest registered version identical to ``new``, or None.

    Identical is Pulsar's schema hash: the same type and definition bytes
    (names and other properties do not count); for KEY_VALUE also the same
    part types and encoding, which Pulsar keeps in the properties and which
    change how the same bytes are read."""
    wanted = _identity(new)
    for version in range(len(existing) - 1, -1, -1):
        if _identity(existing[version]) == wanted:
            return version
    return None


def _identity(info: SchemaInfo) -> tuple[object, ...]:
    if info.type in AVRO_DEFINED:
        # The same Avro JSON however it is spaced or its keys ordered (an
        # upload written by hand is the SDK's schema in another layout).
        return (info.type, _canonical_json(info.schema))
    if info.type is not SchemaType.KEY_VALUE:
        return (info.type, info.schema)
    props = info.properties
    return (
        info.type,
        info.schema,
        *((props.get(f"{part}.schema.type") or "BYTES").upper() for part in KV_PARTS),
        (props.get(KV_ENCODING) or "INLINE").upper(),
    )


def _canonical_json(definition: bytes) -> object:
    try:
        return json.dumps(json.loads(definition), sort_keys=True, separators=(",", ":"))
    except ValueError:
        return definition  # not JSON: validate() refuses it before anything compares it


def validate(info: SchemaInfo, what: str = "the new schema") -> None:
    """Raise :class:`InvalidArgumentError` naming the problem when ``info``
    cannot be registered as it is (whatever it would be compared with)."""
    if info.type not in STORABLE:
        raise InvalidArgumentError(
            f"{what} has type {info.type.name}, which only clients use; register "
            "the schema of the producer's data"
        )
    if info.type in AVRO_DEFINED:
        avro_resolution.parse(info.schema, what)
    elif info.type is SchemaType.KEY_VALUE:
        for part, schema in zip(KV_PARTS, key_value_parts(info, what), strict=True):
            validate(schema, f"{what} ({part})")


def key_value_parts(info: SchemaInfo, what: str = "the schema") -> tuple[SchemaInfo, SchemaInfo]:
    """The key's and the value's schemas of a KEY_VALUE schema."""
    props = info.properties
    try:
        datas = split_key_value(info.schema)
    except InvalidArgumentError as exc:
        raise InvalidArgumentError(f"{what}: {exc.message}") from None
    encoding = props.get(KV_ENCODING)
    if encoding is not None and encoding.upper() not in KV_ENCODINGS:
        raise InvalidArgumentError(
            f"{what}: {KV_ENCODING} is {encoding!r}; it is one of {', '.join(KV_ENCODINGS)}"
        )
    parts = []
    for part, data in zip(KV_PARTS, datas, strict=True):
        type_name = props.get(f"{part}.schema.type") or "BYTES"
        try:
            part_type = schema_type_of(type_name)
            part_props = json.loads(props.get(f"{part}.schema.properties") or "{}")
        except (InvalidArgumentError, ValueError) as exc:
            raise InvalidArgumentError(f"{what}: the {part} schema: {exc}") from None
        if not isinstance(part_props, dict):
            raise InvalidArgumentError(f"{what}: {part}.schema.properties is not a JSON object")
        name = props.get(f"{part}.schema.name", "")
        parts.append(SchemaInfo(part_type, name, data, {k: str(v) for k, v in part_props.items()}))
    return parts[0], parts[1]


def _against(rule: Rule, new: SchemaInfo, old: SchemaInfo, version: int) -> str:
    """Why ``new`` breaks ``rule`` against registered version ``version``
    (``old``); empty when it does not."""
    if new.type != old.type:
        return (
            f"schema type changed from {old.type.name} (version {version}) to "
            f"{new.type.name}; only ALWAYS_COMPATIBLE allows a new type"
        )
    if new.type is SchemaType.KEY_VALUE:
        try:
            old_parts = key_value_parts(old, f"version {version}")
        except InvalidArgumentError as exc:
            return f"{exc.message}, so nothing can be checked against it"
        for part, new_part, old_part in zip(KV_PARTS, key_value_parts(new), old_parts, strict=True):
            reason = _against(rule, new_part, old_part, version)
            if reason:
                return f"{part}: {reason}"
        return ""
    if new.type in AVRO_DEFINED:
        return _avro_against(rule, new.schema, old.schema, version)
    if new.schema != old.schema:
        return (
            f"the {new.type.name} definition changed from version {version}, and "
            f"{new.type.name} has no field-level compatibility check: only the same "
            "definition is compatible"
        )
    return ""


def _avro_against(rule: Rule, new_definition: bytes, old_definition: bytes, version: int) -> str:
    new = avro_resolution.parse(new_definition, "the new schema")
    try:
        old = avro_resolution.parse(old_definition, f"version {version}")
    except InvalidArgumentError as exc:
        return f"{exc.message}, so nothing can be checked against it"
    if rule.new_reads_old:
        found = avro_resolution.reader_mismatch(reader=new, writer=old)
        if found is not None:
            return (
                f"the new schema cannot read data written with version {version}: "
                f"{explain(found, reader_is_new=True, version=version)}"
            )
    if rule.old_reads_new:
        found = avro_resolution.reader_mismatch(reader=old, writer=new)
        if found is not None:
            return (
                f"version {version} cannot read data written with the new schema: "
                f"{explain(found, reader_is_new=False, version=version)}"
            )
    return ""


def explain(mismatch: Mismatch, reader_is_new: bool, version: int) -> str:
    """A resolution mismatch in the words of a schema change (``version``
    is the registered schema on the other side)."""
    where = f"field '{mismatch.path}'" if mismatch.path else "the top-level type"
    match mismatch.kind:
        case MismatchKind.TYPE:
            return f"{where}: writer type '{mismatch.writer}' cannot be read as '{mismatch.reader}'"
        case MismatchKind.MISSING_FIELD if reader_is_new:
            return f"{where} was added without a default"
        case MismatchKind.MISSING_FIELD:
            return f"{where} was removed but has no default in version {version}"
        case MismatchKind.MISSING_SYMBOL if reader_is_new:
            return (
                f"{where}: symbol '{mismatch.writer}' was removed from enum "
                f"'{mismatch.reader}', which has no default"
            )
        case MismatchKind.MISSING_SYMBOL:
            return (
                f"{where}: symbol '{mismatch.writer}' was added to enum '{mismatch.reader}', "
                f"which has no default in version {version}"
            )
        case MismatchKind.TOO_DEEP:
            return (
                f"{where}: the schemas nest deeper than {avro_resolution.DEPTH_MAX} levels, "
                "where the check stops"
            )
    raise AssertionError(f"unexplained mismatch {mismatch}")
