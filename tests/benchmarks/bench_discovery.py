"""Discovery mode: index sizes, and the time of search and describe (target: search < 1 ms).

Run by hand: ``python tests/benchmarks/bench_discovery.py``. The tool sets are
the 117 GitHub MCP server schemas from ``tests/data`` and the synthetic,
namespaced sets of ``tests/sdkgen/synthetic.py`` (1,000 and 5,000 tools).
Prints the index text's size (characters / 4 as tokens), how long building the
catalog and its index take, and the median time of a query over a fixed list.
"""

from __future__ import annotations

import importlib.util
import json
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from sdkgen import ToolCatalog

ROUNDS = 30
HERE = Path(__file__).resolve().parent
CORPUS = HERE.parent / "data" / "github-mcp-server.json"
QUERIES = (
    "list invoices",
    "create customer eu",
    "export reports csv",
    "delete webhook",
    "search tickets",
    "archive employee hr",
    "billing",
    "get order by id",
    "update project deadline",
    "mail messages",
    "pull request review",
    "calendar events attendees",
)


def _synthetic() -> Callable[[int, int], list[dict[str, Any]]]:
    spec = importlib.util.spec_from_file_location(
        "synthetic", HERE.parent / "sdkgen" / "synthetic.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    generate: Callable[[int, int], list[dict[str, Any]]] = module.synthetic_tools
    return generate


def _ms(start: float) -> str:
    return f"{(time.perf_counter() - start) * 1000:7.1f} ms"


def _median_us(fn: Callable[[], object], rounds: int = ROUNDS) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def main() -> None:
    if not CORPUS.is_file():
        sys.exit(f"corpus missing: {CORPUS}")
    synthetic = _synthetic()
    sets = {
        "117 corpus": json.loads(CORPUS.read_text(encoding="utf-8")),
        "1,000 synthetic": synthetic(20, 50),
        "5,000 synthetic": synthetic(100, 50),
    }
    for label, tools in sets.items():
        start = time.perf_counter()
        catalog = ToolCatalog(tools)
        built = _ms(start)
        start = time.perf_counter()
        text = catalog.index_text()
        indexed = _ms(start)
        queries = (
            QUERIES if len(catalog) > 117 else ("create issue", "list pull requests", "star repo")
        )
        per_query = [_median_us(partial(catalog.search, q)) for q in queries]
        wide = [_median_us(partial(catalog.search, q, 100)) for q in queries]
        described = _median_us(partial(catalog.describe, catalog.names[len(catalog) // 2]))
        print(
            f"{label:>16}: index {len(text):>6,} chars ~{(len(text) + 3) // 4:>5,} tokens; "
            f"build {built}, index text {indexed} (the typed render, once)"
        )
        print(
            f"{'':>16}  search median {statistics.median(per_query):6.0f} us "
            f"(max of query medians {max(per_query):6.0f} us; target < 1,000), "
            f"limit=100 {statistics.median(wide):6.0f} us; describe {described:5.0f} us"
        )


if __name__ == "__main__":
    main()
