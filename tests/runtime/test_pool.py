"""The worker pool: workers forked on demand for concurrent runs, up to a bound."""

from __future__ import annotations

import anyio
import pytest

from runtime import Limits, SubprocessRuntime
from runtime.testing import ToolBox

pytestmark = pytest.mark.anyio

_WAIT = "return await tools.sleep({'seconds': %s})"


async def _run_all(runtime: SubprocessRuntime, box: ToolBox, runs: int, seconds: float) -> None:
    results: list[object] = []

    async def one() -> None:
        outcome = await runtime.run(_WAIT % seconds, tool_names=["sleep"], call_tool=box)
        results.append(outcome.result)

    async with anyio.create_task_group() as group:
        for _ in range(runs):
            group.start_soon(one)
    assert results == [{"seconds": seconds}] * runs


async def test_concurrent_runs_do_not_wait_for_each_other() -> None:
    # One spare, eight runs at once: each gets a worker of its own as it
    # comes, so all eight wait on their tool at the same time.
    box = ToolBox()
    async with SubprocessRuntime(spares=1) as runtime:
        await _run_all(runtime, box, 8, 1.0)
    assert box.max_in_flight == 8


async def test_concurrent_runs_without_the_context_manager() -> None:
    box = ToolBox()
    runtime = SubprocessRuntime(spares=1)
    try:
        await _run_all(runtime, box, 6, 0.5)
    finally:
        await runtime.aclose()
    assert box.max_in_flight == 6


async def test_live_workers_stay_within_the_bound() -> None:
    # At most two workers live: two runs at a time; the rest queue and finish.
    box = ToolBox()
    async with SubprocessRuntime(spares=1, max_workers=2) as runtime:
        await _run_all(runtime, box, 6, 0.3)
    assert box.max_in_flight == 2
    assert len(box.calls) == 6


async def test_runs_with_their_own_limits_stay_within_the_bound() -> None:
    # Workers for other limits (or with no spares) are forked per run, and
    # count against the bound too.
    box = ToolBox()
    limits = Limits(cpu_seconds=30)
    async with SubprocessRuntime(spares=0, max_workers=2) as runtime:
        results: list[object] = []

        async def one() -> None:
            outcome = await runtime.run(
                _WAIT % 0.3, tool_names=["sleep"], call_tool=box, limits=limits
            )
            results.append(outcome.result)

        async with anyio.create_task_group() as group:
            for _ in range(4):
                group.start_soon(one)
    assert results == [{"seconds": 0.3}] * 4
    assert box.max_in_flight == 2


def test_max_workers_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_workers"):
        SubprocessRuntime(max_workers=0)
