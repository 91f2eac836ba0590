"""format_json: capped pretty JSON for a run's result, stack-safe at any depth."""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from typing import Any

import pytest

from ptc import format_json
from registry._json import MAX_DEPTH


def nest(levels: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(levels - 1):
        value = [value]
    return value


def with_little_stack(fn: Callable[[], Any], headroom: int = 40) -> Any:
    """Run ``fn`` with only ``headroom`` Python frames to spare: a recursive walk fails."""
    depth = len(inspect.stack(0))
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(depth + headroom)
    try:
        return fn()
    finally:
        sys.setrecursionlimit(limit)


def capped_nest(levels: int) -> str:
    """``nest(levels)`` indented for five levels (ten characters), then compact."""
    opening = [" " * (2 * i) + "[" for i in range(5)]
    closing = [" " * (2 * i) + "]" for i in reversed(range(5))]
    inner = " " * 10 + "[" * (levels - 5) + "]" * (levels - 5)
    return "\n".join([*opening, inner, *closing])


@pytest.mark.parametrize("shape", ["list", "object"])
def test_format_json_is_stack_safe_at_the_snapshots_depth_and_beyond(shape: str) -> None:
    # The deepest value the registry's snapshot admits, then far deeper: the
    # compact part is no longer left to orjson, which refuses past 254 levels.
    for levels in (MAX_DEPTH, 4 * MAX_DEPTH, 40 * MAX_DEPTH):
        value: Any = nest(levels) if shape == "list" else {"deep": nest(levels - 1)}
        text = with_little_stack(lambda: format_json(value))  # noqa: B023
        if shape == "list":
            assert text == capped_nest(levels)
        else:
            lines = text.splitlines()
            assert lines[:2] == ["{", '  "deep": [']
            assert max(len(line) - len(line.lstrip(" ")) for line in lines) == 10
            assert lines[-1] == "}"
            assert text.count("[") == text.count("]") == levels - 1
