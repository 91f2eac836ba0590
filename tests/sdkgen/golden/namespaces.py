# Tool SDK (21 tools). Declarations only: at run time `tools` and
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

GitToolsArgs: TypeAlias = dict[str, JsonValue]

ToolsXArgs: TypeAlias = dict[str, JsonValue]

PrivateXArgs: TypeAlias = dict[str, JsonValue]

ClassXArgs: TypeAlias = dict[str, JsonValue]

DescribeSchemaArgs: TypeAlias = dict[str, JsonValue]

class EchoArgs(TypedDict):
    text: str

EverythingGetTinyImageArgs: TypeAlias = dict[str, JsonValue]

GitJsonValueArgs: TypeAlias = dict[str, JsonValue]

GitABArgs: TypeAlias = dict[str, JsonValue]

class GitLogArgs(TypedDict):
    repo_path: str
    max_count: NotRequired[int]  # (min 1)

GitMyToolArgs: TypeAlias = dict[str, JsonValue]

GitSearchArgs: TypeAlias = dict[str, JsonValue]

class GitStatusArgs(TypedDict):
    repo_path: str  # Path to the Git repository.

class GitStatusResult(TypedDict):
    clean: bool
    branch: NotRequired[str]

ListXArgs: TypeAlias = dict[str, JsonValue]

MemoryArgs: TypeAlias = dict[str, JsonValue]

class MemoryReadArgs(TypedDict):
    key: str

MyNsBArgs: TypeAlias = dict[str, JsonValue]

MyNsAArgs: TypeAlias = dict[str, JsonValue]

class SearchArgs(TypedDict):
    q: str

class TimeGetCurrentTimeArgs(TypedDict):
    timezone: str

TimeNowArgs: TypeAlias = dict[str, JsonValue]

class GitTools2(Protocol):
    """Tools of `git`: `await tools.git.name(args)`."""

    async def log(self, args: GitLogArgs) -> JsonValue:
        """Shows the commit logs."""

    async def search(self, args: GitSearchArgs) -> JsonValue:
        """A rest named search is still an attribute of its namespace."""

    async def status(self, args: GitStatusArgs) -> GitStatusResult:
        """Shows the working tree status."""

class MyNsTools(Protocol):
    """Tools of `myNs`: `await tools.myNs.name(args)`."""

    async def b(self, args: MyNsBArgs) -> JsonValue:
        """Pascal-cases like my_ns."""

class MyNsTools2(Protocol):
    """Tools of `my_ns`: `await tools.my_ns.name(args)`."""

    async def a(self, args: MyNsAArgs) -> JsonValue:
        """Pascal-cases like myNs."""

class TimeTools(Protocol):
    """Tools of `time`: `await tools.time.name(args)`."""

    async def get_current_time(self, args: TimeGetCurrentTimeArgs) -> JsonValue:
        """Current time in a timezone."""

    async def now(self, args: TimeNowArgs) -> JsonValue:
        """Now."""

class Tools(Protocol):
    """Every tool: `await tools.name(args)`; exotic names: `await tools["name"](args)`; namespaced tools: `await tools.namespace.name(args)`."""

    git: GitTools2
    myNs: MyNsTools
    my_ns: MyNsTools2
    time: TimeTools

    async def GitTools(self, args: GitToolsArgs) -> JsonValue:
        """Takes the class name the git namespace wants."""

    async def echo(self, args: EchoArgs) -> JsonValue:
        """A plain tool."""

    async def memory(self, args: MemoryArgs) -> JsonValue:
        """A tool named like a namespace."""

    @overload
    def __getitem__(self, name: Literal["Tools.x"]) -> Callable[[ToolsXArgs], Awaitable[JsonValue]]:
        # usage: await tools["Tools.x"](args)
        """A reserved namespace."""

    @overload
    def __getitem__(self, name: Literal["_private.x"]) -> Callable[[PrivateXArgs], Awaitable[JsonValue]]:
        # usage: await tools["_private.x"](args)
        """Not a namespace."""

    @overload
    def __getitem__(self, name: Literal["class.x"]) -> Callable[[ClassXArgs], Awaitable[JsonValue]]:
        # usage: await tools["class.x"](args)
        """A keyword: not a namespace."""

    @overload
    def __getitem__(self, name: Literal["describe.schema"]) -> Callable[[DescribeSchemaArgs], Awaitable[JsonValue]]:
        # usage: await tools["describe.schema"](args)
        """In a namespace named like the discovery method."""

    @overload
    def __getitem__(self, name: Literal["everything.get-tiny-image"]) -> Callable[[EverythingGetTinyImageArgs], Awaitable[JsonValue]]:
        # usage: await tools["everything.get-tiny-image"](args)
        """No attribute rest: no namespace class."""

    @overload
    def __getitem__(self, name: Literal["git.JsonValue"]) -> Callable[[GitJsonValueArgs], Awaitable[JsonValue]]:
        # usage: await tools["git.JsonValue"](args)
        """A rest named like an SDK type."""

    @overload
    def __getitem__(self, name: Literal["git.a.b"]) -> Callable[[GitABArgs], Awaitable[JsonValue]]:
        # usage: await tools["git.a.b"](args)
        """A rest with a dot of its own."""

    @overload
    def __getitem__(self, name: Literal["git.my-tool"]) -> Callable[[GitMyToolArgs], Awaitable[JsonValue]]:
        # usage: await tools["git.my-tool"](args)
        """A rest that is no attribute name."""

    @overload
    def __getitem__(self, name: Literal["list.x"]) -> Callable[[ListXArgs], Awaitable[JsonValue]]:
        # usage: await tools["list.x"](args)
        """A builtin's name as a namespace."""

    @overload
    def __getitem__(self, name: Literal["memory.read"]) -> Callable[[MemoryReadArgs], Awaitable[JsonValue]]:
        # usage: await tools["memory.read"](args)
        """In a namespace that collides with a tool."""

    @overload
    def __getitem__(self, name: Literal["search"]) -> Callable[[SearchArgs], Awaitable[JsonValue]]:
        # usage: await tools["search"](args)
        """A tool named like the discovery method: tools["search"] only."""

tools: Tools
