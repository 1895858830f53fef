"""``Record``: a class whose attributes declare an Avro record, and the
containers (``Array``, ``Map``) and nested records it can hold.

Declaring: every public class attribute that is a :class:`Field`, an
``Enum`` class (a :class:`CustomEnum`), or a ``Record`` class or instance
(a nested record) is a field, in declaration order; fields of a parent
record come first. An ``Enum`` or ``Record`` class *defined* in the body
(its qualified name is ``Outer.Name``) is a type for other fields to use,
not a field. A record instance used as a field takes the field options as
its constructor's keywords (``Address(required=True)``), as in Pulsar.

Values: a record checks every value assigned to it (``TypeError``) and
refuses names it does not declare (``AttributeError``); ``None`` is always
accepted, and a required field still empty is refused when the record is
encoded (:func:`record_to_datum`, ``InvalidMessage``). The datum of a record
is the plain dict Avro writes; :func:`record_from_datum` rebuilds the
record, nested records as their classes.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from client.exceptions import InvalidMessage
from client.schema._fields import AvroNames, CustomEnum, Field, Null, describe, refuse

# Keywords a record instance takes as a field spec (``Address(required=True)``)
# when the record has no field of that name.
FIELD_OPTIONS = ("default", "required", "required_default")


class Array(Field):
    """A list of ``array_type`` values (a Field, an Enum class, or a Record
    class or instance); the items themselves are never null."""

    def __init__(
        self,
        array_type: Any,
        default: Any = None,
        required: bool = False,
        required_default: bool = False,
    ):
        self.array_type = _field_or_refuse(array_type)
        super().__init__(default, required, required_default)

    def avro_type(self, names: AvroNames) -> object:
        return {"type": "array", "items": self.array_type.avro_type(names)}

    def check(self, value: Any) -> Any:
        return self._each(value, self.array_type.check)

    def to_datum(self, value: Any) -> Any:
        return self._each(value, self.array_type.to_datum)

    def from_datum(self, datum: Any, strict: bool) -> Any:
        return self._each(datum, lambda item: self.array_type.from_datum(item, strict))

    def _each(self, value: Any, convert: Callable[[Any], Any]) -> list[Any]:
        if not isinstance(value, list | tuple):
            raise refuse(value, "a list")
        out = []
        for index, item in enumerate(value):
            if item is None:
                raise TypeError(f"item {index} is None; array items cannot be null")
            out.append(convert(item))
        return out


class Map(Field):
    """A dict of str keys to ``value_type`` values (never null)."""

    def __init__(
        self,
        value_type: Any,
        default: Any = None,
        required: bool = False,
        required_default: bool = False,
    ):
        self.value_type = _field_or_refuse(value_type)
        super().__init__(default, required, required_default)

    def avro_type(self, names: AvroNames) -> object:
        return {"type": "map", "values": self.value_type.avro_type(names)}

    def check(self, value: Any) -> Any:
        return self._each(value, self.value_type.check)

    def to_datum(self, value: Any) -> Any:
        return self._each(value, self.value_type.to_datum)

    def from_datum(self, datum: Any, strict: bool) -> Any:
        return self._each(datum, lambda item: self.value_type.from_datum(item, strict))

    def _each(self, value: Any, convert: Callable[[Any], Any]) -> dict[str, Any]:
        if not isinstance(value, Mapping):
            raise refuse(value, "a dict")
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"map key {describe(key)} is not a str")
            if item is None:
                raise TypeError(f"the value of map key {key!r} is None; map values cannot be null")
            out[key] = convert(item)
        return out


class RecordField(Field):
    """A field holding a nested record of ``record_cls``. A dict of its
    fields is accepted in place of the record and built into one."""

    def __init__(
        self,
        record_cls: type[Record],
        default: Any = None,
        required: bool = False,
        required_default: bool = False,
    ):
        self.record_cls = record_cls
        super().__init__(default, required, required_default)

    def avro_type(self, names: AvroNames) -> object:
        return self.record_cls._avro_record(names)

    def check(self, value: Any) -> Any:
        if isinstance(value, self.record_cls):
            return value
        if isinstance(value, Mapping):
            return self.record_cls(**value)
        raise refuse(value, f"a {self.record_cls.__name__} record")

    def to_datum(self, value: Any) -> Any:
        return record_to_datum(self.record_cls, value)

    def from_datum(self, datum: Any, strict: bool) -> Any:
        return record_from_datum(self.record_cls, datum, strict)

    def __repr__(self) -> str:
        return f"RecordField({self.record_cls.__name__}, required={self.required})"


def is_record_class(value: Any) -> bool:
    return isinstance(value, type) and issubclass(value, Record)


def as_field(value: Any) -> Field | None:
    """The field a class attribute or a container's item type declares, or
    None when it declares none."""
    if isinstance(value, Field):
        return value
    if isinstance(value, type) and issubclass(value, enum.Enum):
        return CustomEnum(value)
    if is_record_class(value):
        return RecordField(value)
    if isinstance(value, Record):
        return RecordField(type(value), **value._field_options)
    return None


def _field_or_refuse(value: Any) -> Field:
    field = as_field(value)
    if field is None:
        raise TypeError(
            f"{describe(value)} is not a field type (a Field, an Enum class, or a Record)"
        )
    return field


class Record:
    """The base of schema records; see the module docstring for the rules.

    ``_avro_namespace`` sets the Avro namespace; ``_sorted_fields = True``
    lists the fields in the schema by name instead of declaration order.
    """

    _fields: ClassVar[dict[str, Field]] = {}
    _avro_namespace: ClassVar[str | None] = None
    _sorted_fields: ClassVar[bool] = False
    _field_options: dict[str, Any]  # set by __init__: this instance as a field spec

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        fields = dict(cls._fields)  # the parent record's, first
        for name, value in list(vars(cls).items()):
            if name.startswith("_") or _defined_inside(cls, name, value):
                continue
            field = as_field(value)
            if field is not None:
                fields[name] = field
                setattr(cls, name, field)
        cls._fields = fields

    def __init__(self, **values: Any) -> None:
        fields = type(self)._fields
        options = {k: values.pop(k) for k in FIELD_OPTIONS if k in values and k not in fields}
        object.__setattr__(self, "_field_options", options)
        for name, field in fields.items():
            object.__setattr__(self, name, field.default())
        for name, value in values.items():
            setattr(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        cls = type(self)
        field = cls._fields.get(name)
        if field is None:
            known = ", ".join(cls._fields) or "none"
            raise AttributeError(f"{cls.__name__} has no field {name!r} (its fields: {known})")
        if value is not None:
            try:
                value = field.check(value)
            except TypeError as exc:
                raise TypeError(f"{cls.__name__}.{name}: {exc}") from None
        object.__setattr__(self, name, value)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Record):
            return NotImplemented
        return type(self) is type(other) and all(
            getattr(self, name) == getattr(other, name) for name in self._fields
        )

    __hash__ = None  # type: ignore[assignment]  # mutable, like a dict

    def __repr__(self) -> str:
        values = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields)
        return f"{type(self).__name__}({values})"

    @classmethod
    def schema(cls) -> dict[str, Any]:
        """The Avro record schema this class declares, as a dict."""
        result = cls._avro_record(AvroNames())
        assert isinstance(result, dict)  # a fresh schema defines the record
        return result

    @classmethod
    def _avro_record(cls, names: AvroNames) -> object:
        """The record's definition, or its full name when ``names`` shows it
        is already defined (Avro allows a named type to be defined once)."""
        known = names.defined(cls)
        if known is not None:
            return known
        fullname = names.define(cls, cls.__name__, cls._avro_namespace)
        definition: dict[str, Any] = {"type": "record", "name": cls.__name__}
        if cls._avro_namespace:
            definition["namespace"] = cls._avro_namespace
        fields = sorted(cls._fields.items()) if cls._sorted_fields else cls._fields.items()
        outer, names.namespace = names.namespace, fullname.rpartition(".")[0] or None
        try:
            definition["fields"] = [_field_entry(name, field, names) for name, field in fields]
        finally:
            names.namespace = outer
        return definition


def _defined_inside(cls: type, name: str, value: Any) -> bool:
    """A class statement in ``cls``'s body (``class Status(Enum)``): a type
    for fields to use, not a field. ``status = Status`` is a field."""
    if not isinstance(value, type) or name != value.__name__:
        return False
    return value.__qualname__ == f"{cls.__qualname__}.{name}"


def _field_entry(name: str, field: Field, names: AvroNames) -> dict[str, Any]:
    """One entry of a record's ``fields``. A field that may be empty is the
    union with null; its default goes first in the union, as Avro requires
    a union's default to match the union's first type."""
    avro = field.avro_type(names)
    entry: dict[str, Any] = {"name": name, "type": avro}
    if isinstance(field, Null):
        if not field.required:
            entry["default"] = None
        return entry
    if field.required:
        if field.required_default:
            entry["default"] = field.default_datum()
        return entry
    default = field.default_datum() if field.required_default else None
    entry["type"] = ["null", avro] if default is None else [avro, "null"]
    entry["default"] = default
    return entry


def _required_but_empty(field: Field) -> bool:
    return field.required and not isinstance(field, Null)


def _field_error(name: str, exc: Exception) -> InvalidMessage:
    """The error for one field, its name first: a nested record's error
    already starts with the inner field's name, so the two are joined by a
    dot (``address.street: ...``)."""
    sep = "." if isinstance(exc, InvalidMessage) else ": "
    return InvalidMessage(f"{name}{sep}{exc}")


def record_to_datum(record_cls: type[Record], value: Any) -> dict[str, Any]:
    """The Avro datum of a record, or of a dict of its fields (a field not
    given takes its default); ``InvalidMessage`` names the first field that
    does not fit, or a required field with no value."""
    fields = record_cls._fields
    if isinstance(value, record_cls):
        values = {name: getattr(value, name) for name in fields}
    elif isinstance(value, Mapping):
        unknown = sorted(str(key) for key in value if key not in fields)
        if unknown:
            raise InvalidMessage(f"{', '.join(unknown)}: not a field of {record_cls.__name__}")
        values = {name: value.get(name, field.default()) for name, field in fields.items()}
    else:
        raise InvalidMessage(
            f"{describe(value)} is not a {record_cls.__name__} (nor a dict of its fields)"
        )
    datum: dict[str, Any] = {}
    for name, field in fields.items():
        item = values[name]
        if item is None:
            if _required_but_empty(field):
                raise InvalidMessage(f"{name}: required, and has no value")
            datum[name] = None
            continue
        try:
            datum[name] = field.to_datum(item)
        except (TypeError, AttributeError, InvalidMessage) as exc:
            raise _field_error(name, exc) from None
    return datum


def record_from_datum(record_cls: type[Record], datum: Any, strict: bool) -> Record:
    """The record a decoded datum describes. A field the datum lacks takes
    its default; keys it has that the record does not declare are refused
    when ``strict``, dropped otherwise (a projection onto this record)."""
    if not isinstance(datum, Mapping):
        raise InvalidMessage(f"{describe(datum)} is not a {record_cls.__name__} record")
    fields = record_cls._fields
    if strict:
        unknown = sorted(str(key) for key in datum if key not in fields)
        if unknown:
            raise InvalidMessage(f"{', '.join(unknown)}: not a field of {record_cls.__name__}")
    values: dict[str, Any] = {}
    for name, field in fields.items():
        item = datum.get(name)
        if item is None:
            values[name] = field.default() if name not in datum else None
            if values[name] is None and _required_but_empty(field):
                raise InvalidMessage(f"{name}: required, and has no value")
            continue
        try:
            values[name] = field.from_datum(item, strict)
        except (TypeError, AttributeError, InvalidMessage) as exc:
            raise _field_error(name, exc) from None
    return record_cls(**values)
