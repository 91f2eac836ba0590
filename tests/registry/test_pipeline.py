"""The call pipeline: error codes, rendering, wrappers, finalize, observers, identity."""

from __future__ import annotations

import copy
import dataclasses
import json
import logging
import pickle
from typing import Any

import pytest

from registry import (
    INVALID_ARGS,
    INVALID_TOOL_OUTPUT,
    UNKNOWN_TOOL,
    AbortSignal,
    Accept,
    Allow,
    Deny,
    DispatchExecution,
    ExecutionToken,
    NotJsonError,
    ToolCall,
    ToolError,
    ToolExecution,
    ToolFailure,
    ToolRegistry,
    ToolResult,
    ToolRunContext,
    ToolSuccess,
    UnknownScopeError,
    snapshot_json,
)
from registry import _pipeline as registry_pipeline
from tests.registry.helpers_pipeline import (
    ANY_OUTPUT,
    Recorder,
    assert_failure,
    assert_success,
    make_call,
    make_tool,
    text,
)

pytestmark = pytest.mark.anyio


def _registry(*tools: Any) -> ToolRegistry:
    reg = ToolRegistry()
    for tool in tools or (make_tool(),):
        reg.register(tool)
    return reg


# --------------------------------------------------------------------------- error codes


async def test_unknown_tool_lists_the_visible_names() -> None:
    reg = _registry(make_tool("echo"), make_tool("alpha"))
    result = await reg.execute(make_call("nope"))
    assert_failure(
        result,
        UNKNOWN_TOOL,
        "unknown tool 'nope'; available tools: alpha, echo",
        name="ToolNotFoundError",
    )


async def test_unknown_tool_in_an_empty_registry() -> None:
    result = await ToolRegistry().execute(make_call("nope"))
    assert_failure(result, UNKNOWN_TOOL, "unknown tool 'nope'; no tools are available")


async def test_schema_violation_is_invalid_args_and_never_reaches_policy_or_body() -> None:
    ran: list[str] = []

    async def body(args: Any, ctx: ToolRunContext) -> str:
        ran.append("body")
        return "x"

    async def pre(execution: ToolExecution, call_next: Any) -> Any:
        ran.append("pre")
        return await call_next()

    reg = _registry(make_tool(execute=body))
    reg.on_pre_execute(pre)
    reg.guard(lambda execution: ran.append("guard"))
    result = await reg.execute(make_call(arguments={"text": 3}))
    failure = assert_failure(result, INVALID_ARGS, name="ToolArgsError")
    assert failure.error.message.startswith("invalid arguments for echo: ")
    assert "3 is not of type 'string'" in failure.error.message
    assert "$.text" in failure.error.message
    assert ran == []


async def test_missing_required_argument_is_invalid_args() -> None:
    result = await _registry().execute(make_call(arguments={}))
    failure = assert_failure(result, INVALID_ARGS)
    assert "'text' is a required property" in failure.error.message


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"text": float("nan")}, "non-finite number nan at $.text"),
        ({"text": b"bytes"}, "bytes (decode it to str) is not JSON at $.text"),
        ({"text": ("a",)}, "tuple (use a list) is not JSON at $.text"),
        ({1: "x"}, "non-string key 1 at $"),
        ({"text": "x", "token": ExecutionToken()}, "is not JSON at $.token"),
    ],
)
async def test_non_json_arguments_are_invalid_args(arguments: Any, problem: str) -> None:
    ran: list[str] = []
    reg = _registry()
    reg.guard(lambda execution: ran.append("guard"))
    result = await reg.execute(make_call(arguments=arguments))
    failure = assert_failure(result, INVALID_ARGS, name="ToolArgsError")
    assert failure.error.message.startswith("arguments of echo are not lossless JSON: ")
    assert problem in failure.error.message
    assert ran == []


async def test_non_json_return_is_invalid_tool_output() -> None:
    async def body(args: Any, ctx: ToolRunContext) -> Any:
        return {"when": {1, 2}}

    reg = _registry(make_tool(execute=body, output_schema=ANY_OUTPUT))
    result = await reg.execute(make_call())
    failure = assert_failure(result, INVALID_TOOL_OUTPUT, name="ToolOutputError")
    assert failure.error.message == (
        "echo returned a value that is not lossless JSON: set (use a list) is not JSON at $.when"
    )


async def test_schema_breaking_return_is_invalid_tool_output() -> None:
    async def body(args: Any, ctx: ToolRunContext) -> Any:
        return 42

    result = await _registry(make_tool(execute=body)).execute(make_call())
    failure = assert_failure(result, INVALID_TOOL_OUTPUT, name="ToolOutputError")
    assert failure.error.message == (
        "echo returned a value that breaks its output schema: "
        "42 is not of type 'string' (at the root)"
    )


async def test_raising_render_is_invalid_tool_output() -> None:
    def render(args: Any, value: Any) -> Any:
        raise RuntimeError("no renderer today")

    result = await _registry(make_tool(render=render)).execute(make_call())
    assert_failure(
        result,
        INVALID_TOOL_OUTPUT,
        "rendering the result of echo failed: RuntimeError: no renderer today",
    )


async def test_render_returning_malformed_blocks_is_invalid_tool_output() -> None:
    def render(args: Any, value: Any) -> Any:
        return [{"text": "no type"}]

    result = await _registry(make_tool(render=render)).execute(make_call())
    failure = assert_failure(result, INVALID_TOOL_OUTPUT)
    assert "every content block must be an object with a string 'type'" in failure.error.message


@pytest.mark.parametrize("broken", ["raises", "not json"])
async def test_a_failing_meta_never_fails_the_call(
    broken: str, caplog: pytest.LogCaptureFixture
) -> None:
    # meta is a UI projection: the call succeeds without it, and the failure is logged.
    def meta(args: Any, value: Any) -> Any:
        if broken == "raises":
            raise KeyError("size")
        return {"size": float("nan")}

    with caplog.at_level(logging.ERROR, logger="registry"):
        result = await _registry(make_tool(meta=meta)).execute(make_call())
    assert_success(result, "hi", "hi")
    assert result.meta is None
    assert "the meta projection of echo raised" in caplog.text


async def test_meta_is_computed_for_direct_calls_only() -> None:
    # A nested (Code Mode) dispatch carries its run_code call's token as parent.
    calls: list[Any] = []

    def meta(args: Any, value: Any) -> Any:
        calls.append(value)
        return {"length": len(value)}

    reg = _registry(make_tool(meta=meta))
    direct = await reg.execute(make_call())
    nested = await reg.execute(make_call(parent=ExecutionToken()))
    assert direct.meta == {"length": 2}
    assert_success(nested, "hi", "hi")
    assert nested.meta is None
    assert calls == ["hi"]


class QuotaError(ToolError):
    code = "QUOTA_EXCEEDED"


async def test_tool_error_subclass_carries_its_name_and_code() -> None:
    async def body(args: Any, ctx: ToolRunContext) -> Any:
        raise QuotaError("the quota is spent")

    result = await _registry(make_tool(execute=body)).execute(make_call())
    failure = assert_failure(result, "QUOTA_EXCEEDED", "the quota is spent", name="QuotaError")
    assert failure.error.to_json() == {
        "message": "the quota is spent",
        "info": {"name": "QuotaError", "code": "QUOTA_EXCEEDED"},
    }


async def test_tool_error_with_an_explicit_code() -> None:
    async def body(args: Any, ctx: ToolRunContext) -> Any:
        raise ToolError("nope", code="CUSTOM")

    result = await _registry(make_tool(execute=body)).execute(make_call())
    assert_failure(result, "CUSTOM", "nope", name="ToolError")


async def test_any_other_exception_fails_without_info() -> None:
    async def body(args: Any, ctx: ToolRunContext) -> Any:
        raise ValueError("bad input file")

    result = await _registry(make_tool(execute=body)).execute(make_call())
    assert_failure(result, None, "ValueError: bad input file")


async def test_exception_without_a_message_names_its_class() -> None:
    async def body(args: Any, ctx: ToolRunContext) -> Any:
        raise LookupError

    result = await _registry(make_tool(execute=body)).execute(make_call())
    assert_failure(result, None, "LookupError")


# --------------------------------------------------------------------------- rendering


async def test_string_value_renders_raw() -> None:
    result = await _registry().execute(make_call(arguments={"text": '"quoted"\nline'}))
    assert_success(result, '"quoted"\nline', '"quoted"\nline')


@pytest.mark.parametrize(
    ("value", "rendered"),
    [
        ({"a": 1, "b": [1, 2]}, '{\n  "a": 1,\n  "b": [\n    1,\n    2\n  ]\n}'),
        ([], "[]"),
        (3, "3"),
        (2.5, "2.5"),
        (True, "true"),
        (None, "null"),
    ],
)
async def test_non_string_value_renders_as_pretty_json(value: Any, rendered: str) -> None:
    async def body(args: Any, ctx: ToolRunContext) -> Any:
        return value

    result = await _registry(make_tool(execute=body, output_schema=ANY_OUTPUT)).execute(make_call())
    success = assert_success(result, value, rendered)
    assert success.meta is None
    assert success.additional_contexts == ()


async def test_custom_render_and_meta_receive_arguments_and_value() -> None:
    seen: list[tuple[Any, Any]] = []

    def render(args: Any, value: Any) -> Any:
        seen.append((args, value))
        return [{"type": "text", "text": f"{args['text']}->{value}"}, {"type": "image", "x": 1}]

    def meta(args: Any, value: Any) -> Any:
        return {"length": len(value)}

    async def body(args: Any, ctx: ToolRunContext) -> Any:
        return args["text"].upper()

    reg = _registry(make_tool(execute=body, render=render, meta=meta))
    result = await reg.execute(make_call(arguments={"text": "ab"}))
    success = assert_success(result, "AB")
    assert success.content == [{"type": "text", "text": "ab->AB"}, {"type": "image", "x": 1}]
    assert success.meta == {"length": 2}
    assert seen == [({"text": "ab"}, "AB")]


async def test_render_may_return_a_plain_string() -> None:
    result = await _registry(make_tool(render=lambda args, value: f"<{value}>")).execute(
        make_call()
    )
    assert_success(result, "hi", "<hi>")


async def test_success_value_is_a_snapshot_of_what_the_body_returned() -> None:
    returned: dict[str, Any] = {"items": [1]}

    async def body(args: Any, ctx: ToolRunContext) -> Any:
        return returned

    result = await _registry(make_tool(execute=body, output_schema=ANY_OUTPUT)).execute(make_call())
    returned["items"].append(2)
    assert_success(result, {"items": [1]})


# --------------------------------------------------------------------------- wrappers


async def test_wrappers_run_outermost_first_around_the_body() -> None:
    events: list[str] = []

    def wrapper(label: str) -> Any:
        async def wrap(dispatch: DispatchExecution, call_next: Any) -> ToolResult:
            events.append(f"{label}>")
            result: ToolResult = await call_next()
            events.append(f"<{label}")
            return result

        return wrap

    async def body(args: Any, ctx: ToolRunContext) -> Any:
        events.append("body")
        return "ok"

    reg = _registry(make_tool(execute=body, timeout=30))
    reg.wrap_execute(wrapper("a"))
    reg.wrap_execute(wrapper("b"))
    result = await reg.execute(make_call())
    assert_success(result, "ok")
    assert events == ["a>", "b>", "body", "<b", "<a"]


async def test_wrapper_may_short_circuit_with_a_failure() -> None:
    ran: list[str] = []

    async def body(args: Any, ctx: ToolRunContext) -> Any:
        ran.append("body")
        return "ok"

    async def refuse(dispatch: DispatchExecution, call_next: Any) -> ToolResult:
        return ToolFailure.of("circuit open")

    reg = _registry(make_tool(execute=body))
    reg.wrap_execute(refuse)
    assert_failure(await reg.execute(make_call()), None, "circuit open")
    assert ran == []


async def test_wrapper_authored_success_is_revalidated_and_rerendered() -> None:
    ran: list[str] = []

    async def body(args: Any, ctx: ToolRunContext) -> Any:
        ran.append("body")
        return "fresh"

    cache: dict[str, Any] = {"value": "cached"}

    async def cached(dispatch: DispatchExecution, call_next: Any) -> ToolResult:
        return ToolSuccess(value=cache["value"], content=text("wrapper content"))

    reg = _registry(make_tool(execute=body, render=lambda args, value: f"rendered {value}"))
    reg.wrap_execute(cached)
    assert_success(await reg.execute(make_call()), "cached", "rendered cached")

    cache["value"] = {"not": "a string"}
    failure = assert_failure(await reg.execute(make_call()), INVALID_TOOL_OUTPUT)
    assert "breaks its output schema" in failure.error.message
    assert ran == []


async def test_wrapper_authored_non_json_success_is_invalid_tool_output() -> None:
    async def cached(dispatch: DispatchExecution, call_next: Any) -> ToolResult:
        return ToolSuccess(value=("a", "tuple"), content=text("x"))

    reg = _registry(make_tool(output_schema=ANY_OUTPUT))
    reg.wrap_execute(cached)
    assert_failure(await reg.execute(make_call()), INVALID_TOOL_OUTPUT)


async def test_body_result_passed_through_wrappers_is_not_renormalized() -> None:
    renders: list[Any] = []

    def render(args: Any, value: Any) -> Any:
        renders.append(value)
        return value

    async def passthrough(dispatch: DispatchExecution, call_next: Any) -> ToolResult:
        result: ToolResult = await call_next()
        return result

    reg = _registry(make_tool(render=render))
    reg.wrap_execute(passthrough)
    assert_success(await reg.execute(make_call()), "hi", "hi")
    assert renders == ["hi"]


async def test_raising_wrapper_fails_without_info() -> None:
    async def broken(dispatch: DispatchExecution, call_next: Any) -> ToolResult:
        raise RuntimeError("metrics backend down")

    reg = _registry()
    reg.wrap_execute(broken)
    assert_failure(await reg.execute(make_call()), None, "RuntimeError: metrics backend down")


async def test_wrapper_returning_a_non_result_fails() -> None:
    async def wrong(dispatch: DispatchExecution, call_next: Any) -> Any:
        await call_next()
        return "just a string"

    reg = _registry()
    reg.wrap_execute(wrong)
    assert_failure(
        await reg.execute(make_call()),
        None,
        "an around-execute wrapper returned str, not a result",
    )


async def test_body_sees_a_fusion_of_caller_and_wrapper_signals() -> None:
    caller = AbortSignal()
    replacement = AbortSignal()
    seen: dict[str, Any] = {}

    async def swap(dispatch: DispatchExecution, call_next: Any) -> ToolResult:
        seen["before"] = dispatch.signal
        dispatch.signal = replacement
        try:
            result: ToolResult = await call_next()
        finally:
            dispatch.signal = seen["before"]
        return result

    async def body(args: Any, ctx: ToolRunContext) -> Any:
        seen["body"] = ctx.signal
        seen["execution"] = ctx.execution.signal
        replacement.abort("wrapper says stop")
        seen["aborted"] = ctx.signal.aborted
        seen["reason"] = ctx.signal.reason
        return "done"

    reg = _registry(make_tool(execute=body))
    reg.wrap_execute(swap)
    await reg.execute(make_call(signal=caller))
    assert seen["before"] is caller
    assert seen["execution"] is caller
    assert seen["body"] is not caller
    assert seen["body"] is not replacement
    assert seen["aborted"] is True
    assert seen["reason"] == "wrapper says stop"
    assert caller.aborted is False


async def test_wrapper_sees_the_same_identity_and_cannot_change_it() -> None:
    seen: list[Any] = []

    async def wrap(dispatch: DispatchExecution, call_next: Any) -> ToolResult:
        seen.append((dispatch.name, dispatch.call_id, dispatch.arguments, dispatch.scope))
        seen.append(dispatch.definition)
        with pytest.raises(AttributeError):
            dispatch.name = "other"  # type: ignore[misc]
        result: ToolResult = await call_next()
        return result

    tool = make_tool()
    reg = _registry(tool)
    reg.wrap_execute(wrap)
    assert_success(await reg.execute(make_call(call_id="c9")), "hi")
    assert seen == [("echo", "c9", {"text": "hi"}, None), tool]


# --------------------------------------------------------------------------- finalize_content


class Finalizer:
    def __init__(self, replacement: Any = None, *, raises: bool = False) -> None:
        self.calls: list[tuple[ToolExecution, ToolResult]] = []
        self.replacement = replacement
        self.raises = raises

    def __call__(self, execution: ToolExecution, result: ToolResult) -> Any:
        self.calls.append((execution, result))
        if self.raises:
            raise RuntimeError("finalizer bug")
        return self.replacement


async def test_finalize_content_runs_once_on_success_after_post_policy() -> None:
    finalizer = Finalizer(text("final"))

    async def post(execution: ToolExecution, result: ToolResult, call_next: Any) -> Any:
        return Accept(content=text("from post"))

    reg = _registry(make_tool(finalize_content=finalizer))
    reg.on_post_execute(post)
    result = await reg.execute(make_call())
    assert_success(result, "hi", "final")
    assert len(finalizer.calls) == 1
    execution, seen = finalizer.calls[0]
    assert execution.call_id == "call-1"
    assert seen.content == text("from post")


async def test_finalize_content_replaces_only_content_of_a_tool_failure() -> None:
    finalizer = Finalizer(text("Error: [redacted]"))

    async def body(args: Any, ctx: ToolRunContext) -> Any:
        ctx.defer_context("ctx")
        raise QuotaError("secret path /etc")

    reg = _registry(make_tool(execute=body, finalize_content=finalizer))
    result = await reg.execute(make_call())
    assert result.is_error
    assert result.content == text("Error: [redacted]")
    assert result.error is not None
    assert result.error.message == "secret path /etc"
    assert result.error.info is not None and result.error.info.code == "QUOTA_EXCEEDED"
    assert result.additional_contexts == ("ctx",)
    assert len(finalizer.calls) == 1


async def test_finalize_content_runs_once_for_invalid_args() -> None:
    finalizer = Finalizer()
    reg = _registry(make_tool(finalize_content=finalizer))
    result = await reg.execute(make_call(arguments={"text": 1}))
    assert_failure(result, INVALID_ARGS)
    assert len(finalizer.calls) == 1
    assert finalizer.calls[0][1] is result


async def test_finalize_content_runs_once_for_non_json_args() -> None:
    finalizer = Finalizer()
    reg = _registry(make_tool(finalize_content=finalizer))
    result = await reg.execute(make_call(arguments={"text": {1, 2}}))
    assert_failure(result, INVALID_ARGS)
    assert [r for _, r in finalizer.calls] == [result]


async def test_finalize_content_runs_once_for_a_denial() -> None:
    finalizer = Finalizer()

    async def deny(execution: ToolExecution, call_next: Any) -> Any:
        return Deny("not here")

    reg = _registry(make_tool(finalize_content=finalizer))
    reg.on_pre_execute(deny)
    result = await reg.execute(make_call())
    assert_failure(result, "TOOL_DENIED", "not here")
    assert [r for _, r in finalizer.calls] == [result]


@pytest.mark.parametrize("source", ["deferred by the tool", "attached by a post listener"])
async def test_finalize_content_sees_a_failure_found_while_materializing_contexts(
    source: str,
) -> None:
    # A context that is not lossless JSON fails the call while the result is
    # materialized; finalize_content still sees that final failure, and its
    # content replacement is what the caller gets.
    finalizer = Finalizer(text("Error: [redacted]"))
    bad = {"score": float("nan")}

    async def body(args: Any, ctx: ToolRunContext) -> Any:
        if source == "deferred by the tool":
            ctx.defer_context(bad)
        return "ok"

    async def post(execution: ToolExecution, result: ToolResult, call_next: Any) -> Any:
        return Accept(additional_contexts=[bad])

    reg = _registry(make_tool(execute=body, finalize_content=finalizer))
    if source != "deferred by the tool":
        reg.on_post_execute(post)
    recorder = Recorder()
    reg.on_result(recorder.observer())
    result = await reg.execute(make_call())
    assert isinstance(result, ToolFailure)
    assert result.error.message.startswith("additional context of echo is not lossless JSON")
    ((_, seen),) = finalizer.calls
    assert isinstance(seen, ToolFailure) and seen.error == result.error
    assert seen.content == text(f"Error: {result.error.message}")
    assert result.content == text("Error: [redacted]")
    assert recorder.results == [result]


async def test_raising_finalize_content_is_contained(caplog: pytest.LogCaptureFixture) -> None:
    finalizer = Finalizer(raises=True)
    recorder = Recorder()
    reg = _registry(make_tool(finalize_content=finalizer))
    reg.on_result(recorder.observer())
    with caplog.at_level(logging.ERROR, logger="registry"):
        result = await reg.execute(make_call())
    assert_success(result, "hi", "hi")
    assert len(finalizer.calls) == 1
    assert recorder.results == [result]
    assert "finalize_content of echo raised" in caplog.text


async def test_finalize_content_returning_bad_blocks_keeps_the_content() -> None:
    finalizer = Finalizer([{"no": "type"}])
    result = await _registry(make_tool(finalize_content=finalizer)).execute(make_call())
    assert_success(result, "hi", "hi")
    assert len(finalizer.calls) == 1


# --------------------------------------------------------------------------- observers


async def test_observers_see_the_final_result_in_registration_order() -> None:
    recorder = Recorder()
    finalizer = Finalizer(text("finalized"))
    reg = _registry(make_tool(finalize_content=finalizer))
    reg.on_result(recorder.observer("first"))

    async def second(execution: ToolExecution, result: ToolResult) -> None:
        recorder.events.append("second")
        recorder.results.append(result)

    reg.on_result(second)
    result = await reg.execute(make_call())
    assert result.content == text("finalized")
    assert recorder.events == ["first", "second"]
    assert recorder.results == [result, result]
    # One copy of the returned result, shared by the observers.
    assert recorder.results[0] is recorder.results[1] is not result


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_raising_observer_is_contained_and_later_observers_run(
    kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    recorder = Recorder()

    def sync_boom(execution: ToolExecution, result: ToolResult) -> None:
        raise RuntimeError("observer bug")

    async def async_boom(execution: ToolExecution, result: ToolResult) -> None:
        raise RuntimeError("observer bug")

    reg = _registry()
    reg.on_result(sync_boom if kind == "sync" else async_boom)
    reg.on_result(recorder.observer("after"))
    with caplog.at_level(logging.ERROR, logger="registry"):
        result = await reg.execute(make_call())
    assert_success(result, "hi", "hi")
    assert recorder.events == ["after"]
    assert recorder.results == [result]
    assert "a result observer raised for echo" in caplog.text


async def test_observers_see_unknown_tool_failures_too() -> None:
    recorder = Recorder()
    reg = _registry()
    reg.on_result(recorder.observer())
    result = await reg.execute(make_call("missing"))
    assert_failure(result, UNKNOWN_TOOL)
    assert recorder.results == [result]
    assert recorder.executions[0].definition is None


# --------------------------------------------------------------------------- identity


async def test_parent_and_root_call_id_reach_every_stage() -> None:
    parent = ExecutionToken()
    seen: dict[str, ToolExecution] = {}

    async def pre(execution: ToolExecution, call_next: Any) -> Any:
        seen["pre"] = execution
        return await call_next()

    def guard(execution: ToolExecution) -> None:
        seen["guard"] = execution

    async def wrap(dispatch: DispatchExecution, call_next: Any) -> ToolResult:
        seen["wrap"] = dispatch.execution
        result: ToolResult = await call_next()
        return result

    async def body(args: Any, ctx: ToolRunContext) -> Any:
        seen["body"] = ctx.execution
        return "ok"

    async def post(execution: ToolExecution, result: ToolResult, call_next: Any) -> Any:
        seen["post"] = execution
        return await call_next()

    def observe(execution: ToolExecution, result: ToolResult) -> None:
        seen["observe"] = execution

    reg = _registry(make_tool(execute=body))
    reg.on_pre_execute(pre)
    reg.guard(guard)
    reg.wrap_execute(wrap)
    reg.on_post_execute(post)
    reg.on_result(observe)
    await reg.execute(make_call(call_id="sub-1", parent=parent, root_call_id="root-7"))
    assert set(seen) == {"pre", "guard", "wrap", "body", "post", "observe"}
    first = seen["pre"]
    for execution in seen.values():
        # Copies at the stage boundaries (each with its own arguments), one identity.
        assert execution == first
        assert execution.token is first.token
    assert first.parent is parent
    assert first.root_call_id == "root-7"
    assert first.call_id == "sub-1"
    assert isinstance(first.token, ExecutionToken)
    assert first.token is not parent


async def test_root_call_id_defaults_to_call_id_and_parent_to_none() -> None:
    recorder = Recorder()
    reg = _registry()
    reg.on_result(recorder.observer())
    await reg.execute(make_call(call_id="top"))
    (execution,) = recorder.executions
    assert execution.root_call_id == "top"
    assert execution.parent is None


async def test_nested_call_carries_the_outer_token_as_parent() -> None:
    recorder = Recorder()

    async def outer(args: Any, ctx: ToolRunContext) -> Any:
        inner = await ctx.registry.execute(
            ToolCall(
                call_id=f"{ctx.call_id}:1",
                name="echo",
                arguments={"text": "inner"},
                parent=ctx.token,
                root_call_id=ctx.execution.root_call_id,
                signal=ctx.signal,
            )
        )
        assert isinstance(inner, ToolSuccess)
        return f"outer({inner.value})"

    reg = _registry(make_tool(), make_tool("outer", execute=outer))
    reg.on_result(recorder.observer())
    result = await reg.execute(make_call("outer", call_id="root"))
    assert_success(result, "outer(inner)")
    inner_execution, outer_execution = recorder.executions
    assert inner_execution.parent is outer_execution.token
    assert inner_execution.root_call_id == "root"
    assert inner_execution.call_id == "root:1"
    assert outer_execution.parent is None


async def test_tokens_are_fresh_per_call() -> None:
    recorder = Recorder()
    reg = _registry()
    reg.on_result(recorder.observer())
    call = make_call()
    await reg.execute(call)
    await reg.execute(call)
    first, second = (e.token for e in recorder.executions)
    assert first is not second
    assert first != second
    assert first == first


async def test_tokens_cannot_be_serialised() -> None:
    recorder = Recorder()
    reg = _registry()
    reg.on_result(recorder.observer())
    await reg.execute(make_call())
    token = recorder.executions[0].token
    with pytest.raises(TypeError, match="cannot be serialised"):
        pickle.dumps(token)
    with pytest.raises(TypeError, match="cannot be serialised"):
        copy.deepcopy(token)
    with pytest.raises(TypeError):
        json.dumps(token)
    with pytest.raises(NotJsonError):
        snapshot_json({"token": token})
    assert "ExecutionToken" in repr(token)


async def test_body_mutation_does_not_change_what_listeners_and_caller_see() -> None:
    recorder = Recorder()
    post_saw: list[Any] = []

    async def body(args: Any, ctx: ToolRunContext) -> Any:
        args["text"] = "mutated"
        args["extra"] = [1]
        assert ctx.execution.arguments == {"text": "hi", "nested": {"k": [1]}}
        args["nested"]["k"].append(2)
        return args["text"]

    async def post(execution: ToolExecution, result: ToolResult, call_next: Any) -> Any:
        post_saw.append(copy.deepcopy(execution.arguments))
        return await call_next()

    params = {"type": "object", "properties": {"text": {"type": "string"}}}
    reg = _registry(make_tool(execute=body, parameters=params))
    reg.on_post_execute(post)
    reg.on_result(recorder.observer())
    caller_args = {"text": "hi", "nested": {"k": [1]}}
    result = await reg.execute(make_call(arguments=caller_args))
    assert_success(result, "mutated")
    assert post_saw == [{"text": "hi", "nested": {"k": [1]}}]
    assert recorder.executions[0].arguments == {"text": "hi", "nested": {"k": [1]}}
    assert caller_args == {"text": "hi", "nested": {"k": [1]}}


@pytest.mark.parametrize("reader", ["observer", "render", "meta", "finalize", "timed_retry"])
async def test_a_body_mutating_its_arguments_is_invisible_to_each_later_reader(
    reader: str,
) -> None:
    # The body shares the execution's snapshot only when nothing reads it later;
    # each kind of later reader on its own must still see the validated arguments.
    seen: list[Any] = []
    bodies: list[Any] = []

    async def body(args: Any, ctx: ToolRunContext) -> Any:
        bodies.append(copy.deepcopy(args))
        args["text"] = "mutated"
        if reader == "timed_retry" and len(bodies) == 1:
            raise RuntimeError("transient")
        return "done"

    def read(execution_or_args: Any) -> None:
        args = getattr(execution_or_args, "arguments", execution_or_args)
        seen.append(copy.deepcopy(args))

    def render(args: Any, value: Any) -> Any:
        read(args)
        return [{"type": "text", "text": value}]

    tool_options: dict[str, Any] = {
        "render": {"render": render},
        "meta": {"meta": lambda args, value: read(args)},
        "finalize": {"finalize_content": lambda execution, result: read(execution)},
        "timed_retry": {"timeout": 5.0},
    }.get(reader, {})
    reg = _registry(make_tool(execute=body, **tool_options))
    if reader == "observer":
        reg.on_result(lambda execution, result: read(execution))
    if reader == "timed_retry":

        async def retry(dispatch: Any, call_next: Any) -> Any:
            first = await call_next()
            return await call_next() if first.is_error else first

        reg.wrap_execute(retry)
    result = await reg.execute(make_call(arguments={"text": "hi"}))
    assert_success(result, "done")
    if reader == "timed_retry":
        assert bodies == [{"text": "hi"}, {"text": "hi"}]
    else:
        assert seen == [{"text": "hi"}]


async def test_caller_mutation_after_dispatch_does_not_reach_the_body() -> None:
    caller_args: dict[str, Any] = {"text": "before"}
    seen: list[Any] = []

    async def pre(execution: ToolExecution, call_next: Any) -> Any:
        caller_args["text"] = "after"
        return Allow()

    async def body(args: Any, ctx: ToolRunContext) -> Any:
        seen.append(args)
        return args["text"]

    reg = _registry(make_tool(execute=body))
    reg.on_pre_execute(pre)
    assert_success(await reg.execute(make_call(arguments=caller_args)), "before")
    assert seen == [{"text": "before"}]


# --------------------------------------------------------------------------- execution_mode


def _mode_registry(safe: Any) -> ToolRegistry:
    return _registry(make_tool(concurrency_safe=safe))


def test_execution_mode_parallel_for_exact_true() -> None:
    assert _mode_registry(True).execution_mode(make_call()) == "parallel"


def test_execution_mode_exclusive_by_default() -> None:
    assert _mode_registry(False).execution_mode(make_call()) == "exclusive"


def test_execution_mode_classifier_returning_true_is_parallel_and_sees_a_snapshot() -> None:
    seen: list[Any] = []

    def classify(args: Any) -> bool:
        seen.append(args)
        return bool(args["text"] == "read")

    reg = _mode_registry(classify)
    arguments = {"text": "read"}
    assert reg.execution_mode(make_call(arguments=arguments)) == "parallel"
    assert reg.execution_mode(make_call(arguments={"text": "write"})) == "exclusive"
    assert seen == [{"text": "read"}, {"text": "write"}]
    assert seen[0] is not arguments


@pytest.mark.parametrize("verdict", [1, "yes", [True], None])
def test_execution_mode_classifier_must_return_exactly_true(verdict: Any) -> None:
    reg = _mode_registry(lambda args: verdict)
    assert reg.execution_mode(make_call()) == "exclusive"


def test_execution_mode_raising_classifier_is_exclusive() -> None:
    def classify(args: Any) -> bool:
        raise RuntimeError("classifier bug")

    assert _mode_registry(classify).execution_mode(make_call()) == "exclusive"


def test_execution_mode_invalid_args_are_exclusive_without_asking_the_classifier() -> None:
    seen: list[Any] = []

    def classify(args: Any) -> bool:
        seen.append(args)
        return True

    reg = _mode_registry(classify)
    assert reg.execution_mode(make_call(arguments={"text": 5})) == "exclusive"
    assert reg.execution_mode(make_call(arguments={"text": float("inf")})) == "exclusive"
    assert _mode_registry(True).execution_mode(make_call(arguments={})) == "exclusive"
    assert seen == []


def test_execution_mode_unknown_or_hidden_tool_is_exclusive() -> None:
    reg = _mode_registry(True)
    assert reg.execution_mode(make_call("missing")) == "exclusive"
    reg.register(make_tool("other"))
    reg.restrict("agent", deny=["echo"])
    assert reg.execution_mode(make_call(scope="agent")) == "exclusive"
    assert reg.execution_mode(make_call()) == "parallel"


# --------------------------------------------------------------------------- check, then execute

_LIST_PARAMS = {
    "type": "object",
    "properties": {"items": {"type": "array", "items": {"type": "integer"}}},
    "required": ["items"],
}


class _Spies:
    """Counts the argument validations of one tool and the snapshots of one arguments value."""

    def __init__(self, reg: ToolRegistry, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
        self.validations = 0
        self.snapshots: list[Any] = []
        parameters = reg.view()[name].parameters
        fast = parameters.fast
        assert fast is not None

        def counted_fast(value: Any) -> bool:
            self.validations += 1
            return fast(value)

        parameters.fast = counted_fast
        original = snapshot_json

        def counted_snapshot(value: Any) -> Any:
            self.snapshots.append(value)
            return original(value)

        monkeypatch.setattr(registry_pipeline, "snapshot_json", counted_snapshot)

    def snapshots_of(self, value: Any) -> int:
        return sum(1 for seen in self.snapshots if seen is value)


async def _total(args: Any, ctx: ToolRunContext) -> int:
    return sum(args["items"])


async def test_check_then_execute_snapshots_and_validates_the_arguments_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reg = _registry(
        make_tool("total", _total, parameters=_LIST_PARAMS, output_schema={}, concurrency_safe=True)
    )
    spies = _Spies(reg, "total", monkeypatch)
    arguments = {"items": list(range(10_000))}
    call = make_call("total", arguments)
    checked = reg.check(call)
    assert checked.mode == "parallel"
    assert_success(await reg.execute(call, checked=checked), sum(range(10_000)))
    assert spies.validations == 1
    assert spies.snapshots_of(arguments) == 1
    # Without ``checked``, the mode and the execution each check for themselves.
    assert reg.execution_mode(call) == "parallel"
    assert_success(await reg.execute(call), sum(range(10_000)))
    assert spies.validations == 3
    assert spies.snapshots_of(arguments) == 3


async def test_a_checked_call_lends_its_snapshot_to_one_execution_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[Any] = []

    async def grow(args: Any, ctx: ToolRunContext) -> int:
        seen.append(list(args["items"]))
        args["items"].append(99)  # the body shares the execution's snapshot here
        return len(args["items"])

    reg = _registry(
        make_tool("grow", grow, parameters=_LIST_PARAMS, output_schema={}, concurrency_safe=True)
    )
    spies = _Spies(reg, "grow", monkeypatch)
    arguments = {"items": [1, 2]}
    call = make_call("grow", arguments)
    checked = reg.check(call)
    assert_success(await reg.execute(call, checked=checked), 3)
    assert_success(await reg.execute(call, checked=checked), 3)  # a fresh snapshot
    assert seen == [[1, 2], [1, 2]]
    assert arguments == {"items": [1, 2]}
    assert spies.snapshots_of(arguments) == 2
    assert spies.validations == 2


async def test_a_call_checked_against_a_tool_since_replaced_is_checked_again() -> None:
    reg = ToolRegistry()
    dispose = reg.register(make_tool(concurrency_safe=True))
    call = make_call(arguments={"text": "hi"})
    checked = reg.check(call)
    assert checked.mode == "parallel"
    dispose()
    reg.register(make_tool(parameters=_LIST_PARAMS, concurrency_safe=True))
    result = await reg.execute(call, checked=checked)
    assert_failure(result, INVALID_ARGS)
    assert result.error is not None and "'items' is a required property" in result.error.message


async def test_checked_invalid_arguments_fail_as_they_would_unchecked() -> None:
    reg = _registry(make_tool(concurrency_safe=True))
    for arguments in ({"text": 5}, {"text": float("nan")}):
        call = make_call(arguments=arguments)
        checked = reg.check(call)
        assert checked.mode == "exclusive"
        assert await reg.execute(call, checked=checked) == await reg.execute(call)


async def test_a_classifier_mutating_its_arguments_changes_nothing_that_runs() -> None:
    seen: list[Any] = []

    def classify(args: Any) -> bool:
        args["text"] = "changed"
        return True

    async def body(args: Any, ctx: ToolRunContext) -> str:
        seen.append(ctx.execution.arguments["text"])
        return str(args["text"])

    reg = _registry(make_tool(execute=body, concurrency_safe=classify))
    call = make_call(arguments={"text": "hi"})
    checked = reg.check(call)
    assert checked.mode == "parallel"
    assert_success(await reg.execute(call, checked=checked), "hi")
    assert seen == ["hi"]


async def test_execute_refuses_a_checked_call_it_was_not_given() -> None:
    reg = _registry()
    call = make_call()
    checked = reg.check(call)
    with pytest.raises(ValueError, match="this very call"):
        await reg.execute(make_call(), checked=checked)
    with pytest.raises(ValueError, match="this very call"):
        await reg.execute(call, transport=make_tool("other"), checked=checked)
    with pytest.raises(UnknownScopeError):
        reg.check(make_call(scope="nowhere"))


async def test_listener_mutating_the_execution_arguments_cannot_reach_the_body() -> None:
    seen: list[Any] = []

    async def pre(execution: ToolExecution, call_next: Any) -> Any:
        execution.arguments["text"] = 123  # would have failed validation
        return await call_next()

    async def body(args: Any, ctx: ToolRunContext) -> Any:
        seen.append(args)
        return args["text"]

    reg = _registry(make_tool(execute=body))
    reg.on_pre_execute(pre)
    assert_success(await reg.execute(make_call(arguments={"text": "validated"})), "validated")
    assert seen == [{"text": "validated"}]


def test_hot_path_constructors_build_exactly_what_the_dataclasses_do() -> None:
    from registry._pipeline import _new_execution, _new_success
    from registry._types import ExecutionToken, ToolExecution, ToolSuccess

    token, signal = ExecutionToken(), AbortSignal()
    fields = dict(
        token=token,
        call_id="c",
        root_call_id="r",
        name="n",
        arguments={"a": 1},
        scope="s",
        parent=None,
        signal=signal,
        definition=None,
    )
    assert _new_execution(*fields.values()) == ToolExecution(**fields)  # type: ignore[arg-type]
    assert _new_success(1, [], None, ()) == ToolSuccess(value=1, content=[], meta=None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        _new_execution(*fields.values()).name = "other"
