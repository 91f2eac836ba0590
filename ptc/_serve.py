"""``ptc serve``: code mode for any MCP client, on the official ``mcp`` SDK's server API.

One :class:`CodeExecutor` behind an MCP server. In ``code`` mode the server
lists ``run_code`` alone; in ``both`` mode the visible native tools too. The
model reads tool descriptions, so the SDK text and the code-only rule go where
every client shows them: the ``run_code`` description, the server's
``instructions`` and the resource ``ptc://sdk``.

- A run returns ``structuredContent`` (``{logs, result}``, the declared
  ``outputSchema``) and the rendered text; a failed run is a result with
  ``isError: true`` and the ``CODE_RUN_FAILED`` message, never a protocol error.
- The program's printed lines reach a client that asked for progress (a
  ``progressToken``) as progress notifications while the run goes on, from the
  executor's ``tool/ptc-log`` events; a tool's own progress too.
- The client's cancellation cancels the run, which settles (sub-calls cancelled
  and awaited) before the handler ends.
- An ``Ask`` of the pipeline becomes an elicitation request when the client
  supports elicitation; otherwise it is denied with a reason saying so.
- Runs from concurrent requests run concurrently, bounded by the executor.

The server speaks the initialize-handshake protocol era (2025-11-25, which
every client speaks): on it the server can send requests and notifications
to the client in the middle of a call (elicitation, progress), which the
2026-07-28 era replaces with multi-round results. A 2026-07-28 client falls
back to the handshake.

Over HTTP the server binds to 127.0.0.1 unless told otherwise and can require
a bearer token; the SDK's DNS-rebinding protection is on for loopback.
"""

from __future__ import annotations

import contextlib
import contextvars
import hmac
import logging
import sys
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import anyio
import anyio.from_thread
import anyio.lowlevel

from registry import ToolExecution, ToolResult

from ._budget import DEFAULT_OUTPUT_BUDGET, OutputBudget
from ._events import EventSink
from ._executor import (
    CODE_ONLY_RULE,
    RUN_CODE,
    RUN_CODE_DESCRIPTION,
    RUN_CODE_PARAMETERS,
    CodeExecutor,
    ModelCall,
)

if TYPE_CHECKING:
    import mcp_types as types
    from mcp.server.lowlevel.server import Server

__all__ = [
    "SDK_RESOURCE",
    "CodeModeServer",
    "ServeOptions",
    "exposure_warning",
    "serve_http",
    "serve_stdio",
    "serve_tools",
]

logger = logging.getLogger("ptc.serve")

#: The resource holding the ``tools:sdk`` text.
SDK_RESOURCE: Final = "ptc://sdk"
_TOKEN_ENV: Final = "PTC_SERVE_TOKEN"
_MAX_LIVE_TEXT: Final = 2000

Context = Any  # ServerRequestContext[Any, Any]; the SDK's type, imported lazily


@dataclass(slots=True)
class _Request:
    """The MCP request a run (and its sub-calls' approvals) belongs to."""

    ctx: Any
    live: Any  # the send half of a memory stream of events for this request, or None


_CURRENT: contextvars.ContextVar[_Request | None] = contextvars.ContextVar(
    "ptc_serve_request", default=None
)


class CodeModeServer:
    """An MCP server in front of ``executor``: ``run_code`` over every visible tool.

    Args:
        executor: runs the programs (and, in ``both`` mode, the native calls);
            its ``on_event`` sink, if any, still gets every event.
        scope: the tool view the server exposes.
        name: the server's name in the handshake.

    The executor's registry gets an approval callback for the block (see
    :meth:`approve`) unless it already has one.
    """

    def __init__(
        self, executor: CodeExecutor, *, scope: str | None = None, name: str = "ptc-runner"
    ) -> None:
        from mcp.server.lowlevel.server import Server

        executor.registry.check_scope(scope)
        self.executor = executor
        self.scope = scope
        self._routes: dict[str, Any] = {}  # outer call id -> live event stream
        self._token: Any = None
        self._user_sink: EventSink | None = executor.on_event
        executor.on_event = self._on_event
        self._fallback_approval = executor.registry.approval
        executor.registry.approval = self.approve
        self.server: Server[Any] = Server(
            name,
            version=_version(),
            instructions=self.instructions(),
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_list_resources=self._list_resources,
            on_read_resource=self._read_resource,
        )
        self.server.middleware.append(_handshake_only)

    # ------------------------------------------------------------------ what the model sees

    def sdk_text(self) -> str:
        return self.executor.sdk_text(self.scope)

    def instructions(self) -> str:
        """The server's ``instructions``: how to use it, the rule, and the SDK."""
        return (
            "This server runs Python programs against a tool set, in a sandbox. "
            f"{CODE_ONLY_RULE}\n\nThe SDK the programs run against (also the resource "
            f"{SDK_RESOURCE}):\n\n{self.sdk_text()}"
        )

    def run_code_description(self) -> str:
        """``run_code``'s description: what it does, the code-only rule, and the SDK text."""
        rule = CODE_ONLY_RULE if self.executor.mode == "code" else ""
        return "\n\n".join(part for part in (RUN_CODE_DESCRIPTION, rule, self.sdk_text()) if part)

    def tools(self) -> list[types.Tool]:
        """The tools the server lists: ``run_code`` (and the native ones in ``both`` mode)."""
        import mcp_types as types

        from ._executor import RUN_RESULT_SCHEMA

        listed: list[types.Tool] = []
        if self.executor.mode != "native":
            listed.append(
                types.Tool(
                    name=RUN_CODE,
                    title="Run code",
                    description=self.run_code_description(),
                    input_schema=dict(RUN_CODE_PARAMETERS),
                    output_schema=dict(RUN_RESULT_SCHEMA),
                    annotations=types.ToolAnnotations(
                        read_only_hint=False, destructive_hint=True, open_world_hint=True
                    ),
                )
            )
        if self.executor.mode != "code":
            registry = self.executor.registry
            for schema in registry.schemas(self.scope, with_output=True):
                definition = registry.get(schema["name"], self.scope)
                output = schema["output"]
                listed.append(
                    types.Tool(
                        name=schema["name"],
                        description=schema["description"],
                        input_schema=schema["parameters"],
                        # MCP's outputSchema describes an object; other outputs are text only
                        output_schema=output if _is_object_schema(output) else None,
                        annotations=_annotations(definition),
                    )
                )
        return sorted(listed, key=lambda tool: tool.name)

    # ------------------------------------------------------------------ handlers

    async def _list_tools(
        self, ctx: Context, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        import mcp_types as types

        return types.ListToolsResult(tools=self.tools())

    async def _list_resources(
        self, ctx: Context, params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        import mcp_types as types

        return types.ListResourcesResult(
            resources=[
                types.Resource(
                    uri=SDK_RESOURCE,
                    name="tools-sdk",
                    title="The tool SDK of run_code programs",
                    description="Typed Python declarations of every tool a run_code program may call.",
                    mime_type="text/x-python",
                )
            ]
        )

    async def _read_resource(
        self, ctx: Context, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        import mcp_types as types
        from mcp.shared.exceptions import MCPError

        if str(params.uri) != SDK_RESOURCE:
            raise MCPError(code=types.INVALID_PARAMS, message=f"unknown resource {params.uri}")
        return types.ReadResourceResult(
            contents=[
                types.TextResourceContents(
                    uri=SDK_RESOURCE, mime_type="text/x-python", text=self.sdk_text()
                )
            ]
        )

    async def _call_tool(self, ctx: Context, params: types.CallToolRequestParams) -> Any:

        arguments = dict(params.arguments or {})
        call_id = f"{params.name}-{uuid.uuid4().hex[:12]}"
        wants_progress = _progress_token(ctx) is not None
        send, receive = anyio.create_memory_object_stream[dict[str, Any]](256)
        self._routes[call_id] = send if wants_progress else None
        request = _Request(ctx=ctx, live=send if wants_progress else None)
        token = _CURRENT.set(request)
        try:
            async with anyio.create_task_group() as tasks:
                if wants_progress:
                    tasks.start_soon(self._forward_live, ctx, receive)
                try:
                    result = await self._run(call_id, params.name, arguments)
                finally:
                    self._routes.pop(call_id, None)
                    send.close()
        finally:
            _CURRENT.reset(token)
            receive.close()
        return _call_result(result, structured=self._structured(params.name))

    async def _run(self, call_id: str, name: str, arguments: dict[str, Any]) -> ToolResult:
        """One call, as the model's: ``run_code`` or (in ``both`` mode) a native tool."""
        batch = await self.executor.execute(
            [ModelCall(call_id=call_id, name=name, arguments=arguments)], scope=self.scope
        )
        return batch.results[0].result

    def _structured(self, name: str) -> bool:
        if name == RUN_CODE:
            return True
        definition = self.executor.registry.get(name, self.scope)
        return definition is not None and _is_object_schema(definition.output.schema)

    # ------------------------------------------------------------------ live output

    def _on_event(self, event: dict[str, Any]) -> None:
        """The executor's sink (its delivery thread): route live events to their request."""
        sink = self._user_sink
        if sink is not None:
            sink(event)
        if event.get("type") not in ("tool/ptc-log", "tool/progress"):
            return
        root = event.get("parent_id") or event.get("id")
        stream = self._routes.get(str(root))
        if stream is None or self._token is None:
            return
        try:
            anyio.from_thread.run_sync(_offer, stream, event, token=self._token)
        except Exception:  # the loop is closing: live output is best effort
            logger.debug("a live event could not be forwarded", exc_info=True)

    async def _forward_live(self, ctx: Context, events: Any) -> None:
        """Send a request's live events to its client as progress notifications."""
        count = 0
        async for event in events:
            if event["type"] == "tool/ptc-log":
                text = event.get("text")
                if text is None:
                    text = f"({event.get('dropped', 0)} lines not shown live)"
            else:
                total = event.get("total")
                done = event.get("progress")
                text = f"{event.get('name')}: {done}" + (f"/{total}" if total is not None else "")
                if event.get("message"):
                    text += f" {event['message']}"
            count += 1
            try:
                await ctx.session.report_progress(count, None, text[:_MAX_LIVE_TEXT])
            except Exception:
                logger.debug("a progress notification could not be sent", exc_info=True)
                return

    # ------------------------------------------------------------------ approvals

    async def approve(self, execution: ToolExecution, reason: str | None) -> Any:
        """The registry's approval callback: ask the client's user through elicitation.

        Without an MCP request in progress (a call made some other way) the
        registry's own callback decides, if it had one. A client without the
        elicitation capability gets a denial that says so.
        """
        import mcp_types as types

        request = _CURRENT.get()
        if request is None:
            if self._fallback_approval is not None:
                return await self._fallback_approval(execution, reason)
            return "reject"
        session = request.ctx.session
        wanted = types.ClientCapabilities(elicitation=types.ElicitationCapability())
        if not session.check_client_capability(wanted):
            if self._fallback_approval is not None:
                return await self._fallback_approval(execution, reason)
            return "reject"
        message = f"Allow the tool call {execution.name}?" + (f" {reason}" if reason else "")
        answer = await session.elicit_form(
            message,
            {"type": "object", "properties": {}},
            related_request_id=request.ctx.request_id,
        )
        return {"accept": "allow", "decline": "reject"}.get(answer.action, "cancel")

    # ------------------------------------------------------------------ running

    def bind(self) -> None:
        """Remember the running event loop (call inside it before serving)."""
        self._token = anyio.lowlevel.current_token()


def _offer(stream: Any, event: dict[str, Any]) -> None:
    # A slow client misses live lines; the result still has them all.
    with contextlib.suppress(
        anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError
    ):
        stream.send_nowait(event)


def _progress_token(ctx: Context) -> Any:
    meta = getattr(ctx, "meta", None)
    if meta is None:
        return None
    if isinstance(meta, Mapping):
        token = meta.get("progress_token")
        return meta.get("progressToken") if token is None else token
    return getattr(meta, "progress_token", None)


def _is_object_schema(schema: Any) -> bool:
    return isinstance(schema, Mapping) and schema.get("type") == "object"


def _annotations(definition: Any) -> types.ToolAnnotations | None:
    import mcp_types as types

    hints = None if definition is None else definition.annotations
    safe = None if definition is None else definition.concurrency_safe
    if hints is None:
        return types.ToolAnnotations(read_only_hint=True) if safe is True else None
    return types.ToolAnnotations(
        title=hints.title,
        read_only_hint=hints.read_only,
        destructive_hint=hints.destructive,
        idempotent_hint=hints.idempotent,
        open_world_hint=hints.open_world,
    )


def _call_result(result: ToolResult, *, structured: bool) -> types.CallToolResult:
    """A registry result as MCP's: content blocks, structured value, ``isError``."""
    import mcp_types as types
    from pydantic import TypeAdapter, ValidationError

    adapter: TypeAdapter[Any] = TypeAdapter(types.ContentBlock)
    blocks: list[Any] = []
    for block in result.content:
        try:
            blocks.append(adapter.validate_python(block))
        except ValidationError:  # a block MCP has no type for: shown as its JSON
            import orjson

            blocks.append(types.TextContent(type="text", text=orjson.dumps(block).decode()))
    if result.is_error:
        return types.CallToolResult(content=blocks, is_error=True)
    value = result.value
    return types.CallToolResult(
        content=blocks,
        structured_content=value if structured and isinstance(value, dict) else None,
    )


async def _handshake_only(ctx: Any, call_next: Callable[[Any], Awaitable[Any]]) -> Any:
    """Refuse the 2026-07-28 era (over HTTP its requests reach the modern entry)."""
    from mcp.shared.exceptions import MCPError
    from mcp_types import METHOD_NOT_FOUND
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    if ctx.request_id is not None and ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        raise MCPError(
            code=METHOD_NOT_FOUND,
            message="ptc serve speaks the initialize-handshake protocol era",
            data=ctx.method,
        )
    return await call_next(ctx)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ptc-runner")
    except PackageNotFoundError:  # pragma: no cover - a source checkout without metadata
        return "0"


# --------------------------------------------------------------------------- transports


async def serve_stdio(server: CodeModeServer) -> None:
    """Serve one client over this process's stdin and stdout (until it closes them)."""
    from mcp.server.runner import serve_loop
    from mcp.server.stdio import stdio_server

    server.bind()
    lowlevel = server.server
    async with stdio_server() as (read_stream, write_stream), lowlevel.lifespan(lowlevel) as state:
        await serve_loop(
            lowlevel,
            read_stream,
            write_stream,
            lifespan_state=state,
            init_options=lowlevel.create_initialization_options(),
        )


async def serve_http(
    server: CodeModeServer,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    token: str | None = None,
    ready: Callable[[str], None] | None = None,
) -> None:
    """Serve streamable HTTP at ``http://host:port/mcp`` (port 0: any free port).

    With ``token``, every request must carry ``Authorization: Bearer <token>``
    (else 401). ``ready(url)`` is called once the socket listens.
    """
    import socket
    from contextlib import asynccontextmanager

    import uvicorn

    server.bind()
    app = server.server.streamable_http_app(host=host)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if family == socket.AF_INET6 else host
    url = f"http://{shown}:{bound}/mcp"
    startup = app.router.lifespan_context

    @asynccontextmanager
    async def announce(application: Any) -> Any:
        async with startup(application) as state:
            if ready is not None:
                ready(url)
            yield state

    app.router.lifespan_context = announce
    asgi: Any = app if token is None else _BearerToken(app, token)
    config = uvicorn.Config(asgi, log_level="warning", lifespan="on", timeout_graceful_shutdown=2)
    try:
        await uvicorn.Server(config).serve(sockets=[sock])
    finally:
        sock.close()


class _BearerToken:
    """ASGI middleware: a request without ``Authorization: Bearer <token>`` gets 401."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"text/plain; charset=utf-8"),
                            (b"www-authenticate", b'Bearer realm="ptc"'),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": b"a bearer token is required\n"})
                return
        await self.app(scope, receive, send)


def token_from_environment() -> str | None:
    """The bearer token from ``PTC_SERVE_TOKEN``, if set and not empty."""
    import os

    return os.environ.get(_TOKEN_ENV) or None


def warn(message: str) -> None:
    print(f"ptc: warning: {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- the command


@dataclass(frozen=True, slots=True, kw_only=True)
class ServeOptions:
    scope: str | None = None
    runtime: str = "subprocess"
    isolation: str = "strict"
    mode: str = "code"
    transport: str = "stdio"
    host: str = "127.0.0.1"
    port: int = 8765
    token: str | None = None
    timeout: float | None = None
    max_parallel: int = 10
    events_path: str | None = None
    output_budget: OutputBudget = DEFAULT_OUTPUT_BUDGET


_LOOPBACK: Final = frozenset({"127.0.0.1", "localhost", "::1"})


def exposure_warning(transport: str, host: str, token: str | None) -> str | None:
    """What to say before serving HTTP beyond loopback (``None``: nothing to say)."""
    if transport != "http" or host in _LOOPBACK:
        return None
    return f"serving on {host}: anyone who can reach it can run programs against your tools" + (
        "" if token else "; no bearer token is set (--token or PTC_SERVE_TOKEN)"
    )


def serve_tools(tools: Any, options: ServeOptions) -> int:
    """``ptc serve``: run the server until the client goes (stdio) or a signal (HTTP).

    ``tools`` is a :class:`ptc._toolspec.ToolSet`; its MCP servers are connected
    for the server's whole life.

    Raises:
        ValueError: an unusable option (the CLI prints it and exits 2).
    """
    from runtime import Limits, RuntimeBackendError, get_runtime

    from ._toolspec import run_command

    if options.mode not in ("code", "both"):
        raise ValueError(f"--mode must be code or both, got {options.mode!r}")
    if options.transport not in ("stdio", "http"):
        raise ValueError(f"--transport must be stdio or http, got {options.transport!r}")
    if not 0 <= options.port <= 65535:
        raise ValueError(f"--port must be 0 to 65535, got {options.port}")
    if options.timeout is not None and not options.timeout > 0:
        raise ValueError("--timeout must be positive")
    if options.isolation not in ("strict", "best-effort"):
        raise ValueError(f"--isolation must be strict or best-effort, got {options.isolation!r}")
    try:
        import mcp  # noqa: F401
    except ImportError:
        raise ValueError("ptc serve needs the mcp package: pip install 'ptc-runner[mcp]'") from None
    try:
        runtime = get_runtime(options.runtime, isolation=options.isolation)  # type: ignore[arg-type]
    except RuntimeBackendError as exc:
        raise ValueError(str(exc)) from exc
    token = options.token or token_from_environment()
    exposed = exposure_warning(options.transport, options.host, token)
    if exposed is not None:
        warn(exposed)
    limits = Limits() if options.timeout is None else Limits(timeout=options.timeout)
    from ._run import log_event, open_event_log

    events = open_event_log(options.events_path)

    def on_event(event: dict[str, Any]) -> None:
        if events is not None:
            log_event(events, event)

    async def go() -> None:
        async with (
            runtime,
            tools.open() as registry,
            CodeExecutor(
                registry,
                runtime=runtime,
                mode=options.mode,  # type: ignore[arg-type]
                max_parallel_sub_calls=options.max_parallel,
                limits=limits,
                on_event=on_event if events is not None else None,
                output_budget=options.output_budget,
            ) as executor,
        ):
            server = CodeModeServer(executor, scope=options.scope)
            if options.transport == "stdio":
                await serve_stdio(server)
            else:
                await serve_http(
                    server,
                    host=options.host,
                    port=options.port,
                    token=token,
                    ready=lambda url: print(f"ptc: serving {url}", file=sys.stderr, flush=True),
                )

    try:
        run_command(go)
    finally:
        if events is not None:
            events.close()
    return 0
