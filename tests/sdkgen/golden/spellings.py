# Tool SDK (4 tools). Declarations only: at run time `tools` and
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

class AnthropicToolArgs(TypedDict):
    city: str

class ChatToolArgs(TypedDict):
    flag: NotRequired[bool]

class McpToolArgs(TypedDict):
    q: str

class McpToolResult(TypedDict):
    hits: int

class OpenaiToolArgs(TypedDict):
    n: int

class Tools(Protocol):
    """Every tool: `await tools.name(args)`; exotic names: `await tools["name"](args)`."""

    async def anthropic_tool(self, args: AnthropicToolArgs) -> JsonValue:
        """Anthropic spelling."""

    async def chat_tool(self, args: ChatToolArgs) -> JsonValue:
        ...

    async def mcp_tool(self, args: McpToolArgs) -> McpToolResult:
        """MCP spelling."""

    async def openai_tool(self, args: OpenaiToolArgs) -> JsonValue:
        """OpenAI function tool."""

tools: Tools
