"""The model-facing rendering of a ``run_code`` result."""

from __future__ import annotations

from typing import Any

import orjson

__all__ = ["EMPTY_RUN", "format_json", "render_run_result"]

EMPTY_RUN = "(run_code completed with no output)"
#: Total indentation a rendered result may use; deeper subtrees stay compact.
MAX_INDENT = 10
_STEP = 2


def format_json(value: Any) -> str:
    """Pretty JSON whose total indentation is capped at ``MAX_INDENT`` characters.

    Iterative (an explicit stack), so a deep value cannot exhaust the call stack.
    """
    out: list[str] = []
    # Stack items: ("value", value, depth) or ("text", literal)
    stack: list[tuple[str, Any, int]] = [("value", value, 0)]
    while stack:
        kind, item, depth = stack.pop()
        if kind == "text":
            out.append(item)
            continue
        is_container = isinstance(item, dict | list) and len(item) > 0
        if not is_container or (depth + 1) * _STEP > MAX_INDENT:
            out.append(orjson.dumps(item).decode())
            continue
        pad = " " * ((depth + 1) * _STEP)
        close_pad = " " * (depth * _STEP)
        if isinstance(item, dict):
            opener, closer = "{", "}"
            entries = list(item.items())
        else:
            opener, closer = "[", "]"
            entries = [(None, v) for v in item]
        pending: list[tuple[str, Any, int]] = [("text", opener, 0)]
        for index, (key, child) in enumerate(entries):
            prefix = "\n" + pad
            if key is not None:
                prefix += orjson.dumps(key).decode() + ": "
            pending.append(("text", prefix, 0))
            pending.append(("value", child, depth + 1))
            if index < len(entries) - 1:
                pending.append(("text", ",", 0))
        pending.append(("text", "\n" + close_pad + closer, 0))
        stack.extend(reversed(pending))
    return "".join(out)


def render_run_result(value: dict[str, Any]) -> str:
    """Printed lines, then the result (a string raw, anything else as capped pretty JSON)."""
    parts: list[str] = list(value.get("logs", []))
    if "result" in value:
        result = value["result"]
        parts.append(result if isinstance(result, str) else format_json(result))
    return "\n".join(parts) if parts else EMPTY_RUN
