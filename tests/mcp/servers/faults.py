"""An MCP server whose tools misbehave on purpose, for the MCP client's tests.

Run it as::

    python tests/mcp/servers/faults.py [--http PORT] [--legacy] [--tools-page-size N] [--many N]

Over stdio by default. ``--http PORT`` serves streamable HTTP on 127.0.0.1 at ``/mcp``
instead (port 0 picks a free one) and, once the app is up, prints one line
``READY http://127.0.0.1:<port>/mcp`` to stdout. ``--legacy`` serves only the
initialize-handshake era (2025-11-25 and older): ``server/discover`` and any request
carrying the 2026-07-28 envelope get METHOD_NOT_FOUND, so a client in ``auto`` mode falls
back to the handshake. Without it the server speaks both eras, whichever the client opens.

``FAULTS_LOG``, when set in the environment, names a file the server appends event lines
to (``started hang``, ``cancelled hang``, ``notification cancelled <id>``), so a test can
prove what reached the server. A handler is also cancelled when its connection ends, so
``cancelled hang`` proves a client's cancellation only if it appears while the connection
is still open.

Written on the SDK's lowlevel ``Server`` rather than ``MCPServer``: the faults need raw
control of results (structured content that breaks its own schema, JSON-RPC errors,
pagination, tools added at run time) that the high-level API validates away.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import os
import socket
import struct
import wave
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
from jsonschema import Draft202012Validator
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.runner import serve_loop
from mcp.server.stdio import stdio_server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, METHOD_NOT_FOUND
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

Context = ServerRequestContext[Any, Any]
ToolBody = Callable[[Context, dict[str, Any]], Awaitable[types.CallToolResult]]

PROTOCOL_ERROR_CODE = -32050
"""The JSON-RPC error code ``protocol_error`` answers with unless told another."""

CRASH_EXIT_CODE = 17
"""The exit status of the process after ``crash``."""


def _log(line: str) -> None:
    path = os.environ.get("FAULTS_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as log:
            log.write(line + "\n")


def _text(text: str) -> types.TextContent:
    return types.TextContent(type="text", text=text)


def _result(text: str, *, is_error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[_text(text)], is_error=is_error)


def _tiny_png() -> bytes:
    """A valid 1x1 red RGB PNG."""

    def chunk(tag: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(tag + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"\x00\xff\x00\x00")
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


def _tiny_wav() -> bytes:
    """10 ms of 16-bit mono silence at 8 kHz."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(8000)
        out.writeframes(b"\x00\x00" * 80)
    return buffer.getvalue()


TINY_PNG = base64.b64encode(_tiny_png()).decode("ascii")
TINY_WAV = base64.b64encode(_tiny_wav()).decode("ascii")

SUM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"sum": {"type": "number"}},
    "required": ["sum"],
}


def _schema(
    properties: dict[str, Any] | None = None, required: tuple[str, ...] = ()
) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties or {}}
    if required:
        schema["required"] = list(required)
    return schema


STRING = {"type": "string"}
NUMBER = {"type": "number"}


async def _echo(ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
    return _result(args["text"])


async def _add(ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
    total = args["a"] + args["b"]
    return types.CallToolResult(
        content=[_text(json.dumps({"sum": total}))], structured_content={"sum": total}
    )


async def _bad_output(ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
    wrong = {"sum": "not a number"}
    return types.CallToolResult(content=[_text(json.dumps(wrong))], structured_content=wrong)


async def _fail(ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
    return _result(args["message"], is_error=True)


async def _protocol_error(ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
    raise MCPError(
        code=args.get("code", PROTOCOL_ERROR_CODE),
        message=args.get("message", "protocol_error was asked to fail"),
        data={"tool": "protocol_error"},
    )


async def _crash(ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
    await anyio.sleep(args.get("after_ms", 0) / 1000)
    _log("crashing")
    os._exit(CRASH_EXIT_CODE)


async def _hang(ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
    _log("started hang")
    # Lets a client that asked for progress know, without polling, that the call is running.
    await ctx.session.report_progress(0, None, "started hang")
    try:
        await anyio.sleep_forever()
    except anyio.get_cancelled_exc_class():
        _log("cancelled hang")
        raise
    raise AssertionError("unreachable")


async def _slow(ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
    await anyio.sleep(args["seconds"])
    return _result("done")


async def _progress(ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
    steps = args["steps"]
    for step in range(1, steps + 1):
        await ctx.session.report_progress(step, steps, f"step {step}")
    return _result("done")


async def _media(ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
    return types.CallToolResult(
        content=[
            _text("media follows"),
            types.ImageContent(type="image", data=TINY_PNG, mime_type="image/png"),
            types.AudioContent(type="audio", data=TINY_WAV, mime_type="audio/wav"),
            types.ResourceLink(
                type="resource_link",
                name="readme",
                uri="file:///faults/readme.txt",
                mime_type="text/plain",
                description="A link the server does not serve.",
            ),
            types.EmbeddedResource(
                type="resource",
                resource=types.TextResourceContents(
                    uri="file:///faults/note.txt", mime_type="text/plain", text="an embedded note"
                ),
            ),
        ]
    )


async def _destroy(ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
    return _result(f"destroyed {args['path']}")


async def _env(ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
    return _result(json.dumps(os.environ.get(args["name"])))


async def _header(ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
    headers = getattr(ctx.request, "headers", None)  # the HTTP request, over HTTP
    value = None if headers is None else headers.get(args["name"])
    return _result(json.dumps(value))


async def _echo_arguments(ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
    return _result(json.dumps(args, sort_keys=True))


def _tool(
    name: str,
    description: str,
    input_schema: dict[str, Any],
    *,
    output_schema: dict[str, Any] | None = None,
    annotations: types.ToolAnnotations | None = None,
) -> types.Tool:
    return types.Tool(
        name=name,
        description=description,
        input_schema=input_schema,
        output_schema=output_schema,
        annotations=annotations,
    )


STATIC_TOOLS: list[tuple[types.Tool, ToolBody]] = [
    (
        _tool(
            "echo",
            "Returns its text.",
            _schema({"text": STRING}, ("text",)),
            annotations=types.ToolAnnotations(read_only_hint=True),
        ),
        _echo,
    ),
    (
        _tool(
            "add",
            "Adds two numbers.",
            _schema({"a": NUMBER, "b": NUMBER}, ("a", "b")),
            output_schema=SUM_SCHEMA,
        ),
        _add,
    ),
    (
        _tool("bad_output", "Breaks its own output schema.", _schema(), output_schema=SUM_SCHEMA),
        _bad_output,
    ),
    (
        _tool("fail", "Returns an isError result.", _schema({"message": STRING}, ("message",))),
        _fail,
    ),
    (
        _tool(
            "protocol_error",
            "Answers with a JSON-RPC error.",
            _schema({"code": {"type": "integer"}, "message": STRING}),
        ),
        _protocol_error,
    ),
    (_tool("crash", "Exits the server process mid-call.", _schema({"after_ms": NUMBER})), _crash),
    (_tool("hang", "Never returns until cancelled.", _schema()), _hang),
    (
        _tool("slow", "Sleeps, then returns done.", _schema({"seconds": NUMBER}, ("seconds",))),
        _slow,
    ),
    (
        _tool(
            "progress",
            "Reports progress steps, then returns done.",
            _schema({"steps": {"type": "integer"}}, ("steps",)),
        ),
        _progress,
    ),
    (_tool("media", "Returns one block of every content kind.", _schema()), _media),
    (
        _tool(
            "destroy",
            "Claims to destroy a path (does nothing).",
            _schema({"path": STRING}, ("path",)),
            annotations=types.ToolAnnotations(read_only_hint=False, destructive_hint=True),
        ),
        _destroy,
    ),
    (
        _tool(
            "env",
            "Returns an environment variable as JSON (null when unset).",
            _schema({"name": STRING}, ("name",)),
        ),
        _env,
    ),
    (
        _tool(
            "header",
            "Returns a header of the HTTP request that carried the call, as JSON (null when absent or not HTTP).",
            _schema({"name": STRING}, ("name",)),
        ),
        _header,
    ),
]

LIST_TOOLS: list[types.Tool] = [
    _tool(
        "add_tool", "Adds a tool that echoes its arguments.", _schema({"name": STRING}, ("name",))
    ),
    _tool("remove_tool", "Removes a tool added at run time.", _schema({"name": STRING}, ("name",))),
]
"""The tools that change the tool list; their bodies need the server's state."""


def _echo_tool(name: str, description: str) -> types.Tool:
    return _tool(name, description, {"type": "object"})


class _FaultsServer(Server[Any]):
    """Advertises tools.listChanged on the handshake era too, whoever builds the options.

    The streamable-HTTP session manager asks for initialization options without
    notification options, so the default has to carry the flag.
    """

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options or NotificationOptions(tools_changed=True),
            experimental_capabilities,
            extensions,
        )


class Faults:
    """The tool set and its mutable state (tools added at run time)."""

    def __init__(self, *, legacy: bool, page_size: int | None, many: int) -> None:
        self.page_size = page_size
        self.bus = InMemorySubscriptionBus()
        self.bodies: dict[str, ToolBody] = {}
        self.tools: dict[str, types.Tool] = {}
        self.protected: set[str] = set()
        bound: dict[str, ToolBody] = {"add_tool": self._add_tool, "remove_tool": self._remove_tool}
        for tool, body in [*STATIC_TOOLS, *((tool, bound[tool.name]) for tool in LIST_TOOLS)]:
            self.tools[tool.name] = tool
            self.bodies[tool.name] = body
            self.protected.add(tool.name)
        width = max(3, len(str(many - 1)))
        for index in range(many):
            name = f"t{index:0{width}d}"
            self.tools[name] = _echo_tool(name, f"Extra tool {index}; echoes its arguments.")
            self.bodies[name] = _echo_arguments
        self.server = _FaultsServer(
            "faults",
            version="1.0.0",
            on_list_tools=self.list_tools,
            on_call_tool=self.call_tool,
            # The modern era's list-changed channel; a handshake-only server has none.
            on_subscriptions_listen=None if legacy else ListenHandler(self.bus),
        )
        self.server.middleware.append(_log_cancellations)
        if legacy:
            self.server.middleware.append(_refuse_modern)

    async def list_tools(
        self, ctx: Context, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        tools = list(self.tools.values())
        if self.page_size is None:
            return types.ListToolsResult(tools=tools)
        cursor = params.cursor if params is not None else None
        try:
            start = int(cursor) if cursor is not None else 0
        except ValueError:
            start = -1
        if not 0 <= start <= len(tools):
            raise MCPError(code=INVALID_PARAMS, message=f"Invalid cursor: {cursor!r}")
        end = start + self.page_size
        return types.ListToolsResult(
            tools=tools[start:end], next_cursor=str(end) if end < len(tools) else None
        )

    async def call_tool(
        self, ctx: Context, params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        tool = self.tools.get(params.name)
        if tool is None:
            raise MCPError(code=INVALID_PARAMS, message=f"Unknown tool: {params.name}")
        args = params.arguments or {}
        errors = sorted(Draft202012Validator(tool.input_schema).iter_errors(args), key=str)
        if errors:
            return _result(
                f"Invalid arguments for {params.name}: {errors[0].message}", is_error=True
            )
        return await self.bodies[params.name](ctx, args)

    async def _add_tool(self, ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
        name = args["name"]
        if name in self.tools:
            return _result(f"tool {name} already exists", is_error=True)
        self.tools[name] = _echo_tool(name, "Added at run time; echoes its arguments.")
        self.bodies[name] = _echo_arguments
        await self._tools_changed(ctx)
        return _result(f"added {name}")

    async def _remove_tool(self, ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
        name = args["name"]
        if name in self.protected or name not in self.tools:
            return _result(f"no removable tool {name}", is_error=True)
        del self.tools[name]
        del self.bodies[name]
        await self._tools_changed(ctx)
        return _result(f"removed {name}")

    async def _tools_changed(self, ctx: Context) -> None:
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            # Handshake era: notifications/tools/list_changed on this connection's own channel
            # (over HTTP, the session's standalone GET stream). Other connections are not told.
            await ctx.session.send_tool_list_changed()
        # 2026-07-28: every open subscriptions/listen stream that asked for tool changes.
        await self.bus.publish(ToolsListChanged())


async def _log_cancellations(ctx: Context, call_next: CallNext) -> HandlerResult:
    if ctx.method == "notifications/cancelled":
        _log(f"notification cancelled {(ctx.params or {}).get('requestId')}")
    return await call_next(ctx)


async def _refuse_modern(ctx: Context, call_next: CallNext) -> HandlerResult:
    # Over HTTP a 2026-07-28 request reaches the modern entry whatever the server wants;
    # refusing its discover probe with METHOD_NOT_FOUND sends the client to the handshake.
    if ctx.request_id is not None and ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        raise MCPError(
            code=METHOD_NOT_FOUND,
            message="this server speaks only the handshake protocol",
            data=ctx.method,
        )
    return await call_next(ctx)


async def serve_stdio(faults: Faults, *, legacy: bool) -> None:
    server = faults.server
    async with stdio_server() as (read_stream, write_stream):
        if not legacy:
            await server.run(read_stream, write_stream, server.create_initialization_options())
            return
        # The handshake-only loop: server/discover is not a method of the handshake era.
        async with server.lifespan(server) as state:
            await serve_loop(
                server,
                read_stream,
                write_stream,
                lifespan_state=state,
                init_options=server.create_initialization_options(),
            )


async def serve_http(faults: Faults, port: int) -> None:
    import uvicorn

    # host= turns on the SDK's DNS-rebinding protection for loopback.
    app = faults.server.streamable_http_app(host="127.0.0.1")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(64)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    startup = app.router.lifespan_context

    @asynccontextmanager
    async def announce(application: Any) -> AsyncIterator[Any]:
        async with startup(application) as state:
            # The socket already listens, so connections made from now on are served.
            print(f"READY {url}", flush=True)
            yield state

    app.router.lifespan_context = announce
    config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=2)
    await uvicorn.Server(config).serve(sockets=[sock])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--http", type=int, metavar="PORT", help="serve streamable HTTP on 127.0.0.1:PORT (0: any)"
    )
    parser.add_argument(
        "--legacy", action="store_true", help="serve only the initialize-handshake protocol era"
    )
    parser.add_argument(
        "--tools-page-size", type=int, metavar="N", help="paginate tools/list, N tools a page"
    )
    parser.add_argument(
        "--many", type=int, default=0, metavar="N", help="add N extra tools t000, t001, ..."
    )
    options = parser.parse_args(argv)
    if options.tools_page_size is not None and options.tools_page_size < 1:
        parser.error("--tools-page-size must be at least 1")
    faults = Faults(legacy=options.legacy, page_size=options.tools_page_size, many=options.many)
    if options.http is None:
        anyio.run(lambda: serve_stdio(faults, legacy=options.legacy))
    else:
        anyio.run(serve_http, faults, options.http)


if __name__ == "__main__":
    main()
