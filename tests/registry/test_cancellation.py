"""Cancellation at every stage of a call, timeouts, and the caller's own cancel scopes."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from registry import (
    ABORTED,
    ABORTED_BEFORE_DISPATCH,
    APPROVAL_CANCELLED,
    APPROVAL_REJECTED,
    TOOL_DENIED,
    TOOL_TIMEOUT,
    AbortSignal,
    Accept,
    Allow,
    Ask,
    Deny,
    DispatchExecution,
    ErrorInfo,
    ToolCall,
    ToolError,
    ToolExecution,
    ToolRegistry,
    ToolResult,
    ToolRunContext,
)
from tests.registry.helpers_pipeline import (
    BlockingBody,
    Recorder,
    assert_failure,
    assert_success,
    make_call,
    make_tool,
)

pytestmark = pytest.mark.anyio


class StoppedEarly(ToolError):
    code = "STOPPED_EARLY"


class Trace:
    """Records which stages of the pipeline ran."""

    def __init__(self, reg: ToolRegistry) -> None:
        self.stages: list[str] = []
        self.recorder = Recorder()

        async def pre(execution: ToolExecution, call_next: Any) -> Any:
            self.stages.append("pre")
            return await call_next()

        def guard(execution: ToolExecution) -> None:
            self.stages.append("guard")

        async def wrap(dispatch: DispatchExecution, call_next: Any) -> ToolResult:
            self.stages.append("wrap")
            result: ToolResult = await call_next()
            return result

        async def post(execution: ToolExecution, result: ToolResult, call_next: Any) -> Any:
            self.stages.append("post")
            return await call_next()

        reg.on_pre_execute(pre)
        reg.guard(guard)
        reg.wrap_execute(wrap)
        reg.on_post_execute(post)
        reg.on_result(self.recorder.observer())


async def _execute_aborting_when(
    reg: ToolRegistry, call: ToolCall, event: anyio.Event, reason: object = "user stop"
) -> ToolResult:
    """Run ``call`` and abort its signal once ``event`` is set."""
    assert call.signal is not None
    signal = call.signal
    results: list[ToolResult] = []
    async with anyio.create_task_group() as tg:

        async def abort_later() -> None:
            await event.wait()
            signal.abort(reason)

        tg.start_soon(abort_later)
        results.append(await reg.execute(call))
    (result,) = results
    return result


# --------------------------------------------------------------------------- before dispatch


async def test_pre_aborted_signal_skips_every_policy_stage() -> None:
    body = BlockingBody()
    finalized: list[ToolResult] = []

    def finalize(execution: ToolExecution, result: ToolResult) -> None:
        finalized.append(result)

    reg = ToolRegistry()
    reg.register(make_tool(execute=body, finalize_content=finalize))
    trace = Trace(reg)
    signal = AbortSignal()
    signal.abort("gone")
    result = await reg.execute(make_call(signal=signal))
    assert_failure(result, ABORTED_BEFORE_DISPATCH, name="AbortError")
    assert trace.stages == []
    assert not body.started.is_set()
    assert finalized == [result]
    assert trace.recorder.results == [result]
    assert trace.recorder.executions[0].arguments == {"text": "hi"}


async def test_pre_aborted_signal_wins_over_an_unknown_tool() -> None:
    signal = AbortSignal()
    signal.abort()
    result = await ToolRegistry().execute(make_call("missing", signal=signal))
    assert_failure(result, ABORTED_BEFORE_DISPATCH)


async def test_abort_inside_a_pre_listener_is_aborted_before_dispatch() -> None:
    body = BlockingBody()
    reg = ToolRegistry()
    reg.register(make_tool(execute=body))
    trace = Trace(reg)

    async def aborting(execution: ToolExecution, call_next: Any) -> Any:
        execution.signal.abort("user pressed stop")
        return await call_next()

    reg.on_pre_execute(aborting)
    result = await reg.execute(make_call(signal=AbortSignal()))
    assert_failure(result, ABORTED_BEFORE_DISPATCH)
    assert trace.stages == ["pre"]
    assert not body.started.is_set()
    assert trace.recorder.results == [result]


async def test_abort_while_a_pre_listener_awaits() -> None:
    body = BlockingBody()
    reg = ToolRegistry()
    reg.register(make_tool(execute=body))
    entered = anyio.Event()

    async def slow_gate(execution: ToolExecution, call_next: Any) -> Any:
        entered.set()
        await execution.signal.wait()
        return Allow()

    reg.on_pre_execute(slow_gate)
    result = await _execute_aborting_when(reg, make_call(signal=AbortSignal()), entered)
    assert_failure(result, ABORTED_BEFORE_DISPATCH)
    assert not body.started.is_set()


async def test_abort_during_approval_is_aborted_before_dispatch() -> None:
    body = BlockingBody()

    async def approval(execution: ToolExecution, reason: Any) -> Any:
        execution.signal.abort("closed the dialog")
        return True

    reg = ToolRegistry(approval=approval)
    reg.register(make_tool(execute=body))

    async def ask(execution: ToolExecution, call_next: Any) -> Any:
        return Ask()

    reg.on_pre_execute(ask)
    result = await reg.execute(make_call(signal=AbortSignal()))
    assert_failure(result, ABORTED_BEFORE_DISPATCH)
    assert not body.started.is_set()


@pytest.mark.parametrize("when", ["inside the listener", "while the listener awaits"])
async def test_a_denial_decided_after_an_abort_stays_a_denial(when: str) -> None:
    # The more specific failure wins: the listener decided, with its reason and identity.
    body = BlockingBody()
    reg = ToolRegistry()
    reg.register(make_tool(execute=body))
    trace = Trace(reg)
    entered = anyio.Event()

    async def deny(execution: ToolExecution, call_next: Any) -> Any:
        if when == "inside the listener":
            execution.signal.abort("user pressed stop")
            entered.set()  # (the helper's abort then finds it aborted already)
        else:
            entered.set()
            await execution.signal.wait()
        return Deny("writes are frozen", ErrorInfo(name="FreezeError", code="FROZEN"))

    reg.on_pre_execute(deny)
    result = await _execute_aborting_when(reg, make_call(signal=AbortSignal()), entered)
    assert_failure(result, "FROZEN", "writes are frozen", name="FreezeError")
    assert trace.stages == ["pre"]
    assert not body.started.is_set()
    assert trace.recorder.results == [result]


async def test_a_default_denial_after_an_abort_is_tool_denied() -> None:
    reg = ToolRegistry()
    reg.register(make_tool())

    async def deny(execution: ToolExecution, call_next: Any) -> Any:
        execution.signal.abort()
        return Deny("not in this workspace")

    reg.on_pre_execute(deny)
    result = await reg.execute(make_call(signal=AbortSignal()))
    assert_failure(result, TOOL_DENIED, "not in this workspace", name="ToolDeniedError")


@pytest.mark.parametrize(
    ("verdict", "code"), [("reject", APPROVAL_REJECTED), ("cancel", APPROVAL_CANCELLED)]
)
async def test_an_approvers_refusal_after_an_abort_stays_a_refusal(verdict: str, code: str) -> None:
    body = BlockingBody()

    async def approval(execution: ToolExecution, reason: Any) -> Any:
        execution.signal.abort("closed the dialog")
        return verdict

    reg = ToolRegistry(approval=approval)
    reg.register(make_tool(execute=body))

    async def ask(execution: ToolExecution, call_next: Any) -> Any:
        return Ask("deletes a branch")

    reg.on_pre_execute(ask)
    result = await reg.execute(make_call(signal=AbortSignal()))
    assert_failure(result, code)
    assert not body.started.is_set()


async def test_abort_in_a_wrapper_before_the_body_is_aborted_before_dispatch() -> None:
    body = BlockingBody()
    reg = ToolRegistry()
    reg.register(make_tool(execute=body))

    async def aborting(dispatch: DispatchExecution, call_next: Any) -> ToolResult:
        dispatch.execution.signal.abort()
        result: ToolResult = await call_next()
        return result

    reg.wrap_execute(aborting)
    result = await reg.execute(make_call(signal=AbortSignal()))
    assert_failure(result, ABORTED_BEFORE_DISPATCH)
    assert not body.started.is_set()


# --------------------------------------------------------------------------- while the body runs


async def test_abort_while_the_body_awaits_waits_for_its_cleanup() -> None:
    body = BlockingBody(gated=True)
    reg = ToolRegistry()
    reg.register(make_tool(execute=body))
    trace = Trace(reg)
    signal = AbortSignal()
    results: list[ToolResult] = []
    async with anyio.create_task_group() as tg:

        async def run() -> None:
            results.append(await reg.execute(make_call(signal=signal)))

        tg.start_soon(run)
        await body.started.wait()
        signal.abort("user stop")
        await body.cancelled.wait()
        # The body is cancelled but its cleanup is still blocked on ``release``.
        assert results == []
        assert not body.cleanup_done
        body.release.set()
    (result,) = results
    assert_failure(result, ABORTED, "the call was cancelled", name="AbortError")
    assert body.cleanup_done
    assert trace.stages == ["pre", "guard", "wrap", "post"]
    assert trace.recorder.results == [result]


async def test_abort_while_the_body_awaits_without_wrappers() -> None:
    body = BlockingBody()
    reg = ToolRegistry(enforce_timeouts=False)
    reg.register(make_tool(execute=body))
    call = make_call(signal=AbortSignal())
    result = await _execute_aborting_when(reg, call, body.started)
    assert_failure(result, ABORTED)
    assert body.cancelled.is_set()
    assert body.cleanup_done


async def test_deferred_contexts_survive_a_cancelled_body() -> None:
    body = BlockingBody(defer=("deferred",))
    reg = ToolRegistry()
    reg.register(make_tool(execute=body))
    result = await _execute_aborting_when(reg, make_call(signal=AbortSignal()), body.started)
    assert_failure(result, ABORTED)
    assert result.additional_contexts == ("deferred",)


async def test_body_raising_tool_error_after_abort_keeps_the_specific_error() -> None:
    started = anyio.Event()

    async def body(args: Any, ctx: ToolRunContext) -> Any:
        started.set()
        with anyio.CancelScope(shield=True):
            await ctx.signal.wait()
        raise StoppedEarly("stopped after 3 of 10 files")

    reg = ToolRegistry()
    reg.register(make_tool(execute=body))
    result = await _execute_aborting_when(reg, make_call(signal=AbortSignal()), started)
    assert_failure(result, "STOPPED_EARLY", "stopped after 3 of 10 files", name="StoppedEarly")


async def test_body_turning_its_cancellation_into_a_tool_error_keeps_it() -> None:
    started = anyio.Event()

    async def body(args: Any, ctx: ToolRunContext) -> Any:
        started.set()
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            raise StoppedEarly("rolled back") from None
        return "unreachable"  # pragma: no cover

    reg = ToolRegistry()
    reg.register(make_tool(execute=body))
    result = await _execute_aborting_when(reg, make_call(signal=AbortSignal()), started)
    assert_failure(result, "STOPPED_EARLY", "rolled back")


async def test_body_raising_a_plain_exception_after_abort_is_aborted() -> None:
    started = anyio.Event()

    async def body(args: Any, ctx: ToolRunContext) -> Any:
        started.set()
        with anyio.CancelScope(shield=True):
            await ctx.signal.wait()
        raise ConnectionResetError("socket closed")

    reg = ToolRegistry()
    reg.register(make_tool(execute=body))
    result = await _execute_aborting_when(reg, make_call(signal=AbortSignal()), started)
    assert_failure(result, ABORTED, "ConnectionResetError: socket closed")


async def test_body_that_succeeds_despite_the_abort_is_aborted() -> None:
    started = anyio.Event()

    async def body(args: Any, ctx: ToolRunContext) -> Any:
        started.set()
        with anyio.CancelScope(shield=True):
            await ctx.signal.wait()
        return "finished anyway"

    reg = ToolRegistry()
    reg.register(make_tool(execute=body))
    result = await _execute_aborting_when(reg, make_call(signal=AbortSignal()), started)
    assert_failure(result, ABORTED)


async def test_caller_abort_reaches_the_body_through_a_replaced_signal() -> None:
    body = BlockingBody()
    replacement = AbortSignal()

    async def detach(dispatch: DispatchExecution, call_next: Any) -> ToolResult:
        previous = dispatch.signal
        dispatch.signal = replacement  # tries to drop the caller's signal
        try:
            result: ToolResult = await call_next()
        finally:
            dispatch.signal = previous
        return result

    reg = ToolRegistry()
    reg.register(make_tool(execute=body))
    reg.wrap_execute(detach)
    result = await _execute_aborting_when(
        reg, make_call(signal=AbortSignal()), body.started, "caller"
    )
    assert_failure(result, ABORTED)
    assert body.cancelled.is_set()
    assert body.cleanup_done
    assert body.ctx is not None
    assert body.ctx.signal.aborted
    assert body.ctx.signal.reason == "caller"
    assert not replacement.aborted


async def test_wrapper_signal_alone_cancels_the_body() -> None:
    body = BlockingBody()
    replacement = AbortSignal()

    async def own_signal(dispatch: DispatchExecution, call_next: Any) -> ToolResult:
        dispatch.signal = replacement
        result: ToolResult = await call_next()
        return result

    async def fire_when_started() -> None:
        await body.started.wait()
        replacement.abort("wrapper")

    reg = ToolRegistry()
    reg.register(make_tool(execute=body))
    reg.wrap_execute(own_signal)
    caller = AbortSignal()
    async with anyio.create_task_group() as tg:
        tg.start_soon(fire_when_started)
        result = await reg.execute(make_call(signal=caller))
    assert_failure(result, ABORTED)
    assert body.cleanup_done
    assert not caller.aborted


async def test_wrapper_raising_after_an_abort_is_aborted_and_keeps_deferred_contexts() -> None:
    body = BlockingBody(defer=("deferred",))

    async def flaky(dispatch: DispatchExecution, call_next: Any) -> ToolResult:
        await call_next()
        raise RuntimeError("retry budget exhausted")

    reg = ToolRegistry()
    reg.register(make_tool(execute=body))
    reg.wrap_execute(flaky)
    result = await _execute_aborting_when(reg, make_call(signal=AbortSignal()), body.started)
    assert_failure(result, ABORTED, "retry budget exhausted")
    assert result.additional_contexts == ("deferred",)
    assert body.cleanup_done


async def test_retry_after_an_abort_reports_aborted_since_the_body_already_ran() -> None:
    body = BlockingBody(defer=("first attempt",))
    attempts: list[ToolResult] = []

    async def naive_retry(dispatch: DispatchExecution, call_next: Any) -> ToolResult:
        attempts.append(await call_next())
        attempts.append(await call_next())  # retried without checking the signal
        return attempts[-1]

    reg = ToolRegistry()
    reg.register(make_tool(execute=body))
    reg.wrap_execute(naive_retry)
    result = await _execute_aborting_when(reg, make_call(signal=AbortSignal()), body.started)
    assert_failure(attempts[0], ABORTED)
    assert_failure(result, ABORTED)
    assert result.additional_contexts == ("first attempt",)


# --------------------------------------------------------------------------- after the body


async def test_abort_during_a_post_listener_turns_success_into_aborted() -> None:
    reg = ToolRegistry()
    reg.register(make_tool())
    recorder = Recorder()
    reg.on_result(recorder.observer())

    async def aborting(execution: ToolExecution, result: ToolResult, call_next: Any) -> Any:
        assert_success(result, "hi")
        execution.signal.abort("too late")
        return await call_next()

    reg.on_post_execute(aborting)
    result = await reg.execute(make_call(signal=AbortSignal()))
    assert_failure(result, ABORTED, name="AbortError")
    assert recorder.results == [result]


async def test_abort_during_a_post_listener_keeps_deferred_and_decision_contexts() -> None:
    async def body(args: Any, ctx: ToolRunContext) -> Any:
        ctx.defer_context("deferred")
        return "ok"

    reg = ToolRegistry()
    reg.register(make_tool(execute=body))

    async def aborting(execution: ToolExecution, result: ToolResult, call_next: Any) -> Any:
        execution.signal.abort()
        return Accept(additional_contexts=["decision"])

    reg.on_post_execute(aborting)
    result = await reg.execute(make_call(signal=AbortSignal()))
    assert_failure(result, ABORTED)
    assert result.additional_contexts == ("deferred", "decision")


async def test_abort_during_a_post_listener_keeps_a_tool_failure() -> None:
    async def body(args: Any, ctx: ToolRunContext) -> Any:
        raise StoppedEarly("partial")

    reg = ToolRegistry()
    reg.register(make_tool(execute=body))

    async def aborting(execution: ToolExecution, result: ToolResult, call_next: Any) -> Any:
        execution.signal.abort()
        return await call_next()

    reg.on_post_execute(aborting)
    result = await reg.execute(make_call(signal=AbortSignal()))
    assert_failure(result, "STOPPED_EARLY", "partial")


async def test_denial_is_not_replaced_by_a_later_abort() -> None:
    reg = ToolRegistry()
    reg.register(make_tool())

    async def deny(execution: ToolExecution, call_next: Any) -> Any:
        return Deny("not allowed")

    def abort_on_result(execution: ToolExecution, result: ToolResult) -> None:
        execution.signal.abort()

    reg.on_pre_execute(deny)
    reg.on_result(abort_on_result)
    result = await reg.execute(make_call(signal=AbortSignal()))
    assert_failure(result, "TOOL_DENIED", "not allowed")


# --------------------------------------------------------------------------- timeouts


async def test_timeout_cancels_the_body_and_waits_for_its_cleanup() -> None:
    body = BlockingBody()
    reg = ToolRegistry()
    reg.register(make_tool(execute=body, timeout=0.01))
    caller = AbortSignal()
    result = await reg.execute(make_call(signal=caller))
    assert_failure(result, TOOL_TIMEOUT, "echo timed out after 0.01s", name="ToolTimeoutError")
    assert body.cancelled.is_set()
    assert body.cleanup_done
    assert not caller.aborted
    assert body.ctx is not None
    assert body.ctx.signal.aborted
    assert repr(body.ctx.signal.reason) == "timed out after 0.01s"


async def test_timeout_keeps_deferred_contexts() -> None:
    body = BlockingBody(defer=("deferred",))
    reg = ToolRegistry()
    reg.register(make_tool(execute=body, timeout=0.01))
    result = await reg.execute(make_call())
    assert_failure(result, TOOL_TIMEOUT)
    assert result.additional_contexts == ("deferred",)


async def test_timeout_beats_a_caller_abort_that_arrives_during_cleanup() -> None:
    body = BlockingBody(gated=True)
    reg = ToolRegistry()
    reg.register(make_tool(execute=body, timeout=0.01))
    caller = AbortSignal()
    results: list[ToolResult] = []
    async with anyio.create_task_group() as tg:

        async def run() -> None:
            results.append(await reg.execute(make_call(signal=caller)))

        tg.start_soon(run)
        await body.cancelled.wait()  # the deadline fired
        caller.abort("user stop")  # then the user gave up too
        assert results == []
        body.release.set()
    (result,) = results
    assert_failure(result, TOOL_TIMEOUT)
    assert body.cleanup_done


async def test_caller_abort_before_the_deadline_is_aborted_not_timeout() -> None:
    started = anyio.Event()

    async def body(args: Any, ctx: ToolRunContext) -> Any:
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            # A cleanup that outlives the deadline: the caller still owns the outcome.
            with anyio.CancelScope(shield=True):
                await anyio.sleep(0.6)
        return "unreachable"  # pragma: no cover

    reg = ToolRegistry()
    # The abort follows the body's start at once; a deadline of 0.3 s stays
    # ahead of it even when a loaded machine holds the test back a while.
    reg.register(make_tool(execute=body, timeout=0.3))
    result = await _execute_aborting_when(reg, make_call(signal=AbortSignal()), started)
    assert_failure(result, ABORTED)


async def test_timeout_keeps_a_more_specific_tool_error() -> None:
    async def body(args: Any, ctx: ToolRunContext) -> Any:
        with anyio.CancelScope(shield=True):
            await ctx.signal.wait()
        raise StoppedEarly("saved a checkpoint")

    reg = ToolRegistry()
    reg.register(make_tool(execute=body, timeout=0.01))
    result = await reg.execute(make_call())
    assert_failure(result, "STOPPED_EARLY", "saved a checkpoint")


async def test_success_racing_the_deadline_becomes_timeout() -> None:
    async def body(args: Any, ctx: ToolRunContext) -> Any:
        with anyio.CancelScope(shield=True):
            await ctx.signal.wait()
        return "late success"

    reg = ToolRegistry()
    reg.register(make_tool(execute=body, timeout=0.01))
    result = await reg.execute(make_call())
    assert_failure(result, TOOL_TIMEOUT)


async def test_a_fast_body_is_not_affected_by_its_timeout() -> None:
    reg = ToolRegistry()
    reg.register(make_tool(timeout=30))
    assert_success(await reg.execute(make_call()), "hi", "hi")


async def test_timeouts_are_not_enforced_when_disabled() -> None:
    async def body(args: Any, ctx: ToolRunContext) -> Any:
        await anyio.sleep(0.03)
        return "slow but fine"

    reg = ToolRegistry(enforce_timeouts=False)
    reg.register(make_tool(execute=body, timeout=0.01))
    assert_success(await reg.execute(make_call()), "slow but fine")


# --------------------------------------------------------------------------- the caller's scope


async def test_cancelling_the_callers_scope_propagates_out_of_execute() -> None:
    body = BlockingBody()
    reg = ToolRegistry()
    reg.register(make_tool(execute=body, timeout=30))
    recorder = Recorder()
    reg.on_result(recorder.observer())
    returned: list[ToolResult] = []
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:

            async def cancel_when_started() -> None:
                await body.started.wait()
                scope.cancel()

            tg.start_soon(cancel_when_started)
            returned.append(await reg.execute(make_call(signal=AbortSignal())))
    assert scope.cancelled_caught
    assert returned == []
    assert body.cancelled.is_set()
    assert body.cleanup_done
    assert recorder.results == []


async def test_move_on_after_around_execute_is_not_swallowed() -> None:
    body = BlockingBody()
    reg = ToolRegistry(enforce_timeouts=False)
    reg.register(make_tool(execute=body))
    returned: list[ToolResult] = []
    with anyio.move_on_after(0.01) as scope:
        returned.append(await reg.execute(make_call()))
    assert scope.cancelled_caught
    assert returned == []
    assert body.cleanup_done


async def test_cancelling_the_callers_scope_during_a_pre_listener_propagates() -> None:
    entered = anyio.Event()
    body = BlockingBody()

    async def gate(execution: ToolExecution, call_next: Any) -> Any:
        entered.set()
        await anyio.sleep_forever()
        return Allow()  # pragma: no cover

    reg = ToolRegistry()
    reg.register(make_tool(execute=body))
    reg.on_pre_execute(gate)
    returned: list[ToolResult] = []
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:

            async def cancel_when_entered() -> None:
                await entered.wait()
                scope.cancel()

            tg.start_soon(cancel_when_entered)
            returned.append(await reg.execute(make_call()))
    assert scope.cancelled_caught
    assert returned == []
    assert not body.started.is_set()
