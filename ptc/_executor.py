"""``CodeExecutor``: the executor an agent mounts so its model writes programs."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar, Token
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

import anyio
import orjson
from anyio.abc import TaskGroup

from registry import (
    ABORTED,
    UNKNOWN_TOOL,
    AbortSignal,
    CheckedCall,
    ErrorInfo,
    JsonValue,
    ToolCall,
    ToolDefinition,
    ToolExecution,
    ToolFailure,
    ToolOutput,
    ToolRegistry,
    ToolResult,
    ToolRunContext,
    text_block,
)
from runtime import Isolation, Limits, RunOutcome, Runtime, ToolAnswer, ToolNames, get_runtime

from ._bridge import Bridge, Settlement, SubCall
from ._budget import (
    DEFAULT_OUTPUT_BUDGET,
    OutputBudget,
    OutputSpill,
    SpillHook,
    Truncation,
    apply_output_budget,
    check_output_budget,
    over_budget,
)
from ._calls import ModelCall, PlannedCall, new_call_id, plan_batch
from ._delivery import FLUSH_GRACE_SECONDS, EventDelivery
from ._discovery import Discovery, SdkMode, answer_discovery, check_discovery
from ._events import DispatchLogHook, EventSink, call_event, progress_event, result_event
from ._exceptions import CodeRunFailedError, ExecutorBusyError, ExecutorConfigError
from ._live import LiveLog, LiveLogs
from ._media import find_media, with_placeholders
from ._render import render_run_result
from ._tracing import ActiveSpan, Attributes, Tracing, call_attributes

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import TracerProvider

    from sdkgen import ToolCatalog

__all__ = ["CODE_ONLY_RULE", "RUN_CODE", "BatchResult", "CallResult", "CodeExecutor", "ModelCall"]

logger = logging.getLogger("ptc")

RUN_CODE = "run_code"
Mode: TypeAlias = Literal["native", "code", "both"]

RUN_CODE_DESCRIPTION = (
    "Run a short async Python program that calls the tools declared in the `tools:sdk` "
    "section as `await tools.<name>(args)`. Only what the program prints or returns comes "
    "back to you; intermediate tool results stay in the program."
)
RUN_CODE_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "code": {
            "type": "string",
            "description": "The body of an async Python function: top-level await and return are allowed.",
        },
        "description": {
            "type": "string",
            "description": "A short summary of what the program does.",
        },
    },
    "required": ["code", "description"],
    "additionalProperties": False,
}
RUN_RESULT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "logs": {"type": "array", "items": {"type": "string"}},
        "result": {},
        "truncated": {
            "type": "object",
            "description": (
                "Present when the output was cut to the output budget: `chars` in all, "
                "`cut` of them, the `budget`; `result` says the result became its text "
                "(`string`) or its JSON text (`json`), cut."
            ),
            "properties": {
                "chars": {"type": "integer"},
                "cut": {"type": "integer"},
                "budget": {"type": "integer"},
                "result": {"enum": ["string", "json"]},
                "note": {"type": "string"},
            },
            "required": ["chars", "cut", "budget"],
            "additionalProperties": False,
        },
    },
    "required": ["logs"],
    "additionalProperties": False,
}
CODE_ONLY_RULE = (
    "Only `run_code` is callable directly. Every other tool is reachable only from inside a "
    '`run_code` program, as `await tools.<name>(args)` (or `tools["<name>"](args)`).'
)


@dataclass(slots=True)
class _OuterCall:
    """What one outer call's body hands back to the call that reports it.

    The body may run in a task of the pipeline's own; it finds this through
    :data:`_OUTER` (a task started for it copies the context).
    """

    settlement: Settlement
    output_budget: OutputBudget = DEFAULT_OUTPUT_BUDGET
    isolation: Isolation | None = None
    abandoned: list[SubCall] = field(default_factory=list)
    truncation: Truncation | None = None
    span: ActiveSpan | None = None  # the call's span (None: no tracing)
    span_attributes: Attributes = field(default_factory=dict)  # what the run adds to it
    reported: ToolResult | None = None  # the result the call settled with


_OUTER: ContextVar[_OuterCall | None] = ContextVar("ptc_outer_call", default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class CallResult:
    """One settled call of a batch, correlated with the model's call id."""

    call_id: str
    result: ToolResult


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchResult:
    """Results in model order, plus contexts to append after them."""

    results: list[CallResult]
    additional_contexts: list[JsonValue]


class CodeExecutor:
    """Mounts a registry behind ``run_code`` (and/or native calls) for an agent.

    Use it as an async context manager (``async with CodeExecutor(...) as ex``):
    the block keeps the runtime it creates warm, and it is where a sub-call that
    will not stop goes on after its run stopped waiting for it (see
    ``settle_grace``). Leaving the block waits for such sub-calls, then closes.

    Args:
        registry: the tools and their policy.
        runtime: ``"subprocess"`` (default), ``"pyodide"`` or a :class:`Runtime`.
        isolation: for a runtime created by name: ``"strict"`` (the default: no
            run without every protective layer) or the explicit opt-in
            ``"best-effort"`` (see ``runtime.get_runtime``). Each ``run_code``
            result's ``meta["isolation"]`` and ``tool/result`` event say what
            isolation the run had.
        mode: ``"code"`` (only ``run_code`` is callable), ``"both"`` or ``"native"``.
        max_parallel_sub_calls: how many concurrency-safe sub-calls of one program
            may overlap (``1`` = serial).
        max_parallel_tool_calls: the same for a native batch's model calls.
        max_concurrent_runs: how many programs may run at once.
        max_queued_runs: how many more may wait for a run slot (in order); a
            ``run_code`` call beyond that fails at once as ``EXECUTOR_BUSY``,
            and so does one that waited its whole wall clock (the wait counts
            against the run's ``Limits.timeout``).
        settle_grace: seconds a run's sub-calls get to stop once the run ended
            (its wall clock ran out, the program returned, the caller
            cancelled). A sub-call still running then is abandoned: the run
            stops waiting, says so in its message, and the sub-call goes on in
            the executor's block until it ends, logged then. So ``run_code``
            returns within its wall clock plus ``settle_grace`` plus 0.1 s for
            the event sink (:data:`ptc._delivery.FLUSH_GRACE_SECONDS`).
            Without the block, nothing is abandoned: the run waits.
        output_budget: characters of a ``run_code`` result the model gets
            (30,000 by default; ``math.inf``: no budget). Longer content is cut
            to its head and tail around a marker line, and so is the value's
            part over its share (see ``ptc._budget``). A call's own
            ``output_budget`` overrides it.
        on_spill: hook called with an :class:`OutputSpill` (the call id and the
            whole, uncut result) whenever a result was cut, before the
            ``tool/result`` event; a ``str`` it returns (e.g. where it saved the
            output) is added to the marker. Sync or async; raising is contained.
            ``dispatch_log`` is the counterpart for sub-calls' logged content.
        limits: the runtime limits of each program.
        on_event: sink for ``tool/*`` event dicts (see ``ptc._events``), called
            in order from a delivery thread of the executor's own, never on the
            event loop (see ``ptc._delivery``).
        dispatch_log: hook that may replace the *logged* content of a sub-call.
        live_logs: how a program's printed lines become ``tool/ptc-log``
            events as they are printed (a burst of 50 lines, then 20 a second,
            2,000 characters each, by default; see :class:`LiveLogs`);
            ``None``: no such events. Without ``on_event``, nothing is done.
        tracer_provider: the OpenTelemetry ``TracerProvider`` of this
            executor's spans (``ptc.run_code`` and ``ptc.tool <name>``, see
            ``ptc._tracing``); ``None``: the global one, a no-op unless an SDK
            is configured. Without ``opentelemetry-api`` installed, no spans.
        discovery: when ``tools:sdk`` is the compact discovery index instead of
            the full SDK (:class:`Discovery`: by default above 40 tools or 8,000
            tokens of SDK; ``True``/``False``: always/never). A program can
            ``await tools.search(query)`` and ``await tools.describe(name)`` in
            either mode; only what the run's scope sees is ever found.
    """

    def __init__(
        self,
        registry: ToolRegistry,
        *,
        runtime: str | Runtime = "subprocess",
        isolation: Literal["strict", "best-effort"] | None = None,
        mode: Mode = "code",
        max_parallel_sub_calls: int = 10,
        max_parallel_tool_calls: int = 10,
        max_concurrent_runs: int = 16,
        max_queued_runs: int = 64,
        settle_grace: float = 0.5,
        output_budget: OutputBudget = DEFAULT_OUTPUT_BUDGET,
        on_spill: SpillHook | None = None,
        limits: Limits | None = None,
        on_event: EventSink | None = None,
        dispatch_log: DispatchLogHook | None = None,
        live_logs: LiveLogs | None = LiveLogs(),  # noqa: B008 - immutable
        tracer_provider: TracerProvider | None = None,
        discovery: Discovery | bool = Discovery(),  # noqa: B008 - immutable
    ) -> None:
        if mode not in ("native", "code", "both"):
            raise ExecutorConfigError(f"mode must be 'native', 'code' or 'both', got {mode!r}")
        for label, value, least in (
            ("max_parallel_sub_calls", max_parallel_sub_calls, 1),
            ("max_parallel_tool_calls", max_parallel_tool_calls, 1),
            ("max_concurrent_runs", max_concurrent_runs, 1),
            ("max_queued_runs", max_queued_runs, 0),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                kind = "a positive" if least else "a non-negative"
                raise ExecutorConfigError(f"{label} must be {kind} integer, got {value!r}")
        if (
            isinstance(settle_grace, bool)
            or not isinstance(settle_grace, int | float)
            or not math.isfinite(settle_grace)
            or settle_grace < 0
        ):
            raise ExecutorConfigError(
                f"settle_grace must be a non-negative number of seconds, got {settle_grace!r}"
            )
        if live_logs is not None:
            problem = (
                live_logs.problem()
                if isinstance(live_logs, LiveLogs)
                else f"live_logs must be a LiveLogs or None, got {live_logs!r}"
            )
            if problem is not None:
                raise ExecutorConfigError(problem)
        try:
            self.output_budget = check_output_budget(output_budget)
            self.discovery = check_discovery(discovery)
        except ValueError as exc:
            raise ExecutorConfigError(str(exc)) from None
        if not isinstance(runtime, str | Runtime):
            raise ExecutorConfigError(f"runtime must be a name or a Runtime, got {runtime!r}")
        if isolation not in (None, "strict", "best-effort"):
            raise ExecutorConfigError(
                f"isolation must be 'strict' or 'best-effort', got {isolation!r}"
            )
        if isolation is not None and isinstance(runtime, Runtime):
            raise ExecutorConfigError(
                "isolation applies to a runtime the executor creates by name; "
                "pass it to the runtime's own constructor instead"
            )
        self.isolation = isolation
        self.registry = registry
        self.mode: Mode = mode
        self.max_parallel_sub_calls = max_parallel_sub_calls
        self.max_parallel_tool_calls = max_parallel_tool_calls
        self.max_concurrent_runs = max_concurrent_runs
        self.max_queued_runs = max_queued_runs
        self.settle_grace = float(settle_grace)
        self.limits = limits
        self.on_event = on_event
        self.dispatch_log = dispatch_log
        self.on_spill = on_spill
        self.live_logs = live_logs
        self._tracing = Tracing(tracer_provider)
        self._runtime_spec = runtime
        self._runtime: Runtime | None = runtime if isinstance(runtime, Runtime) else None
        self._owns_runtime = not isinstance(runtime, Runtime)
        self._task_group: TaskGroup | None = None
        self._exit_stack: contextlib.AsyncExitStack | None = None
        self._run_slots = anyio.CapacityLimiter(max_concurrent_runs)
        self._delivery = EventDelivery()
        self._sdk_cache: dict[str | None, str] = {}
        self._mode_cache: dict[str | None, SdkMode] = {}
        self._catalogs: dict[str | None, ToolCatalog] = {}
        self._tool_set_version = 0  # counts registry changes: a catalog built before one is stale
        self._names_cache: dict[str | None, ToolNames] = {}
        self._dispose_watch = registry.on_change(self._on_registry_change)
        self._active_roots: dict[str, int] = {}  # outer call id -> calls running under it
        self._dispose_progress = registry.on_progress(self._on_progress)
        self.transport = ToolDefinition(
            name=RUN_CODE,
            description=RUN_CODE_DESCRIPTION,
            parameters=RUN_CODE_PARAMETERS,
            output=ToolOutput(
                schema=RUN_RESULT_SCHEMA,
                render=lambda _args, value: _render_run(
                    value, self._output_limit(), self._budget_now()
                ),
            ),
            execute=self._run_code_body,
        )

    # ------------------------------------------------------------------ model input

    def _on_registry_change(self) -> None:
        self._tool_set_version += 1
        self._sdk_cache.clear()
        self._mode_cache.clear()
        self._catalogs.clear()
        self._names_cache.clear()

    def sdk_text(self, scope: str | None = None) -> str:
        """The ``tools:sdk`` section for the tools ``scope`` can see.

        The full SDK, or in discovery mode (see :meth:`sdk_mode`) the index
        that ``tools.search``/``tools.describe`` complete. Byte-stable for an
        unchanged tool set.
        """
        if self.sdk_mode(scope) == "discovery":
            return self.catalog(scope).index_text()
        return self._full_sdk(scope)

    def sdk_mode(self, scope: str | None = None) -> SdkMode:
        """``"full"`` or ``"discovery"``: what :meth:`sdk_text` gives ``scope`` (see ``discovery``)."""
        mode = self._mode_cache.get(scope)
        if mode is None:
            count = len(self.registry.definitions(scope))
            mode = self._mode_cache[scope] = self.discovery.mode_for(
                count, lambda: self._full_sdk(scope)
            )
        return mode

    def catalog(self, scope: str | None = None) -> ToolCatalog:
        """The searchable catalog of the tools ``scope`` can see (what the program's discovery finds)."""
        from sdkgen import ToolCatalog  # sdkgen loads when an SDK or a catalog is asked for

        catalog = self._catalogs.get(scope)
        if catalog is None:
            catalog = self._catalogs[scope] = ToolCatalog(
                self.registry.schemas(scope, with_output=True)
            )
        return catalog

    def _full_sdk(self, scope: str | None) -> str:
        cached = self._sdk_cache.get(scope)
        if cached is None:
            from sdkgen import render_sdk

            cached = render_sdk(self.registry.schemas(scope, with_output=True))
            self._sdk_cache[scope] = cached
        return cached

    async def _discover(self, scope: str | None, name: str, args: Any) -> ToolAnswer:
        """A program's ``tools.search``/``describe``, over what ``scope`` sees now."""
        catalog = self._catalogs.get(scope)
        if catalog is None:
            from sdkgen import ToolCatalog

            # Built off the event loop: a large set takes milliseconds.
            version = self._tool_set_version
            schemas = self.registry.schemas(scope, with_output=True)
            catalog = await anyio.to_thread.run_sync(ToolCatalog, schemas)
            if version == self._tool_set_version:
                self._catalogs[scope] = catalog
        return answer_discovery(catalog, name, args)

    def run_code_schema(self) -> dict[str, Any]:
        """The model-facing schema of the reserved ``run_code`` transport."""
        return {
            "name": RUN_CODE,
            "description": RUN_CODE_DESCRIPTION,
            "parameters": orjson.loads(orjson.dumps(RUN_CODE_PARAMETERS)),
        }

    def describe(self, scope: str | None = None) -> dict[str, Any]:
        """The model input for ``scope``: tool schemas and prompt sections.

        ``code``: only ``run_code`` plus ``tools:sdk`` and the ``tools:code-only``
        rule; ``both``: native schemas plus ``run_code`` and the SDK, with an empty
        rule; ``native``: only the native schemas.
        """
        if self.mode == "native":
            return {"tools": self.registry.schemas(scope), "sections": {}}
        tools = [self.run_code_schema()]
        if self.mode == "both":
            tools = sorted([*self.registry.schemas(scope), *tools], key=lambda s: s["name"])
        return {
            "tools": tools,
            "sections": {
                "tools:sdk": self.sdk_text(scope),
                "tools:code-only": CODE_ONLY_RULE if self.mode == "code" else "",
            },
        }

    # ------------------------------------------------------------------ execution

    async def run_code(
        self,
        code: str,
        description: str = "",
        scope: str | None = None,
        signal: AbortSignal | None = None,
        *,
        call_id: str | None = None,
        output_budget: OutputBudget | None = None,
    ) -> ToolResult:
        """Run one program as an outer ``run_code`` call (through the pipeline).

        ``call_id`` defaults to a fresh ``run_code-<12 hex digits>``, so the ids
        of its events and sub-calls are unique across calls. ``output_budget``
        overrides the executor's for this call (``None``: the executor's).
        """
        self.registry.check_scope(scope)  # a caller's typo raises, before any event
        budget = self._budget_of(output_budget)
        if call_id is None:
            call_id = new_call_id(RUN_CODE)
        call = ModelCall(
            call_id=call_id, name=RUN_CODE, arguments={"code": code, "description": description}
        )
        planned = PlannedCall(call=call, event_id=call_id)
        return await self._outer(planned, scope, signal, budget, self._tracing.current())

    async def execute(
        self,
        batch: Sequence[ModelCall | Mapping[str, Any]],
        *,
        scope: str | None = None,
        signal: AbortSignal | None = None,
        output_budget: OutputBudget | None = None,
    ) -> BatchResult:
        """Run a batch of model calls with the native scheduling contract.

        Consecutive concurrency-safe calls overlap up to
        ``max_parallel_tool_calls``; any other call is a barrier that runs alone.
        Results come back in input order, with every call's additional contexts
        after them in the same order. A malformed item or a repeated id is an
        error result of its own (see ``ptc._calls``); the rest of the batch runs.
        ``output_budget`` overrides the executor's for the batch's ``run_code``
        calls (``None``: the executor's).
        """
        self.registry.check_scope(scope)  # a caller's typo raises, before any event
        budget = self._budget_of(output_budget)
        planned = plan_batch(batch)
        trace_parent = self._tracing.current()  # the caller's span, for every call's
        results: list[ToolResult | None] = [None] * len(planned)
        # A native call is checked once: its mode is decided on the snapshot and
        # validation that the pipeline then runs it with.
        checks: dict[int, CheckedCall | None] = {}

        def parallel(i: int) -> bool:
            if i not in checks:
                checks[i] = self._check_native(planned[i], scope, signal)
            checked = checks[i]
            return checked is not None and checked.mode == "parallel"

        index = 0
        while index < len(planned):
            group = [index]
            if parallel(index):
                while group[-1] + 1 < len(planned) and parallel(group[-1] + 1):
                    group.append(group[-1] + 1)
            limiter = anyio.CapacityLimiter(self.max_parallel_tool_calls)

            async def run_one(i: int, limiter: anyio.CapacityLimiter) -> None:
                async with limiter:
                    results[i] = await self._outer(
                        planned[i], scope, signal, budget, trace_parent, checks.get(i)
                    )

            async with anyio.create_task_group() as tg:
                for i in group:
                    tg.start_soon(run_one, i, limiter)
            index = group[-1] + 1
        settled = [r for r in results if r is not None]
        return BatchResult(
            results=[
                CallResult(call_id=p.call.call_id, result=r)
                for p, r in zip(planned, settled, strict=True)
            ],
            additional_contexts=[ctx for r in settled for ctx in r.additional_contexts],
        )

    def _check_native(
        self, planned: PlannedCall, scope: str | None, signal: AbortSignal | None
    ) -> CheckedCall | None:
        """The checked native call of ``planned``; ``None`` for anything that runs alone unchecked."""
        call = planned.call
        if planned.failure is not None or call.name == RUN_CODE or self.mode == "code":
            return None
        return self.registry.check(
            ToolCall(
                call_id=call.call_id,
                name=call.name,
                arguments=call.arguments,
                scope=scope,
                signal=signal,
            )
        )

    async def _outer(
        self,
        planned: PlannedCall,
        scope: str | None,
        signal: AbortSignal | None,
        budget: OutputBudget,
        trace_parent: Context | None,
        checked: CheckedCall | None = None,
    ) -> ToolResult:
        """One outer call: exactly one ``tool/call`` and one ``tool/result``, whatever happens.

        And one span (``ptc.run_code``, or ``ptc.tool <name>`` for a native
        call) under ``trace_parent``, current while the call runs.
        """
        call = planned.call
        state = _OuterCall(settlement=Settlement(self.settle_grace), output_budget=budget)
        self._publish(call_event(planned.event_id, call.name, call.arguments))
        if call.name == RUN_CODE and self.mode != "native":
            state.span = self._tracing.start(
                "ptc.run_code", trace_parent, self._run_span_attributes(call, scope)
            )
        else:
            attributes = call_attributes(call.name, call.call_id, "native")
            state.span = self._tracing.start(f"ptc.tool {call.name}", trace_parent, attributes)
        token = _OUTER.set(state)
        roots = self._active_roots
        roots[call.call_id] = roots.get(call.call_id, 0) + 1
        try:
            return await self._settle_outer(planned, call, scope, signal, state, token, checked)
        finally:
            if roots[call.call_id] == 1:
                del roots[call.call_id]
            else:
                roots[call.call_id] -= 1
            if state.span is not None:
                if state.span.recording:
                    state.span_attributes.update(_settled_attributes(state))
                self._tracing.end(state.span, state.reported, state.span_attributes)

    def _run_span_attributes(self, call: ModelCall, scope: str | None) -> Attributes:
        attributes = call_attributes(RUN_CODE, call.call_id, RUN_CODE)
        attributes["ptc.mode"] = self.mode
        if scope is not None:
            attributes["ptc.scope"] = scope
        code = call.arguments.get("code") if isinstance(call.arguments, dict) else None
        if isinstance(code, str):
            attributes["ptc.code.chars"] = len(code)
        return attributes

    async def _settle_outer(
        self,
        planned: PlannedCall,
        call: ModelCall,
        scope: str | None,
        signal: AbortSignal | None,
        state: _OuterCall,
        token: Token[_OuterCall | None],
        checked: CheckedCall | None,
    ) -> ToolResult:
        try:
            if planned.failure is not None:
                result: ToolResult = planned.failure
            elif checked is not None:
                result = await self.registry.execute(checked.call, checked=checked)
            else:
                result = await self._dispatch_outer(call, scope, signal)
                if call.name == RUN_CODE and self.mode != "native":
                    result = await self._budgeted(call.call_id, scope, result, state)
        except BaseException as exc:
            # Cancelled (or worse): the call still gets its result event, then
            # the exception goes on.
            _OUTER.reset(token)
            ended = self._reported(_ended_by(exc, state), state)
            state.reported = ended
            sequence = self._publish(self._result_event(planned, ended, state))
            with anyio.CancelScope(shield=True):
                await self._delivery.flush(sequence, FLUSH_GRACE_SECONDS)
            raise
        _OUTER.reset(token)
        result = self._reported(result, state)
        state.reported = result
        sequence = self._publish(self._result_event(planned, result, state))
        await self._delivery.flush(sequence, FLUSH_GRACE_SECONDS)
        return result

    def _budget_of(self, output_budget: OutputBudget | None) -> OutputBudget:
        """A call's budget: its own, or the executor's (``None``)."""
        if output_budget is None:
            return self.output_budget
        try:
            return check_output_budget(output_budget)
        except ValueError as exc:
            raise ExecutorConfigError(str(exc)) from None

    def _budget_now(self) -> OutputBudget:
        """The budget of the outer call running in this context (the executor's by default)."""
        state = _OUTER.get()
        return self.output_budget if state is None else state.output_budget

    async def _budgeted(
        self, call_id: str, scope: str | None, result: ToolResult, state: _OuterCall
    ) -> ToolResult:
        """``result`` within the call's output budget; the whole of it to ``on_spill`` first."""
        budget = state.output_budget
        if not over_budget(result, budget):
            return result
        note = await self._spilled(
            OutputSpill(call_id=call_id, scope=scope, budget=int(budget), result=result)
        )
        result, state.truncation = apply_output_budget(result, budget, note)
        if state.truncation is not None and (result.meta is None or isinstance(result.meta, dict)):
            result = dataclasses.replace(
                result, meta={**(result.meta or {}), "truncated": state.truncation.to_json()}
            )
        return result

    async def _spilled(self, spill: OutputSpill) -> str | None:
        """What ``on_spill`` says of ``spill`` (``None``: no hook, no note, or it raised)."""
        hook = self.on_spill
        if hook is None:
            return None
        try:
            note = hook(spill)
            if inspect.isawaitable(note):
                note = await note
        except Exception:
            logger.exception("the on_spill hook raised for %s", spill.call_id)
            return None
        if note is not None and not isinstance(note, str):
            logger.warning(
                "the on_spill hook returned a %s, not a str: no note", type(note).__name__
            )
            return None
        return note

    def _on_progress(
        self, execution: ToolExecution, progress: float, total: float | None, message: str | None
    ) -> None:
        """A progress report of a call this executor runs becomes a ``tool/progress`` event."""
        if self.on_event is not None and execution.root_call_id in self._active_roots:
            self._publish(progress_event(execution, progress, total, message))

    def _publish(self, event: dict[str, Any]) -> int:
        sink = self.on_event
        if sink is None:
            return 0
        return self._delivery.publish(sink, event)

    def _reported(self, result: ToolResult, state: _OuterCall) -> ToolResult:
        if state.isolation is not None and (result.meta is None or isinstance(result.meta, dict)):
            # Metadata for the caller's logs; the model-facing content is unchanged.
            result = dataclasses.replace(
                result, meta={**(result.meta or {}), "isolation": state.isolation.to_json()}
            )
        return result

    def _result_event(
        self, planned: PlannedCall, result: ToolResult, state: _OuterCall
    ) -> dict[str, Any]:
        event = result_event(planned.event_id, planned.call.name, result)
        if state.isolation is not None:
            event["isolation"] = state.isolation.to_json()
        if state.abandoned:
            event["abandoned_sub_calls"] = [sub.sub_id for sub in state.abandoned]
        if state.truncation is not None:
            event["truncated"] = state.truncation.to_json()
        return event

    async def _dispatch_outer(
        self, call: ModelCall, scope: str | None, signal: AbortSignal | None
    ) -> ToolResult:
        if call.name != RUN_CODE and self.mode == "code":
            # The route back only for a tool the scope's SDK declares: anything else
            # would fail inside the program too.
            if self.registry.get(call.name, scope) is None:
                message = f"unknown tool {call.name!r}; only `run_code` is callable directly"
            else:
                message = (
                    f"only `run_code` is callable directly — call `{call.name}` from inside a "
                    "`run_code` program instead"
                )
            return ToolFailure.of(message, ErrorInfo(name="ToolNotFoundError", code=UNKNOWN_TOOL))
        tool_call = ToolCall(
            call_id=call.call_id,
            name=call.name,
            arguments=call.arguments,
            scope=scope,
            signal=signal,
        )
        if call.name == RUN_CODE and self.mode != "native":
            return await self.registry.execute(tool_call, transport=self.transport)
        return await self.registry.execute(tool_call)

    # ------------------------------------------------------------------ the program

    async def _run_code_body(self, args: dict[str, Any], ctx: ToolRunContext) -> dict[str, Any]:
        state = _OUTER.get()
        if state is None:  # the transport run by someone else's call of the pipeline
            state = _OuterCall(settlement=Settlement(self.settle_grace))
        runtime = await self._ensure_runtime()
        limits = self.limits
        timeout = self._limits_of(runtime).timeout
        borrower = object()
        waited = await self._take_run_slot(borrower, timeout)
        try:
            if waited:
                # The wait counts against the run's wall clock.
                limits = dataclasses.replace(self._limits_of(runtime), timeout=timeout - waited)
            outcome, bridge = await self._run_program(runtime, args["code"], ctx, limits, state)
        finally:
            self._run_slots.release_on_behalf_of(borrower)
        if state.span is not None and state.span.recording:
            state.span_attributes.update(_outcome_attributes(outcome, bridge, runtime))
        for context in bridge.deferred_contexts():
            ctx.defer_context(context)
        if not outcome.ok:
            message = outcome.message
            if waited and outcome.kind == "timeout":
                message += (
                    f" (its wall clock was {timeout:g}s; it waited {waited:.2f}s for a run slot)"
                )
            message += _abandoned_note(state.abandoned, self.settle_grace)
            raise CodeRunFailedError(outcome.kind or "crashed", message, outcome.logs)
        value: dict[str, Any] = {"logs": list(outcome.logs)}
        if outcome.has_result:
            value["result"] = outcome.result
        return value

    async def _take_run_slot(self, borrower: object, wall_clock: float) -> float:
        """Take a run slot for ``borrower``; returns the seconds it waited for one.

        Raises:
            ExecutorBusyError: the queue is full, or no slot came free within ``wall_clock``.
        """
        slots = self._run_slots
        try:
            slots.acquire_on_behalf_of_nowait(borrower)
            return 0.0
        except anyio.WouldBlock:
            pass
        queued = slots.statistics().tasks_waiting
        if queued >= self.max_queued_runs:
            raise ExecutorBusyError(
                f"all {self.max_concurrent_runs} run slots are taken and the queue of "
                f"{self.max_queued_runs} is full",
                running=slots.borrowed_tokens,
                queued=queued,
            )
        start = anyio.current_time()
        with anyio.move_on_after(wall_clock):
            await slots.acquire_on_behalf_of(borrower)
            waited = anyio.current_time() - start
            if waited < wall_clock:
                return max(waited, 1e-9)
            slots.release_on_behalf_of(borrower)
        raise ExecutorBusyError(
            f"no run slot came free within the run's wall clock of {wall_clock:g}s",
            running=slots.borrowed_tokens,
            queued=slots.statistics().tasks_waiting,
        )

    async def _run_program(
        self,
        runtime: Runtime,
        code: str,
        ctx: ToolRunContext,
        limits: Limits | None,
        state: _OuterCall,
    ) -> tuple[RunOutcome, Bridge]:
        if self._task_group is not None:
            return await self._run_bridged(runtime, code, ctx, limits, state, self._task_group)
        # Without the executor's block there is nowhere for a sub-call to go on:
        # the run's own task group waits for every one of them.
        async with anyio.create_task_group() as tg:
            ran = await self._run_bridged(runtime, code, ctx, limits, state, tg)
        return ran

    async def _run_bridged(
        self,
        runtime: Runtime,
        code: str,
        ctx: ToolRunContext,
        limits: Limits | None,
        state: _OuterCall,
        task_group: TaskGroup,
    ) -> tuple[RunOutcome, Bridge]:
        bridge = Bridge(
            registry=self.registry,
            ctx=ctx,
            task_group=task_group,
            can_abandon=task_group is self._task_group,
            settlement=state.settlement,
            max_parallel=self.max_parallel_sub_calls,
            publish=None if self.on_event is None else self._publish,
            dispatch_log=self.dispatch_log,
            tracing=self._tracing,
            # The sub-calls run in tasks of their own: their parent is passed on.
            trace_parent=self._tracing.current() if state.span is None else state.span.context,
            discover=functools.partial(self._discover, ctx.scope),
            inline=_takes(runtime, "call_group"),
            shielded=_takes(runtime, "shield_calls"),
        )
        tool_names = self._tool_names(ctx.scope)
        options: dict[str, Any] = {}
        if bridge.inline:
            options["call_group"] = task_group
        if bridge.shielded:
            options["shield_calls"] = True
        live = None
        if self.on_event is not None and self.live_logs is not None and _takes(runtime, "on_log"):
            live = options["on_log"] = LiveLog(self._publish, ctx.call_id, self.live_logs)
        try:
            # (A runtime written before on_log or call_group existed works as before.)
            outcome = await runtime.run(
                code,
                tool_names=tool_names,
                call_tool=bridge.call_tool,
                limits=limits,
                cancel=ctx.signal,
                **options,
            )
        finally:
            if live is not None:
                live.close()  # the count of lines dropped, before the result's event
            bridge.settle()
            state.abandoned.extend(await bridge.drain())
        state.isolation = outcome.isolation
        return outcome, bridge

    def _tool_names(self, scope: str | None) -> ToolNames:
        """The names ``scope`` can call, checked once per registry change.

        The same value every run, so the runtime's work on it (checking,
        encoding) is done once too: a run costs the same with 10 tools or 5,000.
        """
        names = self._names_cache.get(scope)
        if names is None:
            names = ToolNames(d.name for d in self.registry.definitions(scope))
            self._names_cache[scope] = names
        return names

    def _limits_of(self, runtime: Runtime) -> Limits:
        """The limits of this executor's runs (the runtime's own by default)."""
        limits = self.limits if self.limits is not None else getattr(runtime, "limits", None)
        return limits if isinstance(limits, Limits) else Limits()

    def _output_limit(self) -> int:
        """The output limit of this executor's runs (the runtime's own by default)."""
        limits = self.limits if self.limits is not None else getattr(self._runtime, "limits", None)
        return (limits if isinstance(limits, Limits) else Limits()).max_output_bytes

    async def _ensure_runtime(self) -> Runtime:
        if self._runtime is None:
            assert isinstance(self._runtime_spec, str)
            if self.isolation is None:
                self._runtime = get_runtime(self._runtime_spec)
            else:
                self._runtime = get_runtime(self._runtime_spec, isolation=self.isolation)
        return self._runtime

    # ------------------------------------------------------------------ lifecycle

    async def aclose(self) -> None:
        """Close the runtime if this executor created it, and deliver every event."""
        self._dispose_watch()
        self._dispose_progress()
        try:
            if self._runtime is not None and self._owns_runtime:
                runtime, self._runtime = self._runtime, None
                await runtime.aclose()
        finally:
            await self._delivery.aclose()

    async def __aenter__(self) -> CodeExecutor:
        async with contextlib.AsyncExitStack() as stack:
            stack.push_async_callback(self.aclose)
            if self._owns_runtime:
                await self._ensure_runtime()  # (closed by aclose)
            # Where abandoned sub-calls go on (their tasks never raise); leaving
            # waits for the ones that have not ended yet, then closes.
            self._task_group = await stack.enter_async_context(anyio.create_task_group())
            stack.callback(self._forget_task_group)
            self._exit_stack = stack.pop_all()
        return self

    def _forget_task_group(self) -> None:
        self._task_group = None

    async def __aexit__(self, *exc_info: object) -> None:
        stack, self._exit_stack = self._exit_stack, None
        if stack is None:
            await self.aclose()
        else:
            await stack.aclose()


@functools.cache
def _takes_type(kind: type[Runtime], name: str) -> bool:
    run: Callable[..., object] = kind.run
    if run is Runtime.run and name in ("call_group", "shield_calls"):  # passed on to _run
        run = kind._run
    try:
        parameters = inspect.signature(run).parameters
    except (TypeError, ValueError):
        return False
    return name in parameters or any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()
    )


def _takes(runtime: Runtime, name: str) -> bool:
    """Whether ``runtime.run`` accepts ``name`` (a runtime written before it may not)."""
    return _takes_type(type(runtime), name)


def _outcome_attributes(outcome: RunOutcome, bridge: Bridge, runtime: Runtime) -> Attributes:
    """What a ``ptc.run_code`` span says of the program's run (see ``ptc._tracing``)."""
    attributes: Attributes = {
        "ptc.run.kind": outcome.kind or "ok",
        "ptc.logs.lines": len(outcome.logs),
        "ptc.logs.chars": sum(map(len, outcome.logs)) + max(len(outcome.logs) - 1, 0),
        "ptc.tool_calls": bridge.calls_started,
        "ptc.isolation": outcome.isolation.mode,
        "ptc.runtime": outcome.isolation.runtime or runtime.name or type(runtime).__name__,
    }
    if outcome.has_result:
        result = outcome.result
        attributes["ptc.result.chars"] = (
            len(result) if isinstance(result, str) else len(orjson.dumps(result).decode())
        )
    return attributes


def _settled_attributes(state: _OuterCall) -> Attributes:
    """What an outer call's span says of how it settled: cuts, media, abandoned sub-calls."""
    attributes: Attributes = {}
    if state.truncation is not None:
        attributes["ptc.output.cut"] = state.truncation.cut
    if state.abandoned:
        attributes["ptc.abandoned_sub_calls"] = len(state.abandoned)
    result = state.reported
    if result is not None:
        media = sum(1 for block in result.content if block.get("type") in ("image", "audio"))
        if media:
            attributes["ptc.media.count"] = media
    return attributes


def _ended_by(exc: BaseException, state: _OuterCall) -> ToolFailure:
    """The result of an outer call that an exception ended (its ``tool/result`` says so)."""
    note = _abandoned_note(state.abandoned, state.settlement.grace)
    if isinstance(exc, anyio.get_cancelled_exc_class()):
        return ToolFailure.of(
            "the call was cancelled" + note, ErrorInfo(name="AbortError", code=ABORTED)
        )
    return ToolFailure.of(f"the call ended with {type(exc).__name__}: {exc}{note}")


def _abandoned_note(abandoned: Sequence[SubCall], grace: float) -> str:
    if not abandoned:
        return ""
    calls = ", ".join(f"{sub.name} ({sub.sub_id})" for sub in abandoned)
    if len(abandoned) == 1:
        what, goes = "1 sub-call that", "it goes on and is logged when it ends"
    else:
        what, goes = f"{len(abandoned)} sub-calls that", "they go on and are logged when they end"
    return f"; abandoned {what} did not stop within {grace:g}s of the run's end ({goes}): {calls}"


def _render_run(value: dict[str, Any], limit: int, budget: OutputBudget) -> list[Any]:
    """The content of a ``run_code`` result, within ``limit`` bytes if its value is.

    The runtime's output limit bounds the ``{logs, result}`` JSON; a result
    pretty-printed (a line per item, indented) can take several times that, so
    past the limit it is shown compact (never more bytes than its JSON). So it
    is past the output budget when compact fits within it (the budget then
    cuts nothing); otherwise the budget cuts the pretty text.

    Images and audio the program returned follow the text, which shows a
    placeholder for each (see ``ptc._media``).
    """
    media = find_media(value["result"]) if "result" in value else []
    if media:
        value = {**value, "result": with_placeholders(value["result"], media)}
    text = render_run_result(value)
    result = value.get("result")
    if type(result) in (dict, list):
        over_limit = 4 * len(text) > limit and len(text.encode()) > limit
        if over_limit or len(text) > budget:
            compact = "\n".join([*value["logs"], orjson.dumps(result).decode()])
            if over_limit or len(compact) <= budget:
                text = compact
    return [text_block(text), *(m.block for m in media if m.block is not None)]
