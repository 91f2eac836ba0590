"""Shared builders for the pipeline, policy and cancellation tests."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import anyio
import anyio.lowlevel

from registry import (
    ContentBlock,
    ToolCall,
    ToolDefinition,
    ToolExecution,
    ToolFailure,
    ToolOutput,
    ToolResult,
    ToolRunContext,
    ToolSuccess,
)

TEXT_PARAMS: Mapping[str, Any] = {
    "type": "object",
    "properties": {"text": {"type": "string"}},
    "required": ["text"],
    "additionalProperties": False,
}
STRING_OUTPUT: Mapping[str, Any] = {"type": "string"}
ANY_OUTPUT: Mapping[str, Any] = {}


async def echo(args: Any, ctx: ToolRunContext) -> Any:
    return args["text"]


def make_tool(
    name: str = "echo",
    execute: Callable[[Any, ToolRunContext], Any] = echo,
    *,
    parameters: Mapping[str, Any] = TEXT_PARAMS,
    output_schema: Mapping[str, Any] = STRING_OUTPUT,
    render: Any = None,
    meta: Any = None,
    timeout: float | None = None,
    concurrency_safe: Any = False,
    finalize_content: Any = None,
) -> ToolDefinition:
    return ToolDefinition(
        name=name,
        description=f"The {name} tool.",
        parameters=parameters,
        output=ToolOutput(schema=output_schema, render=render, meta=meta),
        execute=execute,
        timeout=timeout,
        concurrency_safe=concurrency_safe,
        finalize_content=finalize_content,
    )


def make_call(name: str = "echo", arguments: Any = None, **kwargs: Any) -> ToolCall:
    return ToolCall(
        call_id=kwargs.pop("call_id", "call-1"),
        name=name,
        arguments={"text": "hi"} if arguments is None else arguments,
        **kwargs,
    )


def text(value: str) -> list[ContentBlock]:
    return [{"type": "text", "text": value}]


def assert_success(result: ToolResult, value: Any, content: str | None = None) -> ToolSuccess:
    assert isinstance(result, ToolSuccess), result
    assert result.is_error is False
    assert result.value == value
    if content is not None:
        assert result.content == text(content)
    return result


def assert_failure(
    result: ToolResult, code: str | None, message: str | None = None, *, name: str | None = None
) -> ToolFailure:
    """A failure whose content is exactly ``Error: <message>`` and whose code is ``code``."""
    assert isinstance(result, ToolFailure), result
    assert result.is_error is True
    assert not hasattr(result, "value")
    assert result.content == text(f"Error: {result.error.message}")
    if code is None:
        assert result.error.info is None
    else:
        assert result.error.info is not None, result.error
        assert result.error.info.code == code
    if name is not None:
        assert result.error.info is not None
        assert result.error.info.name == name
    if message is not None:
        assert result.error.message == message
    return result


class Recorder:
    """Collects named events in order, with helpers that build recording listeners."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self.executions: list[ToolExecution] = []
        self.results: list[ToolResult] = []

    def observer(self, label: str = "observe") -> Callable[[ToolExecution, ToolResult], None]:
        def observe(execution: ToolExecution, result: ToolResult) -> None:
            self.events.append(label)
            self.executions.append(execution)
            self.results.append(result)

        return observe


class BlockingBody:
    """A tool body that blocks until cancelled, then runs a shielded cleanup.

    ``release`` gates the cleanup so a test can prove the pipeline waits for it;
    it is set from the start unless ``gated`` is true.
    """

    def __init__(self, *, gated: bool = False, defer: Sequence[Any] = ()) -> None:
        self.started = anyio.Event()
        self.cancelled = anyio.Event()
        self.release = anyio.Event()
        if not gated:
            self.release.set()
        self.defer = list(defer)
        self.cleanup_done = False
        self.ctx: ToolRunContext | None = None

    async def __call__(self, args: Any, ctx: ToolRunContext) -> Any:
        self.ctx = ctx
        for context in self.defer:
            ctx.defer_context(context)
        self.started.set()
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            self.cancelled.set()
            raise
        finally:
            with anyio.CancelScope(shield=True):
                # The cleanup really awaits: the pipeline must wait for it.
                await anyio.lowlevel.checkpoint()
                await self.release.wait()
            self.cleanup_done = True
        return "unreachable"  # pragma: no cover
