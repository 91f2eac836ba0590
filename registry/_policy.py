"""Policy decisions and the listener signatures of the pipeline.

Order of one call::

    pre-execute waterfall (Allow / Deny / Ask / Cancel)
      -> guards (monotonic: may only deny)
      -> around-execute wrappers (may only replace the signal)
      -> body -> output snapshot + validation -> render
      -> post-execute waterfall (Accept / Block)
      -> finalize_content -> result observers (contained)

Every hook works on copies: the hooks before the body share one copy of the
arguments, post-execute listeners get their own copy of the arguments and of the
result, observers one copy of the final result. Whatever a hook mutates in
place, the body runs with the validated arguments, later stages see what ran,
and the caller gets the value that was validated; only a decision changes a
result (``Accept.with_value`` is validated again).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from ._json import JsonValue
from ._types import ContentBlock, DispatchExecution, ErrorInfo, ToolExecution, ToolResult

__all__ = [
    "Accept",
    "Allow",
    "ApprovalFn",
    "Ask",
    "Block",
    "Cancel",
    "Deny",
    "GuardDenial",
    "GuardFn",
    "PostDecision",
    "PostExecuteFn",
    "PreDecision",
    "PreExecuteFn",
    "ResultObserver",
    "WrapperFn",
    "ask_before_destructive",
]


@dataclass(frozen=True, slots=True)
class Allow:
    """Let the call proceed."""


@dataclass(frozen=True, slots=True)
class Deny:
    """Refuse the call; ``reason`` is what the model reads."""

    reason: str
    info: ErrorInfo | None = None


@dataclass(frozen=True, slots=True)
class Ask:
    """Ask the approval callback; without one (or on refusal) the call is denied."""

    reason: str | None = None


@dataclass(frozen=True, slots=True)
class Cancel:
    """End the call as cancelled before dispatch, without a policy denial."""


PreDecision: TypeAlias = Allow | Deny | Ask | Cancel


@dataclass(frozen=True, slots=True, kw_only=True)
class Accept:
    """Keep the result; optionally replace its content *or* its value (not both)."""

    content: Sequence[ContentBlock] | None = None
    value: Any = None
    replace_value: bool = False
    additional_contexts: Sequence[JsonValue] = ()

    @classmethod
    def with_value(
        cls, value: JsonValue, *, additional_contexts: Sequence[JsonValue] = ()
    ) -> Accept:
        """Replace the canonical value (revalidated against the output schema)."""
        return cls(value=value, replace_value=True, additional_contexts=additional_contexts)


@dataclass(frozen=True, slots=True, kw_only=True)
class Block:
    """Turn the result into a failure carrying corrective ``feedback``."""

    feedback: str | Sequence[ContentBlock]
    info: ErrorInfo | None = None
    additional_contexts: Sequence[JsonValue] = ()


PostDecision: TypeAlias = Accept | Block


@dataclass(frozen=True, slots=True)
class GuardDenial:
    """A guard's denial with structured identity."""

    reason: str
    info: ErrorInfo | None = None


Approval: TypeAlias = bool | Literal["allow", "reject", "cancel"]

PreExecuteFn: TypeAlias = Callable[
    [ToolExecution, Callable[[], Awaitable[PreDecision]]], Awaitable[PreDecision]
]
PostExecuteFn: TypeAlias = Callable[
    [ToolExecution, ToolResult, Callable[[], Awaitable[PostDecision]]], Awaitable[PostDecision]
]
WrapperFn: TypeAlias = Callable[
    [DispatchExecution, Callable[[], Awaitable[ToolResult]]], Awaitable[ToolResult]
]
GuardFn: TypeAlias = Callable[[ToolExecution], "str | GuardDenial | None"]
ApprovalFn: TypeAlias = Callable[[ToolExecution, "str | None"], Awaitable[Approval]]
ResultObserver: TypeAlias = Callable[[ToolExecution, ToolResult], "Awaitable[None] | None"]


async def ask_before_destructive(
    execution: ToolExecution, call_next: Callable[[], Awaitable[PreDecision]]
) -> PreDecision:
    """A ready-made pre-execute listener: ask before a tool that may destroy data.

    A tool whose :class:`ToolAnnotations` say it may destroy data (not read-only,
    and not declared non-destructive: the MCP defaults) goes to the registry's
    approval callback with a reason naming it; without a callback it is denied
    as ``APPROVAL_UNAVAILABLE``. Tools without annotations, and everything the
    next listeners decide, pass through. Install it with
    ``registry.on_pre_execute(ask_before_destructive)``.
    """
    definition = execution.definition
    annotations = None if definition is None else definition.annotations
    if annotations is not None and annotations.may_destroy:
        title = annotations.title or execution.name
        return Ask(f"{title} may change or destroy data")
    return await call_next()
