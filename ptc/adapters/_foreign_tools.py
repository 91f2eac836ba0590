"""Tools written for other frameworks, registered into a ``ToolRegistry`` as they are.

    register_langchain_tools(registry, [search, fetch_page])  # BaseTool, @tool
    register_pydantic_ai_tools(registry, toolset)             # Tool, functions, FunctionToolset
    register_fastmcp_tools(registry, mcp)                     # an MCPServer's @mcp.tool()s

Each keeps the tool's name, description and parameter JSON Schema (what its framework
sends a model), its output schema where the framework knows one, and its body, sync or
async (a sync body runs in a worker thread). Each returns one disposer that
unregisters every tool it registered; registration is all or nothing (a name already
taken undoes the ones before it). A framework is imported only by its own function.

Errors become registry failures the model (or the program) reads, each with a stable
code:

=====================================================  ========================
raised by the tool                                     failure code
=====================================================  ========================
LangChain ``ToolException``                            :data:`TOOL_EXCEPTION`
pydantic-ai ``ModelRetry``                             :data:`MODEL_RETRY`
pydantic-ai ``ToolFailed``                             :data:`TOOL_FAILED`
an MCP server's ``ToolError`` (or an ``isError``)      ``MCP_TOOL_ERROR``
arguments its framework's own validation rejects       ``INVALID_ARGS``
something only its framework's run can give            :data:`TOOL_NEEDS_FRAMEWORK`
(pydantic-ai's ``CallDeferred``/``ApprovalRequired``,
an MCP tool's request for client input)
any other exception                                    as for a registry tool
=====================================================  ========================

A LangChain tool's message is the one its ``handle_tool_error`` (or
``handle_validation_error``) gives, when that is a string or a function, so the model
reads what the tool's author wrote for it.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import inspect
import logging
import typing
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Final

import anyio.to_thread

from registry import (
    ContentBlock,
    RegistrationError,
    ToolArgsError,
    ToolDefinition,
    ToolError,
    ToolOutput,
    ToolRegistry,
    ToolReturn,
    ToolRunContext,
)

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool
    from mcp.server.mcpserver import MCPServer
    from mcp_types import CallToolResult
    from pydantic_ai import Tool
    from pydantic_ai.toolsets import FunctionToolset

__all__ = [
    "MODEL_RETRY",
    "TOOL_EXCEPTION",
    "TOOL_FAILED",
    "TOOL_NEEDS_FRAMEWORK",
    "register_fastmcp_tools",
    "register_langchain_tools",
    "register_pydantic_ai_tools",
]

#: A LangChain tool raised ``ToolException``; the message is its error text.
TOOL_EXCEPTION: Final = "TOOL_EXCEPTION"
#: A pydantic-ai tool raised ``ModelRetry``: call it again, differently.
MODEL_RETRY: Final = "MODEL_RETRY"
#: A pydantic-ai tool raised ``ToolFailed``: a terminal failure, a retry will not help.
TOOL_FAILED: Final = "TOOL_FAILED"
#: The tool asked for what only its framework's own run gives (a deferred call, an
#: approval raised from its body, input from an MCP client).
TOOL_NEEDS_FRAMEWORK: Final = "TOOL_NEEDS_FRAMEWORK"

Disposer = Callable[[], None]

#: The output schema of a tool whose framework declares none: any JSON value.
_ANY: Final[dict[str, Any]] = {}


def _register_all(
    registry: ToolRegistry,
    definitions: Iterable[ToolDefinition],
    scope: str | None,
    extra: Callable[[], Disposer] | None = None,
) -> Disposer:
    """Register every definition (all or none); one disposer for all of them."""
    disposers: list[Disposer] = []
    try:
        for definition in definitions:
            disposers.append(registry.register(definition, scope=scope))
        if extra is not None:
            disposers.append(extra())
    except BaseException:
        for dispose in reversed(disposers):
            dispose()
        raise

    def dispose_all() -> None:
        for dispose in reversed(disposers):
            dispose()

    return dispose_all


def _json_value(value: Any) -> Any:
    """A tool's return value as JSON (models, dataclasses, datetimes... as pydantic dumps them)."""
    from pydantic_core import PydanticSerializationError, to_jsonable_python

    if value is None or isinstance(value, str | int | float | bool):
        return value
    try:
        return to_jsonable_python(value)
    except PydanticSerializationError:
        return str(value)


def _return_schema(function: Callable[..., Any] | None) -> dict[str, Any]:
    """The JSON Schema of ``function``'s return annotation (any JSON when it has none)."""
    if function is None:
        return _ANY
    try:
        annotation = typing.get_type_hints(function).get("return", Any)
    except Exception:  # an annotation that does not resolve says nothing we can use
        return _ANY
    if annotation is Any or annotation is inspect.Signature.empty:
        return _ANY
    from pydantic import TypeAdapter

    try:
        schema: dict[str, Any] = TypeAdapter(annotation).json_schema(mode="serialization")
    except Exception:  # a type pydantic cannot describe: its value is still JSON
        return _ANY
    return schema


# --------------------------------------------------------------------------- LangChain


def register_langchain_tools(
    registry: ToolRegistry,
    tools: Iterable[BaseTool],
    *,
    scope: str | None = None,
    concurrency_safe: bool = False,
) -> Disposer:
    """Register LangChain tools (``BaseTool`` subclasses, ``@tool`` functions) as they are.

    Each tool's name, description and parameters are what ``convert_to_openai_tool``
    sends a model (injected arguments left out); its output schema is its function's
    return annotation, when it has one. It runs through ``ainvoke`` when it has an async
    implementation, else ``invoke`` in a worker thread, with the registry's validated
    arguments. A string result stays a string; a list of content blocks is the result's
    content (images as image blocks); anything else is its JSON (pydantic's dump).

    Args:
        registry: where to register them.
        tools: the tools.
        scope: the scope to register them in (``None``: globally).
        concurrency_safe: whether their calls may overlap (LangChain says nothing of
            it; a program's ``asyncio.gather`` of them overlaps only with ``True``).

    Raises:
        TypeError: an item is not a LangChain ``BaseTool``.
        RegistrationError: a name is taken or invalid (nothing is registered then).
    """
    from langchain_core.tools import BaseTool

    definitions = []
    for tool in tools:
        if not isinstance(tool, BaseTool):
            raise TypeError(f"register_langchain_tools takes LangChain tools, got {tool!r}")
        definitions.append(_langchain_definition(tool, concurrency_safe))
    return _register_all(registry, definitions, scope)


def _langchain_definition(tool: BaseTool, concurrency_safe: bool) -> ToolDefinition:
    from langchain_core.tools import BaseTool, ToolException
    from langchain_core.utils.function_calling import convert_to_openai_tool
    from pydantic import ValidationError

    function = convert_to_openai_tool(tool)["function"]
    # Its own error handling off: a handled error would come back as a success.
    runner = tool.model_copy(update={"handle_tool_error": False, "handle_validation_error": False})
    coroutine = getattr(tool, "coroutine", None)
    if hasattr(tool, "coroutine"):
        native_async = coroutine is not None
        body = getattr(tool, "func", None) or coroutine
    else:
        native_async = type(tool)._arun is not BaseTool._arun
        body = type(tool)._arun if native_async else type(tool)._run
    output = _return_schema(body) if tool.response_format == "content" else _ANY

    async def execute(args: Any, ctx: ToolRunContext) -> Any:
        try:
            if native_async:
                value = await runner.ainvoke(args)
            else:
                value = await anyio.to_thread.run_sync(runner.invoke, args)
        except ToolException as exc:
            own = str(exc.args[0]) if exc.args else "Tool execution error"  # (LangChain's)
            raise ToolError(
                _langchain_error_text(tool.handle_tool_error, exc, own), code=TOOL_EXCEPTION
            ) from exc
        except ValidationError as exc:
            own = f"invalid arguments for {tool.name}: {_validation_text(exc)}"
            raise ToolArgsError(
                _langchain_error_text(tool.handle_validation_error, exc, own)
            ) from exc
        return _langchain_value(value)

    return ToolDefinition(
        name=function["name"],
        description=function.get("description") or "",
        parameters=function.get("parameters") or {"type": "object", "properties": {}},
        output=ToolOutput(schema=output),
        execute=execute,
        concurrency_safe=concurrency_safe,
    )


def _langchain_error_text(handler: Any, exc: Exception, default: str) -> str:
    """The message a tool's ``handle_*_error`` gives the model for ``exc`` (else ``default``)."""
    if isinstance(handler, str):
        return handler
    if callable(handler):
        given = handler(exc)
        if isinstance(given, str):
            return given
        return "\n".join(_text_of(block) for block in given)
    return default


def _text_of(block: Any) -> str:
    if isinstance(block, str):
        return block
    if isinstance(block, dict) and isinstance(block.get("text"), str):
        return str(block["text"])
    return str(block)


def _langchain_value(value: Any) -> Any:
    """A LangChain tool's output: a string, its content blocks (MCP spelling), or JSON."""
    if isinstance(value, str):
        return value
    blocks = _langchain_blocks(value)
    if blocks is not None:
        return ToolReturn(blocks, blocks)
    return _json_value(value)


def _langchain_blocks(value: Any) -> list[ContentBlock] | None:
    """``value`` as MCP content blocks when it is a list of LangChain content blocks."""
    if not isinstance(value, list) or not value:
        return None
    blocks: list[ContentBlock] = []
    for item in value:
        if isinstance(item, str):
            blocks.append({"type": "text", "text": item})
            continue
        if not isinstance(item, dict):
            return None
        kind = item.get("type")
        if kind == "text" and isinstance(item.get("text"), str):
            blocks.append({"type": "text", "text": item["text"]})
        elif kind in ("image", "audio") and isinstance(item.get("base64") or item.get("data"), str):
            mime = item.get("mime_type") or item.get("mimeType") or ""
            data = item.get("base64") or item.get("data")
            blocks.append({"type": kind, "data": data, "mimeType": mime})
        elif kind == "image_url":
            url = item.get("image_url")
            url = url.get("url") if isinstance(url, dict) else url
            image = _data_url_block(url)
            if image is None:
                return None
            blocks.append(image)
        else:
            return None
    return blocks


def _data_url_block(url: Any) -> ContentBlock | None:
    if not isinstance(url, str) or not url.startswith("data:") or ";base64," not in url:
        return None
    head, data = url[5:].split(";base64,", 1)
    return {"type": "image", "data": data, "mimeType": head}


# --------------------------------------------------------------------------- pydantic-ai


def register_pydantic_ai_tools(
    registry: ToolRegistry,
    tools: FunctionToolset[Any] | Iterable[Tool[Any] | Callable[..., Any]],
    *,
    deps: Any = None,
    scope: str | None = None,
) -> Disposer:
    """Register pydantic-ai tools (``Tool``s, plain functions, a ``FunctionToolset``).

    Each keeps its name, description, parameter schema and return schema (pydantic-ai's
    own); the registry's arguments go through the tool's own validator, so its body gets
    the typed values (models, datetimes...). A tool taking a ``RunContext`` gets one
    outside any agent run: ``deps`` as given, fresh usage, ``tool_name``, and the
    registry's call id as ``tool_call_id``; its ``model`` is a placeholder that refuses
    requests. ``sequential`` tools run alone (the others may overlap, as in pydantic-ai),
    a ``timeout`` is the registry's (``TOOL_TIMEOUT``), and a tool that
    ``requires_approval`` asks the registry's approval callback first (denied without
    one). A ``ToolReturn``'s value is the result; its ``content`` follows it as a
    deferred context.

    Args:
        registry: where to register them.
        tools: a ``FunctionToolset``, or ``Tool`` objects and functions.
        deps: the ``RunContext.deps`` the tools get.
        scope: the scope to register them in (``None``: globally).

    Raises:
        TypeError: an item is neither a ``Tool`` nor a function.
        RegistrationError: a name is taken or invalid, or a tool has a ``prepare``
            function (it needs an agent run to decide; use the registry's scopes and
            restrictions); nothing is registered then.
    """
    from pydantic_ai import Tool
    from pydantic_ai.toolsets import FunctionToolset

    timeout: float | None = None
    items: Iterable[Any]
    if isinstance(tools, FunctionToolset):
        items, timeout = list(tools.tools.values()), tools.timeout
    else:
        items = tools
    resolved: list[Tool[Any]] = []
    for item in items:
        if isinstance(item, Tool):
            resolved.append(item)
        elif callable(item):
            resolved.append(Tool(item))
        else:
            raise TypeError(
                "register_pydantic_ai_tools takes a FunctionToolset, or pydantic-ai Tools "
                f"and functions, got {item!r}"
            )
    definitions = [_pydantic_ai_definition(tool, deps, timeout) for tool in resolved]
    approval = {
        definition.execute
        for definition, tool in zip(definitions, resolved, strict=True)
        if tool.requires_approval
    }
    if not approval:
        return _register_all(registry, definitions, scope)

    from registry import Ask

    async def ask_first(execution: Any, call_next: Callable[[], Any]) -> Any:
        definition = execution.definition
        if definition is not None and definition.execute in approval:
            return Ask(f"{execution.name} requires approval")
        return await call_next()

    return _register_all(
        registry, definitions, scope, lambda: registry.on_pre_execute(ask_first, scope=scope)
    )


def _pydantic_ai_definition(tool: Tool[Any], deps: Any, timeout: float | None) -> ToolDefinition:
    from pydantic import ValidationError
    from pydantic_ai import ApprovalRequired, CallDeferred, ModelRetry, RunContext, ToolFailed
    from pydantic_ai.usage import RunUsage

    if tool.prepare is not None:
        raise RegistrationError(
            tool.name,
            "its prepare function needs a pydantic-ai agent run to decide what the tool "
            "is; register it without one (the registry's scopes and restrictions say who "
            "sees it)",
        )
    schema = tool.function_schema
    name = tool.name
    model = _placeholder_model()

    async def execute(args: Any, ctx: ToolRunContext) -> Any:
        run = RunContext[Any](
            deps=deps,
            model=model,
            usage=RunUsage(),
            tool_name=name,
            tool_call_id=ctx.call_id,
        )
        try:
            validated = schema.validator.validate_python(args)
            if tool.args_validator is not None:
                checked = tool.args_validator(run, **validated)
                if inspect.isawaitable(checked):
                    await checked
            value = await schema.call(validated, run)
        except ValidationError as exc:
            raise ToolArgsError(f"invalid arguments for {name}: {_validation_text(exc)}") from exc
        except ModelRetry as exc:
            raise ToolError(exc.message, code=MODEL_RETRY) from exc
        except ToolFailed as exc:
            raise ToolError(exc.message, code=TOOL_FAILED) from exc
        except (CallDeferred, ApprovalRequired) as exc:
            what = "deferred the call" if isinstance(exc, CallDeferred) else "asked for approval"
            raise ToolError(
                f"{name} {what}, which only a pydantic-ai agent run can carry out",
                code=TOOL_NEEDS_FRAMEWORK,
            ) from exc
        return _pydantic_ai_value(value, ctx)

    return ToolDefinition(
        name=name,
        description=tool.description or "",
        parameters=dict(schema.json_schema),
        output=ToolOutput(schema=_pydantic_ai_output(tool)),
        execute=execute,
        concurrency_safe=not tool.sequential,
        timeout=tool.timeout if tool.timeout is not None else timeout,
    )


def _pydantic_ai_output(tool: Tool[Any]) -> dict[str, Any]:
    """pydantic-ai's return schema; any JSON for binary content (it becomes a content block)."""
    from pydantic_ai import BinaryContent

    try:
        annotation = typing.get_type_hints(tool.function).get("return")
    except Exception:  # pydantic-ai resolved it for its own schema, or has none
        annotation = None
    if _mentions(annotation, BinaryContent):
        return _ANY
    return dict(tool.function_schema.return_schema or _ANY)


def _mentions(annotation: Any, kind: type) -> bool:
    if isinstance(annotation, type) and issubclass(annotation, kind):
        return True
    return any(_mentions(arg, kind) for arg in typing.get_args(annotation))


def _validation_text(exc: Any) -> str:
    """A pydantic ``ValidationError`` in one line per error, without its links."""
    lines = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(part) for part in error.get("loc", ())) or "(root)"
        lines.append(f"{where}: {error.get('msg')}")
    return "; ".join(lines) or str(exc)


def _pydantic_ai_value(value: Any, ctx: ToolRunContext) -> Any:
    from pydantic_ai import BinaryContent
    from pydantic_ai import ToolReturn as AiToolReturn

    if isinstance(value, AiToolReturn):
        content = value.content
        if content is not None:
            for item in [content] if isinstance(content, str) else content:
                block = _binary_block(item) if isinstance(item, BinaryContent) else None
                ctx.defer_context(block if block is not None else _json_value(item))
        value = value.return_value
    if isinstance(value, BinaryContent):
        block = _binary_block(value)
        if block is not None:
            return ToolReturn(block, [block])
    return _json_value(value)


def _binary_block(content: Any) -> ContentBlock | None:
    """pydantic-ai's ``BinaryContent`` as an image or audio block (``None``: neither)."""
    if content.is_image or content.is_audio:
        return {
            "type": "image" if content.is_image else "audio",
            "data": base64.b64encode(content.data).decode(),
            "mimeType": content.media_type,
        }
    return None


def _placeholder_model() -> Any:
    """The ``RunContext.model`` of a call outside an agent run: it refuses every request."""
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    def refuse(messages: Sequence[Any], info: AgentInfo) -> Any:
        raise RuntimeError(
            "this tool runs from a ToolRegistry, outside any pydantic-ai agent run: "
            "its RunContext has no model to send requests to"
        )

    return FunctionModel(refuse, model_name="ptc-registry")


# --------------------------------------------------------------------------- FastMCP


def register_fastmcp_tools(
    registry: ToolRegistry,
    server: MCPServer[Any],
    *,
    namespace: str | None = None,
    scope: str | None = None,
) -> Disposer:
    """Register an MCP server's tools (``MCPServer``'s ``@mcp.tool()`` functions), in process.

    The tools are the ones the server lists now, as it lists them (``inputSchema``,
    ``outputSchema``, annotations; a read-only one may overlap with others); each call
    goes through the server's own ``call_tool`` (its validation and result conversion),
    with no transport, and its result maps as for a connected server
    (``registry.connect_mcp``): ``structuredContent`` is the value, content blocks the
    content, ``isError`` or a ``ToolError`` is ``MCP_TOOL_ERROR``. A tool's ``Context``
    has no client behind it (no progress reaches anyone, and elicitation fails as
    ``TOOL_NEEDS_FRAMEWORK``).

    Args:
        registry: where to register them.
        server: the ``mcp.server.mcpserver.MCPServer``.
        namespace: register them as ``<namespace>.<tool>`` (``None``: their own names).
        scope: the scope to register them in (``None``: globally).

    Raises:
        TypeError: ``server`` is not an ``MCPServer``.
        RegistrationError: a name is taken or invalid (nothing is registered then).
    """
    import mcp_types
    from mcp.server.mcpserver import MCPServer

    from registry._mcp import tool_definition

    if not isinstance(server, MCPServer):
        raise TypeError(f"register_fastmcp_tools takes an mcp MCPServer, got {server!r}")

    context_class = _fastmcp_context_class()

    async def call(name: str, args: Any, ctx: ToolRunContext) -> CallToolResult:
        context = context_class(mcp_server=server)
        context._run = ctx
        return await _fastmcp_call(server, name, args, context)

    definitions = []
    # The server's own listing, read where it keeps it: MCPServer.list_tools() is a
    # coroutine only by signature, and registration is synchronous (as it is for a
    # registry built at import, the way `ptc --tools` loads one).
    for info in server._tool_manager.list_tools():
        listed = mcp_types.Tool(
            name=info.name,
            title=info.title,
            description=info.description,
            input_schema=info.parameters,
            output_schema=info.output_schema,
            annotations=info.annotations,
        )
        definition = tool_definition(namespace or "_", listed, call)
        name = info.name if namespace is None else f"{namespace}.{info.name}"
        definitions.append(dataclasses.replace(definition, name=name))
    return _register_all(registry, definitions, scope)


async def _fastmcp_call(
    server: MCPServer[Any], name: str, args: Any, context: Any
) -> CallToolResult:
    import mcp_types
    from mcp.server.mcpserver.exceptions import ToolError as McpToolError
    from mcp.server.mcpserver.exceptions import UnexpectedToolError
    from mcp.shared.exceptions import MCPError
    from pydantic import ValidationError

    from registry import MCP_PROTOCOL_ERROR, MCP_TOOL_ERROR

    try:
        result = await server.call_tool(name, dict(args), context)
    except UnexpectedToolError as exc:
        # The tool's own exception, as a registry tool's would be (the server hides
        # it from remote clients; here the caller is the program of the same host).
        cause = exc.__cause__
        raise (cause if isinstance(cause, Exception) else exc) from None
    except McpToolError as exc:
        if isinstance(exc.__cause__, ValidationError):
            raise ToolArgsError(
                f"invalid arguments for {name}: {_validation_text(exc.__cause__)}"
            ) from exc
        raise ToolError(str(exc), code=MCP_TOOL_ERROR) from exc
    except MCPError as exc:
        raise ToolError(str(exc), code=MCP_PROTOCOL_ERROR) from exc
    if not isinstance(result, mcp_types.CallToolResult):
        raise ToolError(
            f"{name} asked for input from the client, and a registry call has none",
            code=TOOL_NEEDS_FRAMEWORK,
        )
    return result


_LOG_LEVELS: Final = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}


@functools.cache
def _fastmcp_context_class() -> Any:
    """The ``Context`` a FastMCP tool gets when a registry calls it (no client behind it)."""
    from mcp.server.mcpserver import Context

    class RegistryCallContext(Context[Any, Any]):
        _run: ToolRunContext | None = None

        async def report_progress(
            self, progress: float, total: float | None = None, message: str | None = None
        ) -> None:
            if self._run is not None:
                self._run.report_progress(progress, total, message)

        async def log(self, level: Any, data: Any, *, logger_name: str | None = None) -> None:
            name = "ptc.adapters.fastmcp" + (f".{logger_name}" if logger_name else "")
            tool = self._run.name if self._run is not None else "?"
            logging.getLogger(name).log(
                _LOG_LEVELS.get(str(level), logging.INFO), "%s: %s", tool, data
            )

    return RegistryCallContext
