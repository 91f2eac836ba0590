"""json_schema_to_py: one schema to one type expression, without a naming context."""

from __future__ import annotations

from typing import Any

import pytest

from sdkgen import json_schema_to_py

CASES: list[tuple[Any, str]] = [
    ({"type": "string"}, "str"),
    ({"type": "integer"}, "int"),
    ({"type": "number"}, "float"),
    ({"type": "boolean"}, "bool"),
    ({"type": "null"}, "None"),
    ({}, "JsonValue"),
    (True, "JsonValue"),
    ({"description": "annotation only"}, "JsonValue"),
    ({"type": "array", "items": {"type": "string"}}, "list[str]"),
    ({"type": "array"}, "list[JsonValue]"),
    ({"type": "array", "items": [{"type": "string"}, {"type": "integer"}]}, "list[str | int]"),
    ({"type": "array", "prefixItems": [{"type": "string"}]}, "list[str]"),
    ({"enum": ["a", "b", "a"]}, 'Literal["a", "b"]'),
    ({"enum": [1, True, None]}, "Literal[1, True] | None"),
    ({"enum": [1.5, "x"]}, 'Literal["x"] | float'),
    ({"const": 'q"uote'}, "Literal['q\"uote']"),
    ({"type": ["string", "null"]}, "str | None"),
    ({"type": "string", "nullable": True}, "str | None"),
    ({"anyOf": [{"type": "null"}, {"type": "integer"}]}, "int | None"),
    ({"oneOf": [{"type": "string"}, {"type": "string"}]}, "str"),
    ({"type": "object"}, "dict[str, JsonValue]"),
    ({"type": "object", "additionalProperties": {"type": "integer"}}, "dict[str, int]"),
    ({"type": "object", "patternProperties": {"^x": {"type": "string"}}}, "dict[str, str]"),
    ({"type": "object", "properties": {"a": {"type": "string"}}}, "dict[str, Any]"),
    ({"properties": {"from": {"type": "string"}}}, "dict[str, Any]"),
    (
        {"allOf": [{"type": "object"}, {"additionalProperties": {"type": "boolean"}}]},
        "dict[str, bool]",
    ),
    # spellings seen in the wild
    ({"type": "dict"}, "dict[str, JsonValue]"),
    ({"type": "float"}, "float"),
    ({"type": "int"}, "int"),
    ({"type": "tuple"}, "list[JsonValue]"),
    ({"type": "any"}, "JsonValue"),
    ({"type": "String"}, "str"),
    ({"items": {"type": "integer"}}, "list[int]"),
    ({"maxLength": 3}, "str"),
    ({"minimum": 0}, "float"),
    # garbage degrades
    ({"type": "wat"}, "Any"),
    ({"type": 5}, "Any"),
    ({"type": []}, "Any"),
    ({"enum": []}, "Any"),
    ({"enum": "abc"}, "Any"),
    (False, "Any"),
    (None, "Any"),
    ("string", "Any"),
    ([{"type": "string"}], "Any"),
    ({"$ref": "#/nowhere"}, "Any"),
    ({"$ref": 7}, "Any"),
    ({"type": "array", "items": 3}, "list[Any]"),
    ({"enum": [{"a": 1}, "b"]}, "JsonValue"),
]


@pytest.mark.parametrize(("schema", "expected"), CASES)
def test_json_schema_to_py(schema: Any, expected: str) -> None:
    assert json_schema_to_py(schema) == expected


def test_refs_resolve_inline_and_recursion_degrades() -> None:
    schema = {
        "$defs": {
            "Name": {"type": "string"},
            "Tree": {"type": "array", "items": {"$ref": "#/$defs/Tree"}},
        },
        "anyOf": [{"$ref": "#/$defs/Name"}, {"$ref": "#/$defs/Tree"}],
    }
    assert json_schema_to_py(schema) == "str | list[Any]"


def test_big_integer_enum_does_not_raise() -> None:
    assert json_schema_to_py({"enum": [10**5000]}) == "int"


@pytest.mark.parametrize(("schema", "expected"), CASES)
def test_expressions_are_valid_annotations(schema: Any, expected: str) -> None:
    compile(f"x: {json_schema_to_py(schema)}\n", "<expr>", "exec")
