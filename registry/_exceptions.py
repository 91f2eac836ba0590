"""Every error of the registry, in one tree.

Two families, kept apart on purpose, and the errors of values and MCP servers::

    ToolError                    raised by a tool body: an expected failure, becomes data
    ├── ToolArgsError            INVALID_ARGS
    ├── ToolOutputError          INVALID_TOOL_OUTPUT
    ├── McpCallError             an MCP tool's call failed (MCP_TOOL_ERROR, MCP_TIMEOUT, ...)
    └── (your subclasses)        with their own stable ``code``

    ValueError
    ├── RegistryError            raised to the caller: misuse of the registry itself
    │   ├── RegistrationError    a bad definition or a duplicate/reserved name
    │   ├── RestrictionError     a bad scope, restriction or filter
    │   └── UnknownScopeError    a scope read (also a LookupError) that was never declared
    ├── NotJsonError             snapshot_json(): a value is not lossless JSON (with its path)
    └── McpConfigError           load_mcp_config(): an ``mcpServers`` document is malformed

    ConnectionError
    └── McpConnectionError       connect_mcp(): a server cannot be started, reached or initialised

    ConversionError              internal: a typed tool's argument or result has no
                                 Python or JSON form; the tool's ``execute`` translates
                                 it into ToolArgsError or ToolOutputError

A tool's failure never raises out of :meth:`ToolRegistry.execute`; it becomes a
:class:`ToolFailure`. A misuse of the registry raises at the call site.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from typing import ClassVar, TypeAlias

__all__ = [
    "ABORTED",
    "ABORTED_BEFORE_DISPATCH",
    "APPROVAL_CANCELLED",
    "APPROVAL_REJECTED",
    "APPROVAL_UNAVAILABLE",
    "INVALID_ARGS",
    "INVALID_TOOL_OUTPUT",
    "TOOL_DENIED",
    "TOOL_TIMEOUT",
    "UNKNOWN_TOOL",
    "ConversionError",
    "McpCallError",
    "McpConfigError",
    "McpConnectionError",
    "NotJsonError",
    "RegistrationError",
    "RegistryError",
    "RestrictionError",
    "ToolArgsError",
    "ToolError",
    "ToolOutputError",
    "UnknownScopeError",
]

UNKNOWN_TOOL = "UNKNOWN_TOOL"
INVALID_ARGS = "INVALID_ARGS"
INVALID_TOOL_OUTPUT = "INVALID_TOOL_OUTPUT"
TOOL_TIMEOUT = "TOOL_TIMEOUT"
ABORTED = "ABORTED"
ABORTED_BEFORE_DISPATCH = "ABORTED_BEFORE_DISPATCH"
APPROVAL_REJECTED = "APPROVAL_REJECTED"
APPROVAL_CANCELLED = "APPROVAL_CANCELLED"
APPROVAL_UNAVAILABLE = "APPROVAL_UNAVAILABLE"
TOOL_DENIED = "TOOL_DENIED"


class ToolError(Exception):
    """An expected failure raised by a tool body.

    Subclass it with a stable ``code``; the failure result then carries
    ``info = {name: <class name>, code}``. The message is what the model reads.
    """

    code: ClassVar[str] = "TOOL_ERROR"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code  # type: ignore[misc]


class ToolArgsError(ToolError):
    """The arguments do not satisfy the tool's parameter schema."""

    code = INVALID_ARGS


class ToolOutputError(ToolError):
    """The tool produced a value that breaks its output declaration."""

    code = INVALID_TOOL_OUTPUT


class RegistryError(ValueError):
    """Misuse of the registry by its caller."""


class RegistrationError(RegistryError):
    """A definition cannot be registered."""

    def __init__(self, name: object, problem: str) -> None:
        self.tool_name = name
        self.problem = problem
        super().__init__(f"cannot register tool {name!r}: {problem}")


class RestrictionError(RegistryError):
    """A scope, restriction or reservation is invalid."""


class UnknownScopeError(RegistryError, LookupError):
    """A scope was read (its tools, schemas, policy or a call in it) but never declared.

    Reading never creates a scope: a typo would otherwise show the global view.

    Attributes:
        scope: the name that was looked up.
    """

    def __init__(self, scope: str, known: Iterable[str] = ()) -> None:
        self.scope = scope
        names = sorted(known)
        close = difflib.get_close_matches(scope, names, n=1) if isinstance(scope, str) else []
        if close:
            hint = f" (did you mean {close[0]!r}?)"
        elif names:
            hint = "; declare it with add_scope() or register into it first"
        else:
            hint = "; no scopes are declared (add_scope() declares one)"
        super().__init__(f"unknown scope {scope!r}{hint}")


class NotJsonError(ValueError):
    """A value is not lossless JSON.

    Attributes:
        path: JSON-pointer-like location of the offending value (``$`` is the root).
        problem: what is wrong there.
    """

    def __init__(self, path: str, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"{problem} at {path}")


class McpCallError(ToolError):
    """A call of an MCP tool failed; ``code`` says how (``MCP_TOOL_ERROR``, ``MCP_TIMEOUT``, ...)."""


class McpConfigError(ValueError):
    """An ``mcpServers`` document (or one server's entry) is malformed."""


class McpConnectionError(ConnectionError):
    """A server could not be started, reached or initialised.

    Attributes:
        server: the server's name (its key in the configuration).
        reason: what went wrong, in one sentence (with the end of its stderr).
    """

    def __init__(self, server: str, reason: str) -> None:
        self.server = server
        self.reason = reason
        super().__init__(f"MCP server {server!r}: {reason}")


#: Where a value sits inside an argument or result: keys and indexes from its root.
ValuePath: TypeAlias = tuple[str | int, ...]
_MAX_LISTED = 5


class ConversionError(Exception):
    """Values that cannot be converted; each issue's path is relative to where it was raised."""

    def __init__(self, message: str = "", *, issues: Sequence[tuple[ValuePath, str]] = ()) -> None:
        self.issues: list[tuple[ValuePath, str]] = list(issues) or [((), message)]
        super().__init__(self.issues[0][1])

    def inside(self, key: str | int) -> ConversionError:
        """The same error, one level deeper (under ``key``)."""
        self.issues = [((key, *path), message) for path, message in self.issues]
        return self

    def describe(self) -> str:
        """``message (at $.a[0].b)``, for each issue (the first few)."""
        shown = [f"{message} (at ${_where(path)})" for path, message in self.issues[:_MAX_LISTED]]
        more = len(self.issues) - _MAX_LISTED
        if more > 0:
            shown.append(f"and {more} more")
        return "; ".join(shown)


def _where(path: ValuePath) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)
