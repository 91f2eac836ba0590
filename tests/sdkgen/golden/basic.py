"""## Writing code for run_code

`run_code` takes two required arguments: `code` — the body of an async Python function — and `description`, a short summary of what the program does. Inside the program:

- Call tools as `await tools.name(args)` with one dict of arguments — subscript access for exotic names: `await tools["my-tool"](args)`. A namespaced tool such as `git.status` is `await tools.git.status(args)`. Every call returns the tool's typed canonical JSON value. Arguments must be plain JSON (dict, list, str, int, float, bool, None).
- `await` works at the top level; do not call `asyncio.run()`. `tools` and `ToolCallError` already exist — do not import or define them.
- A FAILED tool call raises `ToolCallError`, whose `tool_name` identifies the failed tool, whose `message` is human-readable and whose `code` is the failure's stable code (`NOT_FOUND`, `TOOL_TIMEOUT`, `TOOL_DENIED`, …; `None` when it has none) — `try`/`except ToolCallError` to handle it and continue, branching on `e.code` when the failures need different handling.
- Independent read-only calls MAY overlap under `asyncio.gather(...)` (`import asyncio`; safe calls run concurrently; mutating calls run alone, in submission order). Sequence dependent work with `await`.
- Emit results with `return` and/or `print(...)`. ONLY what you print or return comes back to you — intermediate tool results never enter the conversation, so extract just what you need.
- To see an image or audio block a tool returned (`{"type": "image", "data": <base64>, "mimeType": ...}`), `return` it, alone or as an item of the returned list: it comes back to you as the image itself, not as text.

The available tools:
"""

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

EchoArgs: TypeAlias = dict[str, JsonValue]

class GetUserArgs(TypedDict):
    login: str

class GetUserResult(TypedDict):
    login: str
    id: NotRequired[int]

class PingArgs(TypedDict):
    pass

PingResult: TypeAlias = Literal["pong"]

class SearchIssuesArgsAuthor(TypedDict):
    login: str
    id: NotRequired[int]

class SearchIssuesArgs(TypedDict):
    query: str  # Search query (minLength 1)
    author: NotRequired[SearchIssuesArgsAuthor]  # Who wrote it
    extra: NotRequired[dict[str, int]]  # Counters by name
    labels: NotRequired[list[str]]  # (maxItems 10)
    legacy: NotRequired[bool]  # (deprecated)
    order: NotRequired[Literal["asc", "desc"]]  # (default "desc")
    per_page: NotRequired[int]  # Results per page (default 30, min 1, max 100)
    since: NotRequired[str]  # Only issues updated after this time (format "date-time")

class SearchIssuesResultItemsItem(TypedDict):
    number: int
    title: str
    state: NotRequired[Literal["open", "closed"]]
    user: NotRequired[SearchIssuesArgsAuthor]

class SearchIssuesResult(TypedDict):
    items: list[SearchIssuesResultItemsItem]
    total: int
    next_cursor: NotRequired[str | None]

class Tools(Protocol):
    """Every tool: `await tools.name(args)`; exotic names: `await tools["name"](args)`."""

    async def echo(self, args: EchoArgs) -> JsonValue:
        ...

    async def get_user(self, args: GetUserArgs) -> GetUserResult:
        """Get a user by login."""

    async def ping(self, args: PingArgs) -> PingResult:
        """Check the connection."""

    async def search_issues(self, args: SearchIssuesArgs) -> SearchIssuesResult:
        """Search issues and pull requests."""

tools: Tools
