"""normalize_tool_schemas: every common tool-list spelling, and clear errors."""

from __future__ import annotations

from typing import Any

import pytest

from sdkgen import normalize_tool_schemas

PARAMS = {"type": "object", "properties": {"q": {"type": "string"}}}
EXPECTED = {"name": "t", "description": "D.", "parameters": PARAMS}


@pytest.mark.parametrize(
    "entry",
    [
        {"name": "t", "description": "D.", "parameters": PARAMS},
        {"name": "t", "description": "D.", "inputSchema": PARAMS},
        {"name": "t", "description": "D.", "input_schema": PARAMS},
        {"type": "function", "function": {"name": "t", "description": "D.", "parameters": PARAMS}},
        {"type": "function", "name": "t", "description": "D.", "parameters": PARAMS},
    ],
    ids=["registry", "mcp", "anthropic", "openai", "responses"],
)
def test_each_spelling_normalises_to_the_registry_shape(entry: dict[str, Any]) -> None:
    assert normalize_tool_schemas([entry]) == [EXPECTED]


def test_documents_mcp_result_and_jsonrpc_reply() -> None:
    entry = {
        "name": "t",
        "description": "D.",
        "inputSchema": PARAMS,
        "outputSchema": {"type": "integer"},
    }
    expected = [{**EXPECTED, "output": {"type": "integer"}}]
    assert normalize_tool_schemas({"tools": [entry]}) == expected
    assert (
        normalize_tool_schemas({"jsonrpc": "2.0", "id": 1, "result": {"tools": [entry]}})
        == expected
    )


def test_missing_description_and_parameters_get_defaults() -> None:
    assert normalize_tool_schemas([{"name": "t"}]) == [
        {"name": "t", "description": "", "parameters": {"type": "object"}}
    ]


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ("tools", "expected a list of tool schemas, got str"),
        (None, "expected a list of tool schemas, got NoneType"),
        (
            {"functions": []},
            'an object with a "tools" list (MCP tools/list result); got an object with keys: functions',
        ),
        ({"tools": {"a": 1}}, "got an object with keys: tools"),
        ([1], "tool #0: expected an object, got int"),
        ([{"name": "a"}, {"description": "x"}], 'tool #1: missing a string "name"'),
        ([{"type": "function", "function": "x"}], 'tool #0: "function" must be an object'),
        (
            [{"name": "a", "inputSchema": "x"}],
            'tool #0: "inputSchema" must be a JSON Schema object',
        ),
        ([{"name": "a"}, {"name": "a"}], "tool #1: duplicate tool name 'a'"),
    ],
)
def test_anything_else_is_a_clear_value_error(document: Any, message: str) -> None:
    with pytest.raises(ValueError) as info:
        normalize_tool_schemas(document)
    assert message in str(info.value)
    assert "\n" not in str(info.value)
