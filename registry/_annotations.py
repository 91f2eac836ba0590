"""Reading annotations: the shapes ``define_tool`` knows and the typed values it converts.

A *typed value* is a Python value whose JSON form is a string (or, for a
``Decimal`` argument, a number too): ``datetime``, ``date``, ``time``, ``UUID``,
``Decimal`` and the ``pathlib`` paths. Each has one JSON Schema per direction
(arguments are validated, results serialised) and a ``format`` where JSON Schema
has one. Records are TypedDicts, dataclasses and pydantic models; pydantic is
never imported here, only recognised once the program has imported it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import sys
import types
import typing
import uuid
from collections.abc import Mapping, MutableMapping, MutableSequence, Sequence
from decimal import Decimal
from pathlib import PurePath
from typing import Annotated, Any, ForwardRef, NotRequired, Required, Union, get_args, get_origin

__all__ = [
    "ARRAYS",
    "DECIMAL_PATTERN",
    "OBJECTS",
    "SETS",
    "UNIONS",
    "is_any_json",
    "is_dataclass_type",
    "is_enum",
    "is_model",
    "leaf_kind",
    "leaf_schema",
    "scalar",
    "strip",
]

_SCALARS: tuple[tuple[object, str], ...] = (
    (str, "string"),
    (bool, "boolean"),
    (int, "integer"),
    (float, "number"),
    (None, "null"),
    (type(None), "null"),
)
ARRAYS = (list, Sequence, MutableSequence)
OBJECTS = (dict, Mapping, MutableMapping)
UNIONS = (Union, types.UnionType)
SETS = (set, frozenset, typing.AbstractSet, typing.MutableSet)

#: A decimal number as a string, in plain notation (no exponent, no NaN or infinities).
DECIMAL_PATTERN = r"^-?\d+(\.\d+)?$"

# (base class, kind); ``datetime`` before ``date``, of which it is a subclass.
_LEAVES: tuple[tuple[type, str], ...] = (
    (dt.datetime, "datetime"),
    (dt.date, "date"),
    (dt.time, "time"),
    (uuid.UUID, "uuid"),
    (Decimal, "decimal"),
    (PurePath, "path"),
)
_FORMATS = {
    "datetime": "date-time",
    "date": "date",
    "time": "time",
    "uuid": "uuid",
    "path": "path",
}


def strip(tp: Any) -> Any:
    """``tp`` without ``Annotated``, ``Required``/``NotRequired`` and ``NewType`` layers."""
    while True:
        origin = get_origin(tp)
        if origin is Annotated or origin is Required or origin is NotRequired:
            tp = get_args(tp)[0]
        elif isinstance(tp, typing.NewType):
            tp = tp.__supertype__
        else:
            return tp


def scalar(tp: object) -> str | None:
    """The JSON type of a plain scalar annotation (``str``, ``int``, ``None``…), if it is one."""
    for python, json_type in _SCALARS:
        if tp is python:
            return json_type
    return None


def is_enum(tp: object) -> typing.TypeGuard[type[enum.Enum]]:
    return isinstance(tp, type) and issubclass(tp, enum.Enum)


def leaf_kind(tp: object) -> str | None:
    """``"datetime"``, ``"date"``, ``"time"``, ``"uuid"``, ``"decimal"``, ``"path"`` or ``None``."""
    if not isinstance(tp, type) or issubclass(tp, enum.Enum):
        return None
    for base, kind in _LEAVES:
        if issubclass(tp, base):
            return kind
    return None


def leaf_schema(kind: str, *, serialization: bool) -> dict[str, Any]:
    """The JSON Schema of a typed value, for an argument or (``serialization``) a result."""
    if kind == "decimal":
        # A result is always the exact string ("12.50", never 12.5 or "1.25E+1"); an
        # argument may also be a JSON number, read through its shortest repr
        # (0.1 -> Decimal("0.1")), since models and programs write prices as numbers.
        return {
            "type": "string" if serialization else ["number", "string"],
            "pattern": DECIMAL_PATTERN,
        }
    return {"type": "string", "format": _FORMATS[kind]}


def is_dataclass_type(tp: object) -> typing.TypeGuard[type]:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


def is_model(tp: object) -> bool:
    """Whether ``tp`` is a pydantic (v2) model class, without importing pydantic.

    A model class can only exist once ``pydantic.main`` has been imported, so a
    program that never imported pydantic has none.
    """
    main = sys.modules.get("pydantic.main")
    base = getattr(main, "BaseModel", None) if main is not None else None
    return isinstance(tp, type) and isinstance(base, type) and issubclass(tp, base)


def is_any_json(tp: object) -> bool:
    """Whether ``tp`` is "any JSON value": ``Any``, ``object`` or a JsonValue-like union.

    A recursive alias such as ``registry.JsonValue`` resolves to a union of the
    seven JSON kinds whose containers end in unresolved ``ForwardRef``s.
    """
    if tp is Any or tp is object or isinstance(tp, ForwardRef):
        return True
    if get_origin(tp) not in UNIONS:
        return False
    kinds: set[str] = set()
    for member in get_args(tp):
        origin, args = get_origin(member), get_args(member)
        kind = scalar(member)
        if kind is not None:
            kinds.add(kind)
        elif origin in OBJECTS and len(args) == 2 and args[0] is str and is_any_json(args[1]):
            kinds.add("object")
        elif origin in ARRAYS and len(args) == 1 and is_any_json(args[0]):
            kinds.add("array")
        else:
            return False
    return kinds >= {"string", "boolean", "integer", "number", "null", "object", "array"}
