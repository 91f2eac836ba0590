"""``ptc serve`` with the official ``mcp`` client: in process (fast, every behaviour),
over stdio and over streamable HTTP on loopback (the transports, the token)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import orjson
import pytest
from mcp import Client, StdioServerParameters

from ptc import CODE_ONLY_RULE, CodeExecutor
from ptc._serve import SDK_RESOURCE, CodeModeServer, exposure_warning
from ptc._toolspec import load_registry
from registry import ToolRegistry

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
TOOLS = "tests/ptc/serve/tools.py:registry"
FANOUT = """
import asyncio
keys = ["alpha", "beta", "gamma"]
found = await asyncio.gather(*[tools.lookup({"key": k}) for k in keys])
print("looked up", len(found))
return {r["key"]: r["length"] for r in found}
"""


def serve_registry() -> ToolRegistry:
    return load_registry(str(ROOT / TOOLS))


@asynccontextmanager
async def in_process(
    *,
    mode: str = "code",
    events: list[dict[str, Any]] | None = None,
    budget: int = 30_000,
    **client: Any,
) -> AsyncIterator[tuple[Client, CodeModeServer]]:
    registry = serve_registry()
    sink = events.append if events is not None else None
    async with CodeExecutor(
        registry,
        mode=mode,  # type: ignore[arg-type]
        on_event=sink,
        output_budget=budget,
    ) as executor:
        server = CodeModeServer(executor)
        server.bind()
        async with Client(server.server, mode="legacy", **client) as connected:
            yield connected, server


async def poll_until(condition: Callable[[], bool]) -> None:
    """Until ``condition()`` holds (at most 20 s): it reads a file, or a list another
    thread (the executor's event delivery) appends to, so there is no event to await."""
    with anyio.fail_after(20):
        while not condition():  # noqa: ASYNC110
            await anyio.sleep(0.01)


def run_code(code: str) -> dict[str, Any]:
    return {"code": code, "description": "a test program"}


# --------------------------------------------------------------------------- what is listed


async def test_code_mode_lists_run_code_with_the_sdk_in_its_description() -> None:
    async with in_process() as (client, server):
        listed = (await client.list_tools()).tools
        assert [tool.name for tool in listed] == ["run_code"]
        tool = listed[0]
        sdk = server.sdk_text()
        assert tool.description is not None
        assert sdk in tool.description and CODE_ONLY_RULE in tool.description
        assert "async def lookup(self, args: LookupArgs)" in tool.description
        assert tool.output_schema is not None and "logs" in tool.output_schema["properties"]
        assert tool.input_schema["required"] == ["code", "description"]
        # the instructions and the resource carry the SDK too
        assert client.session.instructions is not None
        assert CODE_ONLY_RULE in client.session.instructions and sdk in client.session.instructions
        resource = await client.read_resource(SDK_RESOURCE)
        content = resource.contents[0]
        assert isinstance(content, types.TextResourceContents) and content.text == sdk
        listed_resources = (await client.list_resources()).resources
        assert [str(r.uri) for r in listed_resources] == [SDK_RESOURCE]


async def test_both_mode_lists_the_native_tools_with_their_hints() -> None:
    async with in_process(mode="both") as (client, _):
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert sorted(listed) == ["guarded", "lookup", "picture", "run_code", "steps", "wait"]
        lookup = listed["lookup"]
        assert lookup.annotations is not None and lookup.annotations.read_only_hint is True
        assert lookup.output_schema is not None  # an object: declared
        assert listed["picture"].output_schema is None  # a string: text only
        native = await client.call_tool("lookup", {"key": "abc"})
        assert not native.is_error and native.structured_content == {"key": "abc", "length": 3}
        picture = await client.call_tool("picture", {})
        assert [type(block).__name__ for block in picture.content] == [
            "TextContent",
            "ImageContent",
        ]


# --------------------------------------------------------------------------- results


async def test_a_fan_out_program_returns_structured_content_and_text() -> None:
    async with in_process() as (client, _):
        result = await client.call_tool("run_code", run_code(FANOUT))
    assert not result.is_error
    assert result.structured_content == {
        "logs": ["looked up 3"],
        "result": {"alpha": 5, "beta": 4, "gamma": 5},
    }
    text = result.content[0]
    assert isinstance(text, types.TextContent) and "looked up 3" in text.text


async def test_a_failed_run_is_an_error_result_not_a_protocol_error() -> None:
    async with in_process() as (client, _):
        failed = await client.call_tool("run_code", run_code("raise ValueError('no luck')"))
        invalid = await client.call_tool("run_code", {"code": 42, "description": "x"})
    assert failed.is_error and failed.structured_content is None
    message = failed.content[0]
    assert isinstance(message, types.TextContent)
    assert message.text.startswith("Error: code run failed (exception)")
    assert "ValueError: no luck" in message.text
    assert invalid.is_error  # bad arguments are a result too


# --------------------------------------------------------------------------- live output


async def test_progress_arrives_during_the_run() -> None:
    seen: list[tuple[float, str | None]] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        seen.append((done, message))

    async with in_process() as (client, _):
        result = await client.call_tool(
            "run_code",
            run_code('return await tools.steps({"count": 3})'),
            progress_callback=progress,
        )
    assert not result.is_error, result
    messages = [message for _, message in seen]
    assert messages == ["steps: 1/3 step 1", "steps: 2/3 step 2", "steps: 3/3 step 3"]
    assert [done for done, _ in seen] == [1, 2, 3]  # increasing, as MCP requires


# --------------------------------------------------------------------------- cancellation


async def test_cancelling_a_run_settles_every_sub_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "tools.log"
    monkeypatch.setenv("SERVE_TEST_LOG", str(log))
    events: list[dict[str, Any]] = []
    program = "import asyncio\nawait asyncio.gather(*[tools.wait({'n': i}) for i in range(3)])"
    async with in_process(events=events) as (client, _):
        with anyio.move_on_after(30) as scope:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(client.call_tool, "run_code", run_code(program))
                await poll_until(lambda: log.exists() and log.read_text().count("started") == 3)
                tasks.cancel_scope.cancel()  # the client cancels its request
        assert not scope.cancelled_caught
        # the server settles the run: every sub-call is cancelled and awaited
        await poll_until(lambda: any(e["type"] == "tool/result" for e in events))
        assert (await client.call_tool("run_code", run_code("return 1"))).structured_content == {
            "logs": [],
            "result": 1,
        }
    lines = log.read_text().splitlines()
    assert sorted(line for line in lines if line.startswith("cancelled")) == [
        "cancelled 0",
        "cancelled 1",
        "cancelled 2",
    ]
    started = [e["id"] for e in events if e["type"] == "tool/ptc-dispatch-start"]
    settled = [e["id"] for e in events if e["type"] == "tool/ptc-dispatch"]
    assert len(started) == 3 and sorted(settled) == sorted(started)
    result = next(e for e in events if e["type"] == "tool/result")
    assert result["is_error"] and result["error"]["info"]["code"] == "ABORTED"


# --------------------------------------------------------------------------- approvals


async def test_an_ask_becomes_an_elicitation_round_trip() -> None:
    asked: list[str] = []

    async def answer(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept" if len(asked) == 1 else "decline", content={})

    program = """
first = await tools.guarded({"note": "one"})
try:
    await tools.guarded({"note": "two"})
except ToolCallError as error:
    second = error.code
return [first, second]
"""
    async with in_process(elicitation_callback=answer) as (client, _):
        result = await client.call_tool("run_code", run_code(program))
    assert not result.is_error, result
    assert result.structured_content is not None
    assert result.structured_content["result"] == ["approved: one", "APPROVAL_REJECTED"]
    assert asked == ["Allow the tool call guarded? guarded calls need a yes"] * 2


async def test_without_elicitation_an_ask_is_denied_with_a_reason() -> None:
    program = """
try:
    await tools.guarded({"note": "x"})
except ToolCallError as error:
    return [error.code, error.message]
"""
    async with in_process() as (client, _):
        result = await client.call_tool("run_code", run_code(program))
    assert result.structured_content is not None
    code, message = result.structured_content["result"]
    assert code == "APPROVAL_REJECTED" and "guarded" in message


# --------------------------------------------------------------------------- transports


def serve_command(*extra: str) -> list[str]:
    return [sys.executable, "-m", "ptc", "serve", "--tools", TOOLS, *extra]


async def test_over_stdio_with_the_official_client(tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    params = StdioServerParameters(
        command=sys.executable,
        args=serve_command("--events", str(events))[1:],
        cwd=str(ROOT),
    )
    async with Client(params) as client:
        assert [tool.name for tool in (await client.list_tools()).tools] == ["run_code"]
        result = await client.call_tool("run_code", run_code(FANOUT))
        failed = await client.call_tool("run_code", run_code("1 / 0"))
    assert result.structured_content == {
        "logs": ["looked up 3"],
        "result": {"alpha": 5, "beta": 4, "gamma": 5},
    }
    assert failed.is_error
    logged = [orjson.loads(line) for line in events.read_bytes().splitlines()]
    assert [e["type"] for e in logged].count("tool/result") == 2


@contextmanager
def http_server(*extra: str) -> Iterator[str]:
    process = subprocess.Popen(
        serve_command("--transport", "http", "--port", "0", *extra),
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert process.stderr is not None
        url = None
        for line in process.stderr:
            found = re.search(r"ptc: serving (http://\S+)", line)
            if found:
                url = found.group(1)
                break
        assert url is not None, "ptc serve did not say where it serves"
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stderr is not None:
            process.stderr.close()


async def test_over_streamable_http_a_bearer_token_is_required() -> None:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    with http_server("--token", "s3cret-token") as url:
        async with httpx2.AsyncClient() as http:
            refused = await http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
            wrong = await http.post(
                url,
                json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                headers={"Authorization": "Bearer nope"},
            )
        assert refused.status_code == 401 and wrong.status_code == 401
        async with (
            httpx2.AsyncClient(headers={"Authorization": "Bearer s3cret-token"}) as http,
            Client(streamable_http_client(url, http_client=http)) as client,
        ):
            result = await client.call_tool("run_code", run_code(FANOUT))
    assert result.structured_content is not None
    assert result.structured_content["result"] == {"alpha": 5, "beta": 4, "gamma": 5}


def _entries(directory: Path) -> list[str]:
    return sorted(os.listdir(directory))


async def test_a_terminated_http_server_closes_its_runtime(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # SIGTERM (a service manager's stop) ends the server cleanly: its runtime
    # is closed, the zygote's directory is gone by the time the process is.
    from mcp.client.streamable_http import streamable_http_client

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    with http_server() as url:
        async with Client(streamable_http_client(url)) as client:
            result = await client.call_tool("run_code", run_code("return 6 * 7"))
        assert result.structured_content == {"logs": [], "result": 42}
        assert [name[:12] for name in _entries(tmp_path)] == ["ptc-runtime-"]
    assert _entries(tmp_path) == []


async def test_the_token_may_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    import httpx2

    monkeypatch.setenv("PTC_SERVE_TOKEN", "from-env")
    with http_server() as url:
        async with httpx2.AsyncClient() as http:
            refused = await http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert refused.status_code == 401


def test_binding_beyond_loopback_warns() -> None:
    assert exposure_warning("http", "127.0.0.1", None) is None
    assert exposure_warning("stdio", "0.0.0.0", None) is None
    bare = exposure_warning("http", "0.0.0.0", None)
    assert bare is not None and "anyone who can reach it" in bare and "no bearer token" in bare
    guarded = exposure_warning("http", "10.0.0.5", "t")
    assert guarded is not None and "no bearer token" not in guarded


def test_bad_options_are_one_line_and_exit_2() -> None:
    for extra, message in (
        (("--transport", "http", "--port", "70000"), "--port must be 0 to 65535"),
        (("--transport", "carrier-pigeon"), "--transport must be stdio or http"),
        (("--mode", "native"), "--mode must be code or both"),
        (("--scope", "nope"), "unknown scope 'nope'"),
        (("--output-budget", "lots"), "--output-budget must be a positive number"),
    ):
        process = subprocess.run(
            serve_command(*extra), cwd=ROOT, capture_output=True, text=True, timeout=60
        )
        assert process.returncode == 2, (extra, process.stderr)
        assert message in process.stderr and "Traceback" not in process.stderr
        assert process.stdout == ""  # stdout is the MCP channel


async def test_concurrent_runs_from_a_client_run_concurrently(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "tools.log"
    monkeypatch.setenv("SERVE_TEST_LOG", str(log))
    async with in_process() as (client, _):
        async with anyio.create_task_group() as tasks:
            for n in range(3):
                tasks.start_soon(
                    client.call_tool, "run_code", run_code(f"await tools.wait({{'n': {n}}})")
                )
            # all three programs are inside their tool call at once
            await poll_until(lambda: log.exists() and log.read_text().count("started") == 3)
            tasks.cancel_scope.cancel()
        answered = await client.call_tool("run_code", run_code("return 'still serving'"))
    assert answered.structured_content == {"logs": [], "result": "still serving"}


async def test_the_output_budget_cuts_what_the_client_gets() -> None:
    program = "for i in range(5000):\n    print('line', i)\nreturn 'done'"
    async with in_process(budget=2000) as (client, _):
        result = await client.call_tool("run_code", run_code(program))
        small = await client.call_tool("run_code", run_code("print('short')\nreturn 1"))
    assert not result.is_error, result
    text = result.content[0]
    assert isinstance(text, types.TextContent) and len(text.text) <= 2000
    assert "characters cut (budget 2,000)" in text.text
    assert text.text.startswith("line 0\n") and "line 4999" in text.text  # head and tail
    value = result.structured_content
    assert value is not None and value["truncated"]["budget"] == 2000
    assert value["result"] == "done" and len("\n".join(value["logs"])) < 2000
    assert small.structured_content == {"logs": ["short"], "result": 1}  # untouched


async def test_printed_lines_arrive_while_the_run_goes_on() -> None:
    seen: list[str | None] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        seen.append(message)

    program = "print('warming up')\nprint('almost there')\nawait tools.wait({'n': 0})"
    async with in_process() as (client, _), anyio.create_task_group() as tasks:
        tasks.start_soon(
            lambda: client.call_tool("run_code", run_code(program), progress_callback=progress)
        )
        # the run is blocked in its tool call: these lines came live, not with a result
        await poll_until(lambda: "almost there" in seen)
        tasks.cancel_scope.cancel()
    assert seen[:2] == ["warming up", "almost there"]
