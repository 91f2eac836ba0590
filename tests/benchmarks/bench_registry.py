"""Pipeline overhead per call for a no-op tool, with 0, 1 and 5 listeners.

Run by hand: ``python tests/benchmarks/bench_registry.py``. Prints the median
µs/call over several rounds (target: under 30 µs with no listeners).
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import anyio

from registry import (
    Accept,
    Allow,
    ToolCall,
    ToolDefinition,
    ToolExecution,
    ToolOutput,
    ToolRegistry,
    ToolResult,
)

CALLS_PER_ROUND = 5_000
ROUNDS = 9


async def _noop(args: Any, ctx: Any) -> None:
    return None


def _registry(listeners: int) -> ToolRegistry:
    reg = ToolRegistry()
    reg.register(
        ToolDefinition(
            name="noop",
            description="Do nothing.",
            parameters={"type": "object", "properties": {"q": {"type": "string"}}},
            output=ToolOutput(schema={"type": "null"}),
            execute=_noop,
        )
    )
    for _ in range(listeners):

        async def pre(execution: ToolExecution, call_next: Any) -> Any:
            return await call_next()

        async def post(execution: ToolExecution, result: ToolResult, call_next: Any) -> Any:
            return await call_next()

        def observe(execution: ToolExecution, result: ToolResult) -> None:
            return None

        reg.on_pre_execute(pre)
        reg.on_post_execute(post)
        reg.guard(lambda execution: None)
        reg.on_result(observe)
    assert Allow and Accept  # the listeners return next()'s defaults
    return reg


async def _round(reg: ToolRegistry) -> tuple[float, float]:
    """(wall, CPU) µs per call; CPU time shrugs off other processes on a busy machine."""
    call = ToolCall(call_id="c1", name="noop", arguments={"q": "x"})
    start, start_cpu = time.perf_counter(), time.process_time()
    for _ in range(CALLS_PER_ROUND):
        result = await reg.execute(call)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - start_cpu
    assert not result.is_error
    return elapsed / CALLS_PER_ROUND * 1e6, cpu / CALLS_PER_ROUND * 1e6


async def main() -> None:
    print(f"registry pipeline, no-op tool, median of {ROUNDS} rounds x {CALLS_PER_ROUND} calls")
    for listeners in (0, 1, 5):
        reg = _registry(listeners)
        await _round(reg)  # warm-up
        samples = [await _round(reg) for _ in range(ROUNDS)]
        label = f"{listeners} listener set(s)" + (
            " (pre+guard+post+observer each)" if listeners else ""
        )
        wall = statistics.median(sample[0] for sample in samples)
        cpu = statistics.median(sample[1] for sample in samples)
        print(f"  {label:<48} {wall:6.1f} µs/call wall, {cpu:6.1f} µs/call CPU")


if __name__ == "__main__":
    anyio.run(main)
