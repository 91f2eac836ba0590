"""Discovery mode through the executor: the index in the prompt, search/describe in the program.

The program's ``tools.search``/``tools.describe`` cross to the host like tool
calls and are answered from the catalog of the run's scope: scopes and
restrictions apply, a registry change is seen, nothing is logged as a
sub-dispatch. The sandboxed runtime and the in-process fake both run them.
"""

from __future__ import annotations

from typing import Any

import pytest

from ptc import CodeExecutor, Discovery, ExecutorConfigError
from ptc._discovery import answer_discovery
from registry import ToolDefinition, ToolOutput, ToolRegistry, ToolRunContext
from runtime import DESCRIBE_CALL, SEARCH_CALL, Runtime
from sdkgen import ToolCatalog, render_sdk

pytestmark = pytest.mark.anyio


def _tool(name: str, description: str, **properties: str) -> ToolDefinition:
    async def run(args: dict[str, Any], ctx: ToolRunContext) -> dict[str, Any]:
        return {"tool": name, "args": args}

    return ToolDefinition(
        name=name,
        description=description,
        parameters={
            "type": "object",
            "properties": {
                key: {"type": "string", "description": text} for key, text in properties.items()
            },
            "required": sorted(properties),
        },
        output=ToolOutput(schema={"type": "object"}),
        execute=run,
        concurrency_safe=True,
    )


def _registry(count: int = 0) -> ToolRegistry:
    reg = ToolRegistry()
    reg.register(_tool("issues.create", "Create an issue in a repository.", title="The title."))
    reg.register(_tool("issues.list", "List the issues of a repository.", repo="owner/name"))
    reg.register(_tool("pulls.merge", "Merge a pull request.", number="Its number."))
    for index in range(count):
        reg.register(_tool(f"filler.tool_{index:03}", f"Filler number {index}.", x="A value."))
    return reg


# --------------------------------------------------------------------------- the mode


def test_auto_mode_turns_discovery_on_above_the_tool_count() -> None:
    small = CodeExecutor(_registry(), runtime="subprocess")
    assert small.sdk_mode() == "full"
    assert small.sdk_text() == render_sdk(small.registry.schemas(with_output=True))
    large = CodeExecutor(_registry(38), runtime="subprocess")  # 41 tools > 40
    assert large.sdk_mode() == "discovery"
    assert large.sdk_text() == large.catalog().index_text()
    assert large.describe()["sections"]["tools:sdk"] == large.sdk_text()
    assert len(large.sdk_text()) < len(render_sdk(large.registry.schemas(with_output=True)))
    exactly = CodeExecutor(_registry(37), runtime="subprocess")  # 40: not above
    assert exactly.sdk_mode() == "full"


def test_auto_mode_turns_discovery_on_above_the_token_count() -> None:
    reg = ToolRegistry()
    for index in range(30):  # 30 tools (not above 40), each with 15 fields of its own
        fields = {
            f"field_{i}": f"What field {i} of tool {index} holds, said at length. " * 3
            for i in range(15)
        }
        reg.register(_tool(f"wordy_{index}", "A tool with many fields.", **fields))
    full = render_sdk(reg.schemas(with_output=True))
    assert len(full) // 4 > 8_000
    assert CodeExecutor(reg).sdk_mode() == "discovery"
    assert CodeExecutor(reg, discovery=Discovery(above_tokens=100_000)).sdk_mode() == "full"


def test_discovery_can_be_forced_either_way() -> None:
    assert CodeExecutor(_registry(), discovery=True).sdk_mode() == "discovery"
    assert CodeExecutor(_registry(), discovery=Discovery(mode="always")).sdk_mode() == "discovery"
    assert CodeExecutor(_registry(50), discovery=False).sdk_mode() == "full"
    with pytest.raises(ExecutorConfigError, match=r"Discovery\.mode"):
        CodeExecutor(_registry(), discovery=Discovery(mode="sometimes"))  # type: ignore[arg-type]
    with pytest.raises(ExecutorConfigError, match="above_tools"):
        CodeExecutor(_registry(), discovery=Discovery(above_tools=-1))
    with pytest.raises(ExecutorConfigError, match="discovery must be"):
        CodeExecutor(_registry(), discovery="yes")  # type: ignore[arg-type]


def test_the_index_is_byte_stable_whatever_the_registration_order() -> None:
    forward = _registry(45)
    backward = ToolRegistry()
    for definition in reversed(forward.definitions()):
        backward.register(definition)
    a, b = CodeExecutor(forward), CodeExecutor(backward)
    assert a.sdk_text() == b.sdk_text()
    assert a.sdk_text() == a.sdk_text()  # (cached and rebuilt alike)


def test_a_registry_change_is_seen_by_the_mode_and_the_catalog() -> None:
    reg = _registry(37)
    ex = CodeExecutor(reg)
    assert ex.sdk_mode() == "full"
    assert "pulls.merge" in ex.catalog()
    dispose = reg.register(_tool("more.tool", "One more."))
    assert ex.sdk_mode() == "discovery"
    assert "more.tool" in ex.catalog()
    dispose()
    assert ex.sdk_mode() == "full"
    assert "more.tool" not in ex.catalog()


# --------------------------------------------------------------------------- in the program

PROGRAM = """
hits = await tools.search("create an issue", limit=2)
text = await tools.describe(hits[0]["name"])
made = await tools.issues.create({"title": "x"})
return {"hits": hits, "text": text, "made": made}
"""


async def test_a_program_searches_describes_and_calls(any_runtime: Runtime) -> None:
    events: list[dict[str, Any]] = []
    async with CodeExecutor(_registry(45), runtime=any_runtime, on_event=events.append) as ex:
        result = await ex.run_code(PROGRAM, description="discover, then call")
    assert not result.is_error, result.content
    value = result.value["result"]
    assert value["hits"][0]["name"] == "issues.create"
    assert len(value["hits"]) <= 2
    assert value["text"] == ex.catalog().describe("issues.create")
    assert value["made"] == {"tool": "issues.create", "args": {"title": "x"}}
    # One sub-dispatch (the tool call); the two discovery calls are not tool calls.
    starts = [e["name"] for e in events if e["type"] == "tool/ptc-dispatch-start"]
    settles = [e["name"] for e in events if e["type"] == "tool/ptc-dispatch"]
    assert starts == settles == ["issues.create"]


async def test_search_and_describe_see_only_the_scope(any_runtime: Runtime) -> None:
    reg = _registry()
    reg.register(_tool("secret.rotate", "Rotate the secret keys."), scope="admin")
    reg.add_scope("agent")
    reg.restrict("agent", deny=["pulls.merge"])
    code = """
found = [hit["name"] for hit in await tools.search("rotate secret keys merge pull request")]
try:
    await tools.describe("pulls.merge")
except ToolCallError as exc:
    hidden = [exc.tool_name, exc.code]
return {"found": found, "hidden": hidden}
"""
    async with CodeExecutor(reg, runtime=any_runtime, discovery=True) as ex:
        admin = await ex.run_code(
            "return [h['name'] for h in await tools.search('rotate secret keys')]",
            description="admin search",
            scope="admin",
        )
        agent = await ex.run_code(code, description="agent search", scope="agent")
    assert admin.value["result"] == ["secret.rotate"]
    assert agent.value["result"] == {"found": [], "hidden": ["tools.describe", "UNKNOWN_TOOL"]}


async def test_bad_discovery_arguments_are_errors_the_program_can_catch(
    any_runtime: Runtime,
) -> None:
    code = """
out = []
for query, limit in (("", 5), ("issue", 0), ("issue", 10_000)):
    try:
        await tools.search(query, limit=limit)
        out.append(None)
    except ToolCallError as exc:
        out.append(exc.code)
try:
    await tools.describe("issues.craete")
except ToolCallError as exc:
    out.append([exc.code, "issues.create" in exc.message])
return out
"""
    async with CodeExecutor(_registry(), runtime=any_runtime) as ex:
        result = await ex.run_code(code, description="bad discovery")
    assert result.value["result"] == [
        "INVALID_ARGS",
        "INVALID_ARGS",
        "INVALID_ARGS",
        ["UNKNOWN_TOOL", True],
    ]


def test_a_workers_malformed_discovery_arguments_are_failures_not_exceptions() -> None:
    catalog = ToolCatalog(_registry().schemas(with_output=True))
    for name, args in (
        (SEARCH_CALL, None),
        (SEARCH_CALL, [1]),
        (SEARCH_CALL, {"query": 3}),
        (SEARCH_CALL, {"query": "issue", "limit": "9"}),
        (SEARCH_CALL, {"query": "issue", "extra": 1}),
        (DESCRIBE_CALL, {}),
        (DESCRIBE_CALL, {"name": ["issues.create"]}),
        (DESCRIBE_CALL, {"name": "issues.create", "more": 1}),
    ):
        answer = answer_discovery(catalog, name, args)
        assert not answer.ok, (name, args)
        assert answer.code == "INVALID_ARGS", (name, args, answer.message)
    found = answer_discovery(catalog, SEARCH_CALL, {"query": "merge"})
    assert found.ok and found.value[0]["name"] == "pulls.merge"
