"""Namespaced tools end to end: a registry holding ``git.status``, ``git.log`` and
``time.now``, the SDK a model reads, and a program calling ``tools.git.status``,
on the real workers (the subprocess worker and, where installed, Pyodide)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from ptc import CodeExecutor
from registry import ToolDefinition, ToolError, ToolOutput, ToolRegistry, ToolRunContext
from runtime import Runtime, SubprocessRuntime, get_runtime


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
    backend = SubprocessRuntime() if request.param == "subprocess" else get_runtime("pyodide")
    async with backend:
        yield backend


class Running:
    """How many tool bodies run at once, to see ``asyncio.gather`` overlap them."""

    def __init__(self) -> None:
        self.now = 0
        self.peak = 0
        self.all_in = anyio.Event()

    async def hold(self, count: int) -> None:
        self.now += 1
        self.peak = max(self.peak, self.now)
        if self.now >= count:
            self.all_in.set()
        try:
            with anyio.fail_after(5):
                await self.all_in.wait()
        finally:
            self.now -= 1


def _registry(running: Running) -> ToolRegistry:
    reg = ToolRegistry()
    repo = {"type": "object", "properties": {"repo_path": {"type": "string"}}}

    async def status(args: dict[str, Any], ctx: ToolRunContext) -> dict[str, Any]:
        if args["repo_path"] == "/missing":
            raise ToolError("no repository at /missing", code="NOT_FOUND")
        if args["repo_path"].startswith("/together"):
            await running.hold(3)
        return {"repo": args["repo_path"], "clean": True}

    async def log(args: dict[str, Any], ctx: ToolRunContext) -> list[str]:
        if args["repo_path"].startswith("/together"):
            await running.hold(3)
        return [f"commit {n} of {args['repo_path']}" for n in range(args.get("max_count", 1))]

    async def now(args: dict[str, Any], ctx: ToolRunContext) -> str:
        await running.hold(3)
        return "2026-01-01T00:00:00Z"

    for name, body, params, output in (
        ("git.status", status, repo, {"type": "object"}),
        ("git.log", log, repo, {"type": "array", "items": {"type": "string"}}),
        ("time.now", now, {"type": "object"}, {"type": "string"}),
    ):
        reg.register(
            ToolDefinition(
                name=name,
                description=f"The {name} tool.",
                parameters=params,
                output=ToolOutput(schema=output),
                execute=body,
                concurrency_safe=True,
            )
        )
    return reg


PROGRAM = """
import asyncio
status = await tools.git.status({"repo_path": "/r"})
log = await tools["git.log"]({"repo_path": "/r", "max_count": 2})
same = await tools.git["log"]({"repo_path": "/r"})
together = await asyncio.gather(
    tools.git.status({"repo_path": "/together/a"}),
    tools.time.now({}),
    tools.git.log({"repo_path": "/together/b"}),
)
try:
    await tools.git.status({"repo_path": "/missing"})
except ToolCallError as e:
    failure = [e.tool_name, e.code]
return {
    "status": status, "log": log, "same": same, "together": together, "failure": failure,
    "names": list(tools), "git": list(tools.git), "dir": dir(tools),
}
"""


@pytest.mark.anyio
async def test_a_program_calls_namespaced_tools_through_the_pipeline(runtime: Runtime) -> None:
    running = Running()
    events: list[dict[str, Any]] = []
    ex = CodeExecutor(_registry(running), runtime=runtime, on_event=events.append)
    result = await ex.run_code(PROGRAM, description="namespaced calls", call_id="ns")
    assert not result.is_error, result.content
    assert result.value["result"] == {
        "status": {"repo": "/r", "clean": True},
        "log": ["commit 0 of /r", "commit 1 of /r"],
        "same": ["commit 0 of /r"],
        "together": [
            {"repo": "/together/a", "clean": True},
            "2026-01-01T00:00:00Z",
            ["commit 0 of /together/b"],
        ],
        "failure": ["git.status", "NOT_FOUND"],
        "names": ["git.log", "git.status", "time.now"],
        "git": ["log", "status"],
        "dir": ["git", "time"],
    }
    assert running.peak == 3  # the gathered namespace calls overlapped
    starts = [e for e in events if e["type"] == "tool/ptc-dispatch-start"]
    assert [e["name"] for e in starts[:3]] == ["git.status", "git.log", "git.log"]
    assert sorted(e["name"] for e in starts[3:6]) == ["git.log", "git.status", "time.now"]
    assert [e["id"] for e in starts] == [f"ns:ptc:{n}" for n in range(1, 8)]


def test_the_sdk_shows_the_namespaces_the_program_uses() -> None:
    ex = CodeExecutor(_registry(Running()), runtime=SubprocessRuntime())  # never started
    sdk = ex.sdk_text()
    assert "class GitTools(Protocol):\n" in sdk
    assert "    async def status(self, args: GitStatusArgs) -> GitStatusResult:\n" in sdk
    assert "    async def log(self, args: GitLogArgs) -> GitLogResult:\n" in sdk
    assert "class TimeTools(Protocol):\n" in sdk
    assert "    git: GitTools\n    time: TimeTools\n" in sdk
    assert "__getitem__" not in sdk  # every name here is reached by attribute
