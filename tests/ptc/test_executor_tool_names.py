"""The executor hands its runtime the same checked tool names run after run, until the registry changes."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from ptc import CodeExecutor
from registry import ToolRegistry
from runtime import CallTool, CancelSignal, Limits, RunOutcome, Runtime, ToolNames

pytestmark = pytest.mark.anyio


class _Names(Runtime):
    """Records the tool names each run was given."""

    name = "names"

    def __init__(self) -> None:
        super().__init__()
        self.given: list[ToolNames] = []

    async def _run(
        self,
        code: str,
        *,
        tool_names: ToolNames,
        call_tool: CallTool,
        limits: Limits,
        cancel: CancelSignal | None,
        on_log: Callable[[str], None] | None,
    ) -> RunOutcome:
        self.given.append(tool_names)
        return RunOutcome(result=None, has_result=True)


def _registry() -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool
    async def first(x: int) -> int:
        """Return x."""
        return x

    return registry


async def test_the_same_names_come_back_until_the_registry_changes() -> None:
    registry = _registry()
    runtime = _Names()
    async with CodeExecutor(registry, runtime=runtime) as executor:
        await executor.run_code("return 1")
        await executor.run_code("return 1")
        first, again = runtime.given
        assert first == {"first"}
        assert again is first  # checked and encoded once

        @registry.tool
        async def second(x: int) -> int:
            """Return x."""
            return x

        await executor.run_code("return 1")
        assert runtime.given[2] == {"first", "second"}
        dispose = registry.restrict("agent", deny=["first"])
        await executor.run_code("return 1", scope="agent")
        assert runtime.given[3] == {"second"}
        dispose()
        await executor.run_code("return 1", scope="agent")
        assert runtime.given[4] == {"first", "second"}
