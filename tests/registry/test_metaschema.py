"""``plainly_valid`` never calls a schema valid that jsonschema's metaschema check refuses."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from registry import RegistrationError, ToolDefinition, ToolOutput
from registry._metaschema import plainly_valid
from registry._validation import _unresolvable_ref, compile_definition

ROOT = Path(__file__).resolve().parents[2]
TYPES = ["array", "boolean", "integer", "null", "number", "object", "string"]
# Values of every JSON kind, the wrong ones for most keywords included.
anything = st.recursive(
    st.none()
    | st.booleans()
    | st.sampled_from([0, 1, -1, 2, 0.5, -2.5, 1.0])
    | st.sampled_from(["", "a", "string", "nope", "#/$defs/a", "#/$defs/b", "#", "^(", "x y"]),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=2), children)
    ),
    max_leaves=6,
)
KEYWORDS = [
    "type", "enum", "const", "properties", "$defs", "items", "additionalProperties",
    "not", "prefixItems", "anyOf", "allOf", "oneOf", "required", "minLength",
    "maxLength", "minItems", "maxItems", "minProperties", "maxProperties", "minimum",
    "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "uniqueItems",
    "title", "description", "$comment", "format", "default", "examples", "deprecated",
    "readOnly", "writeOnly", "$ref", "pattern", "$id", "$schema", "x-extra",
]  # fmt: skip


def _argument(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    # Mostly well-shaped arguments (so that many schemas are valid), sometimes anything.
    return st.one_of(
        anything,
        children,
        st.lists(children, max_size=3),
        st.dictionaries(st.sampled_from(["a", "b", "c"]), children, max_size=3),
        st.sampled_from(TYPES),
        st.lists(st.sampled_from([*TYPES, "nope"]), max_size=3),
        st.lists(st.sampled_from(["a", "b"]), max_size=3),
        st.sampled_from(["#/$defs/a", "#/$defs/b", "#/$defs/a~1", "#/properties/a"]),
        st.integers(-2, 3),
    )


schemas = st.recursive(
    st.booleans() | st.just({}),
    lambda children: st.dictionaries(st.sampled_from(KEYWORDS), _argument(children), max_size=4),
    max_leaves=10,
)


def jsonschema_accepts(schema: Any) -> bool:
    """What registration decided before ``plainly_valid``: metaschema and ``$ref`` check."""
    try:
        Draft202012Validator.check_schema(schema)
    except Exception:
        return False
    return _unresolvable_ref(schema) is None


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schemas.filter(lambda s: isinstance(s, dict)))
def test_plainly_valid_implies_jsonschema_accepts(schema: dict[str, Any]) -> None:
    if plainly_valid(schema):
        assert jsonschema_accepts(schema), schema


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
        {"type": ["string", "null"], "default": None, "description": "d"},
        {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}]},
        {"$defs": {"A": {"type": "integer", "minimum": 0}}, "items": {"$ref": "#/$defs/A"}},
        {"type": "array", "prefixItems": [{"const": 1}], "minItems": 1, "uniqueItems": True},
        {"type": "number", "exclusiveMaximum": 2.5, "multipleOf": 0.5, "format": "float"},
    ],
)
def test_plain_schemas_are_proven_without_jsonschema(schema: dict[str, Any]) -> None:
    assert plainly_valid(schema)
    assert jsonschema_accepts(schema)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "strin"},
        {"type": []},
        {"type": ["string", "string"]},
        {"required": ["a", "a"]},
        {"required": "a"},
        {"minLength": -1},
        {"minLength": 1.5},
        {"multipleOf": 0},
        {"enum": "a"},
        {"properties": {"a": 3}},
        {"anyOf": []},
        {"items": [{}]},
        {"$ref": "#/$defs/missing"},
        {"$ref": "#/properties/a", "properties": {"a": {}}},  # resolvable, left to jsonschema
        {"pattern": "^a"},  # a regex: left to jsonschema
        {"$schema": "http://json-schema.org/draft-07/schema#"},
        {"x-custom": 1},
        {"title": 1},
    ],
)
def test_anything_else_is_left_to_jsonschema(schema: dict[str, Any]) -> None:
    assert not plainly_valid(schema)


def test_an_invalid_schema_is_still_refused_at_registration() -> None:
    async def execute(arguments: Any, context: Any) -> Any:
        return None

    for parameters in ({"type": "object", "properties": {"a": {"type": "strin"}}},):
        definition = ToolDefinition(
            name="t",
            description="d",
            parameters=parameters,
            output=ToolOutput(schema={"type": "null"}),
            execute=execute,
        )
        with pytest.raises(RegistrationError, match="invalid at properties/a/type"):
            compile_definition(definition)


def test_the_example_program_runs_without_jsonschema() -> None:
    # The cold start of ``ptc run``: jsonschema's import alone cost more than
    # registering the whole example tool set.
    code = (
        "import sys\n"
        "from ptc._run import RunOptions, run_program\n"
        "from ptc._toolspec import load_registry\n"
        "registry = load_registry('examples/tools.py:registry')\n"
        "program = open('examples/programs/fanout_search.py').read()\n"
        "assert run_program(registry, program, RunOptions()) == 0\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('jsonschema', 'referencing')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert done.stdout.splitlines()[-1] == "[]", done.stdout
