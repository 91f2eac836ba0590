"""The value types of one tool call: definition, call, execution views, results."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias, TypedDict

from ._json import JsonValue
from ._signal import AbortSignal

if TYPE_CHECKING:
    from ._registry import ToolRegistry

__all__ = [
    "ContentBlock",
    "ErrorInfo",
    "ExecutionMode",
    "ExecutionToken",
    "FailureDetail",
    "ProgressFn",
    "ToolAnnotations",
    "ToolCall",
    "ToolDefinition",
    "ToolExecution",
    "ToolFailure",
    "ToolOutput",
    "ToolResult",
    "ToolReturn",
    "ToolRunContext",
    "ToolSuccess",
]


class TextBlock(TypedDict):
    """The one content block every tool can produce."""

    type: Literal["text"]
    text: str


#: A model-facing content block (``{"type": "text", "text": ...}`` and friends).
ContentBlock: TypeAlias = dict[str, Any]
ExecutionMode: TypeAlias = Literal["parallel", "exclusive"]


def text_block(text: str) -> ContentBlock:
    """One text content block."""
    return {"type": "text", "text": text}


class ExecutionToken:
    """Opaque identity of one execution; supports equality only.

    It never crosses a model, log, or worker boundary: it has no stable text
    form and refuses to be pickled or serialised.
    """

    __slots__ = ("__weakref__",)

    def __repr__(self) -> str:
        return f"<ExecutionToken {id(self):#x}>"

    def __reduce__(self) -> Any:
        raise TypeError("an ExecutionToken cannot be serialised")


# --------------------------------------------------------------------------- definitions


class RenderFn(Protocol):
    def __call__(self, args: Any, value: Any, /) -> Sequence[ContentBlock]: ...


class ExecuteFn(Protocol):
    def __call__(self, args: Any, ctx: ToolRunContext, /) -> Awaitable[Any]: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolOutput:
    """The canonical output declaration of a tool.

    Attributes:
        schema: JSON Schema every successful value must satisfy.
        render: pure ``(args, value) -> content blocks``; default renders strings
            raw and any other value as pretty JSON.
        meta: optional pure ``(args, value) -> JSON`` presentation metadata, for
            a UI showing a direct call: not computed for a nested dispatch (a call
            with a ``parent``, e.g. from a ``run_code`` program); if it raises or
            is not JSON, the call still succeeds, without ``meta`` (logged).
    """

    schema: Mapping[str, Any]
    render: RenderFn | None = None
    meta: Callable[[Any, Any], Any] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolAnnotations:
    """What a tool says about its behaviour, for policy to read (MCP's tool annotations).

    Every field is a hint, ``None`` when the tool did not say. The properties
    apply the MCP defaults: a tool that does not say it is read-only may
    change things, and one that may change things is destructive unless it
    says it is not.

    Attributes:
        title: a human-readable title.
        read_only: the tool changes nothing (``readOnlyHint``).
        destructive: its changes may destroy data (``destructiveHint``).
        idempotent: calling it again with the same arguments changes nothing more
            (``idempotentHint``).
        open_world: it reaches an open world, e.g. the web (``openWorldHint``).
    """

    title: str | None = None
    read_only: bool | None = None
    destructive: bool | None = None
    idempotent: bool | None = None
    open_world: bool | None = None

    @property
    def may_destroy(self) -> bool:
        """Whether a call may destroy data, by the MCP defaults."""
        return self.read_only is not True and self.destructive is not False


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolDefinition:
    """A tool: model-facing schema, canonical output contract and body.

    Attributes:
        name: the name the model calls.
        description: what the tool does, for the model.
        parameters: JSON Schema of the argument object.
        output: the canonical output declaration (mandatory).
        execute: ``async (args, ctx) -> JSON value``; must observe ``ctx.signal``.
        concurrency_safe: ``True`` or a pure ``(args) -> bool`` classifier; only an
            exact ``True`` lets a call overlap with others.
        timeout: seconds before the call fails as ``TOOL_TIMEOUT`` (enforced by
            the built-in timeout wrapper); never shown to the model.
        finalize_content: sync ``(execution, result) -> content | None`` run once for
            every result, last, to enforce a content-only invariant.
        annotations: behaviour hints (read-only, destructive, ...) for policy.
    """

    name: str
    description: str
    parameters: Mapping[str, Any]
    output: ToolOutput
    execute: ExecuteFn
    concurrency_safe: bool | Callable[[Any], bool] = False
    timeout: float | None = None
    finalize_content: (
        Callable[[ToolExecution, ToolResult], Sequence[ContentBlock] | None] | None
    ) = None
    annotations: ToolAnnotations | None = None


@dataclass(frozen=True, slots=True)
class ToolReturn:
    """A body's return value with the content the model should see for it.

    Returned by ``execute`` instead of a bare value, it replaces the output's
    renderer for this call: ``value`` is still the canonical value (snapshotted
    and validated against the output schema, what a program receives), and
    ``content`` is what a direct call shows (images, resources and the like).
    """

    value: Any
    content: Sequence[ContentBlock]


#: ``(progress, total, message)``: one progress report of a running call.
ProgressFn: TypeAlias = Callable[["ToolExecution", float, "float | None", "str | None"], None]


# --------------------------------------------------------------------------- calls


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCall:
    """One call's input, as the caller describes it.

    Attributes:
        call_id: the caller's id for the call (the model's tool-call id).
        name: the tool to call.
        arguments: the call's arguments; snapshotted as lossless JSON.
        scope: the calling scope (an agent); ``None`` is the global view.
        parent: the token of the enclosing execution (``run_code``), if any.
        signal: caller-owned cancellation; a fresh one is used when omitted.
        root_call_id: the root model call of this tree; defaults to ``call_id``.
    """

    call_id: str
    name: str
    arguments: Any = field(default_factory=dict)
    scope: str | None = None
    parent: ExecutionToken | None = None
    signal: AbortSignal | None = None
    root_call_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolExecution:
    """The read-only pipeline view of one call, after its arguments were snapshotted.

    Attributes:
        token: fresh opaque identity of this execution.
        definition: the resolved definition (``None`` for an unknown tool).
        signal: the caller's cancellation signal.
    """

    token: ExecutionToken
    call_id: str
    root_call_id: str
    name: str
    arguments: Any
    scope: str | None
    parent: ExecutionToken | None
    signal: AbortSignal
    definition: ToolDefinition | None


class DispatchExecution:
    """The around-execute view: identity is read-only, ``signal`` may be replaced.

    The registry fuses whatever signal a wrapper installs with the caller's own
    before the body starts, so a replacement can add cancellation but never
    detach the caller's.
    """

    __slots__ = ("execution", "signal")

    def __init__(self, execution: ToolExecution) -> None:
        self.execution = execution
        self.signal: AbortSignal = execution.signal

    @property
    def name(self) -> str:
        return self.execution.name

    @property
    def call_id(self) -> str:
        return self.execution.call_id

    @property
    def arguments(self) -> Any:
        return self.execution.arguments

    @property
    def scope(self) -> str | None:
        return self.execution.scope

    @property
    def definition(self) -> ToolDefinition | None:
        return self.execution.definition


class ToolRunContext:
    """What a tool body receives besides its arguments.

    Attributes:
        execution: the immutable execution identity.
        signal: the cancellation signal the body must observe (caller's fused
            with any wrapper's).
        registry: the registry running the call (for composite tools).
    """

    __slots__ = ("_deferred", "execution", "registry", "signal")

    def __init__(
        self, execution: ToolExecution, signal: AbortSignal, registry: ToolRegistry
    ) -> None:
        self.execution = execution
        self.signal = signal
        self.registry = registry
        self._deferred: list[JsonValue] = []

    @property
    def call_id(self) -> str:
        return self.execution.call_id

    @property
    def name(self) -> str:
        return self.execution.name

    @property
    def scope(self) -> str | None:
        return self.execution.scope

    @property
    def token(self) -> ExecutionToken:
        return self.execution.token

    def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Tell the registry's progress listeners how far this call has come.

        ``progress`` should grow with every report; ``total`` is the value it
        reaches at the end, when known. Listeners run synchronously and their
        failures are logged, never raised here.
        """
        self.registry._report_progress(self.execution, progress, total, message)

    def defer_context(self, context: JsonValue) -> None:
        """Attach one context (e.g. a user message) to this call's final result.

        Contexts are delivered after the result, in call order, even when the
        tool later fails or is cancelled.
        """
        self._deferred.append(context)

    @property
    def deferred_contexts(self) -> tuple[JsonValue, ...]:
        return tuple(self._deferred)


# --------------------------------------------------------------------------- results


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorInfo:
    """Structured identity of a failure: an error class name and a stable code."""

    name: str
    code: str
    reason: str | None = None

    def to_json(self) -> dict[str, str]:
        out = {"name": self.name, "code": self.code}
        if self.reason is not None:
            out["reason"] = self.reason
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class FailureDetail:
    """Why a call failed: the model-facing message and optional identity."""

    message: str
    info: ErrorInfo | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"message": self.message}
        if self.info is not None:
            out["info"] = self.info.to_json()
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSuccess:
    """A successful call: the canonical value and its model-facing content."""

    value: Any
    content: list[ContentBlock]
    meta: Any = None
    additional_contexts: tuple[JsonValue, ...] = ()

    @property
    def is_error(self) -> Literal[False]:
        return False

    @property
    def error(self) -> None:
        return None


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolFailure:
    """A failed call: no value, an error detail and ``Error: <message>`` content."""

    error: FailureDetail
    content: list[ContentBlock]
    meta: Any = None
    additional_contexts: tuple[JsonValue, ...] = ()

    @property
    def is_error(self) -> Literal[True]:
        return True

    @classmethod
    def of(
        cls,
        message: str,
        info: ErrorInfo | None = None,
        *,
        additional_contexts: tuple[JsonValue, ...] = (),
    ) -> ToolFailure:
        """A failure whose content is ``Error: <message>``."""
        return cls(
            error=FailureDetail(message=message, info=info),
            content=[text_block(f"Error: {message}")],
            additional_contexts=additional_contexts,
        )


ToolResult: TypeAlias = ToolSuccess | ToolFailure
