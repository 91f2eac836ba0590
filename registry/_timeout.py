"""The built-in around-execute wrapper that enforces a definition's ``timeout``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio

from ._exceptions import ABORTED, ABORTED_BEFORE_DISPATCH, TOOL_TIMEOUT
from ._signal import AbortSignal
from ._types import DispatchExecution, ErrorInfo, ToolFailure, ToolResult

__all__ = ["TimeoutReason", "timeout_wrapper"]


class TimeoutReason:
    """The abort reason the timeout wrapper gives its signal."""

    __slots__ = ("seconds",)

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def __repr__(self) -> str:
        return f"timed out after {self.seconds:g}s"


async def timeout_wrapper(
    dispatch: DispatchExecution, call_next: Callable[[], Awaitable[ToolResult]]
) -> ToolResult:
    """Abort the call's signal once its definition's ``timeout`` elapses.

    The body is cancelled through the replaced signal and awaited to the end;
    an outcome that cancellation produced (or a success that raced it) becomes
    ``TOOL_TIMEOUT``. A more specific failure of the tool itself is kept.
    """
    definition = dispatch.definition
    seconds = None if definition is None else definition.timeout
    if seconds is None:
        return await call_next()
    previous = dispatch.signal
    deadline_signal = AbortSignal()
    fused, detach = AbortSignal.any(previous, deadline_signal)
    dispatch.signal = fused
    timed_out = False
    try:
        async with anyio.create_task_group() as tg:

            async def expire() -> None:
                nonlocal timed_out
                await anyio.sleep(seconds)
                # The deadline owns the outcome only if it fired first: a caller
                # abort that arrives later (during cleanup) cannot take it back.
                timed_out = not (previous.aborted or dispatch.execution.signal.aborted)
                deadline_signal.abort(TimeoutReason(seconds))

            tg.start_soon(expire)
            try:
                result = await call_next()
            finally:
                tg.cancel_scope.cancel()
    finally:
        dispatch.signal = previous
        detach()
    if timed_out:
        info = result.error.info if result.is_error else None
        if not result.is_error or (
            info is not None and info.code in (ABORTED, ABORTED_BEFORE_DISPATCH)
        ):
            return ToolFailure.of(
                f"{dispatch.name} timed out after {seconds:g}s",
                ErrorInfo(name="ToolTimeoutError", code=TOOL_TIMEOUT),
                additional_contexts=result.additional_contexts,
            )
    return result
