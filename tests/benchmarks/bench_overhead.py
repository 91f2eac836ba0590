"""What a sub-call and a visible tool cost, each as a ratio to its floor measured in the same run.

Run by hand: ``python tests/benchmarks/bench_overhead.py [--rounds N] [--calls N]``.
Prints medians and ratios:

(a) per sub-call overhead through the executor (``run_code`` with N sequential
    calls of a no-op tool, less ``run_code`` with none, over N), next to its
    floor, the runtime's own tool round trip (the same program through
    ``SubprocessRuntime.run`` with a ``call_tool`` that answers at once), and
    the executor over the in-process fake runtime (target: within 2x the floor);
(b) per-run cost of ``run_code('return 1')`` with 10 and with 5,000 visible
    tools, through the executor and through the runtime alone (target: 5,000
    within 1.2x of 10);
(c) one mode: hand-off (``return 1``) and round trip with the runtime used in an
    ``async with`` block and without one (target: the same).

The machine may be busy with other work: only the ratios within one run mean much.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from ptc import CodeExecutor
from registry import ToolRegistry
from runtime import Limits, Runtime, SubprocessRuntime, ToolAnswer

try:
    from runtime.testing import InProcessRuntime  # type: ignore[attr-defined]
except ImportError:  # (before it moved)
    from ptc.testing import InProcessRuntime


def _program(calls: int) -> str:
    return f"n = 0\nfor i in range({calls}):\n    n += await tools.echo({{'x': i}})\nreturn n"


async def _answer(name: str, args: Any) -> ToolAnswer:
    return ToolAnswer.success(args["x"])


def make_registry(extra_tools: int = 0) -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool(concurrency_safe=True)
    async def echo(x: int) -> int:
        """Return x."""
        return x

    for index in range(extra_tools):

        async def other(x: int) -> int:
            """Return x."""
            return x

        registry.tool(name=f"tool_{index:05d}", concurrency_safe=True)(other)
    return registry


async def _median(work: Callable[[], Awaitable[object]], rounds: int) -> float:
    for _ in range(3):
        await work()
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        await work()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


async def _interleaved(
    works: dict[str, Callable[[], Awaitable[object]]], rounds: int, pause: float = 0.0
) -> dict[str, float]:
    """Medians of each work, measured in alternation (a busy moment hits all alike).

    ``pause`` (seconds) before each sample lets the pool make its spares again:
    runs back to back would measure how fast workers are forked instead.
    """
    samples: dict[str, list[float]] = {label: [] for label in works}
    for work in works.values():
        for _ in range(3):
            await work()
    for _ in range(rounds):
        for label, work in works.items():
            if pause:
                await anyio.sleep(pause)
            started = time.perf_counter()
            await work()
            samples[label].append(time.perf_counter() - started)
    return {label: statistics.median(values) for label, values in samples.items()}


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:9.1f} µs"


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:9.3f} ms"


async def _runtime_run(runtime: Runtime, code: str, names: Any) -> None:
    outcome = await runtime.run(code, tool_names=names, call_tool=_answer)
    assert outcome.ok, outcome.message


async def _executor_run(executor: CodeExecutor, code: str) -> None:
    result = await executor.run_code(code)
    assert not result.is_error, result.content


async def bench_sub_calls(rounds: int, calls: int) -> None:
    many, none = _program(calls), _program(0)
    limits = Limits(timeout=120)
    async with SubprocessRuntime(limits=limits) as runtime:
        fake = InProcessRuntime(limits=limits)
        registry = make_registry()
        names = ["echo"]
        async with (
            CodeExecutor(registry, runtime=runtime, max_parallel_sub_calls=100) as executor,
            CodeExecutor(registry, runtime=fake, max_parallel_sub_calls=100) as in_process,
        ):
            medians = await _interleaved(
                {
                    "runtime many": lambda: _runtime_run(runtime, many, names),
                    "runtime none": lambda: _runtime_run(runtime, none, names),
                    "executor many": lambda: _executor_run(executor, many),
                    "executor none": lambda: _executor_run(executor, none),
                    "fake many": lambda: _executor_run(in_process, many),
                    "fake none": lambda: _executor_run(in_process, none),
                },
                rounds,
                # The spare replacing the last run's worker is forked (and
                # sandboxed: about 5 ms of CPU) in the next run, a long or a
                # short one by turns: without the pause the difference between
                # them would also count the fork.
                pause=0.02,
            )
    floor = (medians["runtime many"] - medians["runtime none"]) / calls
    through = (medians["executor many"] - medians["executor none"]) / calls
    fake_cost = (medians["fake many"] - medians["fake none"]) / calls
    print(f"(a) per sub-call, {calls} sequential calls per run")
    print(f"    runtime round trip (floor)          {_us(floor)}")
    print(f"    through the executor                {_us(through)}   {through / floor:5.2f}x floor")
    print(
        f"    executor, in-process runtime        {_us(fake_cost)}   {fake_cost / floor:5.2f}x floor"
    )


async def bench_visible_tools(rounds: int) -> None:
    small, large = make_registry(9), make_registry(4_999)
    small_names = [d.name for d in small.definitions(None)]
    large_names = [d.name for d in large.definitions(None)]
    async with (
        SubprocessRuntime() as runtime,
        CodeExecutor(small, runtime=runtime) as few,
        CodeExecutor(large, runtime=runtime) as many,
    ):
        medians = await _interleaved(
            {
                "executor 10": lambda: _executor_run(few, "return 1"),
                "executor 5000": lambda: _executor_run(many, "return 1"),
                "runtime 10": lambda: _runtime_run(runtime, "return 1", small_names),
                "runtime 5000": lambda: _runtime_run(runtime, "return 1", large_names),
            },
            rounds,
            pause=0.03,
        )
    print("(b) per run, 'return 1', by visible tools")
    for where in ("executor", "runtime"):
        ten, five = medians[f"{where} 10"], medians[f"{where} 5000"]
        print(
            f"    {where:<8}  10 tools {_ms(ten)}   5,000 tools {_ms(five)}   "
            f"{five / ten:5.2f}x (target <= 1.2x)"
        )


async def bench_modes(rounds: int) -> None:
    entered = SubprocessRuntime()
    plain = SubprocessRuntime()
    one = _program(1)
    names = ["echo"]
    try:
        async with entered:
            await plain.start()
            medians = await _interleaved(
                {
                    "entered handoff": lambda: _runtime_run(entered, "return 1", names),
                    "plain handoff": lambda: _runtime_run(plain, "return 1", names),
                    "entered call": lambda: _runtime_run(entered, one, names),
                    "plain call": lambda: _runtime_run(plain, one, names),
                },
                rounds,
                pause=0.03,
            )
    finally:
        await plain.aclose()
    print("(c) one mode: the runtime in an async with block, and without one")
    for what in ("handoff", "call"):
        inside, outside = medians[f"entered {what}"], medians[f"plain {what}"]
        label = "'return 1'" if what == "handoff" else "one tool call"
        print(
            f"    {label:<14} in a block {_ms(inside)}   without {_ms(outside)}   "
            f"{outside / inside:5.2f}x"
        )


async def main(rounds: int, calls: int) -> None:
    await bench_sub_calls(rounds, calls)
    await bench_visible_tools(rounds)
    await bench_modes(rounds)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    # Long runs: each sample also holds one worker's hand-off, and with few calls
    # that (and whether a spare was ready, back to back) outweighs them.
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    anyio.run(main, args.rounds, args.calls)
