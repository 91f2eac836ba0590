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
