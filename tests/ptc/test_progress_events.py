"""A tool's progress reports become ``tool/progress`` events of the executor running it."""

from __future__ import annotations

from typing import Any

import pytest

from ptc import CodeExecutor, ModelCall
from registry import ToolCall, ToolRegistry, ToolRunContext
from runtime.testing import InProcessRuntime

pytestmark = pytest.mark.anyio


def _registry() -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool
    async def crunch(steps: int, ctx: ToolRunContext) -> str:
        """Work in steps, reporting each."""
        for step in range(1, steps + 1):
            ctx.report_progress(step, steps, f"step {step}")
        return "done"

    return registry


async def test_a_sub_calls_progress_is_an_event_between_its_start_and_its_settle() -> None:
    events: list[dict[str, Any]] = []
    registry = _registry()
    async with CodeExecutor(registry, runtime=InProcessRuntime(), on_event=events.append) as ex:
        result = await ex.run_code(
            'return await tools.crunch({"steps": 2})', description="crunch", call_id="run-1"
        )
    assert not result.is_error, result
    kinds = [(e["type"], e["id"]) for e in events]
    assert kinds == [
        ("tool/call", "run-1"),
        ("tool/ptc-dispatch-start", "run-1:ptc:1"),
        ("tool/progress", "run-1:ptc:1"),
        ("tool/progress", "run-1:ptc:1"),
        ("tool/ptc-dispatch", "run-1:ptc:1"),
        ("tool/result", "run-1"),
    ]
    progress = [e for e in events if e["type"] == "tool/progress"]
    assert [(e["progress"], e["total"], e["message"]) for e in progress] == [
        (1, 2, "step 1"),
        (2, 2, "step 2"),
    ]
    assert all(e["parent_id"] == "run-1" and e["name"] == "crunch" for e in progress)


async def test_a_native_calls_progress_has_no_parent() -> None:
    events: list[dict[str, Any]] = []
    registry = _registry()
    async with CodeExecutor(
        registry, runtime=InProcessRuntime(), mode="both", on_event=events.append
    ) as ex:
        await ex.execute([ModelCall(call_id="n-1", name="crunch", arguments={"steps": 1})])
    progress = [e for e in events if e["type"] == "tool/progress"]
    assert len(progress) == 1
    assert progress[0]["id"] == "n-1" and "parent_id" not in progress[0]


async def test_calls_the_executor_does_not_run_make_no_events() -> None:
    events: list[dict[str, Any]] = []
    registry = _registry()
    async with CodeExecutor(registry, runtime=InProcessRuntime(), on_event=events.append):
        await registry.execute(ToolCall(call_id="elsewhere", name="crunch", arguments={"steps": 3}))
    assert events == []
