"""The dispatch bridge: a program's tool calls -> the registry pipeline, via a rolling pool.

Scheduling per run: calls start strictly in submission order; consecutive
``parallel`` calls overlap up to ``max_parallel``; an ``exclusive`` call waits
for the pool to drain, runs alone, and holds back every later call until it
settles. Each started call runs the complete pipeline as a sub-dispatch with id
``<outer id>:ptc:<n>`` and the outer execution's token as ``parent``.

Settlement: :meth:`Bridge.settle` fires the run's abort (which every in-flight
sub-call observes through its signal), drops queued calls, and waits for every
started call to finish and be logged before it returns.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.abc import TaskGroup

from registry import (
    AbortSignal,
    ExecutionMode,
    JsonValue,
    ToolCall,
    ToolFailure,
    ToolRegistry,
    ToolResult,
    ToolRunContext,
)
from runtime import ToolAnswer

from ._events import (
    DispatchLogHook,
    EventSink,
    PtcDispatchLog,
    dispatch_event,
    dispatch_start_event,
    emit,
)

__all__ = ["Bridge"]

logger = logging.getLogger("ptc")


@dataclass(slots=True)
class _Pending:
    number: int
    name: str
    arguments: Any
    mode: ExecutionMode
    is_started: bool = False
    started: anyio.Event | None = None  # created only when the call has to queue
    finished: anyio.Event = field(default_factory=anyio.Event)
    result: ToolResult | None = None
    abandoned: bool = False


class Bridge:
    """One run's bridge between the worker's tool calls and the registry."""

    def __init__(
        self,
        *,
        registry: ToolRegistry,
        ctx: ToolRunContext,
        task_group: TaskGroup,
        max_parallel: int,
        on_event: EventSink | None,
        dispatch_log: DispatchLogHook | None,
    ) -> None:
        self._registry = registry
        self._ctx = ctx
        self._tg = task_group
        self._max_parallel = max_parallel
        self._on_event = on_event
        self._dispatch_log = dispatch_log
        self.signal = AbortSignal()
        self._detach = ctx.signal.add_listener(lambda: self.signal.abort(ctx.signal.reason))
        self._queue: deque[_Pending] = deque()
        self._running = 0
        self._exclusive_running = False
        self._closed = False
        self._count = 0
        self._contexts: dict[int, tuple[JsonValue, ...]] = {}

    @property
    def calls_started(self) -> int:
        return self._count

    async def call_tool(self, name: str, arguments: Any) -> ToolAnswer:
        """The runtime's ``call_tool``: schedule, run through the pipeline, answer."""
        if self._closed:
            return ToolAnswer.failure("the run has ended")
        self._count += 1
        mode = self._registry.execution_mode(
            ToolCall(call_id="", name=name, arguments=arguments, scope=self._ctx.scope)
        )
        pending = _Pending(number=self._count, name=name, arguments=arguments, mode=mode)
        self._queue.append(pending)
        self._pump()
        if not pending.is_started:
            pending.started = anyio.Event()
            try:
                await pending.started.wait()
            except BaseException:
                # Cancelled while queued: abandoned, logged by neither event.
                if not pending.is_started:
                    pending.abandoned = True
                    self._forget(pending)
                raise
        if pending.abandoned:
            return ToolAnswer.failure("the run has ended")
        try:
            await pending.finished.wait()
        except BaseException:
            # The runtime gave up on this call (the run is ending): stop the
            # sub-call through its signal and let it settle and be logged.
            self.signal.abort("the run ended")
            with anyio.CancelScope(shield=True):
                await pending.finished.wait()
            raise
        result = pending.result
        assert result is not None
        if result.is_error:
            return ToolAnswer.failure(result.error.message)
        return ToolAnswer.success(result.value)

    def _forget(self, pending: _Pending) -> None:
        with contextlib.suppress(ValueError):
            self._queue.remove(pending)
        self._pump()

    def _pump(self) -> None:
        while self._queue and not self._closed:
            head = self._queue[0]
            if head.mode == "exclusive":
                if self._running:
                    return
                self._exclusive_running = True
            elif self._exclusive_running or self._running >= self._max_parallel:
                return
            self._queue.popleft()
            self._running += 1
            head.is_started = True
            if head.started is not None:
                head.started.set()
            self._tg.start_soon(self._dispatch, head, name=f"ptc sub-call {head.number}")

    async def _dispatch(self, pending: _Pending) -> None:
        # Shielded: a started sub-call is stopped through its signal (the run's
        # abort), never abandoned, so it always settles and is logged exactly once.
        with anyio.CancelScope(shield=True):
            try:
                await self._dispatch_started(pending)
            finally:
                self._running -= 1
                if pending.mode == "exclusive":
                    self._exclusive_running = False
                pending.finished.set()
                self._pump()

    async def _dispatch_started(self, pending: _Pending) -> None:
        parent_id = self._ctx.call_id
        sub_id = f"{parent_id}:ptc:{pending.number}"
        started = time.time()
        emit(
            self._on_event, dispatch_start_event(sub_id, parent_id, pending.name, pending.arguments)
        )
        call = ToolCall(
            call_id=sub_id,
            name=pending.name,
            arguments=pending.arguments,
            scope=self._ctx.scope,
            parent=self._ctx.token,
            signal=self.signal,
            root_call_id=self._ctx.execution.root_call_id,
        )
        try:
            result = await self._registry.execute(call)
        except Exception as exc:  # the pipeline returns failures; this is a bug guard
            logger.exception("the registry raised for %s", sub_id)
            result = ToolFailure.of(f"internal error while running {pending.name}: {exc}")
        pending.result = result
        if result.additional_contexts:
            self._contexts[pending.number] = result.additional_contexts
        content = await self._logged_content(sub_id, pending.name, result)
        emit(
            self._on_event,
            dispatch_event(sub_id, parent_id, pending.name, result, content, started),
        )

    async def _logged_content(self, sub_id: str, name: str, result: ToolResult) -> list[Any]:
        hook = self._dispatch_log
        if hook is None:
            return result.content
        log = PtcDispatchLog(
            execution=self._ctx.execution,
            sub_call_id=sub_id,
            name=name,
            is_error=result.is_error,
            content=result.content,
        )
        try:
            replaced = hook(log)
            if inspect.isawaitable(replaced):
                replaced = await replaced
            if replaced is None:
                return result.content
            return [dict(block) for block in replaced]
        except Exception:
            logger.exception("the ptc-dispatch-log hook raised for %s", sub_id)
            return result.content

    def settle(self) -> None:
        """Fire the run's abort and drop queued calls (started calls finish in the task group)."""
        self._closed = True
        self.signal.abort("the run settled")
        self._detach()
        while self._queue:
            pending = self._queue.popleft()
            pending.abandoned = True
            pending.is_started = True
            if pending.started is not None:
                pending.started.set()

    def deferred_contexts(self) -> list[JsonValue]:
        """Sub-call contexts in dispatch (submission) order."""
        return [c for number in sorted(self._contexts) for c in self._contexts[number]]
