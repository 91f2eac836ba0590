"""MCP servers' tools as registry tools, on the official ``mcp`` SDK (the ``mcp`` extra).

:func:`connect_mcp` connects to one or many servers (stdio or streamable
HTTP), registers every tool of each as ``<server>.<tool>`` and keeps the
sessions open until the ``async with`` block ends; then it disposes the tools
and closes the sessions (a stdio server's process is ended). The ``mcp``
package is imported only when a server is connected.

The mapping of one call:

- ``inputSchema`` is the parameter schema, kept whole; ``outputSchema`` the
  output schema, and ``structuredContent`` the canonical value. A tool without
  an ``outputSchema`` returns its single text block (parsed when it is a JSON
  object or array), or else its list of content blocks (:data:`MCP_OUTPUT`).
- The content blocks (text, image, audio, resource links, embedded resources)
  are the result's content, as MCP spells them.
- ``isError`` is a failure coded ``MCP_TOOL_ERROR``; a JSON-RPC error is
  ``MCP_PROTOCOL_ERROR``, a call past ``call_timeout`` ``MCP_TIMEOUT``, a server
  that went away ``MCP_CONNECTION_CLOSED`` (that call and every later one: a
  session is not re-established), a result that breaks the output schema
  ``INVALID_TOOL_OUTPUT``.
- ``readOnlyHint`` makes a tool concurrency-safe; all annotations are kept as
  :class:`ToolAnnotations` (see :func:`ask_before_destructive`).
- A cancelled call is cancelled on the server too (MCP's cancellation), and
  settles as ``ABORTED``; progress notifications reach the registry's
  progress listeners; a changed tool list is listed again and the registry
  updated, without dropping the calls in flight.
"""

from __future__ import annotations

import logging
import math
import os
import re
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TextIO, TypeAlias, cast

import anyio
import orjson

from ._exceptions import (
    McpCallError,
    McpConfigError,
    McpConnectionError,
    RegistrationError,
    ToolOutputError,
)
from ._types import (
    ContentBlock,
    ToolAnnotations,
    ToolDefinition,
    ToolOutput,
    ToolReturn,
    ToolRunContext,
)

#: ``await call(tool_name, args, ctx)``: one call of a server's tool, its raw result.
CallFn: TypeAlias = Callable[[str, Any, ToolRunContext], Awaitable["CallToolResult"]]

if TYPE_CHECKING:
    from mcp import Client
    from mcp_types import CallToolResult, Tool

    from ._registry import ToolRegistry

__all__ = [
    "MCP_CONNECTION_CLOSED",
    "MCP_OUTPUT",
    "MCP_PROTOCOL_ERROR",
    "MCP_TIMEOUT",
    "MCP_TOOL_ERROR",
    "HttpServer",
    "McpCallError",
    "McpConfigError",
    "McpConnection",
    "McpConnectionError",
    "McpServers",
    "ServerSpec",
    "StdioServer",
    "connect_mcp",
    "load_mcp_config",
]

logger = logging.getLogger("registry.mcp")

#: The tool's result has ``isError: true``; the message is the server's text.
MCP_TOOL_ERROR: Final = "MCP_TOOL_ERROR"
#: The server answered the call with a JSON-RPC error, or with a malformed result.
MCP_PROTOCOL_ERROR: Final = "MCP_PROTOCOL_ERROR"
#: The server did not answer within the connection's ``call_timeout``.
MCP_TIMEOUT: Final = "MCP_TIMEOUT"
#: The server went away (it exited, or its connection closed); later calls fail fast.
MCP_CONNECTION_CLOSED: Final = "MCP_CONNECTION_CLOSED"

#: The output schema of a tool that declares none: what its canonical value is.
MCP_OUTPUT: Final[Mapping[str, Any]] = {
    "title": "McpToolResult",
    "description": (
        "The tool's text when it returns one text block (parsed when that text is a JSON "
        "object or array), else its list of MCP content blocks "
        '({"type": "text", "text": ...}, {"type": "image", "data": ..., "mimeType": ...}, ...).'
    ),
    "anyOf": [{"type": "string"}, {"type": "object"}, {"type": "array"}],
}

_SERVER_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]{0,63}")
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_MAX_PAGES = 1000
_STDERR_TAIL = 2000
_CLOSE_TIMEOUT = 10.0


# --------------------------------------------------------------------------- configuration


@dataclass(frozen=True, slots=True, kw_only=True)
class StdioServer:
    """A server started as a subprocess, spoken to over its stdin and stdout.

    The process gets only a minimal environment (``HOME``, ``PATH``, ``USER``,
    ``SHELL``, ``TERM``, ``LOGNAME``) plus ``env``: the host's secrets stay out.
    Its stderr is kept, and its end quoted when it fails.
    """

    command: str
    args: Sequence[str] = ()
    env: Mapping[str, str] | None = None
    cwd: str | os.PathLike[str] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpServer:
    """A server reached over MCP's streamable HTTP transport."""

    url: str
    headers: Mapping[str, str] | None = None


ServerSpec: TypeAlias = StdioServer | HttpServer


def load_mcp_config(
    source: str | os.PathLike[str] | Mapping[str, Any],
    *,
    environ: Mapping[str, str] | None = None,
) -> dict[str, ServerSpec]:
    """Read an ``mcpServers`` document (the format of Claude Desktop, Cursor and Claude Code).

    ``{"mcpServers": {"git": {"command": ..., "args": [...], "env": {...}, "cwd": ...},
    "remote": {"url": ..., "headers": {...}}}}``; an entry may name its ``type``
    (``stdio``, ``http`` or ``streamable-http``). ``${VAR}`` and ``${VAR:-default}``
    in a command, argument, environment value, cwd, URL or header are replaced
    from ``environ`` (default: ``os.environ``). A relative ``cwd`` is relative to
    the file.

    Raises:
        McpConfigError: the document, or an entry, is not of this shape (the
            message names the entry and the key).
        OSError: the file cannot be read.
    """
    base: Path | None = None
    if not isinstance(source, str | os.PathLike):
        document: Any = source
    else:
        path = Path(source)
        base = path.parent
        try:
            document = orjson.loads(path.read_bytes())
        except orjson.JSONDecodeError as exc:
            raise McpConfigError(f"{path}: not JSON ({exc})") from None
    if not isinstance(document, Mapping) or not isinstance(document.get("mcpServers"), Mapping):
        raise McpConfigError('expected an object with an "mcpServers" object')
    env = os.environ if environ is None else environ
    servers: dict[str, ServerSpec] = {}
    for name, entry in document["mcpServers"].items():
        check_server_name(name)
        servers[name] = _server_spec(name, entry, env, base)
    return servers


def check_server_name(name: object) -> str:
    """Return ``name`` if it can namespace a server's tools, else raise :class:`McpConfigError`."""
    if not isinstance(name, str) or not _SERVER_NAME.fullmatch(name):
        raise McpConfigError(
            f"server name {name!r}: use 1 to 64 letters, digits, '_' or '-' "
            "(it becomes the prefix of the tools' names: <server>.<tool>)"
        )
    return name


def _server_spec(name: str, entry: Any, env: Mapping[str, str], base: Path | None) -> ServerSpec:
    where = f"server {name!r}"
    if not isinstance(entry, Mapping):
        raise McpConfigError(f"{where}: expected an object")
    kind = entry.get("type", "http" if "url" in entry else "stdio")
    if kind == "stdio":
        unknown = set(entry) - {"type", "command", "args", "env", "cwd"}
        command = _text(entry.get("command"), f"{where}: command", env)
        args = entry.get("args", [])
        if not isinstance(args, list):
            raise McpConfigError(f"{where}: args must be a list of strings")
        extra_env = entry.get("env")
        if extra_env is not None and not isinstance(extra_env, Mapping):
            raise McpConfigError(f"{where}: env must be an object of strings")
        cwd: str | None = None
        if entry.get("cwd") is not None:
            cwd = _text(entry["cwd"], f"{where}: cwd", env)
            if base is not None and not os.path.isabs(cwd):
                cwd = str(base / cwd)
        spec: ServerSpec = StdioServer(
            command=command,
            args=tuple(_text(a, f"{where}: args[{i}]", env) for i, a in enumerate(args)),
            env=None
            if extra_env is None
            else {str(k): _text(v, f"{where}: env.{k}", env) for k, v in extra_env.items()},
            cwd=cwd,
        )
    elif kind in ("http", "streamable-http", "streamableHttp"):
        unknown = set(entry) - {"type", "url", "headers"}
        headers = entry.get("headers")
        if headers is not None and not isinstance(headers, Mapping):
            raise McpConfigError(f"{where}: headers must be an object of strings")
        spec = HttpServer(
            url=_text(entry.get("url"), f"{where}: url", env),
            headers=None
            if headers is None
            else {str(k): _text(v, f"{where}: headers.{k}", env) for k, v in headers.items()},
        )
    elif kind == "sse":
        raise McpConfigError(
            f"{where}: the SSE transport is deprecated and not supported; use streamable HTTP"
        )
    else:
        raise McpConfigError(f"{where}: unknown type {kind!r} (stdio, http)")
    if unknown:
        logger.warning("MCP %s: ignoring unknown keys %s", where, ", ".join(sorted(unknown)))
    return spec


def _text(value: Any, where: str, env: Mapping[str, str]) -> str:
    if not isinstance(value, str) or (where.endswith(("command", "url")) and not value):
        raise McpConfigError(
            f"{where} must be a non-empty string" if not value else f"{where} must be a string"
        )

    def substitute(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if name in env:
            return env[name]
        if default is not None:
            return default
        raise McpConfigError(f"{where}: the environment variable {name} is not set")

    return _VARIABLE.sub(substitute, value)


# --------------------------------------------------------------------------- the mapping


def tool_definition(server: str, tool: Tool, call: CallFn) -> ToolDefinition:
    """The registry definition of one MCP tool of ``server``."""
    hints = tool.annotations
    annotations = ToolAnnotations(
        title=tool.title or (hints.title if hints is not None else None),
        read_only=None if hints is None else hints.read_only_hint,
        destructive=None if hints is None else hints.destructive_hint,
        idempotent=None if hints is None else hints.idempotent_hint,
        open_world=None if hints is None else hints.open_world_hint,
    )
    output_schema = tool.output_schema
    structured = output_schema is not None
    name = tool.name

    async def execute(args: Any, ctx: ToolRunContext) -> Any:
        result = await call(name, args, ctx)
        return to_return(result, structured=structured)

    return ToolDefinition(
        name=f"{server}.{name}",
        description=tool.description or tool.title or "",
        parameters=dict(tool.input_schema),
        output=ToolOutput(schema=MCP_OUTPUT if output_schema is None else dict(output_schema)),
        execute=execute,
        concurrency_safe=annotations.read_only is True,
        annotations=annotations,
    )


def content_blocks(result: CallToolResult) -> list[ContentBlock]:
    """The result's content blocks as MCP spells them on the wire."""
    return [
        block.model_dump(mode="json", by_alias=True, exclude_none=True) for block in result.content
    ]


def to_return(result: CallToolResult, *, structured: bool) -> Any:
    """A successful result's canonical value with its content (see the module docstring).

    Raises:
        ToolError: the result has ``isError`` (code ``MCP_TOOL_ERROR``).
    """
    blocks = content_blocks(result)
    if result.is_error:
        texts = [block["text"] for block in blocks if block.get("type") == "text"]
        message = "\n".join(texts).strip() or "the tool reported an error without a message"
        raise McpCallError(message, code=MCP_TOOL_ERROR)
    if result.structured_content is not None:
        value: Any = result.structured_content
        return ToolReturn(value, blocks) if blocks else value
    if structured:
        raise ToolOutputError(
            "the tool declares an output schema but returned no structured content"
        )
    if len(blocks) == 1 and blocks[0].get("type") == "text":
        text: str = blocks[0]["text"]
        value = text
        head = text.lstrip()[:1]
        if head in ("{", "["):
            with suppress(orjson.JSONDecodeError):
                value = orjson.loads(text)
        return ToolReturn(value, blocks)
    return ToolReturn(blocks, blocks)


# --------------------------------------------------------------------------- connections


class McpConnection:
    """One live MCP server session and the tools it registered.

    Made by :func:`connect_mcp`; read it through the :class:`McpServers` it yields.
    """

    __slots__ = (
        "_call_timeout",
        "_client",
        "_closed_reason",
        "_closing",
        "_connect_timeout",
        "_refresh_lock",
        "_registered",
        "_registry",
        "_scope",
        "_skipped",
        "_stderr",
        "_tasks",
        "name",
        "spec",
    )

    def __init__(
        self,
        name: str,
        spec: ServerSpec,
        registry: ToolRegistry,
        *,
        scope: str | None,
        connect_timeout: float,
        call_timeout: float | None,
    ) -> None:
        self.name = name
        self.spec = spec
        self._registry = registry
        self._scope = scope
        self._connect_timeout = connect_timeout
        self._call_timeout = call_timeout
        self._client: Client | None = None
        # full name -> (definition, fingerprint of the listed tool, disposer)
        self._registered: dict[str, tuple[ToolDefinition, bytes, Callable[[], None]]] = {}
        self._skipped: dict[str, str] = {}
        self._closed_reason: str | None = None
        self._stderr: TextIO | None = None
        self._closing = anyio.Event()
        self._refresh_lock = anyio.Lock()
        self._tasks: anyio.abc.TaskGroup | None = None

    def __repr__(self) -> str:
        state = "alive" if self.alive else f"closed: {self._closed_reason}"
        return f"<McpConnection {self.name!r} ({state}), {len(self._registered)} tools>"

    # ------------------------------------------------------------------ reading

    @property
    def tools(self) -> tuple[str, ...]:
        """The registered tools' names (``<server>.<tool>``), sorted."""
        return tuple(sorted(self._registered))

    @property
    def skipped(self) -> Mapping[str, str]:
        """Tools the server listed that could not be registered: name -> why."""
        return dict(self._skipped)

    @property
    def alive(self) -> bool:
        """Whether calls can still reach the server."""
        return self._client is not None and self._closed_reason is None

    @property
    def closed_reason(self) -> str | None:
        """Why the session ended, once it has (``None`` while it is alive)."""
        return self._closed_reason

    @property
    def client(self) -> Client:
        """The SDK's :class:`mcp.Client` (for resources, prompts and the like).

        Raises:
            RuntimeError: the connection is closed.
        """
        if self._client is None or self._closed_reason is not None:
            raise RuntimeError(f"MCP server {self.name!r} is not connected")
        return self._client

    @property
    def protocol_version(self) -> str | None:
        return None if self._client is None else self._client.session.protocol_version

    @property
    def server_info(self) -> dict[str, Any] | None:
        """The server's ``{"name", "version", ...}``, when it said."""
        if self._client is None or self._client.session.server_info is None:
            return None
        info: dict[str, Any] = self._client.session.server_info.model_dump(
            mode="json", by_alias=True, exclude_none=True
        )
        return info

    # ------------------------------------------------------------------ lifecycle

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Own the session: connect, list and register, serve until closed, clean up.

        Reports readiness through ``task_status``; a failure to connect raises
        :class:`McpConnectionError` before that. Once serving it never raises:
        a session that breaks is recorded and its calls fail.
        """
        from mcp import Client

        ready = False
        with cast(
            TextIO, tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")
        ) as stderr:
            self._stderr = stderr
            deadline = anyio.current_time() + self._connect_timeout
            try:
                with anyio.CancelScope(deadline=deadline) as scope:
                    try:
                        async with Client(
                            self._transport(stderr),
                            read_timeout_seconds=self._connect_timeout,
                            message_handler=self._on_message,
                            client_info=_client_info(),
                            cache=None,
                        ) as client:
                            self._client = client
                            await self._sync_tools(client)
                            scope.deadline = math.inf
                            ready = True
                            task_status.started()
                            async with anyio.create_task_group() as tasks:
                                self._tasks = tasks
                                if _wants_listen(client):
                                    tasks.start_soon(self._listen, client)
                                await self._closing.wait()
                                tasks.cancel_scope.cancel()
                    except Exception as exc:
                        if not ready:
                            raise McpConnectionError(self.name, self._describe(exc)) from exc
                        self._set_closed(self._describe(exc))
                        logger.warning("MCP server %r: the session ended: %s", self.name, exc)
                if scope.cancelled_caught and not ready:
                    raise McpConnectionError(
                        self.name,
                        self._with_stderr(f"no answer within {self._connect_timeout:g} s"),
                    )
            finally:
                self._tasks = None
                self._set_closed("the connection was closed")
                self._unregister_all()
                self._client = None
                self._stderr = None

    def close(self) -> None:
        """Ask the owning task to end the session (idempotent)."""
        self._closing.set()

    def _transport(self, stderr: TextIO) -> Any:
        spec = self.spec
        if isinstance(spec, StdioServer):
            from mcp import StdioServerParameters
            from mcp.client.stdio import stdio_client

            params = StdioServerParameters(
                command=spec.command,
                args=list(spec.args),
                env=None if spec.env is None else dict(spec.env),
                cwd=None if spec.cwd is None else os.fspath(spec.cwd),
            )
            return stdio_client(params, errlog=stderr)
        return _http_transport(spec)

    # ------------------------------------------------------------------ tools

    async def refresh(self) -> None:
        """List the server's tools again and update the registry to match.

        New tools are registered, removed ones disposed, changed ones replaced;
        calls in flight keep the definition they started with.
        """
        await self._sync_tools(self.client)

    async def _sync_tools(self, client: Client) -> None:
        async with self._refresh_lock:
            listed = await _list_all(client)
            self._apply(listed)

    def _apply(self, listed: list[Tool]) -> None:
        wanted: dict[str, tuple[ToolDefinition, bytes]] = {}
        skipped: dict[str, str] = {}
        for tool in listed:
            full = f"{self.name}.{tool.name}"
            if full in wanted:
                skipped[full] = "the server listed two tools of this name; the first is kept"
                continue
            wanted[full] = (tool_definition(self.name, tool, self._call), _fingerprint(tool))
        for full in list(self._registered):
            if full not in wanted or self._registered[full][1] != wanted[full][1]:
                self._registered.pop(full)[2]()
        for full, (definition, fingerprint) in wanted.items():
            if full in self._registered:
                continue
            try:
                dispose = self._registry.register(definition, scope=self._scope)
            except RegistrationError as exc:
                skipped[full] = exc.problem
                logger.warning(
                    "MCP server %r: tool %r not registered: %s", self.name, full, exc.problem
                )
                continue
            self._registered[full] = (definition, fingerprint, dispose)
        self._skipped = skipped

    def _unregister_all(self) -> None:
        while self._registered:
            _, (_, _, dispose) = self._registered.popitem()
            dispose()

    # ------------------------------------------------------------------ notifications

    async def _on_message(self, message: Any) -> None:
        from mcp_types import ToolListChangedNotification

        if isinstance(message, ToolListChangedNotification):
            self._schedule_refresh()
        elif isinstance(message, Exception):
            logger.debug("MCP server %r: transport error: %s", self.name, message)
        await anyio.lowlevel.checkpoint()

    def _schedule_refresh(self) -> None:
        tasks = self._tasks
        if tasks is not None:
            tasks.start_soon(self._refresh_quietly)

    async def _refresh_quietly(self) -> None:
        try:
            await self.refresh()
        except Exception as exc:
            logger.warning("MCP server %r: listing the changed tools failed: %s", self.name, exc)

    async def _listen(self, client: Client) -> None:
        """Follow ``tools/list_changed`` on a 2026-07-28 connection (``subscriptions/listen``)."""
        try:
            async with client.listen(tools_list_changed=True) as events:
                async for _ in events:
                    await self._refresh_quietly()
        except Exception as exc:
            logger.info("MCP server %r: not following tool-list changes: %s", self.name, exc)

    # ------------------------------------------------------------------ calls

    async def _call(self, name: str, args: Any, ctx: ToolRunContext) -> CallToolResult:
        from mcp import MCPError
        from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT
        from pydantic import ValidationError

        client = self._client
        if client is None or self._closed_reason is not None:
            raise McpCallError(
                f"MCP server {self.name!r} is gone: {self._closed_reason or 'not connected'}",
                code=MCP_CONNECTION_CLOSED,
            )

        async def progress(progress: float, total: float | None, message: str | None) -> None:
            ctx.report_progress(progress, total, message)

        timeout = math.inf if self._call_timeout is None else self._call_timeout
        try:
            return await client.call_tool(
                name, args, read_timeout_seconds=timeout, progress_callback=progress
            )
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                reason = self._with_stderr("its connection closed")
                self._set_closed(reason)
                raise McpCallError(
                    f"MCP server {self.name!r} is gone: {reason}", code=MCP_CONNECTION_CLOSED
                ) from None
            if exc.code == REQUEST_TIMEOUT:
                raise McpCallError(
                    f"MCP server {self.name!r} did not answer {name} within {timeout:g} s",
                    code=MCP_TIMEOUT,
                ) from None
            raise McpCallError(
                f"MCP server {self.name!r} answered {name} with error {exc.code}: {exc.message}",
                code=MCP_PROTOCOL_ERROR,
            ) from None
        except ValidationError as exc:
            raise McpCallError(
                f"MCP server {self.name!r} sent a malformed result for {name}: "
                f"{exc.error_count()} problem(s), first: {exc.errors()[0]['msg']}",
                code=MCP_PROTOCOL_ERROR,
            ) from None
        except RuntimeError as exc:  # the SDK's check of structured content
            raise ToolOutputError(str(exc)) from None
        except Exception as exc:
            broken = _transport_failure(exc)
            if broken is None and self._closed_reason is None:
                raise
            reason = self._closed_reason or self._with_stderr(f"its connection broke ({broken})")
            self._set_closed(reason)
            raise McpCallError(
                f"MCP server {self.name!r} is gone: {reason}", code=MCP_CONNECTION_CLOSED
            ) from None

    # ------------------------------------------------------------------ errors

    def _set_closed(self, reason: str) -> None:
        if self._closed_reason is None:
            self._closed_reason = reason

    def _describe(self, exc: BaseException) -> str:
        while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
            exc = exc.exceptions[0]
        text = str(exc) or type(exc).__name__
        if isinstance(exc, FileNotFoundError) and isinstance(self.spec, StdioServer):
            text = f"cannot start {self.spec.command!r}: no such command"
        return self._with_stderr(text)

    def _with_stderr(self, text: str) -> str:
        tail = _tail(self._stderr)
        return f"{text}; its stderr ends: {tail}" if tail else text


@asynccontextmanager
async def _http_transport(spec: HttpServer) -> AsyncIterator[Any]:
    """Streamable HTTP with the server's headers, on a client this connection owns."""
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    timeout = httpx2.Timeout(30.0, read=300.0)  # the SDK's own defaults
    async with (
        httpx2.AsyncClient(headers=dict(spec.headers or {}), timeout=timeout) as http,
        streamable_http_client(spec.url, http_client=http) as streams,
    ):
        yield streams


def _transport_failure(exc: BaseException) -> str | None:
    """The first transport-level error in ``exc`` (groups included), by name; else ``None``."""
    kinds: tuple[type[BaseException], ...] = (
        OSError,
        EOFError,
        anyio.BrokenResourceError,
        anyio.ClosedResourceError,
        anyio.EndOfStream,
    )
    try:
        import httpx2

        kinds += (httpx2.TransportError,)
    except ImportError:  # pragma: no cover - the mcp extra brings it
        pass
    pending = [exc]
    while pending:
        current = pending.pop()
        if isinstance(current, BaseExceptionGroup):
            pending.extend(current.exceptions)
        elif isinstance(current, kinds):
            return type(current).__name__
    return None


def _tail(stream: TextIO | None) -> str:
    if stream is None or stream.closed:
        return ""
    try:
        stream.flush()
        size = stream.seek(0, os.SEEK_END)
        stream.seek(max(0, size - _STDERR_TAIL * 4))
        text = stream.read()
    except (OSError, ValueError):
        return ""
    lines = [line for line in text.strip().splitlines() if line.strip()][-5:]
    return " | ".join(lines)[-_STDERR_TAIL:]


def _wants_listen(client: Client) -> bool:
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    tools = client.session.server_capabilities
    follows = tools is not None and tools.tools is not None and bool(tools.tools.list_changed)
    return follows and client.session.protocol_version in MODERN_PROTOCOL_VERSIONS


async def _list_all(client: Client) -> list[Tool]:
    """Every page of the server's tool list."""
    tools: list[Tool] = []
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(_MAX_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            return tools
        if cursor in seen:
            raise RuntimeError(f"the tool list repeats the cursor {cursor!r}")
        seen.add(cursor)
    raise RuntimeError(f"the tool list has more than {_MAX_PAGES} pages")


def _fingerprint(tool: Tool) -> bytes:
    return orjson.dumps(tool.model_dump(mode="json", by_alias=True), option=orjson.OPT_SORT_KEYS)


def _client_info() -> Any:
    from mcp_types import Implementation

    return Implementation(name="ptc-runner", version=_version())


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ptc-runner")
    except PackageNotFoundError:  # pragma: no cover - a source checkout without metadata
        return "0"


# --------------------------------------------------------------------------- the group


class McpServers(Mapping[str, McpConnection]):
    """The servers :func:`connect_mcp` connected, by name."""

    __slots__ = ("_connections",)

    def __init__(self, connections: Mapping[str, McpConnection]) -> None:
        self._connections = dict(connections)

    def __getitem__(self, name: str) -> McpConnection:
        return self._connections[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._connections)

    def __len__(self) -> int:
        return len(self._connections)

    @property
    def tools(self) -> tuple[str, ...]:
        """Every registered tool of every server, sorted."""
        return tuple(sorted(name for c in self._connections.values() for name in c.tools))

    def __repr__(self) -> str:
        return f"<McpServers {', '.join(self._connections)}>"


@asynccontextmanager
async def connect_mcp(
    registry: ToolRegistry,
    servers: Mapping[str, ServerSpec],
    *,
    scope: str | None = None,
    connect_timeout: float = 30.0,
    call_timeout: float | None = None,
) -> AsyncIterator[McpServers]:
    """Connect to MCP servers and register their tools into ``registry`` until the block ends.

    Every tool of server ``git`` is registered as ``git.<tool>`` (globally, or
    into ``scope``); a program calls it as ``await tools.git.status(args)``.
    The servers are connected concurrently; if one fails, those already
    connected are closed again and nothing stays registered.

    Args:
        registry: where the tools go.
        servers: server name -> :class:`StdioServer` or :class:`HttpServer` (e.g.
            from :func:`load_mcp_config`).
        scope: register into this scope instead of the global view.
        connect_timeout: seconds each server has to start, initialise and list.
        call_timeout: seconds a call may wait for its answer (``MCP_TIMEOUT``);
            ``None`` waits as long as the call's own timeout and cancellation allow.

    Raises:
        McpConnectionError: a server could not be started, reached or initialised
            (the first one that failed; the message names it).
        McpConfigError: a server name cannot namespace tools.
        ImportError: the ``mcp`` package is missing (``pip install 'ptc-runner[mcp]'``).
    """
    for name in servers:
        check_server_name(name)
    try:
        import mcp  # noqa: F401
    except ImportError as exc:
        raise ImportError(
            "MCP servers need the mcp package: pip install 'ptc-runner[mcp]'"
        ) from exc
    connections = {
        name: McpConnection(
            name,
            spec,
            registry,
            scope=scope,
            connect_timeout=connect_timeout,
            call_timeout=call_timeout,
        )
        for name, spec in servers.items()
    }
    failures: list[McpConnectionError] = []
    raised: Exception | None = None
    async with anyio.create_task_group() as owners:

        async def start(connection: McpConnection) -> None:
            try:
                await owners.start(connection.run)
            except McpConnectionError as exc:
                failures.append(exc)

        async with anyio.create_task_group() as starting:
            for connection in connections.values():
                starting.start_soon(start, connection)
        if failures:
            owners.cancel_scope.cancel()
        else:
            try:
                yield McpServers(connections)
            except Exception as exc:
                # Raised again below, past the task group (which would wrap it).
                raised = exc
            finally:
                for connection in connections.values():
                    connection.close()
                # The owners end their sessions (the SDK ends a stdio server's
                # process, a kill after a grace period); a session that will not
                # end is cancelled.
                owners.cancel_scope.deadline = anyio.current_time() + _CLOSE_TIMEOUT
    if failures:
        raise failures[0]
    if raised is not None:
        raise raised
