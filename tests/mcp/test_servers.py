"""What the real MCP test servers do, seen through the SDK's own ``mcp.Client``.

These pin the raw behaviour the project's MCP client is tested against: the protocol
version each server negotiates, the exact result shapes of the fault tools, and what
the SDK client itself does when a server crashes, hangs, breaks its output schema or
changes its tool list. When an SDK or server upgrade changes any of it, these fail first.
"""

from __future__ import annotations

import base64
import io
import json
import struct
import wave
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client, MCPError
from mcp.client.subscriptions import ListenNotSupportedError
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.subscriptions import ToolsListChanged
from mcp_types import CONNECTION_CLOSED, INVALID_PARAMS, REQUEST_TIMEOUT

from tests.mcp.helpers_servers import (
    GIT_COMMIT_MESSAGE,
    HANDSHAKE,
    MODERN,
    ServerCommand,
    faults_command,
    faults_http,
    read_lines,
    stdio_parameters,
    wait_for_line,
)

pytestmark = pytest.mark.anyio

FAULT_TOOLS = {
    "echo",
    "header",
    "add",
    "bad_output",
    "fail",
    "protocol_error",
    "crash",
    "hang",
    "slow",
    "progress",
    "media",
    "destroy",
    "env",
    "add_tool",
    "remove_tool",
}

# (server flags, client mode, the version they settle on)
ERAS = {
    "modern": ((), "auto", MODERN),
    "legacy-server": (("--legacy",), "auto", HANDSHAKE),
    "legacy-client": ((), "legacy", HANDSHAKE),
}
STDIO_ERAS = pytest.mark.parametrize("flags", [(), ("--legacy",)], ids=["modern", "legacy"])


def _text(result: types.CallToolResult) -> str:
    assert len(result.content) == 1
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


def _started_hang() -> tuple[anyio.Event, ProgressFnT]:
    """An event the hang tool's first progress report sets, and the callback to pass."""
    started = anyio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        if message == "started hang":
            started.set()

    return started, on_progress


async def _cancel_a_hang(client: Client) -> None:
    """Call hang, wait until the server runs it, then cancel the call."""
    started, on_progress = _started_hang()
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: client.call_tool("hang", {}, progress_callback=on_progress))
        with anyio.fail_after(10):
            await started.wait()
        tg.cancel_scope.cancel()


# The fault server over stdio.


@pytest.mark.parametrize("era", ERAS.values(), ids=ERAS.keys())
async def test_fault_tools_answer_in_their_raw_shapes(
    era: tuple[tuple[str, ...], str, str], faults_log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    flags, mode, version = era
    monkeypatch.setenv("FAULTS_TEST_INHERITED", "from the test process")
    server = faults_command(*flags, log=faults_log, env={"FAULTS_TEST_PASSED": "passed"})
    async with Client(stdio_parameters(server), mode=mode) as client:
        assert client.protocol_version == version
        assert client.server_info is not None
        assert client.server_info.name == "faults"
        assert client.server_capabilities.tools is not None
        assert client.server_capabilities.tools.list_changed is True

        listing = await client.list_tools()
        assert listing.next_cursor is None
        tools = {tool.name: tool for tool in listing.tools}
        assert set(tools) == FAULT_TOOLS
        assert tools["echo"].annotations == types.ToolAnnotations(read_only_hint=True)
        assert tools["destroy"].annotations == types.ToolAnnotations(
            read_only_hint=False, destructive_hint=True
        )
        assert tools["add"].output_schema == tools["bad_output"].output_schema
        assert tools["add"].output_schema == {
            "type": "object",
            "properties": {"sum": {"type": "number"}},
            "required": ["sum"],
        }

        echo = await client.call_tool("echo", {"text": "hi"})
        assert echo.is_error is False
        assert echo.structured_content is None
        assert _text(echo) == "hi"

        added = await client.call_tool("add", {"a": 2, "b": 3.5})
        assert added.structured_content == {"sum": 5.5}
        assert json.loads(_text(added)) == {"sum": 5.5}

        failed = await client.call_tool("fail", {"message": "it broke"})
        assert failed.is_error is True
        assert _text(failed) == "it broke"

        invalid = await client.call_tool("echo", {})
        assert invalid.is_error is True
        assert "'text' is a required property" in _text(invalid)

        with pytest.raises(MCPError) as protocol_error:
            await client.call_tool("protocol_error", {"message": "refused"})
        assert (protocol_error.value.code, protocol_error.value.message) == (-32050, "refused")
        assert protocol_error.value.data == {"tool": "protocol_error"}

        with pytest.raises(MCPError) as unknown:
            await client.call_tool("no_such_tool", {})
        assert unknown.value.code == INVALID_PARAMS

        assert (
            _text(await client.call_tool("destroy", {"path": "/nowhere"})) == "destroyed /nowhere"
        )

        # The SDK's stdio client passes a short default environment plus what it is given.
        assert (
            json.loads(_text(await client.call_tool("env", {"name": "FAULTS_TEST_PASSED"})))
            == "passed"
        )
        assert (
            json.loads(_text(await client.call_tool("env", {"name": "FAULTS_TEST_INHERITED"})))
            is None
        )

        reports: list[tuple[float, float | None, str | None]] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            reports.append((progress, total, message))

        assert (
            _text(await client.call_tool("progress", {"steps": 3}, progress_callback=on_progress))
            == "done"
        )
        assert reports == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]

        assert _text(await client.call_tool("slow", {"seconds": 0.01})) == "done"


async def test_media_blocks_carry_real_files() -> None:
    async with Client(stdio_parameters(faults_command())) as client:
        result = await client.call_tool("media", {})
    text, image, audio, link, embedded = result.content
    assert isinstance(text, types.TextContent)
    assert isinstance(image, types.ImageContent)
    assert image.mime_type == "image/png"
    png = base64.b64decode(image.data)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", png[16:24]) == (1, 1)
    assert isinstance(audio, types.AudioContent)
    assert audio.mime_type == "audio/wav"
    with wave.open(io.BytesIO(base64.b64decode(audio.data))) as sound:
        assert (sound.getnchannels(), sound.getframerate(), sound.getnframes()) == (1, 8000, 80)
    assert isinstance(link, types.ResourceLink)
    assert (link.name, str(link.uri)) == ("readme", "file:///faults/readme.txt")
    assert isinstance(embedded, types.EmbeddedResource)
    assert isinstance(embedded.resource, types.TextResourceContents)
    assert embedded.resource.text == "an embedded note"


async def test_tools_list_walks_several_pages() -> None:
    async with Client(
        stdio_parameters(faults_command("--many", "25", "--tools-page-size", "10"))
    ) as client:
        pages: list[list[str]] = []
        cursor: str | None = None
        while True:
            page = await client.list_tools(cursor=cursor)
            pages.append([tool.name for tool in page.tools])
            cursor = page.next_cursor
            if cursor is None:
                break
        with pytest.raises(MCPError) as bad_cursor:
            await client.list_tools(cursor="not a cursor")
    total = len(FAULT_TOOLS) + 25
    assert [len(page) for page in pages] == [10] * (total // 10) + (
        [total % 10] if total % 10 else []
    )
    assert len(pages) > 2
    names = [name for page in pages for name in page]
    assert set(names) == FAULT_TOOLS | {f"t{index:03d}" for index in range(25)}
    assert len(names) == len(set(names))
    assert bad_cursor.value.code == INVALID_PARAMS


async def test_sdk_client_rejects_structured_content_that_breaks_the_schema() -> None:
    async with Client(stdio_parameters(faults_command())) as client:
        # The SDK validates on its own (listing the tools first if it has not): a RuntimeError, not a result.
        with pytest.raises(
            RuntimeError, match="Invalid structured content returned by tool bad_output"
        ):
            await client.call_tool("bad_output", {})
        # What the server really sent, read past the client's validation.
        raw = await client.session.send_request(
            types.CallToolRequest(
                params=types.CallToolRequestParams(name="bad_output", arguments={})
            ),
            types.CallToolResult,
        )
    assert raw.is_error is False
    assert raw.structured_content == {"sum": "not a number"}


async def test_sdk_client_validates_output_only_against_the_first_tools_page() -> None:
    # Page size 1: the first page holds only echo. The SDK's own refresh before validating
    # lists that page alone, finds no schema for bad_output and lets the result through.
    async with Client(stdio_parameters(faults_command("--tools-page-size", "1"))) as client:
        result = await client.call_tool("bad_output", {})
    assert result.structured_content == {"sum": "not a number"}


@STDIO_ERAS
async def test_crash_closes_the_connection(flags: tuple[str, ...], faults_log: Path) -> None:
    async with Client(stdio_parameters(faults_command(*flags, log=faults_log))) as client:
        with pytest.raises(MCPError) as crash:
            await client.call_tool("crash", {"after_ms": 20})
        assert crash.value.code == CONNECTION_CLOSED
        with pytest.raises(MCPError) as after:
            await client.call_tool("echo", {"text": "anyone?"})
        assert after.value.code == CONNECTION_CLOSED
    assert read_lines(faults_log) == ["crashing"]


@STDIO_ERAS
async def test_cancelling_and_timing_out_reach_the_server(
    flags: tuple[str, ...], faults_log: Path
) -> None:
    async with Client(stdio_parameters(faults_command(*flags, log=faults_log))) as client:
        await _cancel_a_hang(client)
        # Seen while the connection is open, so it is the cancellation, not the hang-up.
        lines = await wait_for_line(faults_log, "cancelled hang")
        # The server logs the notification after the handler it cancels has
        # ended (and logged "cancelled hang"): wait for that line too.
        with anyio.fail_after(10):
            while not any(line.startswith("notification") for line in lines):
                await anyio.sleep(0.02)
                lines = read_lines(faults_log)
        # Over stdio, both eras send notifications/cancelled.
        assert [line.split()[:2] for line in lines if line.startswith("notification")] == [
            ["notification", "cancelled"]
        ]

        with pytest.raises(MCPError) as timeout:
            await client.call_tool("hang", {}, read_timeout_seconds=0.2)
        assert timeout.value.code == REQUEST_TIMEOUT
        lines = await wait_for_line(faults_log, "cancelled hang", count=2)

        assert _text(await client.call_tool("echo", {"text": "still here"})) == "still here"
    assert lines.count("started hang") == 2


async def test_list_changed_arrives_as_a_notification_on_the_handshake_era(
    faults_log: Path,
) -> None:
    changes = 0
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        nonlocal changes, changed
        if isinstance(message, types.ToolListChangedNotification):
            changes += 1
            changed.set()

    async with Client(
        stdio_parameters(faults_command("--legacy")), message_handler=on_message
    ) as client:
        assert client.protocol_version == HANDSHAKE
        with pytest.raises(ListenNotSupportedError):
            async with client.listen(tools_list_changed=True):
                pass

        assert _text(await client.call_tool("add_tool", {"name": "added"})) == "added added"
        with anyio.fail_after(10):
            await changed.wait()
        assert "added" in {tool.name for tool in (await client.list_tools()).tools}
        assert json.loads(_text(await client.call_tool("added", {"x": 1}))) == {"x": 1}

        changed = anyio.Event()
        assert _text(await client.call_tool("remove_tool", {"name": "added"})) == "removed added"
        with anyio.fail_after(10):
            await changed.wait()
        assert "added" not in {tool.name for tool in (await client.list_tools()).tools}
        assert (await client.call_tool("remove_tool", {"name": "echo"})).is_error is True
    assert changes == 2


async def test_list_changed_arrives_on_a_listen_stream_on_the_modern_era() -> None:
    teed: list[types.ToolListChangedNotification] = []
    tee = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            teed.append(message)
            tee.set()

    async with Client(stdio_parameters(faults_command()), message_handler=on_message) as client:
        assert client.protocol_version == MODERN
        # No listen stream open: the server tells nothing (the next call is a round trip).
        await client.call_tool("add_tool", {"name": "unheard"})
        await client.call_tool("echo", {"text": "round trip"})
        assert teed == []
        async with client.listen(tools_list_changed=True) as subscription:
            assert subscription.honored.tools_list_changed is True
            await client.call_tool("add_tool", {"name": "added"})
            with anyio.fail_after(10):
                event = await subscription.__anext__()
                # The event is also handed to message_handler, stamped with the listen id.
                await tee.wait()
            assert event == ToolsListChanged()
            assert "added" in {tool.name for tool in (await client.list_tools()).tools}
    assert len(teed) == 1
    assert teed[0].params is not None
    assert teed[0].params.meta is not None
    assert set(teed[0].params.meta) == {"io.modelcontextprotocol/subscriptionId"}


# The fault server over streamable HTTP.


async def test_http_modern(faults_http_url: str, faults_log: Path) -> None:
    async with Client(faults_http_url) as client:
        assert client.protocol_version == MODERN
        assert _text(await client.call_tool("echo", {"text": "over http"})) == "over http"
        async with client.listen(tools_list_changed=True) as subscription:
            await client.call_tool("add_tool", {"name": "added"})
            with anyio.fail_after(10):
                assert await subscription.__anext__() == ToolsListChanged()
        # The modern HTTP client cancels by dropping the request's response stream.
        await _cancel_a_hang(client)
        await wait_for_line(faults_log, "cancelled hang")


async def test_http_legacy(faults_http_legacy_url: str, faults_log: Path) -> None:
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    async with Client(faults_http_legacy_url, message_handler=on_message) as client:
        assert client.protocol_version == HANDSHAKE
        assert _text(await client.call_tool("echo", {"text": "over http"})) == "over http"
        await client.call_tool("add_tool", {"name": "added"})
        with anyio.fail_after(10):
            await changed.wait()
        await _cancel_a_hang(client)
        lines = await wait_for_line(faults_log, "cancelled hang")
    assert any(line.startswith("notification cancelled") for line in lines)


async def test_http_crash_on_the_modern_era_escapes_the_client_as_a_transport_error(
    faults_log: Path,
) -> None:
    with faults_http(log=faults_log) as url, pytest.raises(ExceptionGroup) as crash:
        async with Client(url) as client:
            await client.call_tool("crash", {"after_ms": 50})
    assert crash.group_contains(httpx2.TransportError)
    assert read_lines(faults_log) == ["crashing"]


async def test_http_crash_on_the_handshake_era_fails_the_call(faults_log: Path) -> None:
    with faults_http("--legacy", log=faults_log) as url:
        async with Client(url) as client:
            with pytest.raises(MCPError) as crash:
                await client.call_tool("crash", {"after_ms": 50})
    assert crash.value.code == CONNECTION_CLOSED
    assert read_lines(faults_log) == ["crashing"]


# The servers from PyPI and npm.


async def test_time_server(time_server: ServerCommand) -> None:
    async with Client(stdio_parameters(time_server)) as client:
        assert client.protocol_version == MODERN
        assert {tool.name for tool in (await client.list_tools()).tools} == {
            "get_current_time",
            "convert_time",
        }
        now = await client.call_tool("get_current_time", {"timezone": "UTC"})
        assert now.structured_content is not None
        assert now.structured_content["timezone"] == "UTC"
        assert json.loads(_text(now)) == now.structured_content
        bad = await client.call_tool("get_current_time", {"timezone": "Nowhere/Bogus"})
        assert bad.is_error is True
    async with Client(stdio_parameters(time_server), mode="legacy") as client:
        assert client.protocol_version == HANDSHAKE


async def test_git_server(git_server: ServerCommand, git_repository: Path) -> None:
    async with Client(stdio_parameters(git_server)) as client:
        assert client.protocol_version == MODERN
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert {"git_status", "git_log", "git_commit"} <= set(tools)
        assert tools["git_status"].annotations is not None
        assert tools["git_status"].annotations.read_only_hint is True
        log = _text(await client.call_tool("git_log", {"repo_path": str(git_repository)}))
        assert GIT_COMMIT_MESSAGE in log
        assert "Author: PTC Test" in log
        outside = await client.call_tool("git_status", {"repo_path": "/"})
        assert outside.is_error is True


async def test_everything_server(everything_server: ServerCommand) -> None:
    async with Client(stdio_parameters(everything_server)) as client:
        # A TypeScript SDK 1.x server: no server/discover, so the client falls back.
        assert client.protocol_version == HANDSHAKE
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert {"echo", "get-sum", "get-structured-content", "get-tiny-image"} <= set(tools)
        assert _text(await client.call_tool("echo", {"message": "hi"})) == "Echo: hi"
        weather = await client.call_tool("get-structured-content", {"location": "New York"})
        assert weather.structured_content is not None
        assert set(weather.structured_content) == {"temperature", "conditions", "humidity"}


async def test_everything_server_over_http(everything_http_url: str) -> None:
    async with Client(everything_http_url) as client:
        assert client.protocol_version == HANDSHAKE
        assert _text(await client.call_tool("echo", {"message": "over http"})) == "Echo: over http"
