"""The scripted GitHub task suite (issue 19): every task solved in discovery mode in two programs.

The tasks are in ``github_tasks``, the scripted model and the token
accounting in ``discovery_tasks``; the fake GitHub behind the 117 real tool schemas is
``github_world``. The figures per task are printed by
``tests/benchmarks/bench_discovery_tasks.py``.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from ptc import CodeExecutor
from runtime import Runtime
from runtime.testing import InProcessRuntime
from tests.ptc.discovery_tasks import (
    DESCRIBED,
    Need,
    RankingMiss,
    Task,
    accounting,
    discovery_program,
    native_chars,
    pick,
    solve,
    tokens,
)
from tests.ptc.github_tasks import TASKS
from tests.ptc.github_world import Call, World, github_registry, load_corpus

pytestmark = pytest.mark.anyio

BY_KEY = {task.key: task for task in TASKS}
#: Solved on the real sandbox too: gather and ToolCallError handling, a merge
#: after reads, a three-step write, a stdlib import.
SANDBOXED = (
    "latest-release-per-repo",
    "merge-approved-pr",
    "fix-typo-on-a-branch",
    "package-version",
)


def test_the_suite_has_at_least_twenty_varied_tasks() -> None:
    assert len(TASKS) >= 20
    assert len(BY_KEY) == len(TASKS)
    used = {need.tool for task in TASKS for need in task.needs}
    assert len(used) >= 30
    answered = {name for name in used if callable(getattr(World(), name, None))}
    assert answered == used  # every tool a task uses answers from the world


def test_the_world_registers_the_whole_corpus_with_its_real_schemas() -> None:
    corpus = load_corpus()
    reg = github_registry(World())
    definitions = {d.name: d for d in reg.definitions()}
    assert len(definitions) == len(corpus) == 117
    for entry in corpus:
        definition = definitions[entry["name"]]
        assert definition.parameters == entry["inputSchema"]
        read_only = entry["annotations"].get("readOnlyHint") is True
        assert definition.concurrency_safe is read_only, entry["name"]
    assert CodeExecutor(reg).sdk_mode() == "discovery"  # 117 tools: on by default


async def test_real_validation_applies_and_unused_tools_answer_a_fixture() -> None:
    world = World()
    code = """
out = {}
try:
    await tools.merge_pull_request({"owner": "acme", "repo": "widgets", "pullNumber": "10"})
except ToolCallError as exc:
    out["string number"] = exc.code
try:
    await tools.get_latest_release({"owner": "acme", "repo": "docs"})
except ToolCallError as exc:
    out["no release"] = exc.code
out["unused"] = await tools.get_gist({"gist_id": "abc"})
return out
"""
    async with CodeExecutor(github_registry(world), runtime=InProcessRuntime()) as ex:
        result = await ex.run_code(code, description="validation and fixtures")
    assert not result.is_error, result.content
    value = result.value["result"]
    assert value["string number"] == "INVALID_ARGS"
    assert value["no release"] == "NOT_FOUND"
    assert value["unused"]["items"] == []
    assert [call.name for call in world.calls] == ["get_latest_release", "get_gist"]
    assert not world.repos["acme/widgets"]["pulls"][10]["merged"]


@pytest.mark.parametrize("task", TASKS, ids=lambda task: task.key)
async def test_each_task_is_solved_in_discovery_mode_in_two_programs(task: Task) -> None:
    outcome = await solve(task, InProcessRuntime(), discovery=True)
    assert len(outcome.runs) == 2
    assert outcome.runs[0].code == discovery_program(task)
    for need in task.needs:  # the names came from the hits: each was found and described
        rank = outcome.ranks[need.query]
        assert rank is not None and rank <= DESCRIBED
        assert need.tool in outcome.runs[1].code
    assert outcome.calls, "program 2 called the tools"


@pytest.mark.parametrize("key", SANDBOXED)
async def test_some_tasks_are_solved_on_the_sandboxed_runtime(key: str) -> None:
    from runtime import SubprocessRuntime

    runtime: Runtime = SubprocessRuntime()
    try:
        outcome = await solve(BY_KEY[key], runtime, discovery=True)
    finally:
        await runtime.aclose()
    assert len(outcome.runs) == 2


async def test_the_suite_costs_fewer_tokens_in_discovery_mode_than_in_full_mode() -> None:
    schemas = github_registry(World()).schemas()
    figures = []
    for task in TASKS:
        discovered = await solve(task, InProcessRuntime(), discovery=True)
        full = await solve(task, InProcessRuntime(), discovery=False)
        assert len(full.runs) == 1
        assert full.answer == discovered.answer
        # Native tools make the same calls (parallel ones in any order).
        assert Counter(c.name for c in full.calls) == Counter(c.name for c in discovered.calls)
        figures.append(accounting(discovered, full, schemas))
    discovery = sum(f.discovery for f in figures)
    full_total = sum(f.full for f in figures)
    native = sum(f.native for f in figures)
    assert discovery < full_total < native
    assert discovery * 3 < full_total  # not merely below: the index is an order smaller
    index = CodeExecutor(github_registry(World()), discovery=True).sdk_text()
    assert tokens(len(index)) < 3_000


def test_a_ranking_miss_fails_the_task_and_a_missing_argument_too() -> None:
    need = Need("list", "list issues", "list_issues", ("owner", "state"))
    task = Task("t", "goal", (need,), lambda names: "", lambda answer, world: None)
    signature = '# "list_issues": `await tools.list_issues(args)`\n    owner: str\n    state: str\n'
    names, ranks = pick(task, {"list issues": ["list_label", "list_issues"]}, signature)
    assert names == {"list": "list_issues"} and ranks == {"list issues": 2}
    with pytest.raises(RankingMiss, match="list_issues"):
        pick(task, {"list issues": ["list_label", "search_issues"]}, signature)
    too_far = ["a", "b", "c", "list_issues"]
    assert len(too_far) > DESCRIBED
    with pytest.raises(RankingMiss):
        pick(task, {"list issues": too_far}, signature)
    with pytest.raises(AssertionError, match="'state' is not in the signature"):
        pick(task, {"list issues": ["list_issues"]}, signature.replace("state", "status"))


def test_native_accounting_counts_every_schema_and_each_call() -> None:
    schemas: list[dict[str, Any]] = [{"name": "x", "description": "d", "parameters": {}}]
    base = native_chars([], schemas)
    assert base == len('[{"name":"x","description":"d","parameters":{}}]')
    calls = [Call(name="x", args={"a": 1}, value=[1, 2]), Call(name="x", args={}, error="boom")]
    assert native_chars(calls, schemas) == base + 1 + 7 + 5 + 1 + 2 + 4
