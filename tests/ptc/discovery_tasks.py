"""A scripted task suite over the GitHub corpus: discovery mode against full mode and native tools.

Each :class:`Task` (the suite's are in ``github_tasks``) is a goal a user could
give an agent with the 117 GitHub MCP tools, a scripted "model" and a check of
its answer against the fake GitHub of ``github_world`` (and of that world after
a mutation).

The scripted model, in discovery mode, writes at most two programs:

1. :func:`discovery_program` searches for each of the task's needs (the query
   a model would write from the goal), prints the signatures of the top
   :data:`DESCRIBED` hits of each query and returns the hit names;
2. :func:`pick` reads that output: for each need it takes the tool's name from
   the hits (it must be there, and described — a ranking miss fails the task)
   and checks that every argument name the second program relies on is in the
   signature it read; the task's ``program`` is then written from those names.

In full mode the model already sees every signature: it writes the second
program only, with the same names. With native JSON tools it makes the same
tool calls one by one, each result entering its context: :func:`accounting`
replays the calls the world logged.

Tokens are characters / 4 (rounded up), like ``ptc.Discovery``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from ptc import CodeExecutor
from registry import ToolResult
from runtime import Runtime
from tests.ptc.github_world import Call, World, github_registry

#: How many hits of each query program 1 searches for, and how many it describes.
SEARCH_LIMIT = 5
DESCRIBED = 3


@dataclass(frozen=True, slots=True)
class Need:
    """One tool a task needs: how the model looks for it and what it relies on.

    ``role`` names it in the program template; ``query`` is the search a model
    would write from the goal; ``tool`` the tool it means to pick from the hits;
    ``uses`` the argument names (and enum values) program 2 passes, each of
    which must be in the signature that program 1 printed.
    """

    role: str
    query: str
    tool: str
    uses: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Task:
    """A goal, the tools it needs, program 2's template and the check of the outcome."""

    key: str
    goal: str
    needs: tuple[Need, ...]
    program: Callable[[Mapping[str, str]], str]
    check: Callable[[Any, World], None]


@dataclass
class Run:
    """One program as the model wrote it and what came back to it."""

    code: str
    description: str
    content: str
    value: Any
    seconds: float


@dataclass
class Outcome:
    """A task solved in one mode: the programs, the answer, the world after, the calls."""

    task: Task
    mode: str
    runs: list[Run] = field(default_factory=list)
    answer: Any = None
    world: World = field(default_factory=World)
    ranks: dict[str, int | None] = field(default_factory=dict)
    model_input: int = 0  # characters of the model input (tool schemas + sections)

    @property
    def calls(self) -> list[Call]:
        return self.world.calls


class RankingMiss(AssertionError):
    """The tool a need means was not among the described hits of its query."""


def tokens(chars: int) -> int:
    """Characters as tokens (characters / 4, rounded up)."""
    return (chars + 3) // 4


def discovery_program(task: Task) -> str:
    """Program 1: search each need's query, print the top hits' signatures, return the names."""
    queries = list(dict.fromkeys(need.query for need in task.needs))
    return (
        f"queries = {queries!r}\n"
        "found = {}\n"
        "for query in queries:\n"
        f"    hits = await tools.search(query, limit={SEARCH_LIMIT})\n"
        '    found[query] = [hit["name"] for hit in hits]\n'
        f"for name in dict.fromkeys(n for names in found.values() for n in names[:{DESCRIBED}]):\n"
        "    print(await tools.describe(name))\n"
        "return found\n"
    )


def pick(
    task: Task, learned: Mapping[str, Any], printed: str
) -> tuple[dict[str, str], dict[str, int | None]]:
    """The tool names program 2 uses, read from program 1's output, and each query's rank.

    Raises:
        RankingMiss: a need's tool is not among its query's described hits.
        AssertionError: a name program 2 relies on is not in the signature read.
    """
    names: dict[str, str] = {}
    ranks: dict[str, int | None] = {}
    for need in task.needs:
        hits = list(learned[need.query])
        rank = hits.index(need.tool) + 1 if need.tool in hits else None
        ranks[need.query] = rank
        if rank is None or rank > DESCRIBED:
            raise RankingMiss(
                f"{task.key}: {need.tool} is not among the described hits of {need.query!r}: {hits}"
            )
        name = hits[rank - 1]
        head = f'# "{name}": '
        start = printed.find(head)
        assert start >= 0, f"{task.key}: program 1 printed no signature for {name}"
        end = printed.find('\n# "', start + 1)
        signature = printed[start : end if end >= 0 else len(printed)]
        for word in need.uses:
            assert word in signature, f"{task.key}: {word!r} is not in the signature of {name}"
        names[need.role] = name
    return names, ranks


def rendered(result: ToolResult) -> str:
    """The text the model reads for a ``run_code`` result."""
    return "".join(block.get("text", "") for block in result.content if block.get("type") == "text")


def model_input(executor: CodeExecutor) -> int:
    """Characters of the model input: tool schemas (compact JSON) and prompt sections."""
    described = executor.describe()
    return len(orjson.dumps(described["tools"])) + sum(
        len(text) for text in described["sections"].values()
    )


async def _run(executor: CodeExecutor, code: str, description: str) -> Run:
    start = time.perf_counter()
    result = await executor.run_code(code, description=description)
    seconds = time.perf_counter() - start
    assert not result.is_error, rendered(result)
    return Run(
        code=code,
        description=description,
        content=rendered(result),
        value=result.value,
        seconds=seconds,
    )


async def solve(task: Task, runtime: Runtime, *, discovery: bool) -> Outcome:
    """Solve ``task`` on a fresh world: two programs in discovery mode, one in full mode."""
    outcome = Outcome(task=task, mode="discovery" if discovery else "full")
    world = outcome.world
    async with CodeExecutor(github_registry(world), runtime=runtime, discovery=discovery) as ex:
        assert ex.sdk_mode() == outcome.mode
        outcome.model_input = model_input(ex)
        if discovery:
            first = await _run(ex, discovery_program(task), f"find the tools to {task.key}")
            outcome.runs.append(first)
            assert not world.calls, "program 1 only searches and describes"
            printed = "\n".join(first.value["logs"])
            names, outcome.ranks = pick(task, first.value["result"], printed)
        else:
            names = {need.role: need.tool for need in task.needs}
        second = await _run(ex, task.program(names), task.goal)
        outcome.runs.append(second)
    outcome.answer = second.value["result"]
    task.check(outcome.answer, world)
    return outcome


def program_chars(outcome: Outcome) -> int:
    """Characters of what the model wrote (code and description) and read back."""
    return sum(len(run.code) + len(run.description) + len(run.content) for run in outcome.runs)


def native_chars(calls: list[Call], schemas: list[dict[str, Any]]) -> int:
    """Characters with native JSON tools: every schema, then each call's arguments and result."""
    total = len(orjson.dumps(schemas))
    for call in calls:
        total += len(call.name) + len(orjson.dumps(call.args))
        total += len(call.error) if call.error is not None else len(orjson.dumps(call.value))
    return total


@dataclass(frozen=True, slots=True)
class Accounting:
    """One task's prompt-plus-result tokens in each mode."""

    key: str
    discovery: int
    full: int
    native: int
    calls: int


def accounting(
    discovered: Outcome, full: Outcome, native_schemas: list[dict[str, Any]]
) -> Accounting:
    """The token figures of one task from its discovery-mode and full-mode outcomes."""
    return Accounting(
        key=discovered.task.key,
        discovery=tokens(discovered.model_input + program_chars(discovered)),
        full=tokens(full.model_input + program_chars(full)),
        native=tokens(native_chars(full.calls, native_schemas)),
        calls=len(full.calls),
    )
