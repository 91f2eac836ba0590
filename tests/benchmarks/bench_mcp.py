"""One MCP tool call through the whole pipeline versus the same call on the SDK's session.

Run by hand: ``python tests/benchmarks/bench_mcp.py [--rounds N] [--server faults|time]``.
Prints medians, in one run so the ratios compare like with like:

- ``direct``: ``await connection.client.call_tool(...)`` on the open session
  (the floor: the SDK, the transport and the server);
- ``registry``: ``registry.execute`` of the registered tool (snapshot,
  validation, policy, the mapping of the result);
- ``program``: a ``run_code`` program making that one call from the sandboxed
  CPython worker (the whole path a model's call takes);
- ``100 gathered``: one program gathering 100 calls over the one session,
  against 100 calls gathered directly on the session.
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

from ptc import CodeExecutor
from registry import StdioServer, ToolCall, ToolRegistry, connect_mcp

FAULTS = Path(__file__).resolve().parent.parent / "mcp" / "servers" / "faults.py"

SERVERS = {
    "faults": (
        StdioServer(command=sys.executable, args=(str(FAULTS),)),
        "echo",
        {"text": "hello"},
    ),
    "time": (
        StdioServer(command=sys.executable, args=("-m", "mcp_server_time")),
        "get_current_time",
        {"timezone": "UTC"},
    ),
}


async def median_ms(fn: Callable[[], Awaitable[Any]], rounds: int) -> float:
    for _ in range(5):  # warm-up
        await fn()
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        await fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e3


async def bench(server: str, rounds: int) -> None:
    spec, tool, args = SERVERS[server]
    registry = ToolRegistry()
    async with (
        connect_mcp(registry, {"srv": spec}) as servers,
        CodeExecutor(registry, max_parallel_sub_calls=100) as executor,
    ):
        client = servers["srv"].client
        name = f"srv.{tool}"

        async def direct() -> None:
            result = await client.call_tool(tool, args)
            assert not result.is_error

        async def through_registry() -> None:
            result = await registry.execute(ToolCall(call_id="b", name=name, arguments=args))
            assert not result.is_error, result

        one = f"return await tools[{name!r}]({args!r})"

        async def program() -> None:
            result = await executor.run_code(one)
            assert not result.is_error, result

        async def direct_100() -> None:
            async with anyio.create_task_group() as tasks:
                for _ in range(100):
                    tasks.start_soon(direct)

        many = (
            "import asyncio\n"
            f"rs = await asyncio.gather(*[tools[{name!r}]({args!r}) for _ in range(100)])\n"
            "return len(rs)"
        )

        async def program_100() -> None:
            result = await executor.run_code(many)
            assert not result.is_error, result

        print(f"MCP server {server!r}, tool {tool!r}, {rounds} rounds each (medians)")
        floor = await median_ms(direct, rounds)
        print(f"  direct on the session          {floor:8.3f} ms")
        for label, fn in (("registry.execute", through_registry), ("program (run_code)", program)):
            value = await median_ms(fn, rounds)
            print(f"  {label:<30} {value:8.3f} ms   x{value / floor:5.2f} of direct")
        floor_100 = await median_ms(direct_100, max(5, rounds // 4))
        print(f"  100 gathered, direct           {floor_100:8.3f} ms")
        value = await median_ms(program_100, max(5, rounds // 4))
        print(
            f"  100 gathered, program          {value:8.3f} ms   x{value / floor_100:5.2f} of direct"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--server", choices=sorted(SERVERS), default="faults")
    options = parser.parse_args()
    anyio.run(bench, options.server, options.rounds)


if __name__ == "__main__":
    main()
