"""What passed validation is what the caller gets, and what observers see is what ran.

Every hook works on a copy of its own: a listener, guard, wrapper, approval
callback or observer that mutates what it was handed (in place) changes neither
the value that reaches the caller nor what a later stage is told ran. Only a
decision changes a result, and a replaced value is validated again.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from registry import (
    INVALID_TOOL_OUTPUT,
    Accept,
    Allow,
    Ask,
    DispatchExecution,
    ToolExecution,
    ToolRegistry,
    ToolResult,
    ToolRunContext,
)
from tests.registry.helpers_pipeline import (
    assert_failure,
    assert_success,
    make_call,
    make_tool,
    text,
)

pytestmark = pytest.mark.anyio

ITEMS_PARAMS = {"type": "object", "properties": {"text": {"type": "string"}}}
ITEMS_OUTPUT = {
    "type": "object",
    "properties": {"items": {"type": "array", "items": {"type": "integer"}, "maxItems": 2}},
    "required": ["items"],
    "additionalProperties": False,
}


async def _items(args: Any, ctx: ToolRunContext) -> Any:
    return {"items": [1, 2]}


def _items_registry(**kwargs: Any) -> ToolRegistry:
    reg = ToolRegistry(**kwargs)
    reg.register(make_tool("items", _items, parameters=ITEMS_PARAMS, output_schema=ITEMS_OUTPUT))
    return reg


def _validated(result: ToolResult) -> None:
    """The value the schema admitted, and content that says the same."""
    assert_success(result, {"items": [1, 2]})
    assert result.content == text('{\n  "items": [\n    1,\n    2\n  ]\n}')


# --------------------------------------------------------------------------- post-execute


async def test_only_a_post_listeners_decision_changes_the_value() -> None:
    # Mutating the value in place changes nothing delivered (a Code Mode program
    # gets ``result.value``); handing it back replaces it, validated again.
    decision = ""

    async def post(execution: ToolExecution, result: ToolResult, call_next: Any) -> Any:
        assert not result.is_error
        items = result.value["items"]
        if decision == "hand back a valid value":
            items.pop()
            return Accept.with_value(result.value)
        items.append("not an integer, and one too many")
        result.value["extra"] = True
        return Accept.with_value(result.value) if decision == "hand back" else await call_next()

    reg = _items_registry()
    reg.on_post_execute(post)
    decision = "accept"
    _validated(await reg.execute(make_call("items", {})))
    decision = "hand back"
    failure = assert_failure(await reg.execute(make_call("items", {})), INVALID_TOOL_OUTPUT)
    assert "breaks its output schema" in failure.error.message
    decision = "hand back a valid value"
    result = assert_success(await reg.execute(make_call("items", {})), {"items": [1]})
    assert result.content == text('{\n  "items": [\n    1\n  ]\n}')


async def test_a_post_listener_mutating_content_and_meta_in_place_changes_nothing() -> None:
    async def post(execution: ToolExecution, result: ToolResult, call_next: Any) -> Any:
        result.content[0]["text"] = "something else"
        result.content.append({"type": "text", "text": "more"})
        result.meta["shown"] = "tampered"
        return await call_next()

    reg = ToolRegistry()
    reg.register(make_tool(meta=lambda args, value: {"shown": value}))
    reg.on_post_execute(post)
    result = assert_success(await reg.execute(make_call()), "hi", "hi")
    assert result.meta == {"shown": "hi"}


async def test_a_post_listener_mutating_the_arguments_is_invisible_to_observers() -> None:
    seen: list[Any] = []

    async def post(execution: ToolExecution, result: ToolResult, call_next: Any) -> Any:
        execution.arguments["text"] = "never ran"
        return await call_next()

    reg = ToolRegistry()
    reg.register(make_tool())
    reg.on_post_execute(post)
    reg.on_result(lambda execution, result: seen.append(copy.deepcopy(execution.arguments)))
    assert_success(await reg.execute(make_call(arguments={"text": "hi"})), "hi")
    assert seen == [{"text": "hi"}]


async def test_contexts_a_post_listener_mutates_in_place_are_delivered_as_deferred() -> None:
    async def body(args: Any, ctx: ToolRunContext) -> Any:
        ctx.defer_context({"note": "from the tool"})
        return "ok"

    async def post(execution: ToolExecution, result: ToolResult, call_next: Any) -> Any:
        result.additional_contexts[0]["note"] = "tampered"
        return await call_next()

    reg = ToolRegistry()
    reg.register(make_tool(execute=body))
    reg.on_post_execute(post)
    result = await reg.execute(make_call())
    assert result.additional_contexts == ({"note": "from the tool"},)


# --------------------------------------------------------------------------- observers


async def test_a_result_observer_mutating_the_result_changes_nothing_the_caller_gets() -> None:
    def observe(execution: ToolExecution, result: ToolResult) -> None:
        assert not result.is_error
        result.value["items"].clear()
        result.content[0]["text"] = "the model would read this"
        result.content.append({"type": "text", "text": "and this"})
        result.additional_contexts[0]["note"] = "tampered"

    async def post(execution: ToolExecution, result: ToolResult, call_next: Any) -> Any:
        return Accept(additional_contexts=[{"note": "from policy"}])

    reg = _items_registry()
    reg.on_post_execute(post)
    reg.on_result(observe)
    result = await reg.execute(make_call("items", {}))
    _validated(result)
    assert result.additional_contexts == ({"note": "from policy"},)


async def test_observers_are_handed_an_equal_result_that_is_not_the_callers() -> None:
    seen: list[ToolResult] = []
    reg = _items_registry()
    reg.on_result(lambda execution, result: seen.append(result))
    result = await reg.execute(make_call("items", {}))
    assert seen == [result]
    assert seen[0] is not result
    assert not seen[0].is_error and not result.is_error
    assert seen[0].value is not result.value
    assert seen[0].content is not result.content


async def test_a_tool_mutating_a_context_it_deferred_after_deferring_changes_nothing() -> None:
    # The contexts are materialized (copied) when the result is: later mutation
    # by the tool (or anyone holding the object) does not reach the caller.
    kept: list[dict[str, Any]] = []

    async def body(args: Any, ctx: ToolRunContext) -> Any:
        note = {"note": "as deferred"}
        kept.append(note)
        ctx.defer_context(note)
        return "ok"

    reg = ToolRegistry()
    reg.register(make_tool(execute=body))
    result = await reg.execute(make_call())
    kept[0]["note"] = "changed afterwards"
    assert result.additional_contexts == ({"note": "as deferred"},)


# --------------------------------------------------------------------------- before the body


@pytest.mark.parametrize("hook", ["pre", "guard", "wrapper", "approval"])
async def test_a_hook_before_the_body_mutating_the_arguments_changes_nothing_logged(
    hook: str,
) -> None:
    # What runs, what is rendered, and what post listeners and observers are told ran
    # are all the validated arguments.
    ran: list[Any] = []
    rendered: list[Any] = []
    post_saw: list[Any] = []
    logged: list[Any] = []

    def tamper(execution: Any) -> None:
        execution.arguments["text"] = "never ran"
        execution.arguments["extra"] = {"nested": [1]}

    async def approval(execution: ToolExecution, reason: Any) -> Any:
        tamper(execution)
        return True

    async def body(args: Any, ctx: ToolRunContext) -> Any:
        ran.append(copy.deepcopy(args))
        return args["text"]

    def render(args: Any, value: Any) -> Any:
        rendered.append(copy.deepcopy(args))
        return text(value)

    async def post(execution: ToolExecution, result: ToolResult, call_next: Any) -> Any:
        post_saw.append(copy.deepcopy(execution.arguments))
        return await call_next()

    reg = ToolRegistry(approval=approval)
    reg.register(make_tool(execute=body, render=render))
    if hook == "pre":

        async def pre(execution: ToolExecution, call_next: Any) -> Any:
            tamper(execution)
            return await call_next()

        reg.on_pre_execute(pre)
    elif hook == "guard":
        reg.guard(lambda execution: tamper(execution))
    elif hook == "wrapper":

        async def wrap(dispatch: DispatchExecution, call_next: Any) -> ToolResult:
            tamper(dispatch)
            result: ToolResult = await call_next()
            tamper(dispatch)  # after the body, too
            return result

        reg.wrap_execute(wrap)
    else:

        async def ask(execution: ToolExecution, call_next: Any) -> Any:
            return Ask("sure?")

        reg.on_pre_execute(ask)
    reg.on_post_execute(post)
    reg.on_result(lambda execution, result: logged.append(copy.deepcopy(execution.arguments)))
    assert_success(await reg.execute(make_call(arguments={"text": "validated"})), "validated")
    expected = [{"text": "validated"}]
    assert ran == rendered == post_saw == logged == expected


async def test_hooks_before_the_body_share_one_copy_and_keep_the_identity() -> None:
    seen: list[ToolExecution] = []

    async def pre(execution: ToolExecution, call_next: Any) -> Any:
        seen.append(execution)
        return Allow()

    def guard(execution: ToolExecution) -> None:
        seen.append(execution)

    def observe(execution: ToolExecution, result: ToolResult) -> None:
        seen.append(execution)

    reg = ToolRegistry()
    reg.register(make_tool())
    reg.on_pre_execute(pre)
    reg.guard(guard)
    reg.on_result(observe)
    await reg.execute(make_call())
    before, _, after = seen
    assert seen[1] is before
    assert after is not before and after.token is before.token
    assert after.arguments is not before.arguments
