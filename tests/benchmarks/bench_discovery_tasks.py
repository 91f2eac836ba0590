"""The scripted GitHub task suite (issue 19): tokens per task in discovery, full and native mode.

Run by hand: ``python tests/benchmarks/bench_discovery_tasks.py [--runtime subprocess|in-process]
[--rounds 5]``. The tasks, the scripted model and the fake GitHub behind the 117
real tool schemas are ``tests/ptc/github_tasks.py``, ``discovery_tasks.py``
and ``github_world.py``. For each task it prints the prompt-plus-result
tokens (characters / 4) of:

- discovery: the model input (the ``run_code`` schema, the ``tools:sdk`` index
  and the code-only rule) + program 1 (search, describe) and its output +
  program 2 and its output;
- full: the model input with the full SDK + the one program and its output;
- native: the 117 tool schemas as compact JSON + each call's JSON arguments and
  its whole JSON result (every intermediate result enters the context);

then the totals, the rank of each query's tool among the hits, the rank of
the probe queries (other phrasings a model could write), and the median wall
time of a task's programs in each mode (the sum of its ``run_code`` calls).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import anyio
import orjson

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the task suite lives in the tests tree

from runtime import Runtime, get_runtime  # noqa: E402
from runtime.testing import InProcessRuntime  # noqa: E402
from sdkgen import ToolCatalog  # noqa: E402
from tests.ptc.discovery_tasks import (  # noqa: E402
    DESCRIBED,
    SEARCH_LIMIT,
    Accounting,
    Outcome,
    accounting,
    solve,
    tokens,
)
from tests.ptc.github_tasks import PROBES, TASKS  # noqa: E402
from tests.ptc.github_world import World, github_registry  # noqa: E402


def _ms(outcome: Outcome) -> float:
    return sum(run.seconds for run in outcome.runs) * 1e3


async def bench(runtime: Runtime, rounds: int) -> None:
    schemas = github_registry(World()).schemas()
    rows: list[tuple[Accounting, str, float, float]] = []
    inputs: dict[str, int] = {}
    first_outputs: list[int] = []
    misses: list[str] = []
    for task in TASKS:
        disc_ms: list[float] = []
        full_ms: list[float] = []
        for _ in range(rounds):
            discovered = await solve(task, runtime, discovery=True)
            full = await solve(task, runtime, discovery=False)
            disc_ms.append(_ms(discovered))
            full_ms.append(_ms(full))
        inputs = {"discovery": discovered.model_input, "full": full.model_input}
        first = discovered.runs[0]
        first_outputs.append(len(first.code) + len(first.description) + len(first.content))
        ranks = ",".join(str(rank) for rank in discovered.ranks.values())
        misses += [f"{task.key}: {q!r} rank {r}" for q, r in discovered.ranks.items() if r != 1]
        rows.append(
            (
                accounting(discovered, full, schemas),
                ranks,
                statistics.median(disc_ms),
                statistics.median(full_ms),
            )
        )

    print(
        f"model input: discovery {tokens(inputs['discovery']):,} tokens "
        f"({inputs['discovery']:,} chars), full {tokens(inputs['full']):,} tokens; "
        f"native schemas {tokens(len(orjson.dumps(schemas))):,} tokens"
    )
    print(
        f"program 1 searches (limit={SEARCH_LIMIT}) and describes the top {DESCRIBED} hits of "
        f"each query: median {tokens(int(statistics.median(first_outputs))):,} tokens "
        "(its code and output)\n"
    )
    header = (
        f"{'task':<28} {'calls':>5} {'ranks':>7} {'discovery':>10} {'full':>8} {'native':>8} "
        f"{'disc/full':>9} {'disc ms':>8} {'full ms':>8}"
    )
    print(header)
    print("-" * len(header))
    for figures, ranks, disc, full_time in rows:
        print(
            f"{figures.key:<28} {figures.calls:>5} {ranks:>7} {figures.discovery:>10,} "
            f"{figures.full:>8,} {figures.native:>8,} {figures.discovery / figures.full:>9.2f} "
            f"{disc:>8.1f} {full_time:>8.1f}"
        )
    total_d = sum(f.discovery for f, *_ in rows)
    total_f = sum(f.full for f, *_ in rows)
    total_n = sum(f.native for f, *_ in rows)
    print("-" * len(header))
    print(
        f"{f'total ({len(rows)} tasks)':<28} {sum(f.calls for f, *_ in rows):>5} {'':>7} "
        f"{total_d:>10,} {total_f:>8,} {total_n:>8,} {total_d / total_f:>9.2f} "
        f"{statistics.median(r[2] for r in rows):>8.1f} {statistics.median(r[3] for r in rows):>8.1f}"
    )
    print(
        f"{'(ms: medians over tasks of each task median)':<28}\n"
        f"discovery / native {total_d / total_n:.2f}, full / native {total_f / total_n:.2f}\n"
    )
    print("queries whose tool was not the first hit (all were described):")
    for line in misses or ["  none"]:
        print(f"  {line}")
    catalog = ToolCatalog(github_registry(World()).schemas(with_output=True))
    print(f"\nprobe queries (rank of the tool among the top {SEARCH_LIMIT}; - : not found):")
    for query, wanted in PROBES:
        hits = [hit["name"] for hit in catalog.search(query, SEARCH_LIMIT)]
        rank = next((str(i + 1) for i, name in enumerate(hits) if name in wanted), "-")
        print(f"  {rank:>2}  {query!r:<40} wants {' or '.join(wanted)}; hits {', '.join(hits)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runtime", default="subprocess", choices=["subprocess", "in-process"])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    runtime = InProcessRuntime() if args.runtime == "in-process" else get_runtime(args.runtime)

    async def run() -> None:
        try:
            await bench(runtime, args.rounds)
        finally:
            await runtime.aclose()

    print(f"runtime {args.runtime}, {args.rounds} rounds per task and mode")
    anyio.run(run)


if __name__ == "__main__":
    main()
