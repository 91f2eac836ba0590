"""``run_code`` through ``ptc serve`` over stdio versus the same program on ``CodeExecutor``.

Run by hand: ``python tests/benchmarks/bench_serve.py [--rounds N]``. Prints the
medians and their ratio, from one run: the server is ``ptc serve`` started as a
subprocess with the bundled example tool set, driven by the official ``mcp``
client; the direct figure is an in-process ``CodeExecutor`` on the same tool
set and the same (strict, subprocess) runtime.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

from ptc import CodeExecutor
from ptc._toolspec import load_registry

ROOT = Path(__file__).resolve().parents[2]
TOOLS = str(ROOT / "examples" / "tools.py") + ":registry"
PROGRAMS = {
    "no tool call": "return 1",
    "one tool call": 'return len(await tools.search_docs({"query": "retry"}))',
    "fan-out (4 searches)": (
        "import asyncio\n"
        'qs = ["retry", "timeout", "cache", "deploy"]\n'
        "hits = await asyncio.gather(*[tools.search_docs({'query': q}) for q in qs])\n"
        "return sum(len(h) for h in hits)"
    ),
}


async def median_ms(fn: Callable[[], Awaitable[Any]], rounds: int) -> float:
    for _ in range(5):
        await fn()
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        await fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e3


async def bench(rounds: int) -> None:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "ptc", "serve", "--tools", TOOLS], cwd=str(ROOT)
    )
    async with CodeExecutor(load_registry(TOOLS)) as executor, Client(params) as client:
        print(f"run_code round trip, {rounds} rounds each (medians)")
        for label, code in PROGRAMS.items():
            arguments = {"code": code, "description": "bench"}

            async def direct(code: str = code) -> None:
                result = await executor.run_code(code, "bench")
                assert not result.is_error, result

            async def served(arguments: dict[str, Any] = arguments) -> None:
                result = await client.call_tool("run_code", arguments)
                assert not result.is_error, result

            floor = await median_ms(direct, rounds)
            value = await median_ms(served, rounds)
            print(
                f"  {label:<22} CodeExecutor {floor:7.2f} ms   ptc serve (stdio) {value:7.2f} ms"
                f"   x{value / floor:4.2f}"
            )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=40)
    anyio.run(bench, parser.parse_args().rounds)


if __name__ == "__main__":
    main()
