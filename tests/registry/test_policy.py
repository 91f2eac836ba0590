"""Pre-execute, approval, guards, post-execute, contexts, scoping and disposers."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from registry import (
    APPROVAL_CANCELLED,
    APPROVAL_REJECTED,
    APPROVAL_UNAVAILABLE,
    INVALID_TOOL_OUTPUT,
    TOOL_DENIED,
    Accept,
    Allow,
    Ask,
    Block,
    Cancel,
    Deny,
    DispatchExecution,
    ErrorInfo,
    GuardDenial,
    ToolError,
    ToolExecution,
    ToolRegistry,
    ToolResult,
    ToolRunContext,
    ToolSuccess,
)
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

POLICY_ERROR = "POLICY_ERROR"


class Body:
    """A tool body that counts its runs and may defer contexts first."""

    def __init__(self, value: Any = "ran", *, defer: tuple[Any, ...] = ()) -> None:
        self.runs = 0
        self.value = value
        self.defer = defer

    async def __call__(self, args: Any, ctx: ToolRunContext) -> Any:
        self.runs += 1
        for context in self.defer:
            ctx.defer_context(context)
        return self.value


def _registry(body: Any = None, **kwargs: Any) -> ToolRegistry:
    reg = ToolRegistry(**kwargs)
    reg.register(make_tool(execute=body or Body(), render=lambda args, value: f"[{value}]"))
    return reg


def _pre(events: list[str], label: str, decision: Any = None, *, chain: bool = True) -> Any:
    async def listener(execution: ToolExecution, call_next: Any) -> Any:
        events.append(f"{label}>")
        if not chain:
            return decision
        verdict = await call_next()
        events.append(f"<{label}")
        return verdict if decision is None else decision

    return listener


def _post(events: list[str], label: str, decision: Any = None) -> Any:
    async def listener(execution: ToolExecution, result: ToolResult, call_next: Any) -> Any:
        events.append(f"{label}>")
        verdict = await call_next()
        events.append(f"<{label}")
        return verdict if decision is None else decision

    return listener


# --------------------------------------------------------------------------- pre-execute


async def test_pre_listeners_chain_in_registration_order() -> None:
    events: list[str] = []
    body = Body()
    reg = _registry(body)
    reg.on_pre_execute(_pre(events, "a"))
    reg.on_pre_execute(_pre(events, "b"))
    reg.on_pre_execute(_pre(events, "c"))
    assert_success(await reg.execute(make_call()), "ran", "[ran]")
    assert events == ["a>", "b>", "c>", "<c", "<b", "<a"]
    assert body.runs == 1


async def test_pre_listener_short_circuits_later_listeners() -> None:
    events: list[str] = []
    body = Body()
    reg = _registry(body)
    reg.on_pre_execute(_pre(events, "a"))
    reg.on_pre_execute(_pre(events, "b", Deny("stop here"), chain=False))
    reg.on_pre_execute(_pre(events, "c"))
    result = await reg.execute(make_call())
    assert_failure(result, TOOL_DENIED, "stop here", name="ToolDeniedError")
    assert events == ["a>", "b>", "<a"]
    assert body.runs == 0


async def test_earlier_pre_listener_can_override_a_later_decision() -> None:
    events: list[str] = []
    body = Body()
    reg = _registry(body)
    reg.on_pre_execute(_pre(events, "outer", Allow()))
    reg.on_pre_execute(_pre(events, "inner", Deny("inner says no"), chain=False))
    assert_success(await reg.execute(make_call()), "ran")
    assert body.runs == 1


async def test_pre_listener_sees_the_later_decision_through_call_next() -> None:
    seen: list[Any] = []

    async def outer(execution: ToolExecution, call_next: Any) -> Any:
        decision = await call_next()
        seen.append(decision)
        return decision

    reg = _registry()
    reg.on_pre_execute(outer)
    reg.on_pre_execute(_pre([], "inner", Ask("check"), chain=False))
    assert_failure(await reg.execute(make_call()), APPROVAL_UNAVAILABLE)
    assert seen == [Ask("check")]


async def test_deny_with_info_keeps_its_identity() -> None:
    reg = _registry()
    info = ErrorInfo(name="SandboxError", code="OUTSIDE_SANDBOX")
    reg.on_pre_execute(_pre([], "deny", Deny("outside the sandbox", info), chain=False))
    result = await reg.execute(make_call())
    assert_failure(result, "OUTSIDE_SANDBOX", "outside the sandbox", name="SandboxError")


async def test_raising_pre_listener_fails_closed(caplog: pytest.LogCaptureFixture) -> None:
    body = Body()

    async def broken(execution: ToolExecution, call_next: Any) -> Any:
        raise RuntimeError("policy store offline")

    reg = _registry(body)
    reg.on_pre_execute(broken)
    with caplog.at_level(logging.ERROR, logger="registry"):
        result = await reg.execute(make_call())
    assert_failure(result, POLICY_ERROR, "pre-execute policy failed: policy store offline")
    assert body.runs == 0
    assert "a pre-execute listener raised for echo" in caplog.text


async def test_pre_listener_returning_a_non_decision_fails_closed() -> None:
    body = Body()

    async def sloppy(execution: ToolExecution, call_next: Any) -> Any:
        await call_next()
        return None

    reg = _registry(body)
    reg.on_pre_execute(sloppy)
    failure = assert_failure(await reg.execute(make_call()), POLICY_ERROR)
    assert failure.error.message.endswith("not a decision; the call is denied")
    assert body.runs == 0


async def test_cancel_decision_is_aborted_before_dispatch() -> None:
    body = Body()
    reg = _registry(body)
    reg.on_pre_execute(_pre([], "cancel", Cancel(), chain=False))
    result = await reg.execute(make_call())
    assert_failure(result, "ABORTED_BEFORE_DISPATCH", name="AbortError")
    assert body.runs == 0


# --------------------------------------------------------------------------- approval


class Approval:
    def __init__(self, verdict: Any = True, *, raises: bool = False) -> None:
        self.verdict = verdict
        self.raises = raises
        self.asked: list[tuple[ToolExecution, Any]] = []

    async def __call__(self, execution: ToolExecution, reason: Any) -> Any:
        self.asked.append((execution, reason))
        if self.raises:
            raise ConnectionError("ui gone")
        return self.verdict


@pytest.mark.parametrize("verdict", [True, "allow"])
async def test_ask_approved_runs_the_tool(verdict: Any) -> None:
    approval = Approval(verdict)
    body = Body()
    reg = _registry(body, approval=approval)
    reg.on_pre_execute(_pre([], "ask", Ask("writes a file"), chain=False))
    assert_success(await reg.execute(make_call(call_id="c5")), "ran")
    assert body.runs == 1
    ((execution, reason),) = approval.asked
    assert execution.call_id == "c5"
    assert reason == "writes a file"


@pytest.mark.parametrize("verdict", [False, "reject", "yes", None])
async def test_ask_rejected_is_approval_rejected(verdict: Any) -> None:
    body = Body()
    reg = _registry(body, approval=Approval(verdict))
    reg.on_pre_execute(_pre([], "ask", Ask("writes a file"), chain=False))
    result = await reg.execute(make_call())
    assert_failure(
        result, APPROVAL_REJECTED, "the user rejected echo: writes a file", name="ApprovalError"
    )
    assert body.runs == 0


async def test_ask_cancelled_is_approval_cancelled() -> None:
    body = Body()
    reg = _registry(body, approval=Approval("cancel"))
    reg.on_pre_execute(_pre([], "ask", Ask(), chain=False))
    result = await reg.execute(make_call())
    assert_failure(result, APPROVAL_CANCELLED, "approval for echo was cancelled")
    assert body.runs == 0


async def test_ask_without_an_approval_channel_is_approval_unavailable() -> None:
    body = Body()
    reg = _registry(body)
    reg.on_pre_execute(_pre([], "ask", Ask("deletes data"), chain=False))
    result = await reg.execute(make_call())
    assert_failure(
        result,
        APPROVAL_UNAVAILABLE,
        "echo needs approval and no approval channel is available: deletes data",
    )
    assert body.runs == 0


async def test_raising_approval_is_approval_unavailable() -> None:
    body = Body()
    reg = _registry(body, approval=Approval(raises=True))
    reg.on_pre_execute(_pre([], "ask", Ask(), chain=False))
    result = await reg.execute(make_call())
    assert_failure(result, APPROVAL_UNAVAILABLE, "approval for echo failed: ui gone")
    assert body.runs == 0


async def test_approval_is_not_consulted_without_ask() -> None:
    approval = Approval(False)
    reg = _registry(approval=approval)
    assert_success(await reg.execute(make_call()), "ran")
    assert approval.asked == []


# --------------------------------------------------------------------------- guards


async def test_guard_denial_is_tool_denied() -> None:
    body = Body()
    reg = _registry(body)
    reg.guard(lambda execution: "no writes in plan mode")
    result = await reg.execute(make_call())
    assert_failure(result, TOOL_DENIED, "no writes in plan mode", name="ToolDeniedError")
    assert body.runs == 0


async def test_guard_denial_with_identity() -> None:
    reg = _registry()
    info = ErrorInfo(name="BudgetError", code="BUDGET")
    reg.guard(lambda execution: GuardDenial("over budget", info))
    assert_failure(await reg.execute(make_call()), "BUDGET", "over budget", name="BudgetError")


async def test_guard_denial_without_identity_defaults_to_tool_denied() -> None:
    reg = _registry()
    reg.guard(lambda execution: GuardDenial("over budget"))
    assert_failure(await reg.execute(make_call()), TOOL_DENIED, "over budget")


async def test_pre_listener_cannot_undo_a_guard() -> None:
    body = Body()
    reg = _registry(body)
    reg.guard(lambda execution: "guarded")
    # Registered after the guard, allows without asking anyone else.
    reg.on_pre_execute(_pre([], "yes", Allow(), chain=False))
    assert_failure(await reg.execute(make_call()), TOOL_DENIED, "guarded")
    assert body.runs == 0


async def test_approved_ask_cannot_undo_a_guard() -> None:
    body = Body()
    reg = _registry(body, approval=Approval(True))
    reg.on_pre_execute(_pre([], "ask", Ask(), chain=False))
    reg.guard(lambda execution: "guarded")
    assert_failure(await reg.execute(make_call()), TOOL_DENIED, "guarded")
    assert body.runs == 0


async def test_guards_run_after_pre_listeners_in_order_and_stop_at_the_first_denial() -> None:
    events: list[str] = []

    def guard(label: str, verdict: Any) -> Any:
        def check(execution: ToolExecution) -> Any:
            events.append(label)
            return verdict

        return check

    reg = _registry()
    reg.guard(guard("g1", None))
    reg.guard(guard("g2", "second says no"))
    reg.guard(guard("g3", "third says no"))
    reg.on_pre_execute(_pre(events, "pre"))
    assert_failure(await reg.execute(make_call()), TOOL_DENIED, "second says no")
    assert events == ["pre>", "<pre", "g1", "g2"]


async def test_guards_do_not_run_when_pre_execute_denies() -> None:
    events: list[str] = []
    reg = _registry()
    reg.guard(lambda execution: events.append("guard"))
    reg.on_pre_execute(_pre(events, "deny", Deny("no"), chain=False))
    assert_failure(await reg.execute(make_call()), TOOL_DENIED, "no")
    assert events == ["deny>"]


async def test_raising_guard_fails_closed(caplog: pytest.LogCaptureFixture) -> None:
    body = Body()

    def broken(execution: ToolExecution) -> Any:
        raise KeyError("rules")

    reg = _registry(body)
    reg.guard(broken)
    with caplog.at_level(logging.ERROR, logger="registry"):
        result = await reg.execute(make_call())
    assert_failure(result, TOOL_DENIED, "guard failed: 'rules'")
    assert body.runs == 0
    assert "a guard raised for echo" in caplog.text


# --------------------------------------------------------------------------- post-execute


async def test_post_listeners_chain_in_registration_order() -> None:
    events: list[str] = []
    reg = _registry()
    reg.on_post_execute(_post(events, "a"))
    reg.on_post_execute(_post(events, "b"))
    assert_success(await reg.execute(make_call()), "ran", "[ran]")
    assert events == ["a>", "b>", "<b", "<a"]


async def test_outer_post_listener_decision_wins() -> None:
    reg = _registry()
    reg.on_post_execute(_post([], "outer", Accept(content=text("outer"))))
    reg.on_post_execute(_post([], "inner", Block(feedback="inner blocks")))
    assert_success(await reg.execute(make_call()), "ran", "outer")


async def test_post_listener_sees_the_rendered_result() -> None:
    seen: list[ToolResult] = []

    async def post(execution: ToolExecution, result: ToolResult, call_next: Any) -> Any:
        seen.append(result)
        return await call_next()

    reg = _registry()
    reg.on_post_execute(post)
    await reg.execute(make_call())
    (result,) = seen
    assert_success(result, "ran", "[ran]")


async def test_post_listener_sees_tool_failures() -> None:
    seen: list[ToolResult] = []

    async def body(args: Any, ctx: ToolRunContext) -> Any:
        raise ToolError("disk full")

    async def post(execution: ToolExecution, result: ToolResult, call_next: Any) -> Any:
        seen.append(result)
        return await call_next()

    reg = _registry(body)
    reg.on_post_execute(post)
    result = await reg.execute(make_call())
    assert_failure(result, "TOOL_ERROR", "disk full")
    assert seen == [result]


async def test_accept_content_replacement_keeps_value_and_meta() -> None:
    reg = ToolRegistry()
    reg.register(make_tool(meta=lambda args, value: {"chars": len(value)}))
    reg.on_post_execute(_post([], "swap", Accept(content=text("summary only"))))
    result = await reg.execute(make_call())
    success = assert_success(result, "hi", "summary only")
    assert success.meta == {"chars": 2}


async def test_accept_content_may_be_a_string() -> None:
    reg = _registry()
    reg.on_post_execute(_post([], "swap", Accept(content="plain")))  # type: ignore[arg-type]
    assert_success(await reg.execute(make_call()), "ran", "plain")


async def test_accept_with_bad_content_fails_closed() -> None:
    reg = _registry()
    reg.on_post_execute(_post([], "swap", Accept(content=[{"text": "untyped"}])))
    failure = assert_failure(await reg.execute(make_call()), POLICY_ERROR)
    assert failure.error.message.startswith("post-execute policy returned bad content: ")


async def test_accept_with_value_is_revalidated_and_rerendered() -> None:
    reg = ToolRegistry()
    reg.register(
        make_tool(
            execute=Body("original"),
            render=lambda args, value: f"[{value}]",
            meta=lambda args, value: {"v": value},
        )
    )
    reg.on_post_execute(_post([], "swap", Accept.with_value("redacted")))
    result = await reg.execute(make_call())
    success = assert_success(result, "redacted", "[redacted]")
    assert success.meta == {"v": "redacted"}


async def test_accept_with_an_invalid_value_is_invalid_tool_output() -> None:
    reg = _registry()
    reg.on_post_execute(_post([], "swap", Accept.with_value({"not": "a string"})))
    failure = assert_failure(await reg.execute(make_call()), INVALID_TOOL_OUTPUT)
    assert "breaks its output schema" in failure.error.message


async def test_accept_with_a_non_json_value_is_invalid_tool_output() -> None:
    reg = ToolRegistry()
    reg.register(make_tool(output_schema=ANY_OUTPUT))
    reg.on_post_execute(_post([], "swap", Accept.with_value({"n": float("nan")})))
    assert_failure(await reg.execute(make_call()), INVALID_TOOL_OUTPUT)


async def test_accept_replacing_both_content_and_value_fails_closed() -> None:
    reg = _registry()
    both = Accept(content=text("c"), value="v", replace_value=True)
    reg.on_post_execute(_post([], "both", both))
    assert_failure(
        await reg.execute(make_call()),
        POLICY_ERROR,
        "post-execute policy replaced both content and value",
    )


async def test_accept_with_value_can_turn_a_failure_into_a_success() -> None:
    async def body(args: Any, ctx: ToolRunContext) -> Any:
        raise ToolError("flaky")

    reg = _registry(body)
    reg.on_post_execute(_post([], "fallback", Accept.with_value("fallback")))
    assert_success(await reg.execute(make_call()), "fallback", "[fallback]")


async def test_block_with_a_string_is_a_valueless_failure() -> None:
    reg = _registry()
    reg.on_post_execute(_post([], "block", Block(feedback="try a smaller range")))
    result = await reg.execute(make_call())
    assert_failure(result, None, "try a smaller range")


async def test_block_with_identity() -> None:
    reg = _registry()
    info = ErrorInfo(name="LeakError", code="SECRET_IN_OUTPUT")
    reg.on_post_execute(_post([], "block", Block(feedback="contains a key", info=info)))
    assert_failure(
        await reg.execute(make_call()), "SECRET_IN_OUTPUT", "contains a key", name="LeakError"
    )


async def test_block_with_blocks_uses_them_as_content() -> None:
    blocks = [
        {"type": "text", "text": "first line"},
        {"type": "image", "data": "..."},
        {"type": "text", "text": "second line"},
    ]
    reg = _registry()
    reg.on_post_execute(_post([], "block", Block(feedback=blocks)))
    result = await reg.execute(make_call())
    assert result.is_error
    assert not isinstance(result, ToolSuccess)
    assert result.content == blocks
    assert result.content is not blocks
    assert result.error.message == "first line\nsecond line"
    assert result.error.info is None


async def test_raising_post_listener_fails_closed() -> None:
    async def broken(execution: ToolExecution, result: ToolResult, call_next: Any) -> Any:
        raise RuntimeError("scanner crashed")

    reg = _registry()
    reg.on_post_execute(broken)
    assert_failure(
        await reg.execute(make_call()), POLICY_ERROR, "post-execute policy failed: scanner crashed"
    )


async def test_post_listener_returning_a_non_decision_withholds_the_result() -> None:
    async def sloppy(execution: ToolExecution, result: ToolResult, call_next: Any) -> Any:
        return result

    reg = _registry()
    reg.on_post_execute(sloppy)
    failure = assert_failure(await reg.execute(make_call()), POLICY_ERROR)
    assert failure.error.message.endswith("not a decision; the result is withheld")


# --------------------------------------------------------------------------- additional contexts


async def test_deferred_contexts_come_before_decision_contexts() -> None:
    reg = _registry(Body(defer=("d1", {"role": "user", "text": "d2"})))
    reg.on_post_execute(_post([], "ctx", Accept(additional_contexts=["p1", "p2"])))
    result = await reg.execute(make_call())
    assert_success(result, "ran", "[ran]")
    assert result.additional_contexts == ("d1", {"role": "user", "text": "d2"}, "p1", "p2")


async def test_deferred_contexts_survive_content_and_value_replacement() -> None:
    reg = _registry(Body(defer=("d1",)))
    reg.on_post_execute(_post([], "content", Accept(content=text("c"), additional_contexts=["p"])))
    result = await reg.execute(make_call())
    assert result.additional_contexts == ("d1", "p")

    reg = _registry(Body(defer=("d1",)))
    reg.on_post_execute(_post([], "value", Accept.with_value("v", additional_contexts=["p"])))
    result = await reg.execute(make_call())
    assert_success(result, "v", "[v]")
    assert result.additional_contexts == ("d1", "p")


async def test_only_the_winning_decision_contributes_contexts() -> None:
    reg = _registry(Body(defer=("d",)))
    reg.on_post_execute(_post([], "outer", Accept(additional_contexts=["outer"])))
    reg.on_post_execute(_post([], "inner", Accept(additional_contexts=["inner"])))
    result = await reg.execute(make_call())
    assert result.additional_contexts == ("d", "outer")


async def test_deferred_contexts_are_kept_when_the_tool_fails() -> None:
    async def body(args: Any, ctx: ToolRunContext) -> Any:
        ctx.defer_context("before failure")
        raise ToolError("broke")

    reg = _registry(body)
    result = await reg.execute(make_call())
    assert_failure(result, "TOOL_ERROR", "broke")
    assert result.additional_contexts == ("before failure",)


async def test_deferred_contexts_are_kept_when_the_output_is_invalid() -> None:
    reg = _registry(Body(42, defer=("kept",)))
    result = await reg.execute(make_call())
    assert_failure(result, INVALID_TOOL_OUTPUT)
    assert result.additional_contexts == ("kept",)


async def test_block_discards_deferred_contexts_and_keeps_its_own() -> None:
    reg = _registry(Body(defer=("deferred",)))
    reg.on_post_execute(_post([], "block", Block(feedback="no", additional_contexts=["mine"])))
    result = await reg.execute(make_call())
    assert_failure(result, None, "no")
    assert result.additional_contexts == ("mine",)

    reg = _registry(Body(defer=("deferred",)))
    reg.on_post_execute(_post([], "block", Block(feedback="no")))
    assert (await reg.execute(make_call())).additional_contexts == ()


async def test_non_json_context_turns_the_result_into_a_failure() -> None:
    reg = _registry(Body(defer=({"at": {1, 2}},)))
    result = await reg.execute(make_call())
    failure = assert_failure(result, None)
    assert failure.error.message.startswith("additional context of echo is not lossless JSON")


# --------------------------------------------------------------------------- scoping


async def test_scoped_listeners_see_only_their_scope_and_its_descendants() -> None:
    seen: dict[str, list[Any]] = {
        "pre": [],
        "guard": [],
        "wrap": [],
        "post": [],
        "result": [],
    }

    async def pre(execution: ToolExecution, call_next: Any) -> Any:
        seen["pre"].append(execution.scope)
        return await call_next()

    def guard(execution: ToolExecution) -> None:
        seen["guard"].append(execution.scope)

    async def wrap(dispatch: DispatchExecution, call_next: Any) -> ToolResult:
        seen["wrap"].append(dispatch.scope)
        result: ToolResult = await call_next()
        return result

    async def post(execution: ToolExecution, result: ToolResult, call_next: Any) -> Any:
        seen["post"].append(execution.scope)
        return await call_next()

    def observe(execution: ToolExecution, result: ToolResult) -> None:
        seen["result"].append(execution.scope)

    reg = _registry()
    reg.add_scope("lead")
    reg.add_scope("helper", parent="lead")
    reg.add_scope("other")
    reg.on_pre_execute(pre, scope="lead")
    reg.guard(guard, scope="lead")
    reg.wrap_execute(wrap, scope="lead")
    reg.on_post_execute(post, scope="lead")
    reg.on_result(observe, scope="lead")
    for scope in (None, "lead", "helper", "other"):
        assert_success(await reg.execute(make_call(scope=scope)), "ran")
    for kind, scopes in seen.items():
        assert scopes == ["lead", "helper"], kind


async def test_scoped_guard_denies_only_in_its_scope() -> None:
    reg = _registry()
    reg.guard(lambda execution: "agents may not echo", scope="agent")
    reg.add_scope("sibling")
    assert_failure(await reg.execute(make_call(scope="agent")), TOOL_DENIED)
    assert_success(await reg.execute(make_call()), "ran")
    assert_success(await reg.execute(make_call(scope="sibling")), "ran")


async def test_global_listeners_see_every_scope() -> None:
    recorder = Recorder()
    reg = _registry()
    reg.add_scope("a")
    reg.add_scope("b", parent="a")
    reg.on_result(recorder.observer())
    for scope in (None, "a", "b"):
        await reg.execute(make_call(scope=scope))
    assert [e.scope for e in recorder.executions] == [None, "a", "b"]


# --------------------------------------------------------------------------- disposers


async def test_disposers_remove_every_kind_of_listener() -> None:
    events: list[str] = []

    async def wrap(dispatch: DispatchExecution, call_next: Any) -> ToolResult:
        events.append("wrap")
        result: ToolResult = await call_next()
        return result

    def observe(execution: ToolExecution, result: ToolResult) -> None:
        events.append("result")

    def guard(execution: ToolExecution) -> str:
        events.append("guard")
        return "guard"

    reg = _registry()
    disposers = [
        reg.on_pre_execute(_pre(events, "pre", Deny("pre"), chain=False)),
        reg.guard(guard),
        reg.wrap_execute(wrap),
        reg.on_post_execute(_post(events, "post", Block(feedback="post"))),
        reg.on_result(observe),
    ]
    assert_failure(await reg.execute(make_call()), TOOL_DENIED, "pre")
    assert events == ["pre>", "result"]

    expected = [
        (TOOL_DENIED, "guard", ["guard", "result"]),
        (None, "post", ["wrap", "post>", "<post", "result"]),
        (None, "post", ["post>", "<post", "result"]),
        ("ok", None, ["result"]),
        ("ok", None, []),
    ]
    for dispose, (code, message, trail) in zip(disposers, expected, strict=True):
        dispose()
        dispose()  # idempotent
        events.clear()
        result = await reg.execute(make_call())
        if code == "ok":
            assert_success(result, "ran")
        else:
            assert_failure(result, code, message)
        assert events == trail


async def test_disposing_one_listener_keeps_an_identical_one() -> None:
    events: list[str] = []

    def observe(execution: ToolExecution, result: ToolResult) -> None:
        events.append("seen")

    reg = _registry()
    first = reg.on_result(observe)
    reg.on_result(observe)
    first()
    await reg.execute(make_call())
    assert events == ["seen"]
