"""Every ``run_code`` result says what isolation its run had; best-effort is passed through."""

from __future__ import annotations

from typing import Any

import pytest

from ptc import CodeExecutor
from ptc._exceptions import ExecutorConfigError
from registry import ToolRegistry
from runtime import SubprocessRuntime
from runtime.testing import InProcessRuntime

pytestmark = pytest.mark.anyio

STRICT = {"mode": "strict", "runtime": "subprocess", "missing": [], "off": []}


async def test_results_and_events_carry_the_runs_isolation(tools: ToolRegistry) -> None:
    events: list[dict[str, Any]] = []
    async with CodeExecutor(tools, on_event=events.append) as executor:
        ok = await executor.run_code("print('hi')\nreturn 1")
        failed = await executor.run_code("raise ValueError('boom')")
    assert ok.meta == {"isolation": STRICT}
    assert failed.is_error and failed.meta == {"isolation": STRICT}
    results = [event for event in events if event["type"] == "tool/result"]
    assert [event["isolation"] for event in results] == [STRICT, STRICT]
    # What the model reads is unchanged.
    assert ok.content == [{"type": "text", "text": "hi\n1"}]
    assert "isolation" not in str(failed.content)


async def test_a_runtime_without_isolation_says_so(tools: ToolRegistry) -> None:
    events: list[dict[str, Any]] = []
    async with CodeExecutor(tools, runtime=InProcessRuntime(), on_event=events.append) as ex:
        result = await ex.run_code("return 1")
    none = {"mode": "none", "runtime": "", "missing": [], "off": []}
    assert result.meta == {"isolation": none}
    assert events[-1]["isolation"] == none


async def test_best_effort_is_an_explicit_option_of_the_executor(tools: ToolRegistry) -> None:
    events: list[dict[str, Any]] = []
    async with CodeExecutor(tools, isolation="best-effort", on_event=events.append) as executor:
        runtime = executor._runtime
        assert isinstance(runtime, SubprocessRuntime) and runtime.isolation == "best-effort"
        result = await executor.run_code("return 1")
    # This machine has every layer: best-effort, and nothing missing.
    assert result.meta == {"isolation": {**STRICT, "mode": "best-effort"}}
    assert events[-1]["isolation"]["mode"] == "best-effort"


def test_isolation_is_for_a_runtime_the_executor_creates(tools: ToolRegistry) -> None:
    with pytest.raises(ExecutorConfigError, match="runtime the executor creates"):
        CodeExecutor(tools, runtime=InProcessRuntime(), isolation="best-effort")
    with pytest.raises(ExecutorConfigError, match="isolation must be"):
        CodeExecutor(tools, isolation="none")  # type: ignore[arg-type]


def _numbered(prefix: str, count: int) -> ToolRegistry:
    registry = ToolRegistry()
    for index in range(count):

        async def tool(x: int) -> int:
            """Return x."""
            return x

        registry.tool(name=f"{prefix}_{index:04d}")(tool)
    return registry


async def test_executors_sharing_a_runtime_see_only_their_own_tools() -> None:
    # One runtime's spares serve both in turn, each made ready for the other's
    # (the larger) start: a program sees the names of its own executor's run.
    seen = "return {'count': len(tools), 'names': list(tools), 'other': 'b_0000' in tools}"
    async with (
        SubprocessRuntime() as runtime,
        CodeExecutor(_numbered("a", 3), runtime=runtime) as few,
        CodeExecutor(_numbered("b", 2_000), runtime=runtime) as many,
    ):
        for _ in range(3):
            small = await few.run_code(seen)
            large = await many.run_code(seen)
            assert not small.is_error and not large.is_error
            assert small.value["result"] == {
                "count": 3,
                "names": ["a_0000", "a_0001", "a_0002"],
                "other": False,
            }
            assert large.value["result"]["count"] == 2_000 and large.value["result"]["other"]
            assert large.value["result"]["names"] == [f"b_{i:04d}" for i in range(2_000)]
