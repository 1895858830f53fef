"""The Record DSL's field types: what a field accepts, its Avro type, and how
its value turns into an Avro datum and back.

A field checks a value when it is assigned (``check``: ``TypeError`` naming
what was given and what fits), converts it for the wire (``to_datum``: an
enum member becomes its symbol) and rebuilds it from a decoded datum
(``from_datum``: a symbol becomes the member again). ``None`` never reaches
these methods: whether a field may be empty is the record's business
(``required``), checked when a record is encoded.

The containers (``Array``, ``Map``) and nested records live in
``_record.py``, beside the ``Record`` class they need to recognise.
"""

from __future__ import annotations

import copy
import enum
from typing import TYPE_CHECKING, Any, ClassVar

INT_BITS = 32
LONG_BITS = 64
FLOAT32_MAX = 3.4028234663852886e38


def describe(value: object) -> str:
    """A value for an error message: its repr, cut short, and its type."""
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{text} ({type(value).__name__})"


class AvroNames:
    """The named types (records, enums) defined so far in the schema being
    built. Avro defines a name once; later uses refer to it by the full name
    it got where it was defined (a type without a namespace of its own takes
    the enclosing record's, and a short name would be read in the namespace
    in force at the use). ``namespace`` is the one in force now."""

    def __init__(self) -> None:
        self.namespace: str | None = None
        self._fullnames: dict[type, str] = {}
        self._owners: dict[str, type] = {}

    def defined(self, owner: type) -> str | None:
        """The full name ``owner`` was defined under, or None the first time."""
        return self._fullnames.get(owner)

    def define(self, owner: type, name: str, namespace: str | None = None) -> str:
        """Record ``owner``'s definition here; its full name."""
        space = namespace or self.namespace
        fullname = f"{space}.{name}" if space else name
        other = self._owners.setdefault(fullname, owner)
        if other is not owner:
            raise TypeError(
                f"two different types are named {fullname} in one schema "
                f"({other.__qualname__} and {owner.__qualname__})"
            )
        self._fullnames[owner] = fullname
        return fullname


class Field:
    """One field of a :class:`Record`.

    ``default`` is the value a record gets when the field is not given;
    ``required=False`` makes the Avro type a union with ``"null"``;
    ``required_default=True`` writes the default into the Avro schema (what
    a reader of older data fills in).
    """

    avro_name: ClassVar[str] = ""

    def __init__(self, default: Any = None, required: bool = False, required_default: bool = False):
        self._required = bool(required)
        self._required_default = bool(required_default)
        self._default = None if default is None else self.check(default)
        if self._required and self._required_default and self.default() is None:
            raise TypeError(
                f"{type(self).__name__}(required=True, required_default=True) needs a default"
            )

    @property
    def required(self) -> bool:
        return self._required

    @property
    def required_default(self) -> bool:
        return self._required_default

    def default(self) -> Any:
        """A fresh copy of the default, so records never share a list or dict."""
        return copy.deepcopy(self._default)

    def avro_type(self, names: AvroNames) -> object:
        """The Avro type; ``names`` holds the named types already defined in
        the schema being built (a second use refers to them by name)."""
        return self.avro_name

    def check(self, value: Any) -> Any:
        """The value as stored (``value`` is not None); ``TypeError`` if it
        does not fit."""
        raise NotImplementedError

    def to_datum(self, value: Any) -> Any:
        return self.check(value)

    def from_datum(self, datum: Any, strict: bool) -> Any:
        """The value for a decoded datum. ``strict`` refuses record keys the
        record does not declare (a plain decode); otherwise they are dropped
        (a projection onto this reader's fields)."""
        return self.check(datum)

    def default_datum(self) -> Any:
        """The default as the Avro schema writes it."""
        value = self.default()
        return None if value is None else json_form(self.to_datum(value))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(required={self._required})"

    if TYPE_CHECKING:
        # For type checkers only: ``user.name`` is the field's value, not the
        # Field. At run time a record keeps its values in its own __dict__.
        def __get__(self, instance: Any, owner: Any) -> Any: ...

        def __set__(self, instance: Any, value: Any) -> None: ...


def refuse(value: Any, expected: str) -> TypeError:
    return TypeError(f"{describe(value)} is not {expected}")


def json_form(datum: Any) -> Any:
    """A datum as Avro writes it in JSON (schema defaults, JSON payloads):
    bytes become a string of code points 0-255."""
    if isinstance(datum, bytes):
        return datum.decode("latin-1")
    if isinstance(datum, list):
        return [json_form(item) for item in datum]
    if isinstance(datum, dict):
        return {key: json_form(item) for key, item in datum.items()}
    return datum


class Null(Field):
    avro_name = "null"

    def check(self, value: Any) -> Any:
        raise refuse(value, "None (a Null field holds nothing)")


class Boolean(Field):
    avro_name = "boolean"

    def default(self) -> Any:
        return False if self._default is None else self._default

    def check(self, value: Any) -> Any:
        if not isinstance(value, bool):
            raise refuse(value, "a bool")
        return value


class _IntegerField(Field):
    bits: ClassVar[int] = INT_BITS

    def check(self, value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, int):
            raise refuse(value, "an int")
        low, high = -(1 << (self.bits - 1)), (1 << (self.bits - 1)) - 1
        if not low <= value <= high:
            raise TypeError(
                f"{value} does not fit an Avro {self.avro_name} ({self.bits}-bit: {low}..{high})"
            )
        return value


class Integer(_IntegerField):
    avro_name = "int"
    bits = INT_BITS


class Long(_IntegerField):
    avro_name = "long"
    bits = LONG_BITS


class Double(Field):
    avro_name = "double"

    def check(self, value: Any) -> Any:
        # An int is taken as the number it is: JSON writes 2.0 as 2.
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise refuse(value, "a float")
        return float(value)


class Float(Double):
    avro_name = "float"

    def check(self, value: Any) -> Any:
        number = super().check(value)
        if abs(number) > FLOAT32_MAX and abs(number) != float("inf"):
            raise TypeError(f"{number} does not fit an Avro float (32-bit)")
        return number


class Bytes(Field):
    avro_name = "bytes"

    def check(self, value: Any) -> Any:
        if not isinstance(value, bytes | bytearray | memoryview):
            raise refuse(value, "bytes")
        return bytes(value)

    def from_datum(self, datum: Any, strict: bool) -> Any:
        # Avro's JSON form of bytes: a string of code points 0-255.
        if isinstance(datum, str):
            try:
                return datum.encode("latin-1")
            except UnicodeEncodeError:
                raise TypeError("a bytes field in JSON holds only code points 0-255") from None
        return self.check(datum)


class String(Field):
    avro_name = "string"

    def check(self, value: Any) -> Any:
        if not isinstance(value, str):
            raise refuse(value, "a str")
        return value


class CustomEnum(Field):
    """A field holding a member of ``enum_cls`` (the Avro enum of its member
    names). A member's name is accepted in place of the member."""

    def __init__(
        self,
        enum_cls: type[enum.Enum],
        default: Any = None,
        required: bool = False,
        required_default: bool = False,
    ):
        if not (isinstance(enum_cls, type) and issubclass(enum_cls, enum.Enum)):
            raise TypeError(f"CustomEnum takes an Enum class, not {describe(enum_cls)}")
        self.enum_cls = enum_cls
        super().__init__(default, required, required_default)

    def avro_type(self, names: AvroNames) -> object:
        known = names.defined(self.enum_cls)
        if known is not None:
            return known
        name = self.enum_cls.__name__
        names.define(self.enum_cls, name)
        return {"type": "enum", "name": name, "symbols": list(self.enum_cls.__members__)}

    def check(self, value: Any) -> Any:
        if isinstance(value, self.enum_cls):
            return value
        if isinstance(value, str) and value in self.enum_cls.__members__:
            return self.enum_cls.__members__[value]
        symbols = ", ".join(self.enum_cls.__members__)
        raise refuse(value, f"a {self.enum_cls.__name__} (one of {symbols})")

    def to_datum(self, value: Any) -> Any:
        return self.check(value).name

    def __repr__(self) -> str:
        return f"CustomEnum({self.enum_cls.__name__}, required={self._required})"
