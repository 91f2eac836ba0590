"""The executor at the registry's boundary: scopes that do not exist, names the SDK
does not declare, and what a program receives from a sub-call."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ptc import CodeExecutor, ModelCall
from registry import (
    UNKNOWN_TOOL,
    ToolDefinition,
    ToolExecution,
    ToolOutput,
    ToolRegistry,
    ToolResult,
    ToolRunContext,
    UnknownScopeError,
)
from runtime.testing import InProcessRuntime

pytestmark = pytest.mark.anyio


def _executor(reg: ToolRegistry, **kwargs: Any) -> tuple[CodeExecutor, list[dict[str, Any]]]:
    events: list[dict[str, Any]] = []
    return CodeExecutor(reg, runtime=InProcessRuntime(), on_event=events.append, **kwargs), events


# ----------------------------------------------------------------------------- unknown scopes


@pytest.mark.parametrize("mode", ["code", "both", "native"])
def test_describe_for_a_scope_that_does_not_exist_raises(tools: ToolRegistry, mode: Any) -> None:
    tools.add_scope("agent-1")
    ex, _ = _executor(tools, mode=mode)
    assert ex.describe(scope="agent-1")["tools"]
    with pytest.raises(
        UnknownScopeError, match=r"unknown scope 'agent-2' \(did you mean 'agent-1'\?\)"
    ):
        ex.describe(scope="agent-2")
    with pytest.raises(UnknownScopeError):
        ex.sdk_text("agent-2")
    with pytest.raises(UnknownScopeError):
        tools.schemas("agent-2")


async def test_running_in_a_scope_that_does_not_exist_raises_before_any_event(
    tools: ToolRegistry,
) -> None:
    ex, events = _executor(tools)
    call = ModelCall(
        call_id="1", name="run_code", arguments={"code": "return 1", "description": ""}
    )
    with pytest.raises(UnknownScopeError):
        await ex.execute([call], scope="typo")
    with pytest.raises(UnknownScopeError):
        await ex.run_code("return 1", scope="typo")
    assert events == []


@pytest.mark.parametrize("command", ["tools", "sdk", "run"])
def test_the_cli_says_a_scope_does_not_exist_in_one_line(command: str) -> None:
    from typer.testing import CliRunner

    from ptc._cli import app

    examples = Path(__file__).parents[2] / "examples"
    spec = f"{examples / 'tools.py'}:registry"
    program = [str(examples / "programs" / "fanout_search.py")] if command == "run" else []
    out = CliRunner().invoke(app, [command, *program, "--tools", spec, "--scope", "typo"])
    assert out.exit_code == 2, out.output
    assert out.output.strip().splitlines() == [
        "ptc: error: unknown scope 'typo'; no scopes are declared (add_scope() declares one)"
    ]


# ----------------------------------------------------------------------------- the route back


@pytest.mark.parametrize("name", ["write", "no_such_tool"])
async def test_a_name_the_sdk_does_not_declare_gets_a_plain_unknown_tool(
    tools: ToolRegistry, name: str
) -> None:
    # ``write`` is restricted away for the agent, ``no_such_tool`` never existed:
    # routing either back into a program would send the model to a dead end.
    tools.restrict("agent", deny=["write"])
    ex, _ = _executor(tools)
    assert f"def {name}" not in ex.sdk_text("agent")
    batch = await ex.execute([ModelCall(call_id="1", name=name, arguments={})], scope="agent")
    result = batch.results[0].result
    assert result.is_error and result.error.info is not None
    assert result.error.info.code == UNKNOWN_TOOL
    assert result.error.message == f"unknown tool {name!r}; only `run_code` is callable directly"
    visible = await ex.execute([ModelCall(call_id="2", name="read", arguments={})], scope="agent")
    assert (
        "call `read` from inside a `run_code` program"
        in visible.results[0].result.content[0]["text"]
    )


# ----------------------------------------------------------------------------- sub-call values


def _items_tool(reg: ToolRegistry, meta: Any = None) -> None:
    async def items(args: Any, ctx: ToolRunContext) -> Any:
        return {"items": [1, 2]}

    reg.register(
        ToolDefinition(
            name="items",
            description="Two items.",
            parameters={"type": "object"},
            output=ToolOutput(
                schema={
                    "type": "object",
                    "properties": {"items": {"type": "array", "items": {"type": "integer"}}},
                    "additionalProperties": False,
                },
                meta=meta,
            ),
            execute=items,
            concurrency_safe=True,
        )
    )


async def test_a_program_receives_the_validated_value_whatever_a_listener_did() -> None:
    reg = ToolRegistry()
    _items_tool(reg)

    async def post(execution: ToolExecution, result: ToolResult, call_next: Any) -> Any:
        if execution.name == "items" and not result.is_error:
            result.value["items"].append("not an integer")
            result.value["extra"] = True
        return await call_next()

    reg.on_post_execute(post)
    ex, events = _executor(reg)
    r = await ex.run_code("return await tools.items({})")
    assert r.value == {"logs": [], "result": {"items": [1, 2]}}
    (settled,) = [e for e in events if e["type"] == "tool/ptc-dispatch"]
    assert settled["content"] == [
        {"type": "text", "text": '{\n  "items": [\n    1,\n    2\n  ]\n}'}
    ]


async def test_meta_is_not_computed_for_a_programs_sub_calls() -> None:
    computed: list[Any] = []

    def meta(args: Any, value: Any) -> Any:
        computed.append(value)
        return {"count": len(value["items"])}

    reg = ToolRegistry()
    _items_tool(reg, meta=meta)
    ex, _ = _executor(reg, mode="both")
    r = await ex.run_code("return await tools.items({})")
    assert r.value == {"logs": [], "result": {"items": [1, 2]}}
    assert computed == []
    batch = await ex.execute([ModelCall(call_id="1", name="items", arguments={})])
    assert batch.results[0].result.meta == {"count": 2}
    assert len(computed) == 1
