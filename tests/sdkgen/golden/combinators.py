# Tool SDK (1 tool). Declarations only: at run time `tools` and
# `ToolCallError` already exist. Call `await tools.name(args)`.

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal, NotRequired, Protocol, TypeAlias, TypedDict, overload

JsonValue: TypeAlias = "dict[str, JsonValue] | list[JsonValue] | str | int | float | bool | None"


class ToolCallError(Exception):
    """Raised by `await tools.x(args)` when that tool call failed (denied, invalid, errored)."""

    tool_name: str  # the tool that failed
    message: str  # what went wrong, human-readable
    code: str | None  # the failure's stable code (NOT_FOUND, TOOL_TIMEOUT, TOOL_DENIED, ...), or None

class DrawArgsBasedOption1(TypedDict):
    a: int
    common: NotRequired[str]

class DrawArgsBasedOption2(TypedDict):
    b: int
    common: NotRequired[str]

class DrawArgsConstraintOnly(TypedDict):
    """Give exactly one of: p | q."""
    p: NotRequired[str]
    q: NotRequired[str]

class DrawArgsMerged(TypedDict):
    a: str
    b: NotRequired[bool]

class DrawArgsOpenWithProps(TypedDict):
    """Other keys are allowed too; their values are int."""
    a: NotRequired[str]

class DrawArgsShapeOption1(TypedDict):
    kind: Literal["circle"]
    r: float

class DrawArgsShapeOption2(TypedDict):
    kind: Literal["square"]
    side: float

class DrawArgs(TypedDict):
    based: NotRequired[DrawArgsBasedOption1 | DrawArgsBasedOption2]
    constraint_only: NotRequired[DrawArgsConstraintOnly]
    map_of_lists: NotRequired[dict[str, list[float]]]
    maybe: NotRequired[str | None]
    merged: NotRequired[DrawArgsMerged]
    mixed_enum: NotRequired[Literal["x", 1, True] | float | None]
    nullable: NotRequired[str | None]
    object_enum: NotRequired[JsonValue]  # [one of: [{"k":1},"plain"]]
    open_with_props: NotRequired[DrawArgsOpenWithProps]
    pattern_map: NotRequired[dict[str, str]]
    shape: NotRequired[DrawArgsShapeOption1 | DrawArgsShapeOption2]
    tuple_items: NotRequired[list[str | int]]
    typelist: NotRequired[int | str | None]

class Tools(Protocol):
    """Every tool: `await tools.name(args)`; exotic names: `await tools["name"](args)`."""

    async def draw(self, args: DrawArgs) -> JsonValue:
        """Draw shapes."""

tools: Tools
