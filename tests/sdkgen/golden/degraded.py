# Tool SDK (3 tools; 2 malformed or duplicate entries left out). Declarations only: at run time `tools` and
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

BoolSchemaArgs: TypeAlias = JsonValue

# schema: false
BoolSchemaResult: TypeAlias = Any

NotAnObjectArgs: TypeAlias = str

class WeirdArgsBadRequired(TypedDict):
    z: NotRequired[str]

WeirdArgs = TypedDict("WeirdArgs", {
    "d": dict[str, JsonValue],
    "from": str,  # kw # injected x = 1
    "String": NotRequired[str],
    "__dunder": NotRequired[str],
    "a": NotRequired[JsonValue],
    "anything": NotRequired[JsonValue],
    "bad_items": NotRequired[list[Any]],  # [schema: 3]
    "bad_props": NotRequired[dict[str, JsonValue]],
    "bad_required": NotRequired[WeirdArgsBadRequired],
    "bad_type": NotRequired[Any],  # [schema: {"type":5}]
    "big": NotRequired[Literal[1, 2]],
    "class": NotRequired[bool],
    "empty_enum": NotRequired[Any],  # [schema: {"enum":[]}]
    "f": NotRequired[float],
    "my-key": NotRequired[int],
    "never": NotRequired[Any],  # [schema: false]
    "s": NotRequired[str],  # ends with quote" (default "a\"b\\c", maxLength 5, pattern "^\\d+$")
    "t": NotRequired[list[JsonValue]],
    "unknown": NotRequired[Any],  # [schema: {"type":"wat"}]
    "untyped": NotRequired[JsonValue],
})

class Tools(Protocol):
    """Every tool: `await tools.name(args)`; exotic names: `await tools["name"](args)`."""

    async def bool_schema(self, args: BoolSchemaArgs) -> BoolSchemaResult:
        ...

    async def not_an_object(self, args: NotAnObjectArgs) -> JsonValue:
        ...

    async def weird(self, args: WeirdArgs) -> JsonValue:
        """Bad ""\" desc\\ with nul
        and ""\") ; import os; os.system("x") #
        more
        after "
        """

tools: Tools
