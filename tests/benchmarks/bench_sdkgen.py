"""Time to render the SDK text for 1,000 tools (target: under 100 ms).

Run by hand: ``python tests/benchmarks/bench_sdkgen.py``. The tools are the 117
GitHub MCP server schemas from ``tests/data``, repeated under distinct names; prints medians over several rounds and the
size of the text.
"""

from __future__ import annotations

import copy
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from sdkgen import json_schema_to_py, render_sdk, sdk_stats

TOOLS = 1_000
ROUNDS = 15
CORPUS = Path(__file__).resolve().parents[1] / "data" / "github-mcp-server.json"


def _tools(count: int) -> list[dict[str, Any]]:
    if not CORPUS.is_file():
        sys.exit(f"corpus missing: {CORPUS}")
    corpus = json.loads(CORPUS.read_text(encoding="utf-8"))
    tools = []
    for i in range(count):
        tool = copy.deepcopy(corpus[i % len(corpus)])
        tool["name"] = f"{tool['name']}_{i}"
        tools.append(tool)
    return tools


def _median_ms(fn: Any, rounds: int = ROUNDS) -> str:
    """Median wall-clock and CPU milliseconds (CPU time shrugs off a busy machine)."""
    wall, cpu = [], []
    for _ in range(rounds):
        start, start_cpu = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return f"{statistics.median(wall) * 1000:7.1f} ms wall, {statistics.median(cpu) * 1000:7.1f} ms CPU"


def main() -> None:
    tools = _tools(TOOLS)
    render_sdk(tools)  # warm-up (name caches, imports)
    full = _median_ms(lambda: render_sdk(tools))
    bare = _median_ms(lambda: render_sdk(tools, instructions=False))
    schemas = [tool["inputSchema"] for tool in tools]
    single = _median_ms(lambda: [json_schema_to_py(s) for s in schemas])
    stats = sdk_stats(render_sdk(tools))
    corpus_stats = sdk_stats(render_sdk(_tools(117)))
    print(f"render_sdk, {TOOLS} tools:                 {full} (medians; target < 100 ms)")
    print(f"render_sdk, {TOOLS} tools, no instructions: {bare}")
    print(f"json_schema_to_py x {TOOLS}:                {single}")
    print(f"size, {TOOLS} tools: {stats['chars']:,} chars, ~{stats['approx_tokens']:,} tokens")
    print(
        f"size, 117 corpus tools: {corpus_stats['chars']:,} chars, ~{corpus_stats['approx_tokens']:,} tokens"
    )


if __name__ == "__main__":
    main()
