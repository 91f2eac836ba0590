"""A program can branch on why a tool call failed: ``ToolCallError.code``, end to end,
on every runtime (the fake, the subprocess worker and, where installed, Pyodide)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Any

import pytest

from ptc import CodeExecutor
from registry import (
    Deny,
    ToolDefinition,
    ToolError,
    ToolExecution,
    ToolOutput,
    ToolRegistry,
    ToolRunContext,
)
from runtime import Runtime, SubprocessRuntime, get_runtime
from runtime.testing import InProcessRuntime

pytestmark = pytest.mark.anyio


def _pyodide_unusable() -> bool:
    # In CI the worker must be installed (never skip there); elsewhere say why it is skipped.
    from runtime import pyodide_status

    return not os.environ.get("CI") and pyodide_status()["usable"] != "yes"


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(
    scope="module",
    params=[
        "inprocess",
        "subprocess",
        pytest.param(
            "pyodide",
            marks=[
                pytest.mark.pyodide,
                pytest.mark.skipif(
                    _pyodide_unusable(), reason="Pyodide not installed: ptc runtime install pyodide"
                ),
            ],
        ),
    ],
)
async def runtime(request: pytest.FixtureRequest) -> AsyncIterator[Runtime]:
    if request.param == "inprocess":
        yield InProcessRuntime()
        return
    backend = SubprocessRuntime() if request.param == "subprocess" else get_runtime("pyodide")
    async with backend:
        yield backend


def _registry() -> ToolRegistry:
    reg = ToolRegistry(enforce_timeouts=True)

    async def get_doc(args: dict[str, Any], ctx: ToolRunContext) -> str:
        raise ToolError(f"no doc with id {args['doc_id']!r}", code="NOT_FOUND")

    async def slow(args: dict[str, Any], ctx: ToolRunContext) -> str:
        import anyio

        await anyio.sleep(5)
        return "never"

    async def crash(args: dict[str, Any], ctx: ToolRunContext) -> str:
        raise RuntimeError("a bug in the tool")

    async def write(args: dict[str, Any], ctx: ToolRunContext) -> str:
        return "written"

    for name, body, params, timeout in (
        ("get_doc", get_doc, {"doc_id": {"type": "string"}}, None),
        ("slow", slow, {}, 0.05),
        ("crash", crash, {}, None),
        ("write", write, {}, None),
        ("search_docs", write, {"query": {"type": "string"}}, None),
    ):
        reg.register(
            ToolDefinition(
                name=name,
                description=name,
                parameters={"type": "object", "properties": params},
                output=ToolOutput(schema={"type": "string"}),
                execute=body,
                timeout=timeout,
            )
        )

    async def no_writes(execution: ToolExecution, call_next: Any) -> Any:
        if execution.name == "write":
            return Deny("writes are frozen today")
        return await call_next()

    reg.on_pre_execute(no_writes)
    return reg


PROGRAM = """
out = []
for name, args in [
    ("get_doc", {"doc_id": "nope"}),
    ("slow", {}),
    ("write", {}),
    ("search_docs", {"query": 5}),
    ("crash", {}),
]:
    try:
        await tools[name](args)
    except ToolCallError as e:
        if e.code == "NOT_FOUND":
            out.append("fallback for " + e.tool_name)
        out.append([e.tool_name, e.code, str(e)])
return out
"""


async def test_a_program_branches_on_the_failure_code(runtime: Runtime) -> None:
    ex = CodeExecutor(_registry(), runtime=runtime)
    result = await ex.run_code(PROGRAM)
    assert not result.is_error, result.content
    out = result.value["result"]
    assert out[0] == "fallback for get_doc"
    assert out[1] == ["get_doc", "NOT_FOUND", "get_doc: no doc with id 'nope'"]
    assert out[2][:2] == ["slow", "TOOL_TIMEOUT"]
    assert out[3] == ["write", "TOOL_DENIED", "write: writes are frozen today"]
    # The message names the tool already: str() does not say it twice.
    assert out[4][:2] == ["search_docs", "INVALID_ARGS"]
    assert out[4][2].startswith("invalid arguments for search_docs: ")
    assert out[5] == ["crash", None, "crash: RuntimeError: a bug in the tool"]


async def test_an_uncaught_failure_names_the_tool_once_in_the_traceback(runtime: Runtime) -> None:
    ex = CodeExecutor(_registry(), runtime=runtime)
    result = await ex.run_code("await tools.search_docs({'query': 5})")
    assert result.is_error
    assert "ToolCallError: invalid arguments for search_docs: " in result.error.message
    assert "search_docs: invalid arguments for search_docs" not in result.error.message


def test_the_sdk_declares_the_code() -> None:
    text = CodeExecutor(_registry(), runtime=InProcessRuntime()).sdk_text()
    assert "    code: str | None  # the failure's stable code" in text
    assert "whose `code` is the failure's stable code" in text
