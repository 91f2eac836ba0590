# Tool SDK (17 tools). Declarations only: at run time `tools` and
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

class ToolArgs(TypedDict):
    x: int

class JsonValueArgs(TypedDict):
    x: int

class MyToolArgs(TypedDict):
    x: int

class ToolsArgs(TypedDict):
    x: int

class InitArgs(TypedDict):
    x: int

class PrivateArgs(TypedDict):
    x: int

class ABArgs(TypedDict):
    x: int

class CafArgs(TypedDict):
    x: int

class ClassArgs(TypedDict):
    x: int

class ListArgs(TypedDict):
    x: int

class MathFactorialArgs(TypedDict):
    x: int

class MyTool2Args(TypedDict):
    x: int

class MyTool3Args(TypedDict):
    x: int

class NewLineArgs(TypedDict):
    x: int

class OkNameArgs(TypedDict):
    x: int

class PrintArgs(TypedDict):
    x: int

class ToolQuoteSlashArgs(TypedDict):
    x: int

class MathTools(Protocol):
    """Tools of `math`: `await tools.math.name(args)`."""

    async def factorial(self, args: MathFactorialArgs) -> JsonValue:
        """The math.factorial tool."""

class Tools(Protocol):
    """Every tool: `await tools.name(args)`; exotic names: `await tools["name"](args)`; namespaced tools: `await tools.namespace.name(args)`."""

    math: MathTools

    async def MyTool(self, args: MyToolArgs) -> JsonValue:
        """The MyTool tool."""

    async def my_tool(self, args: MyTool3Args) -> JsonValue:
        """The my_tool tool."""

    async def ok_name(self, args: OkNameArgs) -> JsonValue:
        """The ok_name tool."""

    @overload
    def __getitem__(self, name: Literal[""]) -> Callable[[ToolArgs], Awaitable[JsonValue]]:
        # usage: await tools[""](args)
        """The  tool."""

    @overload
    def __getitem__(self, name: Literal["JsonValue"]) -> Callable[[JsonValueArgs], Awaitable[JsonValue]]:
        # usage: await tools["JsonValue"](args)
        """The JsonValue tool."""

    @overload
    def __getitem__(self, name: Literal["Tools"]) -> Callable[[ToolsArgs], Awaitable[JsonValue]]:
        # usage: await tools["Tools"](args)
        """The Tools tool."""

    @overload
    def __getitem__(self, name: Literal["__init__"]) -> Callable[[InitArgs], Awaitable[JsonValue]]:
        # usage: await tools["__init__"](args)
        """The __init__ tool."""

    @overload
    def __getitem__(self, name: Literal["_private"]) -> Callable[[PrivateArgs], Awaitable[JsonValue]]:
        # usage: await tools["_private"](args)
        """The _private tool."""

    @overload
    def __getitem__(self, name: Literal["a b"]) -> Callable[[ABArgs], Awaitable[JsonValue]]:
        # usage: await tools["a b"](args)
        """The a b tool."""

    @overload
    def __getitem__(self, name: Literal["café"]) -> Callable[[CafArgs], Awaitable[JsonValue]]:
        # usage: await tools["café"](args)
        """The café tool."""

    @overload
    def __getitem__(self, name: Literal["class"]) -> Callable[[ClassArgs], Awaitable[JsonValue]]:
        # usage: await tools["class"](args)
        """The class tool."""

    @overload
    def __getitem__(self, name: Literal["list"]) -> Callable[[ListArgs], Awaitable[JsonValue]]:
        # usage: await tools["list"](args)
        """The list tool."""

    @overload
    def __getitem__(self, name: Literal["my-tool"]) -> Callable[[MyTool2Args], Awaitable[JsonValue]]:
        # usage: await tools["my-tool"](args)
        """The my-tool tool."""

    @overload
    def __getitem__(self, name: Literal["new\nline"]) -> Callable[[NewLineArgs], Awaitable[JsonValue]]:
        # usage: await tools["new\nline"](args)
        """The new
        line tool.
        """

    @overload
    def __getitem__(self, name: Literal["print"]) -> Callable[[PrintArgs], Awaitable[JsonValue]]:
        # usage: await tools["print"](args)
        """The print tool."""

    @overload
    def __getitem__(self, name: Literal['tool"quote\\slash']) -> Callable[[ToolQuoteSlashArgs], Awaitable[JsonValue]]:
        # usage: await tools['tool"quote\\slash'](args)
        """The tool"quote\\slash tool."""

tools: Tools
