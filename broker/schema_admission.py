"""Which schema version a producer, a consumer or an upload gets on a topic,
and whether a new version is registered (no I/O).

Theory of operation. A topic's schema history is a list of versions, oldest
first; a deletion appends a tombstone (``None``), so version numbers only
grow and a message written under an old version still names the schema it
was written with. The *live* versions are those after the last tombstone.
``BYTES`` (or no schema at all) is Pulsar's "no schema": it never registers.

* **Producer** (:func:`admit_producer`): a schema identical to a live
  version gets that version. Otherwise, with ``is_allow_auto_update_schema``
  on, it is registered when the namespace's compatibility strategy accepts it
  (:func:`broker.schema_compatibility.check`); with it off, or when the
  strategy refuses, the producer gets ``IncompatibleSchema``. A producer
  without a schema on a topic that has one is let through (its messages carry
  no version) unless auto update is off or ``schema_validation_enforced`` is
  on — then it could write bytes the topic's readers cannot decode.
* **Consumer** (:func:`admit_consumer`): registers nothing on a topic that
  has a schema; it must be able to *read* the live versions (the latest, or
  all of them under a _TRANSITIVE strategy), whatever direction the strategy
  checks producers in. On a topic without a schema its schema is registered
  (auto update on), as Pulsar does for a consumer that comes first.
* **Upload** (``schemas upload``, :func:`admit_upload`): an administrator's
  schema is checked like a producer's but auto update does not apply.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from broker.schema_compatibility import (
    RULES,
    Strategy,
    check,
    find_identical,
    validate,
)
from protos.schema_info import SchemaInfo, SchemaType

History = Sequence[SchemaInfo | None]  # None: a deletion


@dataclass(frozen=True)
class Admission:
    """``version`` (None: the client writes or reads without one) and, when
    ``register``, that version is to be stored first. ``refusal`` non-empty:
    refused (IncompatibleSchema), nothing stored."""

    version: int | None = None
    register: bool = False
    refusal: str = ""

    @property
    def refused(self) -> bool:
        return bool(self.refusal)


def live_versions(history: History) -> tuple[int, list[SchemaInfo]]:
    """The first live version number and the live schemas."""
    first = 0
    for i, info in enumerate(history):
        if info is None:
            first = i + 1
    return first, [info for info in history[first:] if info is not None]


def is_schemaless(info: SchemaInfo | None) -> bool:
    return info is None or info.type in (SchemaType.BYTES, SchemaType.NONE)


def admit_producer(
    history: History,
    new: SchemaInfo | None,
    strategy: Strategy,
    auto_update: bool,
    validation_enforced: bool,
) -> Admission:
    first, live = live_versions(history)
    if new is not None:
        validate(new)
    if new is not None and (found := find_identical(new, live)) is not None:
        return Admission(first + found)
    if is_schemaless(new):
        if not live:
            return Admission()
        if validation_enforced or not auto_update:
            why = "schema_validation_enforced" if validation_enforced else "auto update is off"
            return Admission(
                refusal=f"the topic has a {live[-1].type.name} schema (version "
                f"{first + len(live) - 1}) and {why}: a producer without that schema is refused"
            )
        return Admission()
    assert new is not None
    if not auto_update:
        return Admission(
            refusal=f"this {new.type.name} schema is not registered on the topic and "
            "is_allow_auto_update_schema is off: an administrator uploads it (schemas upload)"
        )
    return _register(history, new, strategy, live)


def admit_upload(history: History, new: SchemaInfo, strategy: Strategy) -> Admission:
    first, live = live_versions(history)
    validate(new)
    if (found := find_identical(new, live)) is not None:
        return Admission(first + found)
    return _register(history, new, strategy, live)


def admit_consumer(
    history: History, new: SchemaInfo | None, strategy: Strategy, auto_update: bool
) -> Admission:
    first, live = live_versions(history)
    if is_schemaless(new) or (new is not None and new.type == SchemaType.AUTO_CONSUME):
        return Admission()
    assert new is not None
    validate(new)
    if (found := find_identical(new, live)) is not None:
        return Admission(first + found)
    if not live:
        return Admission(len(history), register=True) if auto_update else Admission()
    if strategy in (Strategy.ALWAYS_COMPATIBLE, Strategy.ALWAYS_INCOMPATIBLE):
        reader_strategy: Strategy = strategy
    elif RULES[strategy].transitive:
        reader_strategy = Strategy.BACKWARD_TRANSITIVE
    else:
        reader_strategy = Strategy.BACKWARD
    verdict = check(reader_strategy, new, live, first)
    if not verdict.compatible:
        return Admission(refusal=verdict.reason)
    return Admission()


def _register(
    history: History, new: SchemaInfo, strategy: Strategy, live: list[SchemaInfo]
) -> Admission:
    first, _ = live_versions(history)
    verdict = check(strategy, new, live, first)
    if not verdict.compatible:
        return Admission(refusal=f"{strategy.name}: {verdict.reason}")
    return Admission(len(history), register=True)
