"""Tool schemas in every common spelling, normalised to the registry's shape.

The registry's shape is ``{"name", "description", "parameters", "output"?}``.
Also accepted, per entry: MCP (``inputSchema``/``outputSchema``), OpenAI function
tools (``{"type": "function", "function": {...}}``), Chat-Completions/Responses
style (``{"name", "parameters"}``) and Anthropic (``input_schema``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

# dict first: the common case skips the slower ABC check
_MAPPING = (dict, Mapping)

__all__ = ["coerce_tool", "iter_tools", "normalize_tool_schemas"]

_PARAMETER_KEYS = ("parameters", "inputSchema", "input_schema")
_OUTPUT_KEYS = ("output", "outputSchema", "output_schema")


def coerce_tool(entry: Any) -> dict[str, Any] | str:
    """The normalised schema of one entry, or why it is not a tool schema."""
    if not isinstance(entry, _MAPPING):
        return f"expected an object, got {type(entry).__name__}"
    if entry.get("type") == "function" and "function" in entry:
        inner = entry["function"]
        if not isinstance(inner, _MAPPING):
            return '"function" must be an object'
        entry = inner
    name = entry.get("name")
    if not isinstance(name, str):
        return 'missing a string "name"'
    tool: dict[str, Any] = {"name": name}
    description = entry.get("description")
    tool["description"] = description if isinstance(description, str) else ""
    for key in _PARAMETER_KEYS:
        if key in entry:
            params = entry[key]
            if not isinstance(params, (Mapping, bool)):
                return f'"{key}" must be a JSON Schema object'
            tool["parameters"] = params
            break
    else:
        # no declared parameters: the tool takes an (open) object
        tool["parameters"] = {"type": "object"}
    for key in _OUTPUT_KEYS:
        if key in entry:
            tool["output"] = entry[key]
            break
    return tool


def iter_tools(document: Any) -> Iterable[Any]:
    """The entries of a tool list, an MCP ``tools/list`` result or its JSON-RPC reply."""
    if isinstance(document, _MAPPING):
        result = document.get("result")
        if "tools" not in document and isinstance(result, _MAPPING):
            document = result
        tools = document.get("tools")
        return tools if isinstance(tools, list) else ()
    if isinstance(document, (list, tuple)):
        return document
    return ()


def normalize_tool_schemas(document: Any) -> list[dict[str, Any]]:
    """Normalise a loaded JSON document into a list of tool schemas.

    Accepts a bare list of tools, an MCP ``tools/list`` result ``{"tools": [...]}``
    (or the JSON-RPC reply around it), with each tool in the registry, MCP,
    OpenAI, Chat-Completions or Anthropic spelling.

    Raises:
        ValueError: the document is not one of these shapes, an entry is not a
            tool schema, or two tools share a name. The message says which.
    """
    if isinstance(document, _MAPPING):
        inner = document.get("result")
        if "tools" not in document and isinstance(inner, _MAPPING) and "tools" in inner:
            document = inner
        if not isinstance(document.get("tools"), list):
            keys = ", ".join(sorted(str(k) for k in document)[:8]) or "none"
            raise ValueError(
                'expected a list of tool schemas or an object with a "tools" list '
                f"(MCP tools/list result); got an object with keys: {keys}"
            )
    elif not isinstance(document, list):
        raise ValueError(f"expected a list of tool schemas, got {type(document).__name__}")
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for index, entry in enumerate(iter_tools(document)):
        tool = coerce_tool(entry)
        if isinstance(tool, str):
            raise ValueError(f"tool #{index}: {tool}")
        if tool["name"] in seen:
            raise ValueError(f"tool #{index}: duplicate tool name {tool['name']!r}")
        seen.add(tool["name"])
        out.append(tool)
    return out
