"""The Pyodide runtime's speed and size, side by side with the CPython worker.

Run by hand: ``python tests/benchmarks/bench_pyodide.py [--rounds N] [--runtime NAME ...]``
(``NAME``: ``pyodide``, ``subprocess``; both by default). Prints medians of:

(a) cold start to first result: a new runtime without spares, its first
    ``return 1`` (target < 400 ms for Pyodide: Deno + Pyodide from the snapshot);
(b) warm hand-off: ``return 1`` on a ready spare (target < 20 ms);
(c) one tool-call round trip: (2,000 sequential calls - no call) / 2,000
    (target < 400 µs);
(d) 100 concurrent tool calls that each sleep 50 ms, wall time of the run;
(e) memory per worker: resident and proportional set size of one ready spare
    (Pyodide: the idle Deno process; CPython: a forked spare of the zygote).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from runtime import Limits, Runtime, ToolAnswer, get_runtime

ROUND_TRIPS = 2000
READY_PAUSE = 3.0  # long enough for a spare to load on a busy 2-core machine
MiB = 1024 * 1024


async def _echo(name: str, args: Any) -> ToolAnswer:
    if name == "sleep":
        await anyio.sleep(0.05)
    return ToolAnswer.success(args)


async def _timed(runtime: Runtime, code: str) -> float:
    started = time.perf_counter()
    outcome = await runtime.run(
        code, tool_names=["echo", "sleep"], call_tool=_echo, limits=Limits(timeout=120)
    )
    elapsed = time.perf_counter() - started
    assert outcome.ok, outcome.message
    return elapsed


async def bench_cold(name: str, rounds: int) -> float:
    samples = []
    for _ in range(rounds):
        # Entering the runtime counts: SubprocessRuntime starts its zygote there.
        started = time.perf_counter()
        async with get_runtime(name, spares=0) as runtime:
            await _timed(runtime, "return 1")
            samples.append(time.perf_counter() - started)
    return statistics.median(samples)


async def _warm(runtime: Runtime, rounds: int, code: str) -> list[float]:
    samples = []
    for _ in range(rounds):
        await anyio.sleep(READY_PAUSE)
        samples.append(await _timed(runtime, code))
    return samples


async def bench_warm(runtime: Runtime, rounds: int) -> float:
    return statistics.median(await _warm(runtime, rounds, "return 1"))


async def bench_round_trip(runtime: Runtime, rounds: int) -> float:
    calls = f"for i in range({ROUND_TRIPS}):\n    await tools.echo({{'i': i}})\nreturn 1"
    with_calls = statistics.median(await _warm(runtime, rounds, calls))
    without = statistics.median(await _warm(runtime, rounds, "return 1"))
    return (with_calls - without) / ROUND_TRIPS


async def bench_concurrent(runtime: Runtime, rounds: int) -> float:
    code = (
        "import asyncio\n"
        "await asyncio.gather(*[tools.sleep({'i': i}) for i in range(100)])\n"
        "return 1"
    )
    return statistics.median(await _warm(runtime, rounds, code))


def _memory_of(pid: int) -> tuple[int, int]:
    rss = pss = 0
    with open(f"/proc/{pid}/smaps_rollup") as rollup:
        for line in rollup:
            if line.startswith("Rss:"):
                rss = int(line.split()[1]) * 1024
            elif line.startswith("Pss:"):
                pss = int(line.split()[1]) * 1024
    return rss, pss


def _descendants(root: int) -> list[int]:
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as stat:
                    parents[int(entry)] = int(stat.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    found, frontier = [], [root]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parents.items() if ppid == parent]
        found.extend(children)
        frontier.extend(children)
    return found


async def bench_memory(name: str, runtime: Runtime) -> str:
    await anyio.sleep(READY_PAUSE)
    if name == "pyodide":
        (spare,) = runtime._spares  # type: ignore[attr-defined]
        rss, pss = _memory_of(spare.pid)
        return f"RSS {rss / MiB:.0f} MiB, PSS {pss / MiB:.0f} MiB (one idle, loaded Deno + Pyodide)"
    zygote = runtime._pool.zygote_pid  # type: ignore[attr-defined]
    sizes = [_memory_of(pid) for pid in _descendants(zygote)]
    if not sizes:
        return "n/a"
    rss, pss = max(sizes, key=lambda size: size[1])
    zygote_rss, _ = _memory_of(zygote)
    return (
        f"RSS {rss / MiB:.0f} MiB, PSS {pss / MiB:.0f} MiB (one forked spare; "
        f"the zygote it shares pages with: RSS {zygote_rss / MiB:.0f} MiB)"
    )


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:9.2f} ms"


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:9.1f} µs"


async def bench(name: str, rounds: int) -> dict[str, str]:
    results = {"cold start to first result": _ms(await bench_cold(name, rounds))}
    async with get_runtime(name, spares=1) as runtime:
        start: Callable[[], Awaitable[None]] | None = getattr(runtime, "start", None)
        if start is not None:
            await start()
        await _timed(runtime, "return 1")  # warm-up
        results["warm hand-off"] = _ms(await bench_warm(runtime, rounds))
        results["tool-call round trip"] = _us(await bench_round_trip(runtime, rounds))
        results["100 concurrent 50 ms calls"] = _ms(await bench_concurrent(runtime, rounds))
        results["memory per worker"] = await bench_memory(name, runtime)
    return results


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument(
        "--runtime", action="append", choices=["pyodide", "subprocess"], dest="runtimes"
    )
    options = parser.parse_args()
    names = options.runtimes or ["pyodide", "subprocess"]
    table = {name: await bench(name, options.rounds) for name in names}
    print(f"medians of {options.rounds} rounds, {os.cpu_count()} CPUs")
    rows = [row for row in next(iter(table.values())) if row != "memory per worker"]
    print(f"{'':30}" + "".join(f"{name:>14}" for name in names))
    for row in rows:
        print(f"{row:30}" + "".join(f"{table[name][row]:>14}" for name in names))
    for name in names:
        print(f"memory per worker, {name}: {table[name]['memory per worker']}")


if __name__ == "__main__":
    anyio.run(main)
