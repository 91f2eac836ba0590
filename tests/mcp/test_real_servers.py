"""``connect_mcp`` against real MCP servers: ``mcp-server-time`` and ``mcp-server-git``
from PyPI, and the reference "everything" server from the npm registry.

What is checked is the mapping a user relies on: names, schemas kept whole,
annotations, the canonical value, content blocks, errors, progress, the
environment a server gets, and that nothing of a server outlives its block.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from ptc import CodeExecutor, ModelCall
from registry import (
    APPROVAL_UNAVAILABLE,
    MCP_OUTPUT,
    MCP_TOOL_ERROR,
    StdioServer,
    ToolCall,
    ToolRegistry,
    ask_before_destructive,
    connect_mcp,
)
from tests.mcp.helpers_servers import (
    GIT_COMMIT_MESSAGE,
    ServerCommand,
    everything_command,
    everything_missing,
    git_command,
    make_git_repository,
    time_command,
)

pytestmark = pytest.mark.anyio


def children() -> set[int]:
    """The pids of this process's live children (from /proc)."""
    me = os.getpid()
    found: set[int] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == me and fields[0] != b"Z":
            found.add(int(entry))
    return found


def stdio(command: ServerCommand) -> StdioServer:
    return StdioServer(command=command.command, args=command.args, env=dict(command.env))


def time_server() -> StdioServer:
    return stdio(time_command())


def call(name: str, arguments: dict[str, Any], call_id: str = "c1") -> ToolCall:
    return ToolCall(call_id=call_id, name=name, arguments=arguments)


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    """A git repository with one commit and one untracked file."""
    repo = make_git_repository(tmp_path / "repo")
    (repo / "new.txt").write_text("untracked\n")
    return repo


# --------------------------------------------------------------------------- mcp-server-time


async def test_time_server_tools_are_registered_faithfully_and_disposed_after() -> None:
    registry = ToolRegistry()
    before = children()
    async with connect_mcp(registry, {"time": time_server()}) as servers:
        connection = servers["time"]
        assert connection.alive and connection.tools == (
            "time.convert_time",
            "time.get_current_time",
        )
        assert servers.tools == connection.tools
        listed = {tool.name: tool for tool in (await connection.client.list_tools()).tools}
        for name in ("convert_time", "get_current_time"):
            definition = registry.get(f"time.{name}")
            assert definition is not None
            raw = listed[name]
            assert definition.description == raw.description
            assert dict(definition.parameters) == raw.input_schema  # kept whole
            assert raw.output_schema is not None
            assert dict(definition.output.schema) == raw.output_schema
            assert definition.annotations is not None
            assert definition.annotations.read_only is True  # readOnlyHint
            assert definition.annotations.destructive is False
            assert definition.concurrency_safe is True
        assert len(children() - before) == 1  # the server's process

        result = await registry.execute(call("time.get_current_time", {"timezone": "Asia/Tokyo"}))
        assert not result.is_error, result
        # structuredContent is the canonical value; the server's text is the content
        assert result.value["timezone"] == "Asia/Tokyo"
        assert result.value["datetime"].endswith("+09:00")
        assert result.content[0]["type"] == "text" and "Asia/Tokyo" in result.content[0]["text"]

        failed = await registry.execute(call("time.get_current_time", {"timezone": "Nowhere/X"}))
        assert failed.is_error and failed.error is not None and failed.error.info is not None
        assert failed.error.info.code == MCP_TOOL_ERROR
        assert "Nowhere/X" in failed.error.message  # the server's own message

        invalid = await registry.execute(call("time.get_current_time", {}))
        assert invalid.is_error and invalid.error is not None and invalid.error.info is not None
        assert invalid.error.info.code == "INVALID_ARGS"  # checked against inputSchema here
    assert registry.definitions() == []
    assert not connection.alive
    assert children() == before  # no server process outlives the block


async def test_a_program_fans_out_over_time_server_tools() -> None:
    registry = ToolRegistry()
    events: list[dict[str, Any]] = []
    async with (
        connect_mcp(registry, {"time": time_server()}),
        CodeExecutor(registry, on_event=events.append) as executor,
    ):
        sdk = executor.sdk_text()
        assert "    time: " in sdk and "    async def get_current_time(self, args: " in sdk
        result = await executor.run_code(
            """
import asyncio
zones = ["UTC", "Europe/Paris", "Asia/Tokyo", "America/New_York"]
times = await asyncio.gather(*[tools.time.get_current_time({"timezone": z}) for z in zones])
converted = await tools["time.convert_time"](
    {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}
)
return {"zones": [t["timezone"] for t in times], "tokyo": converted["target"]["datetime"]}
""",
            description="times",
        )
    assert not result.is_error, result
    assert result.value["result"]["zones"] == [
        "UTC",
        "Europe/Paris",
        "Asia/Tokyo",
        "America/New_York",
    ]
    assert "T21:00:00+09:00" in result.value["result"]["tokyo"]
    settled = [e for e in events if e["type"] == "tool/ptc-dispatch"]
    assert len(settled) == 5 and not any(e["is_error"] for e in settled)


# --------------------------------------------------------------------------- mcp-server-git


async def test_git_server_reads_a_repository_and_destructive_tools_are_asked_for(
    repository: Path,
) -> None:
    registry = ToolRegistry()
    registry.on_pre_execute(ask_before_destructive)
    async with (
        connect_mcp(registry, {"git": stdio(git_command(repository))}),
        CodeExecutor(registry) as executor,
    ):
        reset = registry.get("git.git_reset")
        assert reset is not None and reset.annotations is not None
        assert reset.annotations.may_destroy and reset.concurrency_safe is False
        status = registry.get("git.git_status")
        assert status is not None and status.concurrency_safe is True
        # no outputSchema: the documented canonical value
        assert dict(status.output.schema) == MCP_OUTPUT

        result = await executor.run_code(
            f"""
import asyncio
status, log = await asyncio.gather(
    tools.git.git_status({{"repo_path": {str(repository)!r}}}),
    tools.git.git_log({{"repo_path": {str(repository)!r}}}),
)
try:
    await tools.git.git_reset({{"repo_path": {str(repository)!r}}})
except ToolCallError as error:
    denied = error.code
return {{"status": status, "log": log, "denied": denied}}
""",
            description="status and log",
        )
    assert not result.is_error, result
    value = result.value["result"]
    assert "new.txt" in value["status"]  # the text content, as the server wrote it
    assert GIT_COMMIT_MESSAGE in value["log"]
    assert value["denied"] == APPROVAL_UNAVAILABLE


# --------------------------------------------------------------------------- server-everything

needs_everything = pytest.mark.skipif(
    everything_missing() is not None, reason=str(everything_missing())
)


def everything_server() -> StdioServer:
    return stdio(everything_command())


@needs_everything
async def test_everything_server_content_blocks_reach_the_model_unchanged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PTC_TEST_HOST_SECRET", "do-not-leak")
    registry = ToolRegistry()
    events: list[dict[str, Any]] = []
    async with (
        connect_mcp(registry, {"everything": everything_server()}) as servers,
        CodeExecutor(registry, mode="both", on_event=events.append) as executor,
    ):
        assert servers["everything"].protocol_version is not None
        batch = await executor.execute(
            [
                ModelCall(call_id="img", name="everything.get-tiny-image", arguments={}),
                ModelCall(
                    call_id="links", name="everything.get-resource-links", arguments={"count": 2}
                ),
                ModelCall(
                    call_id="ref",
                    name="everything.get-resource-reference",
                    arguments={"resourceType": "Text", "resourceId": 1},
                ),
            ]
        )
        image, links, ref = (entry.result for entry in batch.results)
        kinds = [block["type"] for block in image.content]
        assert kinds == ["text", "image", "text"]  # nothing turned into a string
        picture = image.content[1]
        assert picture["mimeType"] == "image/png" and picture["data"].startswith("iVBOR")
        assert [block["type"] for block in links.content] == [
            "text",
            "resource_link",
            "resource_link",
        ]
        assert links.content[1]["uri"].startswith("demo://resource/")
        embedded = next(block for block in ref.content if block["type"] == "resource")
        assert embedded["resource"]["uri"] == "demo://resource/dynamic/text/1"

        # a program gets the documented value: the list of blocks (several blocks)
        program = await executor.run_code(
            """
blocks = await tools["everything.get-tiny-image"]({})
structured = await tools["everything.get-structured-content"]({"location": "New York"})
env = await tools["everything.get-env"]({})
return {"kinds": [b["type"] for b in blocks], "structured": structured, "env": env}
""",
            description="values",
        )
    assert not program.is_error, program
    value = program.value["result"]
    assert value["kinds"] == ["text", "image", "text"]
    assert set(value["structured"]) >= {"temperature", "conditions", "humidity"}
    # the server's environment is the SDK's minimal one: no host secret
    assert isinstance(value["env"], dict) and "PATH" in value["env"]
    assert "PTC_TEST_HOST_SECRET" not in value["env"]


@needs_everything
async def test_everything_server_progress_becomes_events() -> None:
    registry = ToolRegistry()
    events: list[dict[str, Any]] = []
    async with (
        connect_mcp(registry, {"everything": everything_server()}),
        CodeExecutor(registry, on_event=events.append) as executor,
    ):
        result = await executor.run_code(
            'return await tools["everything.trigger-long-running-operation"]'
            '({"duration": 0.3, "steps": 3})',
            description="progress",
            call_id="run-p",
        )
    assert not result.is_error, result
    progress = [e for e in events if e["type"] == "tool/progress"]
    assert [(e["progress"], e["total"]) for e in progress] == [(1, 3), (2, 3), (3, 3)]
    assert {e["id"] for e in progress} == {"run-p:ptc:1"}
    order = [e["type"] for e in events if e.get("id") == "run-p:ptc:1"]
    assert order[0] == "tool/ptc-dispatch-start" and order[-1] == "tool/ptc-dispatch"
