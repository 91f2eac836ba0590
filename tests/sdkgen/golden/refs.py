# Tool SDK (2 tools). Declarations only: at run time `tools` and
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

class WalkGraphNode(TypedDict):
    edges: NotRequired[list[WalkGraphNode]]
    id: NotRequired[int]

class WalkGraphArgs(TypedDict):
    root: NotRequired[WalkGraphNode]

class WalkTreeNode(TypedDict):
    """A node of the tree."""
    name: str
    children: NotRequired[list[WalkTreeNode]]

WalkTreeNested: TypeAlias = "str | list[WalkTreeNested]"

class WalkTreeArgs(TypedDict):
    root: WalkTreeNode
    again: NotRequired[WalkTreeArgs]
    escaped: NotRequired[int]
    missing: NotRequired[Any]  # [unresolved $ref "#/$defs/Nope"]
    nested: NotRequired[WalkTreeNested]
    old_style: NotRequired[Literal["red", "green"]]
    remote: NotRequired[Any]  # [unresolved $ref "https://example.com/s.json"]

class WalkTreePage(TypedDict):
    count: int
    next: NotRequired[WalkTreePage | None]

WalkTreeResult: TypeAlias = WalkTreePage

class Tools(Protocol):
    """Every tool: `await tools.name(args)`; exotic names: `await tools["name"](args)`."""

    async def walk_graph(self, args: WalkGraphArgs) -> JsonValue:
        """Two tools may share def names."""

    async def walk_tree(self, args: WalkTreeArgs) -> WalkTreeResult:
        """Walk a tree."""

tools: Tools
