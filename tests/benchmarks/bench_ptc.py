"""run_code end to end through the full pipeline: 0, 1, 100 sequential, 100 parallel sub-calls.

Run by hand: ``python tests/benchmarks/bench_ptc.py [--runtime subprocess|pyodide|in-process]``.
Prints the median wall time per run_code call over several rounds. The tool is
a no-op read (concurrency-safe), so the figures are the executor's, the
bridge's and the worker's overhead.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import anyio

from ptc import CodeExecutor
from registry import ToolRegistry
from runtime import Runtime, get_runtime
from runtime.testing import InProcessRuntime

PROGRAMS = {
    "0 sub-calls": "return 1",
    "1 sub-call": "return await tools.echo({'x': 1})",
    "100 sequential sub-calls": "n = 0\nfor i in range(100):\n    n += await tools.echo({'x': i})\nreturn n",
    "100 parallel sub-calls": (
        "import asyncio\nreturn sum(await asyncio.gather(*[tools.echo({'x': i}) for i in range(100)]))"
    ),
}


def make_registry() -> ToolRegistry:
    reg = ToolRegistry()

    @reg.tool(concurrency_safe=True)
    async def echo(x: int) -> int:
        """Return x."""
        return x

    return reg


async def bench(runtime: Runtime, rounds: int) -> None:
    reg = make_registry()
    async with CodeExecutor(reg, runtime=runtime, max_parallel_sub_calls=100) as ex:
        for label, code in PROGRAMS.items():
            for _ in range(3):  # warm-up (starts the worker pool)
                result = await ex.run_code(code)
                assert not result.is_error, result.content
            samples = []
            for _ in range(rounds):
                start = time.perf_counter()
                await ex.run_code(code)
                samples.append(time.perf_counter() - start)
            print(f"  {label:<28} median {statistics.median(samples) * 1e3:8.2f} ms")
    await runtime.aclose()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runtime", default="subprocess")
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    runtime: Any = InProcessRuntime() if args.runtime == "in-process" else get_runtime(args.runtime)
    print(f"run_code end to end, runtime={args.runtime}, {args.rounds} rounds each")
    anyio.run(bench, runtime, args.rounds)


if __name__ == "__main__":
    main()
