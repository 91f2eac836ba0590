"""A body that can never suspend runs without a cancel scope, and behaves the same."""

from __future__ import annotations

import functools
from typing import Any

import anyio
import anyio.lowlevel
import pytest

import registry._pipeline as pipeline
from registry import (
    ABORTED,
    AbortSignal,
    ToolError,
    ToolRegistry,
    ToolRunContext,
    define_tool,
)
from registry._suspension import body_may_suspend, coroutine_may_suspend
from registry._validation import compile_definition
from tests.registry.helpers_pipeline import assert_failure, assert_success, make_call, make_tool

pytestmark = pytest.mark.anyio


async def returns(args: Any, ctx: ToolRunContext) -> Any:
    return args["text"]


async def awaits(args: Any, ctx: ToolRunContext) -> Any:
    await anyio.lowlevel.checkpoint()
    return args["text"]


async def enters(args: Any, ctx: ToolRunContext) -> Any:
    async with anyio.create_task_group():
        pass
    return args["text"]


async def iterates(args: Any, ctx: ToolRunContext) -> Any:
    return [item async for item in args]


async def nests(args: Any, ctx: ToolRunContext) -> Any:
    async def inner() -> str:
        await anyio.lowlevel.checkpoint()
        return "x"

    return [inner for _ in range(2)] and args["text"]  # defines, never awaits


def sync(args: Any, ctx: ToolRunContext) -> Any:
    return args["text"]


class Tools:
    async def method(self, args: Any, ctx: ToolRunContext) -> Any:
        return args["text"]

    async def __call__(self, args: Any, ctx: ToolRunContext) -> Any:
        return args["text"]


@pytest.mark.parametrize(
    ("body", "may_suspend"),
    [
        (returns, False),
        (nests, False),  # an inner coroutine function's awaits are its own
        (Tools().method, False),
        (awaits, True),
        (enters, True),
        (iterates, True),
        (sync, True),  # not a coroutine function: assumed to
        (Tools(), True),  # a callable object: assumed to
        (functools.partial(returns), True),
        (lambda args, ctx: returns(args, ctx), True),
    ],
)
def test_which_bodies_may_suspend(body: Any, may_suspend: bool) -> None:
    assert coroutine_may_suspend(body) is may_suspend
    assert body_may_suspend(body) is may_suspend


def test_a_defined_tool_knows_from_its_function() -> None:
    async def quick(text: str) -> str:
        """Echo."""
        return text

    async def slow(text: str) -> str:
        """Echo later."""
        await anyio.lowlevel.checkpoint()
        return text

    def threaded(text: str) -> str:
        """Echo in a thread."""
        return text

    assert compile_definition(define_tool(quick)).body_may_suspend is False
    assert compile_definition(define_tool(slow)).body_may_suspend is True
    assert compile_definition(define_tool(threaded)).body_may_suspend is True  # runs in a thread


@pytest.fixture
def scopes(monkeypatch: pytest.MonkeyPatch) -> list[anyio.CancelScope]:
    """The cancel scopes the pipeline opens around bodies."""
    opened: list[anyio.CancelScope] = []
    real = anyio.CancelScope

    class Counting:
        def __new__(cls, *args: Any, **kwargs: Any) -> anyio.CancelScope:
            scope = real(*args, **kwargs)
            opened.append(scope)
            return scope

    monkeypatch.setattr(pipeline.anyio, "CancelScope", Counting)
    return opened


async def test_only_a_body_that_may_suspend_gets_a_cancel_scope(
    scopes: list[anyio.CancelScope],
) -> None:
    reg = ToolRegistry()
    reg.register(make_tool("returns", returns))
    reg.register(make_tool("awaits", awaits))
    assert_success(await reg.execute(make_call("returns")), "hi")
    assert scopes == []
    assert_success(await reg.execute(make_call("awaits")), "hi")
    assert len(scopes) == 1


class Refused(ToolError):
    code = "REFUSED"


async def test_a_body_without_a_scope_fails_and_aborts_like_one_with(
    scopes: list[anyio.CancelScope],
) -> None:
    async def refuses(args: Any, ctx: ToolRunContext) -> Any:
        raise Refused("not today")

    async def crashes(args: Any, ctx: ToolRunContext) -> Any:
        raise KeyError("text")

    async def aborts_its_call(args: Any, ctx: ToolRunContext) -> Any:
        signal.abort("stop")  # the caller's signal, fired from inside the body
        return args["text"]

    async def scoped(args: Any, ctx: ToolRunContext) -> Any:
        with anyio.CancelScope():  # noqa: ASYNC100 (entered and left without waiting)
            return args["text"]

    signal = AbortSignal()
    reg = ToolRegistry()
    for name, body in [
        ("refuses", refuses),
        ("crashes", crashes),
        ("aborts", aborts_its_call),
        ("scoped", scoped),
    ]:
        reg.register(make_tool(name, body))
    assert_failure(await reg.execute(make_call("refuses")), "REFUSED", "not today", name="Refused")
    crashed = await reg.execute(make_call("crashes"))
    assert crashed.is_error and crashed.error.message == "KeyError: 'text'"
    assert_success(await reg.execute(make_call("scoped")), "hi")
    # Cancellation wins over the body's success, as it does with a scope.
    assert_failure(await reg.execute(make_call("aborts", signal=signal)), ABORTED)
    assert len(scopes) == 1  # the one the "scoped" body opened itself
