"""A fast proof that a plain JSON Schema is valid, so registration need not load ``jsonschema``.

Checking a schema against the draft 2020-12 metaschema with ``jsonschema`` costs
about 10 ms per schema, and importing ``jsonschema`` more than a whole tool set's
registration: a cold ``ptc run`` paid both. :func:`plainly_valid` answers "certainly
valid" for the shapes typed tools and most hand-written schemas have — known
keywords with the values the metaschema requires, ``$ref`` only to the document's
own ``#/$defs/<name>`` — and ``False`` for anything else, which then goes to
``jsonschema`` (that decides, and explains what is wrong). It never says valid
where ``jsonschema`` would not: a differential property test holds the two together.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

__all__ = ["plainly_valid"]

_SIMPLE_TYPES = frozenset({"array", "boolean", "integer", "null", "number", "object", "string"})
# ``$ref`` forms resolved here: a ``$defs`` entry of the root, named without the
# characters a JSON pointer or a URI fragment would escape.
_LOCAL_REF = re.compile(r"#/\$defs/([A-Za-z0-9_.\-]+)")


def _is_schema(value: Any, defs: Any) -> bool:
    if type(value) is bool:
        return True
    if type(value) is not dict:
        return False
    for keyword, argument in value.items():
        check = _KEYWORDS.get(keyword)
        if check is None or not check(argument, defs):
            return False
    return True


def _schema_map(value: Any, defs: Any) -> bool:
    return type(value) is dict and all(_is_schema(sub, defs) for sub in value.values())


def _schema_list(value: Any, defs: Any) -> bool:
    return type(value) is list and bool(value) and all(_is_schema(sub, defs) for sub in value)


def _type(value: Any, defs: Any) -> bool:
    if type(value) is str:
        return value in _SIMPLE_TYPES
    return (
        type(value) is list
        and bool(value)
        and all(type(name) is str and name in _SIMPLE_TYPES for name in value)
        and len(set(value)) == len(value)
    )


def _unique_strings(value: Any, defs: Any) -> bool:
    return (
        type(value) is list
        and all(type(item) is str for item in value)
        and len(set(value)) == len(value)
    )


def _non_negative_int(value: Any, defs: Any) -> bool:
    return type(value) is int and value >= 0


def _number(value: Any, defs: Any) -> bool:
    return type(value) in (int, float)


def _positive_number(value: Any, defs: Any) -> bool:
    return type(value) in (int, float) and value > 0


def _string(value: Any, defs: Any) -> bool:
    return type(value) is str


def _boolean(value: Any, defs: Any) -> bool:
    return type(value) is bool


def _array(value: Any, defs: Any) -> bool:
    return type(value) is list


def _anything(value: Any, defs: Any) -> bool:
    return True


def _ref(value: Any, defs: Any) -> bool:
    match = _LOCAL_REF.fullmatch(value) if type(value) is str else None
    return match is not None and type(defs) is dict and match.group(1) in defs


_KEYWORDS: dict[str, Callable[[Any, Any], bool]] = {
    "type": _type,
    "enum": _array,
    "const": _anything,
    "properties": _schema_map,
    "$defs": _schema_map,
    "items": _is_schema,
    "additionalProperties": _is_schema,
    "not": _is_schema,
    "prefixItems": _schema_list,
    "anyOf": _schema_list,
    "allOf": _schema_list,
    "oneOf": _schema_list,
    "required": _unique_strings,
    "minLength": _non_negative_int,
    "maxLength": _non_negative_int,
    "minItems": _non_negative_int,
    "maxItems": _non_negative_int,
    "minProperties": _non_negative_int,
    "maxProperties": _non_negative_int,
    "minimum": _number,
    "maximum": _number,
    "exclusiveMinimum": _number,
    "exclusiveMaximum": _number,
    "multipleOf": _positive_number,
    "uniqueItems": _boolean,
    "title": _string,
    "description": _string,
    "$comment": _string,
    # Only an annotation to the metaschema (the format-annotation vocabulary).
    "format": _string,
    "default": _anything,
    "examples": _array,
    "deprecated": _boolean,
    "readOnly": _boolean,
    "writeOnly": _boolean,
    "$ref": _ref,
}


def plainly_valid(schema: Any) -> bool:
    """Whether ``schema`` (plain JSON values) is certainly a valid draft 2020-12 schema.

    ``True`` only when every keyword, at every depth, is one this module knows,
    its value has the shape the metaschema requires, and every ``$ref`` names an
    entry of the root's ``$defs``. ``$schema``, ``$id``, ``pattern`` and other
    keywords are left to ``jsonschema`` (``False``).
    """
    return type(schema) is dict and _is_schema(schema, schema.get("$defs"))
