"""``connect_mcp`` against our fault server: every mapping rule, fault and lifecycle
promise of ``registry._mcp``, over stdio on both protocol eras and over HTTP.

Waiting is always for a condition (a log line, a registry change, a result),
bounded by ``anyio.fail_after``; nothing sleeps and hopes.
"""

from __future__ import annotations

import math
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from registry import (
    ABORTED,
    APPROVAL_UNAVAILABLE,
    INVALID_TOOL_OUTPUT,
    MCP_CONNECTION_CLOSED,
    MCP_OUTPUT,
    MCP_PROTOCOL_ERROR,
    MCP_TIMEOUT,
    MCP_TOOL_ERROR,
    AbortSignal,
    HttpServer,
    McpConnectionError,
    McpServers,
    ServerSpec,
    StdioServer,
    ToolCall,
    ToolExecution,
    ToolRegistry,
    ToolResult,
    ask_before_destructive,
    connect_mcp,
)
from tests.mcp.helpers_servers import HANDSHAKE, MODERN, ServerCommand, faults_command
from tests.mcp.test_real_servers import children

pytestmark = pytest.mark.anyio

ERAS = [pytest.param((), id="modern"), pytest.param(("--legacy",), id="legacy")]


def spec(command: ServerCommand) -> StdioServer:
    return StdioServer(command=command.command, args=command.args, env=dict(command.env))


def faults(*flags: str, log: Path | None = None) -> StdioServer:
    return spec(faults_command(*flags, log=log))


@asynccontextmanager
async def connected(
    servers: dict[str, ServerSpec], registry: ToolRegistry | None = None, **options: Any
) -> AsyncIterator[tuple[ToolRegistry, McpServers]]:
    registry = registry or ToolRegistry()
    async with connect_mcp(registry, servers, **options) as group:
        yield registry, group


_ids = iter(range(1_000_000))


async def run(
    registry: ToolRegistry, name: str, args: dict[str, Any] | None = None, **kw: Any
) -> ToolResult:
    return await registry.execute(
        ToolCall(call_id=f"c{next(_ids)}", name=name, arguments=args or {}, **kw)
    )


def code_of(result: ToolResult) -> str | None:
    assert result.is_error, result
    assert result.error is not None
    return None if result.error.info is None else result.error.info.code


async def wait_for(condition: Callable[[], bool], limit: float = 10.0) -> None:
    """Until ``condition()`` holds, at most ``limit`` s.

    Polled: the conditions are on files another process writes, or on state a
    background task of the client changes.
    """
    with anyio.fail_after(limit):
        while not condition():  # noqa: ASYNC110 - no event to wait on across processes
            await anyio.sleep(0.005)


def lines(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


# --------------------------------------------------------------------------- mapping


@pytest.mark.parametrize("flags", ERAS)
async def test_results_map_to_values_content_and_codes(flags: tuple[str, ...]) -> None:
    async with connected({"faults": faults(*flags)}) as (registry, group):
        assert group["faults"].protocol_version == (HANDSHAKE if flags else MODERN)

        added = await run(registry, "faults.add", {"a": 2, "b": 3})
        assert not added.is_error, added
        assert added.value == {"sum": 5}  # structuredContent, validated by outputSchema
        assert [block["type"] for block in added.content] == ["text"]

        echoed = await run(registry, "faults.echo", {"text": "hello"})
        assert echoed.value == "hello"  # no outputSchema, one text block: the text

        failed = await run(registry, "faults.fail", {"message": "the disk is full"})
        assert code_of(failed) == MCP_TOOL_ERROR
        assert failed.error is not None and failed.error.message == "the disk is full"

        refused = await run(registry, "faults.protocol_error", {"message": "no such thing"})
        assert code_of(refused) == MCP_PROTOCOL_ERROR
        assert refused.error is not None and "-32050" in refused.error.message
        assert "no such thing" in refused.error.message

        broken = await run(registry, "faults.bad_output")
        assert code_of(broken) == INVALID_TOOL_OUTPUT
        # the session is fine after each of these
        assert (await run(registry, "faults.echo", {"text": "still here"})).value == "still here"


async def test_every_content_kind_reaches_the_result_as_a_block() -> None:
    async with connected({"faults": faults()}) as (registry, _):
        media = registry.get("faults.media")
        assert media is not None and dict(media.output.schema) == MCP_OUTPUT
        result = await run(registry, "faults.media")
    assert not result.is_error, result
    kinds = [block["type"] for block in result.content]
    assert sorted(kinds) == ["audio", "image", "resource", "resource_link", "text"]
    image = next(b for b in result.content if b["type"] == "image")
    assert image["mimeType"] == "image/png" and image["data"]
    audio = next(b for b in result.content if b["type"] == "audio")
    assert audio["mimeType"].startswith("audio/") and audio["data"]
    link = next(b for b in result.content if b["type"] == "resource_link")
    assert link["uri"] and link["name"]
    embedded = next(b for b in result.content if b["type"] == "resource")
    assert embedded["resource"]["uri"] and "text" in embedded["resource"]
    # several blocks: the canonical value a program gets is the same list
    assert result.value == result.content


async def test_json_text_is_parsed_and_other_text_is_kept() -> None:
    async with connected({"faults": faults()}) as (registry, _):
        as_json = await run(registry, "faults.echo", {"text": '{"a": [1, 2]}'})
        listed = await run(registry, "faults.echo", {"text": "[1, 2]"})
        number = await run(registry, "faults.echo", {"text": "42"})
        broken = await run(registry, "faults.echo", {"text": "{not json"})
    assert as_json.value == {"a": [1, 2]}
    assert listed.value == [1, 2]
    assert number.value == "42"  # only objects and arrays are parsed
    assert broken.value == "{not json"


async def test_annotations_drive_concurrency_and_the_destructive_policy() -> None:
    registry = ToolRegistry()
    registry.on_pre_execute(ask_before_destructive)
    async with connected({"faults": faults()}, registry):
        echo, destroy, add = (registry.get(f"faults.{n}") for n in ("echo", "destroy", "add"))
        assert echo is not None and echo.concurrency_safe is True  # readOnlyHint
        assert destroy is not None and destroy.concurrency_safe is False
        assert destroy.annotations is not None and destroy.annotations.destructive is True
        assert add is not None and add.annotations is not None
        assert add.annotations.read_only is None  # the server said nothing: kept as nothing
        denied = await run(registry, "faults.destroy", {"path": "/tmp/x"})
        assert code_of(denied) == APPROVAL_UNAVAILABLE
        assert (await run(registry, "faults.echo", {"text": "ok"})).value == "ok"


async def test_all_pages_of_a_tool_list_are_registered() -> None:
    async with connected({"faults": faults("--many", "120", "--tools-page-size", "25")}) as (
        registry,
        group,
    ):
        names = group["faults"].tools
        assert len([n for n in names if n.startswith("faults.t")]) == 120
        assert "faults.t000" in names and "faults.t119" in names and "faults.echo" in names
        assert (await run(registry, "faults.t077", {"x": 1})).is_error is False


async def test_a_name_already_taken_is_skipped_with_its_reason() -> None:
    registry = ToolRegistry()

    @registry.tool(name="faults.echo")
    def mine(text: str) -> str:
        """Our own echo."""
        return text

    async with connected({"faults": faults()}, registry) as (_, group):
        skipped = group["faults"].skipped
        assert "faults.echo" in skipped and "already registered" in skipped["faults.echo"]
        assert "faults.echo" not in group["faults"].tools
        assert (await run(registry, "faults.echo", {"text": "x"})).value == "x"  # ours
    assert registry.get("faults.echo") is not None  # ours stays


async def test_tools_can_be_registered_into_a_scope() -> None:
    registry = ToolRegistry()
    registry.add_scope("agent")
    async with connected({"faults": faults()}, registry, scope="agent"):
        assert registry.get("faults.echo") is None
        assert registry.get("faults.echo", scope="agent") is not None
    assert registry.get("faults.echo", scope="agent") is None


# --------------------------------------------------------------------------- calls in time


async def test_progress_notifications_reach_progress_listeners() -> None:
    registry = ToolRegistry()
    seen: list[tuple[str, float, float | None, str | None]] = []

    def record(
        execution: ToolExecution, progress: float, total: float | None, message: str | None
    ) -> None:
        seen.append((execution.call_id, progress, total, message))

    registry.on_progress(record)
    async with connected({"faults": faults()}, registry):
        result = await registry.execute(
            ToolCall(call_id="p1", name="faults.progress", arguments={"steps": 3})
        )
    assert not result.is_error, result
    assert seen == [("p1", 1, 3, "step 1"), ("p1", 2, 3, "step 2"), ("p1", 3, 3, "step 3")]


@pytest.mark.parametrize("flags", ERAS)
async def test_a_cancelled_call_is_aborted_and_cancelled_on_the_server(
    flags: tuple[str, ...], tmp_path: Path
) -> None:
    log = tmp_path / "faults.log"
    async with connected({"faults": faults(*flags, log=log)}) as (registry, group):
        signal = AbortSignal()
        outcome: list[ToolResult] = []

        async def call_hang() -> None:
            outcome.append(await run(registry, "faults.hang", signal=signal))

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(call_hang)
            await wait_for(lambda: "started hang" in lines(log))
            signal.abort()
        assert code_of(outcome[0]) == ABORTED
        # the server hears of it while the connection is still open
        await wait_for(lambda: "cancelled hang" in lines(log))
        assert group["faults"].alive
        assert (await run(registry, "faults.echo", {"text": "after"})).value == "after"


async def test_a_call_past_call_timeout_fails_as_mcp_timeout_and_the_session_lives_on() -> None:
    async with connected({"faults": faults()}, call_timeout=0.3) as (registry, group):
        late = await run(registry, "faults.slow", {"seconds": 5})
        assert code_of(late) == MCP_TIMEOUT
        assert late.error is not None and "0.3" in late.error.message
        assert group["faults"].alive
        assert (await run(registry, "faults.slow", {"seconds": 0})).value == "done"


async def test_a_registry_timeout_still_applies_to_mcp_tools() -> None:
    import dataclasses

    async with connected({"faults": faults()}) as (registry, _):
        slow = registry.get("faults.slow")
        assert slow is not None
        registry.register(dataclasses.replace(slow, name="slow_bounded", timeout=0.2))
        result = await run(registry, "slow_bounded", {"seconds": 5})
        assert code_of(result) == "TOOL_TIMEOUT"


# --------------------------------------------------------------------------- a server that dies


async def test_a_server_that_crashes_mid_call_fails_that_call_and_every_later_one() -> None:
    before = children()
    async with connected({"faults": faults(), "other": faults()}) as (registry, group):
        crashed = await run(registry, "faults.crash", {})
        assert code_of(crashed) == MCP_CONNECTION_CLOSED
        assert crashed.error is not None and "'faults'" in crashed.error.message
        assert not group["faults"].alive and group["faults"].closed_reason
        later = await run(registry, "faults.echo", {"text": "x"})
        assert code_of(later) == MCP_CONNECTION_CLOSED  # fails fast: no new session
        # the other server is unaffected
        assert (await run(registry, "other.echo", {"text": "fine"})).value == "fine"
    assert children() == before


async def test_calls_in_flight_when_a_server_crashes_all_settle() -> None:
    async with connected({"faults": faults()}) as (registry, _):
        results: list[ToolResult] = []

        async def slow() -> None:
            results.append(await run(registry, "faults.slow", {"seconds": 30}))

        async with anyio.create_task_group() as tasks:
            for _ in range(5):
                tasks.start_soon(slow)
            # Whether or not a call was sent before the crash, it settles with the code.
            crashed = await run(registry, "faults.crash", {"after_ms": 200})
    assert code_of(crashed) == MCP_CONNECTION_CLOSED
    assert [code_of(r) for r in results] == [MCP_CONNECTION_CLOSED] * 5


# --------------------------------------------------------------------------- tool-list changes


@pytest.mark.parametrize("flags", ERAS)
async def test_a_changed_tool_list_updates_the_registry_without_dropping_calls(
    flags: tuple[str, ...],
) -> None:
    async with connected({"faults": faults(*flags)}) as (registry, group):
        changed = anyio.Event()
        registry.on_change(changed.set)
        assert (await run(registry, "faults.add_tool", {"name": "fresh"})).is_error is False
        await wait_for(lambda: registry.get("faults.fresh") is not None)
        assert changed.is_set()
        assert "faults.fresh" in group["faults"].tools
        fresh = await run(registry, "faults.fresh", {"k": 1})
        assert not fresh.is_error, fresh

        # a call of the tool in flight while it is removed still settles normally
        in_flight: list[ToolResult] = []

        async def slow_fresh() -> None:
            in_flight.append(await run(registry, "faults.slow", {"seconds": 0.5}))

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(slow_fresh)
            assert (await run(registry, "faults.remove_tool", {"name": "fresh"})).is_error is False
            await wait_for(lambda: registry.get("faults.fresh") is None)
        assert in_flight[0].value == "done"
        gone = await run(registry, "faults.fresh", {})
        assert code_of(gone) == "UNKNOWN_TOOL"


# --------------------------------------------------------------------------- HTTP


async def test_streamable_http_on_loopback(faults_http_url: str) -> None:
    async with connected({"remote": HttpServer(url=faults_http_url)}) as (registry, group):
        assert group["remote"].alive
        assert (await run(registry, "remote.echo", {"text": "over http"})).value == "over http"
        assert (await run(registry, "remote.add", {"a": 1, "b": 1})).value == {"sum": 2}


async def test_http_headers_are_sent(faults_http_url: str) -> None:
    async with connected(
        {"remote": HttpServer(url=faults_http_url, headers={"Authorization": "Bearer t0ken"})}
    ) as (registry, _):
        sent = await run(registry, "remote.header", {"name": "authorization"})
        absent = await run(registry, "remote.header", {"name": "x-not-sent"})
    # JSON text of a string or null: not an object or array, so kept as text
    assert sent.value == '"Bearer t0ken"'
    assert absent.value == "null"


# --------------------------------------------------------------------------- connecting


async def test_a_command_that_does_not_exist_names_the_server() -> None:
    registry = ToolRegistry()
    with pytest.raises(McpConnectionError) as caught:
        async with connect_mcp(registry, {"ghost": StdioServer(command="no-such-mcp-server-xyz")}):
            pytest.fail("connected to nothing")
    assert caught.value.server == "ghost"
    assert "ghost" in str(caught.value) and "no-such-mcp-server-xyz" in str(caught.value)


async def test_a_server_that_exits_at_start_is_reported_with_its_stderr() -> None:
    registry = ToolRegistry()
    before = children()
    dying = StdioServer(
        command=sys.executable,
        args=("-c", "import sys; sys.stderr.write('cannot open the database\\n'); sys.exit(3)"),
    )
    with pytest.raises(McpConnectionError) as caught:
        async with connect_mcp(registry, {"db": dying}):
            pytest.fail("connected to a dead server")
    assert caught.value.server == "db"
    assert "cannot open the database" in caught.value.reason
    assert children() == before


async def test_a_server_that_never_answers_times_out() -> None:
    registry = ToolRegistry()
    before = children()
    mute = StdioServer(command=sys.executable, args=("-c", "import time; time.sleep(60)"))
    with anyio.fail_after(10), pytest.raises(McpConnectionError) as caught:
        async with connect_mcp(registry, {"mute": mute}, connect_timeout=0.5):
            pytest.fail("connected to a mute server")
    assert caught.value.server == "mute"
    assert children() == before


async def test_nothing_listening_on_an_http_url_is_a_connection_error() -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, never listening: refused
        with pytest.raises(McpConnectionError) as caught:
            async with connect_mcp(
                ToolRegistry(), {"remote": HttpServer(url=f"http://127.0.0.1:{port}/mcp")}
            ):
                pytest.fail("connected to nothing")
    assert caught.value.server == "remote"


async def test_one_failing_server_closes_the_others_and_registers_nothing() -> None:
    registry = ToolRegistry()
    before = children()
    with pytest.raises(McpConnectionError) as caught:
        async with connect_mcp(
            registry,
            {"good": faults(), "bad": StdioServer(command="no-such-mcp-server-xyz")},
        ):
            pytest.fail("half connected")
    assert caught.value.server == "bad"
    assert registry.definitions() == []
    assert children() == before


async def test_cancelling_the_block_ends_every_server() -> None:
    registry = ToolRegistry()
    before = children()
    with anyio.move_on_after(math.inf) as scope:
        async with connect_mcp(registry, {"a": faults(), "b": faults()}):
            assert len(children() - before) == 2
            scope.cancel()
            await anyio.sleep_forever()
    assert scope.cancelled_caught
    assert registry.definitions() == []
    assert children() == before


async def test_an_error_in_the_block_propagates_unchanged_and_ends_the_servers() -> None:
    registry = ToolRegistry()
    before = children()
    with pytest.raises(KeyError, match="mine"):
        async with connect_mcp(registry, {"a": faults()}):
            raise KeyError("mine")
    assert children() == before


async def test_a_bad_server_name_is_refused_before_anything_starts() -> None:
    from registry import McpConfigError

    for name in ("", "has.dot", "has space", "x" * 65):
        with pytest.raises(McpConfigError, match="server name"):
            async with connect_mcp(ToolRegistry(), {name: faults()}):
                pass


@pytest.mark.parametrize("era", ["modern", "legacy"])
async def test_an_http_server_that_crashes_mid_call_fails_that_call_and_later_ones(
    era: str, faults_log: Path
) -> None:
    from tests.mcp.helpers_servers import faults_http

    flags = ("--legacy",) if era == "legacy" else ()
    with faults_http(*flags, log=faults_log) as url:
        async with connected({"remote": HttpServer(url=url)}) as (registry, group):
            crashed = await run(registry, "remote.crash", {})
            assert code_of(crashed) == MCP_CONNECTION_CLOSED, crashed
            later = await run(registry, "remote.echo", {"text": "x"})
            assert code_of(later) == MCP_CONNECTION_CLOSED, later
            assert not group["remote"].alive
