"""Errors of the registry.

Two families, kept apart on purpose::

    ToolError                 raised by a tool body: an expected failure, becomes data
    ├── ToolArgsError         INVALID_ARGS
    ├── ToolOutputError       INVALID_TOOL_OUTPUT
    └── (your subclasses)     with their own stable ``code``

    RegistryError (ValueError)   raised to the caller: misuse of the registry itself
    ├── RegistrationError        a bad definition or a duplicate/reserved name
    ├── RestrictionError         a bad scope, restriction or filter
    └── UnknownScopeError        a scope read (also a LookupError) that was never declared

A tool's failure never raises out of :meth:`ToolRegistry.execute`; it becomes a
:class:`ToolFailure`. A misuse of the registry raises at the call site.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import ClassVar

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
