"""Conformance checks: ``Runtime.run(call_group=...)``, calls answered in the caller's task group."""

from __future__ import annotations

from typing import Any

import anyio

from .._base import Runtime, ToolAnswer
from ._checks import RuntimeCheck, checker
from ._tools import TOOL_NAMES, ToolBox

__all__ = ["CHECKS"]

#: These checks, in the order they run.
CHECKS: list[RuntimeCheck] = []
check = checker(CHECKS)


@check()
async def _calls_are_answered_in_tasks_of_the_call_group(runtime: Runtime) -> None:
    tools = ToolBox()
    parents: list[int | None] = []

    async def call_tool(name: str, args: Any) -> ToolAnswer:
        parents.append(anyio.get_current_task().parent_id)
        return await tools(name, args)

    code = (
        "import asyncio\n"
        "first = await tools.echo({'n': 1})\n"
        "more = await asyncio.gather(*[tools.sleep({'seconds': 0.01}) for _ in range(5)])\n"
        "return [first, len(more)]"
    )
    async with anyio.create_task_group() as group:
        # The group's tasks are children of the task that entered it (this one).
        host = anyio.get_current_task().id
        outcome = await runtime.run(
            code, tool_names=TOOL_NAMES, call_tool=call_tool, call_group=group
        )
    assert outcome.ok, outcome.message
    assert outcome.result == [{"n": 1}, 5]
    assert len(parents) == 6
    assert parents == [host] * 6, "a call was not answered in a task of call_group"


async def _calls_left_as_the_run_ends(
    runtime: Runtime, *, shield_calls: bool
) -> tuple[list[str], list[str]]:
    """End a program while two calls go on: ``hang`` shields itself, ``sleep`` does not.

    Checks that the run returns at once, without waiting for either; then lets
    both go and returns the calls that finished and those cancelled.
    """
    release = anyio.Event()
    started: list[str] = []
    finished: list[str] = []
    cancelled: list[str] = []

    async def call_tool(name: str, args: Any) -> ToolAnswer:
        if name == "echo":
            return ToolAnswer.success(args)
        started.append(name)
        try:
            with anyio.CancelScope(shield=name == "hang"):
                await release.wait()
        except anyio.get_cancelled_exc_class():
            cancelled.append(name)
            raise
        finished.append(name)
        return ToolAnswer.success("late")

    code = (
        "import asyncio\n"
        "asyncio.ensure_future(tools.hang())\n"
        "asyncio.ensure_future(tools.sleep())\n"
        # Answered after the two calls before it started (calls start in order).
        "await tools.echo({})\n"
        "print('done')"
    )
    with anyio.fail_after(30):
        async with anyio.create_task_group() as group:
            outcome = await runtime.run(
                code,
                tool_names=TOOL_NAMES,
                call_tool=call_tool,
                call_group=group,
                shield_calls=shield_calls,
            )
            assert outcome.ok, outcome.message
            assert outcome.logs == ["done"]
            assert sorted(started) == ["hang", "sleep"]
            assert not finished, "the run waited for a call it should have let go"
            release.set()
    return sorted(finished), cancelled


@check()
async def _the_run_does_not_wait_for_a_call_that_outlives_it(runtime: Runtime) -> None:
    # The call that shields itself from the run's end goes on in the call group
    # to its end; the other is cancelled.
    finished, cancelled = await _calls_left_as_the_run_ends(runtime, shield_calls=False)
    assert finished == ["hang"]
    assert cancelled == ["sleep"]


@check()
async def _a_run_cancelled_from_outside_lets_go_of_its_calls(runtime: Runtime) -> None:
    tools = ToolBox()
    async with anyio.create_task_group() as group:
        with anyio.move_on_after(20) as outer:
            async with anyio.create_task_group() as caller:

                async def go() -> None:
                    await runtime.run(
                        "await tools.hang()",
                        tool_names=TOOL_NAMES,
                        call_tool=tools,
                        call_group=group,
                    )
                    raise AssertionError("run() returned after its task was cancelled")

                caller.start_soon(go)
                await tools.started.wait()
                caller.cancel_scope.cancel()
        assert not outer.cancelled_caught
    assert tools.cancelled == 1
    assert tools.in_flight == 0


@check()
async def _with_shield_calls_the_run_neither_cancels_nor_waits_for_a_call(
    runtime: Runtime,
) -> None:
    # Neither call is cancelled: both go on in the call group to their end.
    finished, cancelled = await _calls_left_as_the_run_ends(runtime, shield_calls=True)
    assert finished == ["hang", "sleep"]
    assert not cancelled, "the run cancelled a call it was told to leave alone"
