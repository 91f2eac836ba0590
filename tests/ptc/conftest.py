"""Fixtures for executor tests: a recording tool set and runtimes to run it on."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest

from registry import (
    ToolDefinition,
    ToolError,
    ToolOutput,
    ToolRegistry,
    ToolRunContext,
)
from runtime import Runtime
from runtime.testing import InProcessRuntime


@dataclass
class Recorder:
    """What the tools saw: (event, name, arg) in order, and how many ran at once."""

    log: list[tuple[str, str, Any]] = field(default_factory=list)
    running: int = 0
    peak: int = 0
    cleanups: int = 0
    gates: dict[str, anyio.Event] = field(default_factory=dict)
    waiters: list[tuple[int, anyio.Event]] = field(default_factory=list)

    def when_running(self, count: int) -> anyio.Event:
        """An event set once ``count`` tool bodies are running at the same time."""
        event = anyio.Event()
        self.waiters.append((count, event))
        return event

    def _started(self) -> None:
        self.running += 1
        self.peak = max(self.peak, self.running)
        for count, event in self.waiters:
            if self.running >= count:
                event.set()

    def gate(self, key: str) -> anyio.Event:
        if key not in self.gates:
            self.gates[key] = anyio.Event()
        return self.gates[key]


def make_tools(recorder: Recorder) -> ToolRegistry:
    """``read`` (safe, waits ``delay`` or a gate), ``write`` (exclusive), ``fail``, ``ctx_tool``."""
    reg = ToolRegistry()

    async def read(args: dict[str, Any], ctx: ToolRunContext) -> str:
        key = args["key"]
        recorder.log.append(("start", "read", key))
        recorder._started()
        try:
            if "gate" in args:
                await recorder.gate(args["gate"]).wait()
            else:
                await anyio.sleep(args.get("delay", 0))
        finally:
            recorder.running -= 1
            recorder.cleanups += 1
            recorder.log.append(("end", "read", key))
        return f"value-of-{key}"

    async def write(args: dict[str, Any], ctx: ToolRunContext) -> dict[str, Any]:
        recorder.log.append(("start", "write", args["key"]))
        recorder._started()
        try:
            await anyio.sleep(args.get("delay", 0))
        finally:
            recorder.running -= 1
            recorder.cleanups += 1
            recorder.log.append(("end", "write", args["key"]))
        return {"written": args["key"]}

    async def fail(args: dict[str, Any], ctx: ToolRunContext) -> None:
        raise ToolError(args.get("why", "it broke"), code="BROKEN")

    async def ctx_tool(args: dict[str, Any], ctx: ToolRunContext) -> int:
        ctx.defer_context({"note": args["note"]})
        return 1

    key_schema = {
        "type": "object",
        "properties": {
            "key": {"type": "string"},
            "delay": {"type": "number"},
            "gate": {"type": "string"},
        },
        "required": ["key"],
    }
    reg.register(
        ToolDefinition(
            name="read",
            description="Read a key.",
            parameters=key_schema,
            output=ToolOutput(schema={"type": "string"}),
            execute=read,
            concurrency_safe=True,
        )
    )
    reg.register(
        ToolDefinition(
            name="write",
            description="Write a key.",
            parameters=key_schema,
            output=ToolOutput(schema={"type": "object"}),
            execute=write,
        )
    )
    reg.register(
        ToolDefinition(
            name="fail",
            description="Always fails.",
            parameters={"type": "object", "properties": {"why": {"type": "string"}}},
            output=ToolOutput(schema={"type": "null"}),
            execute=fail,
            concurrency_safe=True,
        )
    )
    reg.register(
        ToolDefinition(
            name="ctx_tool",
            description="Defers a context.",
            parameters={
                "type": "object",
                "properties": {"note": {"type": "string"}},
                "required": ["note"],
            },
            output=ToolOutput(schema={"type": "integer"}),
            execute=ctx_tool,
            concurrency_safe=True,
        )
    )
    return reg


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def tools(recorder: Recorder) -> ToolRegistry:
    return make_tools(recorder)


def _runtime_names() -> list[Any]:
    names: list[Any] = ["inprocess"]
    try:
        from runtime import SubprocessRuntime  # noqa: F401
    except ImportError:
        return names
    names.append("subprocess")
    return names


@pytest.fixture(params=_runtime_names())
async def any_runtime(request: pytest.FixtureRequest) -> AsyncIterator[Runtime]:
    """The fake in-process runtime and, where available, the real sandboxed one."""
    if request.param == "inprocess":
        yield InProcessRuntime()
        return
    from runtime import SubprocessRuntime

    rt = SubprocessRuntime()
    try:
        yield rt
    finally:
        await rt.aclose()
