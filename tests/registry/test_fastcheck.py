"""The fast "certainly valid" predicate never accepts what jsonschema rejects."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator, validators

from registry._fastcheck import compile_fast_check
from registry._validation import CompiledSchema, _compile_schema, describe_violation

TYPES = ["string", "integer", "number", "boolean", "null", "object", "array"]
KEYS = ["a", "b", "c", "d"]
WORDS = ["x", "y", "", "é"]
DIALECT = "https://json-schema.org/draft/2020-12/schema"

# --------------------------------------------------------------------------- strategies

small_json = st.recursive(
    st.none()
    | st.booleans()
    | st.sampled_from([0, 1, -1, 2**63, 1.0, 0.5, -0.0, 1e300])
    | st.integers(-3, 3)
    | st.sampled_from(WORDS),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.sampled_from([*KEYS, "z"]), children, max_size=4)
    ),
    max_leaves=12,
)

annotations = st.fixed_dictionaries(
    {},
    optional={
        "title": st.text(max_size=3),
        "description": st.text(max_size=3),
        "default": small_json,
        "examples": st.lists(small_json, max_size=2),
        "$comment": st.text(max_size=3),
        "deprecated": st.booleans(),
        "readOnly": st.booleans(),
        "writeOnly": st.booleans(),
    },
)
literals = st.sampled_from([*WORDS, None])
type_keyword = st.sampled_from(TYPES) | st.lists(
    st.sampled_from(TYPES), min_size=1, max_size=3, unique=True
)


def extend(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.fixed_dictionaries(
        {},
        optional={
            "type": type_keyword,
            "enum": st.lists(literals, max_size=3),
            "const": literals,
            "properties": st.dictionaries(st.sampled_from(KEYS), children, max_size=3),
            "required": st.lists(st.sampled_from(KEYS), max_size=3, unique=True),
            "additionalProperties": st.booleans() | children,
            "items": children,
            "anyOf": st.lists(children, min_size=1, max_size=3),
        },
    )


leaf_schemas = st.one_of(
    st.just(True),
    st.just({}),
    st.fixed_dictionaries(
        {},
        optional={"type": type_keyword, "enum": st.lists(literals, max_size=3), "const": literals},
    ),
)


@st.composite
def with_annotations(draw: st.DrawFn, schemas: st.SearchStrategy[Any]) -> Any:
    schema = draw(schemas)
    if isinstance(schema, dict):
        schema = {**schema, **draw(annotations)}
    return schema


subset_schemas = st.recursive(
    with_annotations(leaf_schemas),
    lambda children: with_annotations(extend(children)),
    max_leaves=8,
)


@st.composite
def root_schemas(draw: st.DrawFn) -> Any:
    schema = draw(subset_schemas)
    if isinstance(schema, dict) and draw(st.booleans()):
        schema = {**schema, "$schema": DIALECT}
    return schema


def _guided(draw: st.DrawFn, schema: Any, depth: int = 0) -> Any:
    """An instance that follows ``schema`` most of the time, so acceptance is common."""
    if schema is True or not isinstance(schema, dict) or depth > 6 or draw(st.integers(0, 9)) == 0:
        return draw(small_json)
    if "const" in schema and draw(st.booleans()):
        return schema["const"]
    if schema.get("enum") and draw(st.booleans()):
        return draw(st.sampled_from(schema["enum"]))
    kinds = schema.get("type", draw(st.sampled_from(TYPES)))
    kind = draw(st.sampled_from(kinds)) if isinstance(kinds, list) else kinds
    if kind == "object":
        properties = schema.get("properties", {})
        names = list(dict.fromkeys([*schema.get("required", []), *properties]))
        out = {}
        for name in names:
            if name in schema.get("required", []) or draw(st.booleans()):
                out[name] = _guided(draw, properties.get(name, True), depth + 1)
        if draw(st.integers(0, 3)) == 0:
            extra = schema.get("additionalProperties", True)
            out["z"] = _guided(draw, extra if isinstance(extra, dict) else True, depth + 1)
        return out
    if kind == "array":
        item = schema.get("items", True)
        return [_guided(draw, item, depth + 1) for _ in range(draw(st.integers(0, 3)))]
    simple = {
        "string": st.sampled_from(WORDS),
        "integer": st.sampled_from([0, 7, -1, 2.0, 2**64 - 1]),
        "number": st.sampled_from([0, 1.5, -0.0, 3]),
        "boolean": st.booleans(),
        "null": st.none(),
    }
    return draw(simple[kind])


@st.composite
def schema_and_instance(draw: st.DrawFn) -> tuple[Any, Any]:
    schema = draw(root_schemas())
    instance = _guided(draw, schema) if draw(st.integers(0, 4)) else draw(small_json)
    return schema, instance


# --------------------------------------------------------------------------- differential


@settings(
    max_examples=600,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(schema_and_instance())
def test_fast_acceptance_implies_jsonschema_acceptance(case: tuple[Any, Any]) -> None:
    schema, instance = case
    Draft202012Validator.check_schema(schema)  # the strategy only builds valid schemas
    fast = compile_fast_check(schema)
    # every schema of the subset compiles: a fast path that gave up everywhere
    # would make the property below vacuous
    assert fast is not None, schema
    validator = Draft202012Validator(schema)
    verdict = validator.is_valid(instance)
    if fast(instance):
        assert verdict, (schema, instance, list(validator.iter_errors(instance)))
    compiled = CompiledSchema(schema, fast, validator)
    assert compiled.is_valid(instance) is verdict
    assert (describe_violation(compiled, instance) is None) is verdict


# --------------------------------------------------------------------------- unit cases


@pytest.mark.parametrize(
    "schema",
    [
        {"minimum": 1},
        {"maximum": 1},
        {"exclusiveMinimum": 0},
        {"multipleOf": 2},
        {"minLength": 1},
        {"maxLength": 1},
        {"pattern": "^a"},
        {"$ref": "#"},
        {"$defs": {"a": {}}},
        {"oneOf": [{}, {}]},
        {"anyOf": [{"minimum": 1}]},  # no branch in the subset vouches for anything
        {"allOf": [{}]},
        {"not": {}},
        {"if": {}, "then": {}},
        {"minItems": 1},
        {"maxItems": 1},
        {"uniqueItems": True},
        {"prefixItems": [{}]},
        {"contains": {}},
        {"patternProperties": {"a": {}}},
        {"propertyNames": {"maxLength": 2}},
        {"dependentRequired": {"a": ["b"]}},
        {"minProperties": 1},
        {"unevaluatedProperties": False},
        {"x-custom": 1},
        # unsupported inside the handled keywords
        {"type": "object", "properties": {"a": {"minimum": 1}}},
        {"type": "array", "items": {"pattern": "x"}},
        {"additionalProperties": {"oneOf": [{}, {}]}},
        {"items": False},
        {"items": [{}]},
        {"properties": {"a": False}},
        {"properties": [{"type": "string"}]},
        {"required": [1]},
        {"required": "a"},
        {"enum": [1, 2]},
        {"enum": ["a", True]},
        {"enum": [{"a": 1}]},
        {"const": 1},
        {"const": False},
        {"const": []},
        {"type": "any"},
        {"type": []},
        {"type": 5},
        # another dialect may change what the handled keywords mean
        {"$schema": "http://json-schema.org/draft-04/schema#", "type": "integer"},
        {"properties": {"n": {"$schema": "http://json-schema.org/draft-04/schema#"}}},
        {"$schema": "http://example.com/unknown"},
        # not a schema mapping at all
        False,
        None,
        1,
        "string",
        [{}],
    ],
    ids=repr,
)
def test_unsupported_schemas_compile_to_none(schema: Any) -> None:
    assert compile_fast_check(schema) is None


def test_excessive_nesting_compiles_to_none() -> None:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(40):
        schema = {"type": "array", "items": schema}
    assert compile_fast_check(schema) is None
    shallow: dict[str, Any] = {"type": "string"}
    for _ in range(10):
        shallow = {"type": "array", "items": shallow}
    check = compile_fast_check(shallow)
    assert check is not None


@pytest.mark.parametrize(
    ("schema", "accepted", "not_accepted"),
    [
        (True, [None, 1, "x", {"a": [1]}], []),
        ({}, [None, 1, "x", {"a": [1]}], []),
        ({"title": "t", "description": "d", "default": 3}, [None, "x"], []),
        ({"type": "integer"}, [0, -5, 2.0, 2**64 - 1], [True, 1.5, "1", None]),
        ({"type": "number"}, [0, 1.5, -0.0], [True, False, "1", None]),
        ({"type": "boolean"}, [True, False], [0, 1, None]),
        ({"type": "null"}, [None], [0, "", False]),
        ({"type": "string"}, ["", "x"], [1, None, ["x"]]),
        ({"type": "object"}, [{}, {"a": 1}], [[], "x"]),
        ({"type": "array"}, [[], [1]], [{}, "x"]),
        ({"type": ["string", "null"]}, ["x", None], [1, False]),
        ({"enum": ["a", None]}, ["a", None], ["b", 0, False]),
        ({"const": "a"}, ["a"], ["b", None]),
        ({"const": None}, [None], [0, False, ""]),
        ({"enum": ["a", "b"], "const": "a"}, ["a"], ["b"]),
        ({"enum": []}, [], ["a", None]),
        ({"type": "integer", "enum": [None]}, [], [None, 1]),
        (
            {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
            [{"n": 1}, {"n": 1, "x": "extra"}],
            [{}, {"n": "1"}, {"x": 1}],
        ),
        ({"required": ["a"]}, [{"a": 1}, "not an object", 3], [{}]),
        (
            {"properties": {"a": {"type": "string"}}, "additionalProperties": False},
            [{}, {"a": "x"}, 5],
            [{"b": 1}, {"a": 1}],
        ),
        (
            {"additionalProperties": {"type": "integer"}},
            [{"a": 1, "b": 2}, []],
            [{"a": "x"}],
        ),
        ({"items": {"type": "string"}}, [[], ["a"], {"k": 1}, 7], [["a", 1]]),
        ({"type": "array", "items": {"enum": ["a"]}}, [["a", "a"]], [["b"], "a"]),
        ({"$schema": DIALECT, "type": "integer"}, [1], ["1"]),
        (
            {"$schema": "http://json-schema.org/draft-07/schema#", "type": "integer"},
            [1, 1.0],
            [1.5],
        ),
    ],
)
def test_the_predicate_agrees_with_hand_checked_cases(
    schema: Any, accepted: list[Any], not_accepted: list[Any]
) -> None:
    check = compile_fast_check(schema)
    assert check is not None
    for value in accepted:
        assert check(value) is True, value
    for value in not_accepted:
        assert check(value) is False, value


def test_draft4_integer_semantics_never_take_the_fast_path() -> None:
    # draft 4 rejects 1.0 as an integer, 2020-12 accepts it: the fast path must
    # not decide for a schema that switches dialect, at the root or below it.
    draft4 = "http://json-schema.org/draft-04/schema#"
    cases: list[tuple[dict[str, Any], Any]] = [
        ({"$schema": draft4, "type": "integer"}, 1.0),
        (
            {"type": "object", "properties": {"n": {"$schema": draft4, "type": "integer"}}},
            {"n": 1.0},
        ),
    ]
    for schema, instance in cases:
        validator = validators.validator_for(schema, default=Draft202012Validator)(schema)
        assert not validator.is_valid(instance)
        assert compile_fast_check(schema) is None


def test_format_is_an_annotation_as_it_is_for_the_registrys_validators() -> None:
    # The registry validates without a format checker, so "format" asserts nothing
    # there; the fast check must agree (and typed tools' date-time strings keep it).
    schema = {"type": "object", "properties": {"when": {"type": "string", "format": "date-time"}}}
    fast = compile_fast_check(schema)
    assert fast is not None
    compiled = _compile_schema("t", "parameters", schema)
    for instance in ({"when": "2024-05-01T09:30:00Z"}, {"when": "not a date"}, {"when": 3}):
        assert fast(instance) is (describe_violation(compiled, instance) is None)
