"""The 117 real tool schemas of the GitHub MCP server through registration, listing and calls."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from registry import (
    INVALID_ARGS,
    ToolCall,
    ToolDefinition,
    ToolFailure,
    ToolOutput,
    ToolRegistry,
    ToolRunContext,
    ToolSuccess,
)

# Real tool schemas kept in the repository (see tests/data/README.md for source and licence).
CORPUS = Path(__file__).resolve().parents[1] / "data" / "github-mcp-server.json"
CORPUS_SIZE = 117


def _load_corpus() -> list[dict[str, Any]]:
    tools = json.loads(CORPUS.read_text(encoding="utf-8"))
    assert isinstance(tools, list)
    return tools


@pytest.fixture(scope="module")
def corpus() -> list[dict[str, Any]]:
    return _load_corpus()


async def echo(args: Any, ctx: ToolRunContext) -> Any:
    return args


def read_only(annotations: dict[str, Any]) -> bool:
    return annotations.get("readOnlyHint") is True


def to_definition(entry: dict[str, Any]) -> ToolDefinition:
    hint = read_only(entry["annotations"])

    def classifier(args: Any) -> bool:
        return hint

    return ToolDefinition(
        name=entry["name"],
        description=entry["description"],
        parameters=entry["inputSchema"],
        output=ToolOutput(schema={}),
        execute=echo,
        concurrency_safe=classifier,
    )


@pytest.fixture(scope="module")
def registry(corpus: list[dict[str, Any]]) -> ToolRegistry:
    reg = ToolRegistry()
    for entry in corpus:
        reg.register(to_definition(entry))
    return reg


# --------------------------------------------------------------------------- value builders


def sample(schema: Any) -> Any:
    """A simple value the schema accepts (enums, bounds and lengths respected)."""
    if not isinstance(schema, dict):
        return None
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    for branches in ("anyOf", "oneOf"):
        if branches in schema:
            for branch in schema[branches]:
                candidate = sample(branch)
                if Draft202012Validator(schema).is_valid(candidate):
                    return candidate
    kind = schema.get("type", "object")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "string":
        length = max(schema.get("minLength", 1), 1)
        return "x" * min(length, schema.get("maxLength", length))
    if kind in ("integer", "number"):
        value = schema.get("minimum", 1)
        if "exclusiveMinimum" in schema:
            value = schema["exclusiveMinimum"] + 1
        return min(value, schema.get("maximum", value))
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    if kind == "array":
        count = max(schema.get("minItems", 1), 1)
        return [sample(schema.get("items", {"type": "string"})) for _ in range(count)]
    properties = schema.get("properties", {})
    return {name: sample(properties.get(name, {})) for name in schema.get("required", [])}


WRONG_CANDIDATES: list[Any] = [12345, "wrong", True, {"unexpected": 1}, [["nested"]]]


def wrong_value(schema: dict[str, Any]) -> Any:
    validator = Draft202012Validator(schema)
    for candidate in WRONG_CANDIDATES:
        if not validator.is_valid(candidate):
            return candidate
    raise AssertionError(f"no wrong-typed value for {schema}")


def target_properties(entry: dict[str, Any]) -> list[str]:
    """Required properties; for a tool without any, its declared optional ones."""
    schema = entry["inputSchema"]
    return list(schema.get("required") or schema.get("properties", {}))


def names_property(message: str, tool: str, prop: str) -> bool:
    without_tool = message.replace(tool, "")
    return re.search(rf"(?<![\w]){re.escape(prop)}(?![\w])", without_tool) is not None


# --------------------------------------------------------------------------- tests


def test_the_corpus_has_the_expected_shape(corpus: list[dict[str, Any]]) -> None:
    assert len(corpus) == CORPUS_SIZE
    assert len({entry["name"] for entry in corpus}) == CORPUS_SIZE
    for entry in corpus:
        assert set(entry) == {"name", "description", "inputSchema", "annotations"}, entry["name"]


def test_every_corpus_tool_registers_and_lists_sorted(
    corpus: list[dict[str, Any]], registry: ToolRegistry
) -> None:
    schemas = registry.schemas()
    assert len(schemas) == CORPUS_SIZE
    names = [schema["name"] for schema in schemas]
    assert names == sorted(names) == sorted(entry["name"] for entry in corpus)
    by_name = {entry["name"]: entry for entry in corpus}
    for schema in schemas:
        entry = by_name[schema["name"]]
        assert schema == {
            "name": entry["name"],
            "description": entry["description"],
            "parameters": entry["inputSchema"],
        }
        assert schema["parameters"] is not entry["inputSchema"]
    # with_output adds exactly the canonical output schema
    assert all(s["output"] == {} for s in registry.schemas(with_output=True))


def test_corpus_argument_builders_are_sound(corpus: list[dict[str, Any]]) -> None:
    """The generated arguments must be valid and the wrong values invalid, or the
    execute tests below would prove nothing."""
    for entry in corpus:
        schema = entry["inputSchema"]
        args = sample(schema)
        assert Draft202012Validator(schema).is_valid(args), (entry["name"], args)
        for prop in target_properties(entry):
            bad = {**args, prop: wrong_value(schema["properties"][prop])}
            assert not Draft202012Validator(schema).is_valid(bad), (entry["name"], prop)


@pytest.mark.anyio
async def test_valid_arguments_execute_for_every_corpus_tool(
    corpus: list[dict[str, Any]], registry: ToolRegistry
) -> None:
    for entry in corpus:
        args = sample(entry["inputSchema"])
        result = await registry.execute(ToolCall(call_id="c", name=entry["name"], arguments=args))
        assert isinstance(result, ToolSuccess), (entry["name"], args, result)
        assert result.value == args
        assert result.value is not args


@pytest.mark.anyio
async def test_a_wrong_typed_argument_is_invalid_args_naming_the_property(
    corpus: list[dict[str, Any]], registry: ToolRegistry
) -> None:
    checked = 0
    for entry in corpus:
        name = entry["name"]
        schema = entry["inputSchema"]
        args = sample(schema)
        for prop in target_properties(entry):
            bad = {**args, prop: wrong_value(schema["properties"][prop])}
            result = await registry.execute(ToolCall(call_id="c", name=name, arguments=bad))
            assert isinstance(result, ToolFailure), (name, prop, bad)
            assert result.error.info is not None and result.error.info.code == INVALID_ARGS
            assert names_property(result.error.message, name, prop), result.error.message
            checked += 1
    # every tool but get_me (no properties at all) had at least one property checked
    assert checked >= CORPUS_SIZE - 1


@pytest.mark.anyio
async def test_a_missing_required_argument_is_invalid_args_naming_it(
    corpus: list[dict[str, Any]], registry: ToolRegistry
) -> None:
    for entry in corpus:
        required = entry["inputSchema"].get("required") or []
        if not required:
            continue
        args = sample(entry["inputSchema"])
        missing = required[-1]
        del args[missing]
        result = await registry.execute(ToolCall(call_id="c", name=entry["name"], arguments=args))
        assert isinstance(result, ToolFailure)
        assert result.error.info is not None and result.error.info.code == INVALID_ARGS
        assert names_property(result.error.message, entry["name"], missing), result.error.message


def test_read_only_tools_run_in_parallel_via_the_annotation_classifier(
    corpus: list[dict[str, Any]], registry: ToolRegistry
) -> None:
    modes = {"parallel": 0, "exclusive": 0}
    for entry in corpus:
        args = sample(entry["inputSchema"])
        mode = registry.execution_mode(ToolCall(call_id="c", name=entry["name"], arguments=args))
        assert mode == ("parallel" if read_only(entry["annotations"]) else "exclusive"), entry[
            "name"
        ]
        modes[mode] += 1
        # invalid arguments never run in parallel, whatever the classifier says
        for prop in target_properties(entry)[:1]:
            bad = {**args, prop: wrong_value(entry["inputSchema"]["properties"][prop])}
            call = ToolCall(call_id="c", name=entry["name"], arguments=bad)
            assert registry.execution_mode(call) == "exclusive"
    assert modes == {"parallel": 58, "exclusive": 59}
