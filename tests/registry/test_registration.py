"""Registration validates every definition and names the problem when it refuses one."""

from __future__ import annotations

import math
from typing import Any

import pytest

from registry import (
    INVALID_ARGS,
    RegistrationError,
    RegistryError,
    ToolCall,
    ToolDefinition,
    ToolFailure,
    ToolOutput,
    ToolRegistry,
    ToolRunContext,
    ToolSuccess,
    UnknownScopeError,
)

PARAMS: dict[str, Any] = {"type": "object", "properties": {"n": {"type": "integer"}}}


async def echo(args: Any, ctx: ToolRunContext) -> Any:
    return args


def definition(**overrides: Any) -> ToolDefinition:
    fields: dict[str, Any] = {
        "name": "tool",
        "description": "A tool.",
        "parameters": PARAMS,
        "output": ToolOutput(schema={}),
        "execute": echo,
    }
    fields.update(overrides)
    return ToolDefinition(**fields)


def refused(reg: ToolRegistry, candidate: Any, *, scope: str | None = None) -> RegistrationError:
    """Register ``candidate``, expect a RegistrationError and an unchanged registry."""

    def names() -> list[str] | None:
        try:
            return [d.name for d in reg.definitions(scope)]
        except UnknownScopeError:
            return None  # (and still undeclared afterwards)

    before = names()
    changes: list[None] = []
    stop = reg.on_change(lambda: changes.append(None))
    with pytest.raises(RegistrationError) as info:
        reg.register(candidate, scope=scope)
    stop()
    assert names() == before
    assert changes == []
    return info.value


def test_a_valid_definition_registers() -> None:
    reg = ToolRegistry()
    tool = definition(timeout=2, concurrency_safe=lambda args: True)
    reg.register(tool)
    assert reg.get("tool") is tool


def test_registration_error_is_a_registry_value_error_with_fields() -> None:
    error = refused(ToolRegistry(), definition(name="run_code"))
    assert isinstance(error, RegistryError)
    assert isinstance(error, ValueError)
    assert error.tool_name == "run_code"
    assert "reserved" in error.problem
    assert str(error) == f"cannot register tool 'run_code': {error.problem}"


# --------------------------------------------------------------------------- output


@pytest.mark.parametrize(
    "output",
    [None, ToolOutput(schema=None)],  # type: ignore[arg-type]
    ids=["no-output", "no-output-schema"],
)
def test_an_output_declaration_with_a_schema_is_required(output: Any) -> None:
    error = refused(ToolRegistry(), definition(output=output))
    assert "canonical output declaration with a schema is required" in str(error)


def test_a_non_callable_render_is_refused() -> None:
    error = refused(ToolRegistry(), definition(output=ToolOutput(schema={}, render="text")))  # type: ignore[arg-type]
    assert "output.render must be callable" in str(error)


# --------------------------------------------------------------------------- schemas


@pytest.mark.parametrize(
    ("field", "schema", "message"),
    [
        ("parameters", {"type": "strnig"}, "parameters schema is invalid at type"),
        (
            "parameters",
            {"type": "object", "properties": {"a": {"type": 5}}},
            "parameters schema is invalid at properties/a/type",
        ),
        ("parameters", {"type": "object", "required": "a"}, "invalid at required"),
        (
            "parameters",
            {"type": "object", "properties": {"a": {"type": "string", "pattern": "("}}},
            "invalid at properties/a/pattern",
        ),
        ("output", {"minimum": "zero"}, "output schema is invalid at minimum"),
        ("output", {"type": "object", "properties": []}, "output schema is invalid at properties"),
    ],
)
def test_an_invalid_json_schema_is_refused_with_its_location(
    field: str, schema: dict[str, Any], message: str
) -> None:
    candidate = (
        definition(parameters=schema)
        if field == "parameters"
        else definition(output=ToolOutput(schema=schema))
    )
    error = refused(ToolRegistry(), candidate)
    assert message in str(error)


@pytest.mark.parametrize(
    ("schema", "ref"),
    [
        ({"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}}, "#/$defs/missing"),
        ({"type": "object", "properties": {"a": {"$ref": "#nowhere"}}}, "#nowhere"),
        ({"type": "object", "properties": {"a": {"$ref": "https://example.com/x"}}}, "https://"),
        (
            {
                "$schema": "http://json-schema.org/draft-07/schema#",
                "type": "object",
                "properties": {"a": {"$ref": "#/definitions/missing"}},
            },
            "#/definitions/missing",
        ),
    ],
)
def test_an_unresolvable_ref_is_refused_at_registration(schema: dict[str, Any], ref: str) -> None:
    error = refused(ToolRegistry(), definition(parameters=schema))
    assert "unresolvable $ref" in str(error)
    assert ref in str(error)
    error = refused(ToolRegistry(), definition(output=ToolOutput(schema=schema)))
    assert "output schema has an unresolvable $ref" in str(error)


@pytest.mark.anyio
async def test_resolvable_refs_register_and_validate() -> None:
    reg = ToolRegistry()
    reg.register(
        definition(
            parameters={
                "type": "object",
                "$defs": {"count": {"type": "integer"}},
                "properties": {
                    "n": {"$ref": "#/$defs/count"},
                    "nested": {"$ref": "#"},
                    "enum_data": {"enum": [{"$ref": "#/not/a/ref/just/data"}]},
                },
            }
        )
    )
    ok = await reg.execute(ToolCall(call_id="1", name="tool", arguments={"nested": {"n": 3}}))
    assert isinstance(ok, ToolSuccess)
    bad = await reg.execute(ToolCall(call_id="2", name="tool", arguments={"nested": {"n": "x"}}))
    assert isinstance(bad, ToolFailure)
    assert bad.error.info is not None and bad.error.info.code == INVALID_ARGS
    assert "$.nested.n" in bad.error.message


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({"type": "object", "default": (1, 2)}, "parameters schema is not lossless JSON"),
        ({"type": "object", "default": math.nan}, "not lossless JSON"),
        ({"type": "object", "properties": {1: {}}}, "not lossless JSON"),
        ([{"type": "object"}], "parameters schema must be a JSON object"),
        ("{}", "parameters schema must be a JSON object"),
    ],
)
def test_a_parameters_schema_must_be_a_lossless_json_object(schema: Any, message: str) -> None:
    error = refused(ToolRegistry(), definition(parameters=schema))
    assert message in str(error)


def test_an_output_schema_must_be_lossless_json() -> None:
    error = refused(ToolRegistry(), definition(output=ToolOutput(schema={"enum": [math.inf]})))
    assert "output schema is not lossless JSON" in str(error)


@pytest.mark.parametrize(
    "schema",
    [{"type": "string"}, {"type": "array"}, {"type": "null"}, {"type": ["object", "null"]}],
)
def test_parameters_must_describe_an_object(schema: dict[str, Any]) -> None:
    error = refused(ToolRegistry(), definition(parameters=schema))
    assert "parameters schema must describe an object" in str(error)


def test_non_object_outputs_are_fine() -> None:
    reg = ToolRegistry()
    reg.register(
        definition(output=ToolOutput(schema={"type": "array", "items": {"type": "string"}}))
    )
    assert reg.get("tool") is not None


# --------------------------------------------------------------------------- timeout


@pytest.mark.parametrize(
    "timeout",
    [0, 0.0, -1, -0.5, math.inf, -math.inf, math.nan, True, False, "5", [1]],
    ids=repr,
)
def test_a_timeout_must_be_a_positive_finite_number(timeout: Any) -> None:
    error = refused(ToolRegistry(), definition(timeout=timeout))
    assert "timeout must be a positive finite number" in str(error)
    assert repr(timeout) in str(error)


@pytest.mark.parametrize("timeout", [None, 1e-6, 1, 30.5, 86400])
def test_positive_finite_timeouts_register(timeout: Any) -> None:
    reg = ToolRegistry()
    reg.register(definition(timeout=timeout))
    found = reg.get("tool")
    assert found is not None and found.timeout == timeout


# --------------------------------------------------------------------------- names


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", "non-empty string"),
        ("   ", "non-empty string"),
        ("\t", "non-empty string"),
        (None, "non-empty string"),
        (7, "non-empty string"),
        (" lead", "surrounding space or control characters"),
        ("trail ", "surrounding space or control characters"),
        ("new\nline", "control characters"),
        ("nul\x00", "control characters"),
        ("bell\x07", "control characters"),
        ("del\x7f", "control characters"),
        ("x" * 129, "longer than 128"),
    ],
    ids=repr,
)
def test_bad_names_are_refused(name: Any, message: str) -> None:
    error = refused(ToolRegistry(), definition(name=name))
    assert message in str(error)


@pytest.mark.parametrize("name", ["a", "x" * 128, "get-issue", "Tool.v2", "naïve", "with space"])
def test_ordinary_and_exotic_names_register(name: str) -> None:
    reg = ToolRegistry()
    reg.register(definition(name=name))
    assert [d.name for d in reg.definitions()] == [name]


@pytest.mark.parametrize("scope", [None, "agent-1"])
def test_the_reserved_transport_name_is_refused_in_every_layer(scope: str | None) -> None:
    error = refused(ToolRegistry(), definition(name="run_code"), scope=scope)
    assert "reserved for the code-mode transport" in str(error)


# --------------------------------------------------------------------------- duplicates


def test_a_duplicate_name_in_one_layer_is_refused() -> None:
    reg = ToolRegistry()
    first = definition()
    reg.register(first)
    error = refused(reg, definition(description="Another."))
    assert "already registered globally" in str(error)
    assert reg.get("tool") is first

    reg.register(definition(description="Scoped."), scope="s")
    error = refused(reg, definition(description="Again."), scope="s")
    assert "already registered in scope 's'" in str(error)
    found = reg.get("tool", "s")
    assert found is not None and found.description == "Scoped."


def test_the_same_name_registers_again_after_disposal() -> None:
    reg = ToolRegistry()
    reg.register(definition())()
    second = definition(description="Second.")
    reg.register(second)
    assert reg.get("tool") is second


# --------------------------------------------------------------------------- callables


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"execute": None}, "execute must be an async callable"),
        ({"execute": "echo"}, "execute must be an async callable"),
        ({"description": None}, "description must be a string"),
        ({"description": b"bytes"}, "description must be a string"),
        ({"concurrency_safe": "yes"}, "concurrency_safe must be a bool or a callable"),
        ({"concurrency_safe": 1}, "concurrency_safe must be a bool or a callable"),
        ({"concurrency_safe": None}, "concurrency_safe must be a bool or a callable"),
        ({"finalize_content": "no"}, "finalize_content must be callable"),
    ],
)
def test_non_callable_hooks_and_bad_fields_are_refused(
    overrides: dict[str, Any], message: str
) -> None:
    error = refused(ToolRegistry(), definition(**overrides))
    assert message in str(error)


@pytest.mark.parametrize(
    "candidate",
    [
        {"name": "tool", "description": "", "parameters": {"type": "object"}},
        "tool",
        None,
    ],
    ids=["dict", "str", "none"],
)
def test_only_tool_definitions_register(candidate: Any) -> None:
    error = refused(ToolRegistry(), candidate)
    assert "expected a ToolDefinition" in str(error)


def test_a_refused_scoped_registration_does_not_create_the_scope() -> None:
    reg = ToolRegistry()
    refused(reg, definition(timeout=-1), scope="fresh")
    with pytest.raises(UnknownScopeError):
        reg.scope_chain("fresh")


def test_a_definition_is_immutable() -> None:
    tool = definition()
    with pytest.raises(AttributeError):
        tool.name = "other"  # type: ignore[misc]
