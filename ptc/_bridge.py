"""The dispatch bridge: a program's tool calls -> the registry pipeline, via a rolling pool.

Scheduling per run: calls start strictly in submission order; consecutive
``parallel`` calls overlap up to ``max_parallel``; an ``exclusive`` call waits
for the pool to drain, runs alone, and holds back every later call until it
settles. Each started call runs the complete pipeline as a sub-dispatch with id
``<outer id>:ptc:<n>`` and the outer execution's token as ``parent``.

Settlement: :meth:`Bridge.settle` fires the run's abort (which every in-flight
sub-call observes through its signal) and drops queued calls; :meth:`Bridge.drain`
then waits for every started call to finish and be logged, but only until the
:class:`Settlement` deadline (the moment the run began to end plus the grace).
A call still running then is *abandoned*: the run stops waiting for it, and it
goes on in the task group it runs in (the executor's own, which outlives the
run) until it ends, when it is logged, exactly once, as ``abandoned``. A bridge
whose task group is the run's own cannot abandon anything: the run then waits
for its calls whatever the deadline.

Tasks: one scheduler. The runtime calls :meth:`Bridge.call_tool` in a task of
``task_group`` (``Runtime.run(call_group=...)``), in a copy of the run's
caller's context, and the sub-call runs right there: the pipeline, the events
and the answer, with no task of the bridge's own and no hand-over between
tasks (a no-op sub-call through the executor: 85-97 µs with a parked runner of
the bridge's woken per call, 56-60 µs inline, on a quiet 2-core machine). It
is shielded: a started sub-call is stopped through its signal (the run's
abort), never cancelled from outside, so it always settles and is logged
exactly once, even after its run stopped waiting for it. The runtime does the
shielding (``Runtime.run(shield_calls=True)``: one cancel scope less per
sub-call, about 4 of the 15-19 µs the bridge and the pipeline cost a no-op
sub-call); with a runtime that does not take it, the bridge does. A call that
has to queue waits for its turn in its own task.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import TaskGroup

from registry import (
    ABORTED_BEFORE_DISPATCH,
    UNKNOWN_TOOL,
    AbortSignal,
    ExecutionMode,
    JsonValue,
    ToolCall,
    ToolFailure,
    ToolRegistry,
    ToolResult,
    ToolRunContext,
)
from runtime import DESCRIBE_CALL, SEARCH_CALL, ToolAnswer

from ._events import (
    DispatchLogHook,
    PtcDispatchLog,
    dispatch_event,
    dispatch_start_event,
)
from ._tracing import ActiveSpan, Tracing, call_attributes

if TYPE_CHECKING:
    from opentelemetry.context import Context

    from registry._pipeline import CheckedCall

__all__ = ["Bridge", "Publish", "Settlement", "SubCall"]

logger = logging.getLogger("ptc")

#: Publishes one event (never blocks, never raises).
Publish = Callable[[dict[str, Any]], object]
#: Answers a program's discovery call: ``(SEARCH_CALL or DESCRIBE_CALL, arguments)``.
Discover = Callable[[str, Any], Awaitable[ToolAnswer]]


class Settlement:
    """When one outer call began to end, and the deadline everything after it shares.

    The first :meth:`begin` (the run's wall clock ran out, the program ended,
    the caller cancelled) fixes the deadline at that moment plus ``grace``;
    waiting for sub-calls and for the event sink is bounded by it.
    """

    __slots__ = ("deadline", "grace")

    def __init__(self, grace: float) -> None:
        self.grace = grace
        self.deadline: float | None = None

    def begin(self) -> float:
        if self.deadline is None:
            self.deadline = anyio.current_time() + self.grace
        return self.deadline


@dataclass(slots=True)
class SubCall:
    """One tool call of the program, from submission to its settle event."""

    number: int
    sub_id: str
    name: str
    arguments: Any
    mode: ExecutionMode
    checked: CheckedCall  # the call, its mode and its arguments checked
    is_started: bool = False
    started: anyio.Event | None = None  # created only when the call has to queue
    is_finished: bool = False
    finished: anyio.Event | None = None  # created only when something waits for it
    result: ToolResult | None = None
    dropped: bool = False  # still queued when the run settled: never started, never logged
    abandoned: bool = False  # started, and the run stopped waiting for it


class Bridge:
    """One run's bridge between the worker's tool calls and the registry."""

    def __init__(
        self,
        *,
        registry: ToolRegistry,
        ctx: ToolRunContext,
        task_group: TaskGroup,
        can_abandon: bool,
        settlement: Settlement,
        max_parallel: int,
        publish: Publish | None,
        dispatch_log: DispatchLogHook | None,
        tracing: Tracing | None = None,
        trace_parent: Context | None = None,
        discover: Discover | None = None,
        inline: bool = True,
        shielded: bool = False,
    ) -> None:
        self._registry = registry
        self._discover = discover
        #: Whether sub-calls run in the task that calls :meth:`call_tool` (the
        #: runtime's, in ``task_group``); otherwise in a task of ``task_group``
        #: started per sub-call (for a runtime that takes no ``call_group``).
        self.inline = inline
        #: Whether, inline, the runtime leaves a call's task alone as the run
        #: ends (``Runtime.run(shield_calls=True)``): nothing to shield here then.
        self.shielded = inline and shielded
        self._ctx = ctx
        self._can_abandon = can_abandon
        self._settlement = settlement
        self._max_parallel = max_parallel
        self._publish = publish
        self._dispatch_log = dispatch_log
        # Decided once per run (the check reads the environment): without a
        # provider that records, a sub-call's no-op span would only pass the
        # run's span on, which the sub-call's context (its caller's) has current.
        self._tracing = tracing if tracing is not None and tracing.recording() else None
        self._trace_parent = trace_parent  # the run's span: every sub-call's parent
        self.signal = AbortSignal()
        self._detach = ctx.signal.add_listener(lambda: self.signal.abort(ctx.signal.reason))
        self._queue: deque[SubCall] = deque()
        self._in_flight: dict[int, SubCall] = {}
        self._running = 0
        self._exclusive_running = False
        self._closed = False
        self._count = 0
        self._contexts: dict[int, tuple[JsonValue, ...]] = {}
        #: Where the runtime answers the run's calls (``Runtime.run(call_group=)``).
        self.task_group = task_group

    @property
    def calls_started(self) -> int:
        return self._count

    async def call_tool(self, name: str, arguments: Any) -> ToolAnswer:
        """The runtime's ``call_tool``: schedule, run through the pipeline, answer.

        ``tools.search``/``tools.describe`` (the runtime's discovery calls) are
        answered by ``discover``: no pipeline, no sub-dispatch, no event.
        """
        if self._closed:
            return ToolAnswer.failure("the run has ended", code=ABORTED_BEFORE_DISPATCH)
        if name in (SEARCH_CALL, DESCRIBE_CALL):
            if self._discover is None:
                return ToolAnswer.failure("tool discovery is not offered here", code=UNKNOWN_TOOL)
            return await self._discover(name, arguments)
        self._count += 1
        ctx = self._ctx
        sub_id = f"{ctx.call_id}:ptc:{self._count}"
        # Checked once: the mode is decided on the snapshot and validation that
        # the pipeline then runs the call with.
        checked = self._registry.check(
            ToolCall(
                call_id=sub_id,
                name=name,
                arguments=arguments,
                scope=ctx.scope,
                parent=ctx.token,
                signal=self.signal,
                root_call_id=ctx.execution.root_call_id,
            )
        )
        pending = SubCall(
            number=self._count,
            sub_id=sub_id,
            name=name,
            arguments=arguments,
            mode=checked.mode,
            checked=checked,
        )
        if not self._queue and self._may_start(pending.mode):
            self._start(pending)  # (the usual case: no queue to go through)
        else:
            self._queue.append(pending)
            self._pump()
        if not pending.is_started:
            pending.started = anyio.Event()
            try:
                await pending.started.wait()
            except BaseException:
                # Cancelled while queued: dropped, logged by neither event.
                if not pending.is_started:
                    pending.dropped = True
                    self._forget(pending)
                raise
        if pending.dropped:
            return ToolAnswer.failure("the run has ended", code=ABORTED_BEFORE_DISPATCH)
        if self.shielded:
            await self._dispatch(pending)
        elif self.inline:
            with anyio.CancelScope(shield=True):
                await self._dispatch(pending)
        else:
            await self._dispatch_apart(pending)
        result = pending.result
        assert result is not None
        if result.is_error:
            info = result.error.info
            return ToolAnswer.failure(
                result.error.message, code=None if info is None else info.code
            )
        return ToolAnswer(ok=True, value=result.value)

    def _forget(self, pending: SubCall) -> None:
        with contextlib.suppress(ValueError):
            self._queue.remove(pending)
        self._pump()

    def _may_start(self, mode: ExecutionMode) -> bool:
        if mode == "exclusive":
            return not self._running
        return not self._exclusive_running and self._running < self._max_parallel

    def _start(self, pending: SubCall) -> None:
        if pending.mode == "exclusive":
            self._exclusive_running = True
        self._running += 1
        pending.is_started = True  # its task (waiting, or the caller) runs it now
        self._in_flight[pending.number] = pending
        if pending.started is not None:
            pending.started.set()

    def _pump(self) -> None:
        while self._queue and not self._closed:
            head = self._queue[0]
            if not self._may_start(head.mode):
                return
            self._start(self._queue.popleft())

    async def _dispatch_apart(self, pending: SubCall) -> None:
        """Run ``pending`` in a task of the task group, and wait for it to settle.

        If the runtime gives up on the call (the run is ending), the sub-call is
        stopped through its signal and given until the settlement deadline to
        settle; it goes on in its task after that (logged whenever it settles).
        """
        self.task_group.start_soon(self._dispatch_shielded, pending, name="ptc-sub-call")
        try:
            await _finished(pending)
        except BaseException:
            self.signal.abort("the run ended")
            await self._wait_settled([pending])
            raise

    async def _dispatch_shielded(self, pending: SubCall) -> None:
        with anyio.CancelScope(shield=True):
            await self._dispatch(pending)

    async def _dispatch(self, pending: SubCall) -> None:
        """Run ``pending`` through the pipeline, publish its events, and settle it.

        Shielded by the caller (or the runtime): a started sub-call is stopped
        through its signal (the run's abort), never cancelled from outside, so
        it always settles and is logged exactly once, even after its run
        stopped waiting for it. (One frame: with a sub-call costing ~15 µs,
        a coroutine more per call shows.)
        """
        sub_id = pending.sub_id
        tracing = self._tracing
        span: ActiveSpan | None = None
        try:
            if tracing is not None:
                span = self._start_span(pending, tracing)
            parent_id = self._ctx.call_id
            publish = self._publish
            started = 0.0
            if publish is not None:
                started = time.time()
                publish(dispatch_start_event(sub_id, parent_id, pending.name, pending.arguments))
            checked = pending.checked
            try:
                result = await self._registry.execute(checked.call, checked=checked)
            except Exception as exc:  # the pipeline returns failures; this is a bug guard
                logger.exception("the registry raised for %s", sub_id)
                result = ToolFailure.of(f"internal error while running {pending.name}: {exc}")
            pending.result = result
            if result.additional_contexts and not pending.abandoned:
                self._contexts[pending.number] = result.additional_contexts
            if self._dispatch_log is None:
                content = result.content
            else:
                content = await self._logged_content(sub_id, pending.name, result)
            if publish is not None:
                publish(
                    dispatch_event(
                        sub_id,
                        parent_id,
                        pending.name,
                        result,
                        content,
                        started,
                        abandoned=pending.abandoned,
                    )
                )
        except Exception:  # never into the task group, which may be the executor's
            logger.exception("the ptc bridge failed on %s", sub_id)
        finally:
            if tracing is not None:
                tracing.end(
                    span, pending.result, {"ptc.abandoned": True} if pending.abandoned else None
                )
            self._running -= 1
            if pending.mode == "exclusive":
                self._exclusive_running = False
            self._in_flight.pop(pending.number, None)
            pending.is_finished = True
            if pending.finished is not None:
                pending.finished.set()
            self._pump()

    def _start_span(self, pending: SubCall, tracing: Tracing) -> ActiveSpan | None:
        attributes = call_attributes(pending.name, pending.sub_id, "sub")
        attributes["ptc.parent.id"] = self._ctx.call_id
        attributes["ptc.tool.mode"] = pending.mode
        return tracing.start(f"ptc.tool {pending.name}", self._trace_parent, attributes)

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
        """Fire the run's abort and drop queued calls (started calls finish in their tasks)."""
        self._closed = True
        self._settlement.begin()
        self.signal.abort("the run settled")
        self._detach()
        while self._queue:
            pending = self._queue.popleft()
            pending.dropped = True
            pending.is_started = True
            if pending.started is not None:
                pending.started.set()

    async def drain(self) -> list[SubCall]:
        """Wait for the started calls to settle, until the settlement deadline.

        Returns the calls abandoned: still running at the deadline. Shielded:
        the caller's cancellation does not cut it short.
        """
        return await self._wait_settled(list(self._in_flight.values()))

    async def _wait_settled(self, calls: list[SubCall]) -> list[SubCall]:
        deadline = self._settlement.begin()
        with anyio.CancelScope(shield=True, deadline=deadline):
            for pending in calls:
                await _finished(pending)
        stuck = [pending for pending in calls if not pending.is_finished]
        if stuck and not self._can_abandon:
            logger.warning(
                "%d sub-call(s) of %s did not stop within %gs of the run's end; the run waits "
                "for them (use the CodeExecutor as an async context manager to abandon them)",
                len(stuck),
                self._ctx.call_id,
                self._settlement.grace,
            )
            with anyio.CancelScope(shield=True):
                for pending in stuck:
                    await _finished(pending)
            return []
        for pending in stuck:
            pending.abandoned = True
        return stuck

    def deferred_contexts(self) -> list[JsonValue]:
        """Sub-call contexts in dispatch (submission) order."""
        return [c for number in sorted(self._contexts) for c in self._contexts[number]]


async def _finished(pending: SubCall) -> None:
    """Wait until ``pending`` has settled and been logged."""
    if not pending.is_finished:
        if pending.finished is None:
            pending.finished = anyio.Event()
        await pending.finished.wait()
