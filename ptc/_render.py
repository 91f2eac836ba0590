"""The model-facing rendering of a ``run_code`` result."""

from __future__ import annotations

from typing import Any

from registry import dumps_pretty

__all__ = ["EMPTY_RUN", "format_json", "render_run_result"]

EMPTY_RUN = "(run_code completed with no output)"
#: Total indentation a rendered result may use; deeper subtrees stay compact.
MAX_INDENT = 10


def format_json(value: Any) -> str:
    """Pretty JSON whose total indentation is capped at ``MAX_INDENT`` characters.

    Stack-safe at any depth (``registry.dumps_pretty``: an explicit stack where
    nesting goes deeper than orjson does), so a deep value cannot exhaust the stack.
    """
    return dumps_pretty(value, max_indent=MAX_INDENT)


def render_run_result(value: dict[str, Any]) -> str:
    """Printed lines, then the result (a string raw, anything else as capped pretty JSON)."""
    parts: list[str] = list(value.get("logs", []))
    if "result" in value:
        result = value["result"]
        parts.append(result if isinstance(result, str) else format_json(result))
    return "\n".join(parts) if parts else EMPTY_RUN
