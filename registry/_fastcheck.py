"""A fast acceptance check for the plain JSON Schema shapes most tools use.

Validation is owned by ``jsonschema``. This module only *compiles* a schema
made of a small, fully understood keyword set (``type``, ``properties``,
``required``, ``items``, ``enum``, ``const``, ``additionalProperties``, ``anyOf``
and pure annotations) into a predicate that answers "certainly valid". Anything else —
an unknown keyword, a failing value — goes to ``jsonschema``, which decides and
explains. A differential property test holds the two together.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["compile_fast_check"]

Check = Callable[[Any], bool]

_ANNOTATIONS = frozenset(
    {
        "title",
        "description",
        "default",
        "examples",
        "$comment",
        "deprecated",
        "readOnly",
        "writeOnly",
        "$schema",
        "$id",
        # An annotation too: the registry's validators run without a format checker.
        "format",
    }
)
#: Dialects in which the handled keywords mean exactly what they mean in 2020-12.
_SAME_DIALECTS = frozenset(
    {
        "https://json-schema.org/draft/2020-12/schema",
        "https://json-schema.org/draft/2019-09/schema",
        "http://json-schema.org/draft-07/schema#",
        "http://json-schema.org/draft-07/schema",
        "http://json-schema.org/draft-06/schema#",
        "http://json-schema.org/draft-06/schema",
    }
)
_HANDLED = _ANNOTATIONS | {
    "type",
    "properties",
    "required",
    "items",
    "enum",
    "const",
    "additionalProperties",
    "anyOf",
}


def _is_integer(v: Any) -> bool:
    t = type(v)
    return t is int or (t is float and v.is_integer())


_TYPE_CHECKS: dict[str, Check] = {
    "string": lambda v: type(v) is str,
    "integer": _is_integer,
    "number": lambda v: type(v) is int or type(v) is float,
    "boolean": lambda v: type(v) is bool,
    "null": lambda v: v is None,
    "object": lambda v: type(v) is dict,
    "array": lambda v: type(v) is list,
}


def compile_fast_check(schema: object, depth: int = 0) -> Check | None:
    """A predicate that is ``True`` only for values the schema certainly accepts.

    Returns ``None`` when the schema uses anything outside the handled subset.
    """
    if schema is True or schema == {}:
        return lambda v: True
    if not isinstance(schema, Mapping) or depth > 32 or not set(schema) <= _HANDLED:
        return None
    if "$schema" in schema and schema["$schema"] not in _SAME_DIALECTS:
        # jsonschema switches dialect on ``$schema`` (also in a subschema); drafts
        # 3 and 4 reject 1.0 as an integer and ignore ``const``.
        return None
    checks: list[Check] = []
    kind = schema.get("type")
    if kind is not None:
        kinds = [kind] if isinstance(kind, str) else kind
        if not isinstance(kinds, list) or not kinds or any(k not in _TYPE_CHECKS for k in kinds):
            return None
        type_checks = [_TYPE_CHECKS[k] for k in kinds]
        if len(type_checks) == 1:
            checks.append(type_checks[0])
        else:
            checks.append(lambda v: any(c(v) for c in type_checks))
    # Equality in JSON Schema ignores int/float distinctions but not bool/int ones;
    # leave anything beyond strings and None to jsonschema. ``enum`` and ``const``
    # both apply when both are present.
    for allowed in ([schema["enum"]] if "enum" in schema else []) + (
        [[schema["const"]]] if "const" in schema else []
    ):
        literal_check = _literal_check(allowed)
        if literal_check is None:
            return None
        checks.append(literal_check)
    try:
        object_check = _object_check(schema, depth)
    except _Unsupported:
        return None
    if object_check is not None:
        checks.append(object_check)
    if "items" in schema:
        item = compile_fast_check(schema["items"], depth + 1)
        if item is None:
            return None
        checks.append(_items_check(item))
    if "anyOf" in schema:
        branches = schema["anyOf"]
        if not isinstance(branches, list) or not branches:
            return None
        # A value one branch certainly accepts satisfies ``anyOf``; a branch
        # outside the subset never vouches for anything (jsonschema decides).
        compiled = [compile_fast_check(branch, depth + 1) for branch in branches]
        vouching = [check for check in compiled if check is not None]
        if not vouching:
            return None
        checks.append(lambda v: any(check(v) for check in vouching))
    if not checks:
        return lambda v: True
    if len(checks) == 1:
        return checks[0]
    if len(checks) == 2:
        # The common shape (a type plus properties): no generator per call.
        first, second = checks
        return lambda v: first(v) and second(v)
    return lambda v: all(c(v) for c in checks)


#: The exact types each plain type check accepts without a call (an integral
#: float still goes to ``_is_integer``).
_PLAIN_TYPES: dict[Check, frozenset[type]] = {
    _TYPE_CHECKS["string"]: frozenset({str}),
    _TYPE_CHECKS["integer"]: frozenset({int}),
    _TYPE_CHECKS["number"]: frozenset({int, float}),
    _TYPE_CHECKS["boolean"]: frozenset({bool}),
    _TYPE_CHECKS["null"]: frozenset({type(None)}),
    _TYPE_CHECKS["object"]: frozenset({dict}),
    _TYPE_CHECKS["array"]: frozenset({list}),
}


def _items_check(item: Check) -> Check:
    plain = _PLAIN_TYPES.get(item)
    if plain is None:
        return lambda v: type(v) is not list or all(item(x) for x in v)

    def check(value: Any) -> bool:
        # A long list of one plain type (10,000 ints): a set lookup per item, no call.
        if type(value) is not list:
            return True
        for x in value:  # noqa: SIM110 (a plain loop: no generator per call)
            if type(x) not in plain and not item(x):
                return False
        return True

    return check


class _Unsupported(Exception):
    """The schema leaves the handled subset."""


def _literal_check(allowed: object) -> Check | None:
    if not isinstance(allowed, list) or not all(type(a) is str or a is None for a in allowed):
        return None
    literals = frozenset(a for a in allowed if a is not None)
    allow_none = None in allowed
    return lambda v: (v is None and allow_none) or (type(v) is str and v in literals)


def _object_check(schema: Mapping[str, Any], depth: int) -> Check | None:
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    extra = schema.get("additionalProperties", True)
    if not properties and not required and extra is True:
        return None
    if not isinstance(properties, Mapping) or not isinstance(required, list):
        raise _Unsupported
    if not all(isinstance(r, str) for r in required):
        raise _Unsupported
    compiled: dict[str, Check] = {}
    for key, sub in properties.items():
        sub_check = compile_fast_check(sub, depth + 1)
        if sub_check is None:
            raise _Unsupported
        compiled[key] = sub_check
    extra_check: Check | None
    if extra is True:
        extra_check = None
    elif extra is False:
        extra_check = lambda v: False  # noqa: E731
    else:
        extra_check = compile_fast_check(extra, depth + 1)
        if extra_check is None:
            raise _Unsupported
    required_keys = tuple(required)

    def check(value: Any) -> bool:
        if type(value) is not dict:
            return True
        for key in required_keys:
            if key not in value:
                return False
        for key, item in value.items():
            sub = compiled.get(key)
            if sub is not None:
                if not sub(item):
                    return False
            elif extra_check is not None and not extra_check(item):
                return False
        return True

    return check
