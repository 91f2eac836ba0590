"""``CodeExecutor``: the executor an agent mounts so its model writes programs."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

import anyio
import orjson

from registry import (
    UNKNOWN_TOOL,
    AbortSignal,
    ErrorInfo,
    JsonValue,
    ToolCall,
    ToolDefinition,
    ToolFailure,
    ToolOutput,
    ToolRegistry,
    ToolResult,
    ToolRunContext,
    text_block,
)
from runtime import Isolation, Limits, Runtime, get_runtime
from sdkgen import render_sdk

from ._bridge import Bridge
from ._events import DispatchLogHook, EventSink, call_event, emit, result_event
from ._exceptions import CodeRunFailedError, ExecutorConfigError
from ._render import render_run_result

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
    "properties": {"logs": {"type": "array", "items": {"type": "string"}}, "result": {}},
    "required": ["logs"],
    "additionalProperties": False,
}
CODE_ONLY_RULE = (
    "Only `run_code` is callable directly. Every other tool is reachable only from inside a "
    '`run_code` program, as `await tools.<name>(args)` (or `tools["<name>"](args)`).'
)
# The isolation of the run a ``run_code`` call made, handed from the call's body
# (which the pipeline may run in a task of its own) back to the call that reports it.
_RUN_ISOLATION: ContextVar[list[Isolation] | None] = ContextVar("ptc_run_isolation", default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelCall:
    """One tool call as the model emitted it; ``arguments`` may be a JSON string."""

    call_id: str
    name: str
    arguments: Any = field(default_factory=dict)


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
        limits: the runtime limits of each program.
        on_event: sink for ``tool/*`` event dicts (see ``ptc._events``).
        dispatch_log: hook that may replace the *logged* content of a sub-call.
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
        limits: Limits | None = None,
        on_event: EventSink | None = None,
        dispatch_log: DispatchLogHook | None = None,
    ) -> None:
        if mode not in ("native", "code", "both"):
            raise ExecutorConfigError(f"mode must be 'native', 'code' or 'both', got {mode!r}")
        for label, value in (
            ("max_parallel_sub_calls", max_parallel_sub_calls),
            ("max_parallel_tool_calls", max_parallel_tool_calls),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ExecutorConfigError(f"{label} must be a positive integer, got {value!r}")
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
        self.limits = limits
        self.on_event = on_event
        self.dispatch_log = dispatch_log
        self._runtime_spec = runtime
        self._runtime: Runtime | None = runtime if isinstance(runtime, Runtime) else None
        self._owns_runtime = not isinstance(runtime, Runtime)
        self._entered_runtime: Runtime | None = None
        self._sdk_cache: dict[str | None, str] = {}
        self._dispose_watch = registry.on_change(self._sdk_cache.clear)
        self.transport = ToolDefinition(
            name=RUN_CODE,
            description=RUN_CODE_DESCRIPTION,
            parameters=RUN_CODE_PARAMETERS,
            output=ToolOutput(
                schema=RUN_RESULT_SCHEMA,
                render=lambda _args, value: _render_run(value, self._output_budget()),
            ),
            execute=self._run_code_body,
        )

    # ------------------------------------------------------------------ model input

    def sdk_text(self, scope: str | None = None) -> str:
        """The ``tools:sdk`` section for the tools ``scope`` can see."""
        cached = self._sdk_cache.get(scope)
        if cached is None:
            cached = render_sdk(self.registry.schemas(scope, with_output=True))
            self._sdk_cache[scope] = cached
        return cached

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
        call_id: str = "run_code",
    ) -> ToolResult:
        """Run one program as an outer ``run_code`` call (through the pipeline)."""
        self.registry.check_scope(scope)  # a caller's typo raises, before any event
        return await self._outer(
            ModelCall(
                call_id=call_id, name=RUN_CODE, arguments={"code": code, "description": description}
            ),
            scope,
            signal,
        )

    async def execute(
        self,
        batch: Sequence[ModelCall | Mapping[str, Any]],
        *,
        scope: str | None = None,
        signal: AbortSignal | None = None,
    ) -> BatchResult:
        """Run a batch of model calls with the native scheduling contract.

        Consecutive concurrency-safe calls overlap up to
        ``max_parallel_tool_calls``; any other call is a barrier that runs alone.
        Results come back in input order, with every call's additional contexts
        after them in the same order.
        """
        self.registry.check_scope(scope)  # a caller's typo raises, before any event
        calls = [_as_model_call(item) for item in batch]
        results: list[ToolResult | None] = [None] * len(calls)
        index = 0
        while index < len(calls):
            group = [index]
            if self._mode_of(calls[index], scope) == "parallel":
                while (
                    group[-1] + 1 < len(calls)
                    and self._mode_of(calls[group[-1] + 1], scope) == "parallel"
                ):
                    group.append(group[-1] + 1)
            limiter = anyio.CapacityLimiter(self.max_parallel_tool_calls)

            async def run_one(i: int, limiter: anyio.CapacityLimiter) -> None:
                async with limiter:
                    results[i] = await self._outer(calls[i], scope, signal)

            async with anyio.create_task_group() as tg:
                for i in group:
                    tg.start_soon(run_one, i, limiter)
            index = group[-1] + 1
        settled = [r for r in results if r is not None]
        return BatchResult(
            results=[
                CallResult(call_id=c.call_id, result=r) for c, r in zip(calls, settled, strict=True)
            ],
            additional_contexts=[ctx for r in settled for ctx in r.additional_contexts],
        )

    def _mode_of(self, call: ModelCall, scope: str | None) -> str:
        if call.name == RUN_CODE or (self.mode == "code"):
            return "exclusive"
        return self.registry.execution_mode(
            ToolCall(call_id=call.call_id, name=call.name, arguments=call.arguments, scope=scope)
        )

    async def _outer(
        self, call: ModelCall, scope: str | None, signal: AbortSignal | None
    ) -> ToolResult:
        arguments = call.arguments
        emit(self.on_event, call_event(call.call_id, call.name, arguments))
        reported: list[Isolation] = []
        token = _RUN_ISOLATION.set(reported)
        try:
            result = await self._dispatch_outer(call, scope, signal)
        finally:
            _RUN_ISOLATION.reset(token)
        event = result_event(call.call_id, call.name, result)
        if reported:
            # Metadata for the caller's logs; the model-facing content is unchanged.
            isolation = reported[-1].to_json()
            event["isolation"] = isolation
            if result.meta is None or isinstance(result.meta, dict):
                result = dataclasses.replace(
                    result, meta={**(result.meta or {}), "isolation": isolation}
                )
        emit(self.on_event, event)
        return result

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

    async def _run_code_body(self, args: dict[str, Any], ctx: ToolRunContext) -> dict[str, Any]:
        runtime = await self._ensure_runtime()
        names = [d.name for d in self.registry.definitions(ctx.scope)]
        async with anyio.create_task_group() as tg:
            bridge = Bridge(
                registry=self.registry,
                ctx=ctx,
                task_group=tg,
                max_parallel=self.max_parallel_sub_calls,
                on_event=self.on_event,
                dispatch_log=self.dispatch_log,
            )
            try:
                outcome = await runtime.run(
                    args["code"],
                    tool_names=names,
                    call_tool=bridge.call_tool,
                    limits=self.limits,
                    cancel=ctx.signal,
                )
            finally:
                bridge.settle()
        reported = _RUN_ISOLATION.get()
        if reported is not None:
            reported.append(outcome.isolation)
        for context in bridge.deferred_contexts():
            ctx.defer_context(context)
        if not outcome.ok:
            raise CodeRunFailedError(outcome.kind or "crashed", outcome.message, outcome.logs)
        value: dict[str, Any] = {"logs": list(outcome.logs)}
        if outcome.has_result:
            value["result"] = outcome.result
        return value

    def _output_budget(self) -> int:
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

    async def aclose(self) -> None:
        """Close the runtime if this executor created it."""
        self._dispose_watch()
        if self._runtime is not None and self._owns_runtime:
            runtime, self._runtime = self._runtime, None
            if runtime is self._entered_runtime:
                self._entered_runtime = None
                await runtime.__aexit__(None, None, None)
            else:
                await runtime.aclose()

    async def __aenter__(self) -> CodeExecutor:
        # A runtime this executor creates is entered as a context manager for
        # the block, so it can keep house between runs (SubprocessRuntime ends
        # finished workers and collects new spares then, not during the runs).
        if self._owns_runtime and self._runtime is None:
            runtime = await self._ensure_runtime()
            await runtime.__aenter__()
            self._entered_runtime = runtime
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


def _render_run(value: dict[str, Any], budget: int) -> list[Any]:
    """The content of a ``run_code`` result, within ``budget`` bytes if its value is.

    The runtime's output limit bounds the ``{logs, result}`` JSON; a result
    pretty-printed (a line per item, indented) can take several times that, so
    past the budget it is shown compact (never more bytes than its JSON).
    """
    text = render_run_result(value)
    result = value.get("result")
    if type(result) in (dict, list) and 4 * len(text) > budget and len(text.encode()) > budget:
        text = "\n".join([*value["logs"], orjson.dumps(result).decode()])
    return [text_block(text)]


def _as_model_call(item: ModelCall | Mapping[str, Any]) -> ModelCall:
    if isinstance(item, ModelCall):
        call_id: Any = item.call_id
        name: Any = item.name
        arguments: Any = item.arguments
    else:
        call_id = item.get("id", item.get("call_id"))
        name = item.get("name")
        arguments = item.get("arguments", item.get("input", {}))
    if isinstance(arguments, str | bytes):
        # Unparseable text stays a string: the pipeline rejects it as INVALID_ARGS.
        with contextlib.suppress(orjson.JSONDecodeError):
            arguments = orjson.loads(arguments) if arguments else {}
    if not isinstance(call_id, str) or not isinstance(name, str):
        raise ExecutorConfigError(f"a model call needs string 'id' and 'name', got {item!r}")
    return ModelCall(call_id=call_id, name=name, arguments=arguments)
