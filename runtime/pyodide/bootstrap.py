"""The in-Pyodide half of a ptc-runner worker: ``tools``, ``ToolCallError``, the run.

``worker.js`` imports this module (before the memory snapshot is taken, so it is
already loaded when a worker starts) and calls :func:`attach` with the function
that writes one frame to the host. Every frame is one JSON object:

worker -> host: ``ready``, then for the one run ``log`` / ``call`` frames and a
final ``done``; host -> worker: one ``run``, then one ``answer`` per ``call``.

Security warning: this module runs in the same interpreter as the untrusted
program, which can patch it, read its state and forge any frame. It enforces
nothing the host relies on; it only makes the honest path exact and fast.
"""

from __future__ import annotations

import ast
import asyncio
import builtins
import json
import linecache
import math
import sys
import traceback
from collections.abc import Callable, Coroutine
from typing import Any, cast

PROGRAM_FILE = "<program>"
_LOG_FLUSH_BYTES = 64 * 1024
_INT_MIN = -(2**63)
_INT_MAX = 2**64 - 1
_MAX_DEPTH = 255

Send = Callable[[str], object]


class ToolCallError(Exception):
    """A tool call failed; ``tool_name`` names the tool, ``message`` says why."""

    def __init__(self, tool_name: str, message: str) -> None:
        super().__init__(tool_name, message)
        self.tool_name = tool_name
        self.message = message

    def __str__(self) -> str:
        return f"{self.tool_name}: {self.message}"


def check_json(value: object, path: str = "$", depth: int = 0) -> None:
    """Raise ``TypeError`` unless ``value`` is lossless JSON (exact types, 64-bit ints)."""
    if depth > _MAX_DEPTH:
        raise TypeError(f"nested deeper than {_MAX_DEPTH} levels at {path}")
    kind = type(value)
    if value is None or kind is bool or kind is str:
        return
    if kind is int:
        if not _INT_MIN <= cast(int, value) <= _INT_MAX:
            raise TypeError(f"integer out of 64-bit range at {path}")
        return
    if kind is float:
        if not math.isfinite(cast(float, value)):
            raise TypeError(f"non-finite float at {path}")
        return
    if kind is list:
        for index, item in enumerate(cast("list[object]", value)):
            check_json(item, f"{path}[{index}]", depth + 1)
        return
    if kind is dict:
        for key, item in cast("dict[object, object]", value).items():
            if type(key) is not str:
                raise TypeError(f"non-string key {key!r} at {path}")
            check_json(item, f"{path}.{key}", depth + 1)
        return
    raise TypeError(f"{kind.__name__} is not JSON at {path}")


def dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


class _LogWriter:
    """A text stream that turns writes into log lines, sent in batches."""

    def __init__(self, channel: _Channel) -> None:
        self._channel = channel
        self._partial = ""

    def write(self, text: str) -> int:
        if type(text) is not str:
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        chunks = (self._partial + text).split("\n")
        self._partial = chunks.pop()
        for line in chunks:
            self._channel.log(line)
        return len(text)

    def flush(self) -> None:
        self._channel.flush_logs()

    def finish(self) -> None:
        if self._partial:
            self._channel.log(self._partial)
            self._partial = ""
        self._channel.flush_logs()

    def isatty(self) -> bool:
        return False

    def writable(self) -> bool:
        return True


class _Channel:
    """Frames to and from the host for the one run of this worker."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self._nonce = ""
        self._lines: list[str] = []
        self._line_bytes = 0
        self._next_id = 0
        self._pending: dict[int, asyncio.Future[tuple[bool, Any, str]]] = {}
        self.max_message_bytes = 1 << 20
        self.max_output_bytes = 1 << 20
        self.started = False
        self.task: asyncio.Future[None] | None = None

    def frame(self, frame_type: str, /, **fields: Any) -> None:
        fields["t"] = frame_type
        fields["n"] = self._nonce
        self._send(dumps(fields))

    def log(self, line: str) -> None:
        self._lines.append(line)
        self._line_bytes += len(line) + 8
        if self._line_bytes >= _LOG_FLUSH_BYTES:
            self.flush_logs()

    def flush_logs(self) -> None:
        if self._lines:
            lines, self._lines, self._line_bytes = self._lines, [], 0
            self.frame("log", lines=lines)

    async def call(self, tool_name: str, args: object) -> Any:
        try:
            check_json(args)
            body = dumps(args)
        except (TypeError, ValueError, RecursionError) as exc:
            raise TypeError(
                f"arguments of tools.{tool_name} are not lossless JSON: {exc}"
            ) from None
        if len(body.encode()) + len(tool_name) + 128 > self.max_message_bytes:
            raise ValueError(f"arguments of tools.{tool_name} are larger than the message limit")
        self.flush_logs()
        self._next_id += 1
        call_id = self._next_id
        future: asyncio.Future[tuple[bool, Any, str]] = asyncio.get_event_loop().create_future()
        self._pending[call_id] = future
        self.frame("call", id=call_id, tool=tool_name, args=args)
        try:
            ok, value, message = await future
        finally:
            self._pending.pop(call_id, None)
        if not ok:
            raise ToolCallError(tool_name, message)
        return value

    def receive(self, text: str) -> None:
        message = json.loads(text)
        kind = message.get("t")
        if kind == "answer":
            future = self._pending.get(message.get("id"))
            if future is not None and not future.done():
                future.set_result(
                    (
                        message.get("ok") is True,
                        message.get("value"),
                        str(message.get("message", "")),
                    )
                )
        elif kind == "run" and not self.started:
            self.started = True
            self._nonce = str(message["nonce"])
            self.max_message_bytes = int(message["max_message_bytes"])
            self.max_output_bytes = int(message["max_output_bytes"])
            names = [str(name) for name in message["tools"]]
            self.task = asyncio.ensure_future(_run(self, str(message["code"]), names))


def _make_binding(channel: _Channel, tool_name: str) -> Callable[..., Coroutine[Any, Any, Any]]:
    async def binding(args: object = None, /, **kwargs: object) -> Any:
        if kwargs:
            if args is not None:
                raise TypeError(
                    f"tools.{tool_name}() takes one argument dict or keywords, not both"
                )
            args = kwargs
        return await channel.call(tool_name, {} if args is None else args)

    binding.__name__ = binding.__qualname__ = tool_name
    return binding


class Tools:
    """The program's ``tools`` object: ``await tools.name(args)`` or ``tools["name"](args)``."""

    __slots__ = ("_bindings",)
    _bindings: dict[str, Callable[..., Coroutine[Any, Any, Any]]]

    def __init__(self, bindings: dict[str, Callable[..., Coroutine[Any, Any, Any]]]) -> None:
        object.__setattr__(self, "_bindings", bindings)

    def __getattr__(self, name: str) -> Callable[..., Coroutine[Any, Any, Any]]:
        try:
            return self._bindings[name]
        except KeyError:
            raise AttributeError(f"no tool named {name!r}") from None

    def __getitem__(self, name: str) -> Callable[..., Coroutine[Any, Any, Any]]:
        try:
            return self._bindings[name]
        except KeyError:
            raise KeyError(f"no tool named {name!r}") from None

    def __contains__(self, name: object) -> bool:
        return name in self._bindings

    def __dir__(self) -> list[str]:
        return sorted(self._bindings)

    def __repr__(self) -> str:
        return f"<tools: {', '.join(sorted(self._bindings))}>"


def compile_program(code: str) -> Any:
    """Compile ``code`` as the body of ``async def __ptc_main__()``; raise ``SyntaxError``."""
    tree = ast.parse(code, PROGRAM_FILE, "exec")
    main = ast.AsyncFunctionDef(
        name="__ptc_main__",
        args=ast.arguments(
            posonlyargs=[],
            args=[],
            vararg=None,
            kwonlyargs=[],
            kw_defaults=[],
            kwarg=None,
            defaults=[],
        ),
        body=tree.body or [ast.Pass()],
        decorator_list=[],
        returns=None,
        type_comment=None,
    )
    stray = _top_level_yield(tree)
    if stray is not None:
        where = (PROGRAM_FILE, stray.lineno, stray.col_offset + 1, None)
        raise SyntaxError("'yield' outside function", where)
    module = ast.Module(body=[main], type_ignores=[])
    ast.copy_location(main, tree.body[0] if tree.body else main)
    ast.fix_missing_locations(module)
    return compile(module, PROGRAM_FILE, "exec", dont_inherit=True)


def _top_level_yield(tree: ast.Module) -> ast.expr | None:
    """The first ``yield`` of the program body itself (it would make main a generator)."""
    stack: list[ast.AST] = list(reversed(tree.body))
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Yield | ast.YieldFrom):
            return node
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(node))))
    return None


def format_exception(exc: BaseException) -> str:
    """Type, message and the traceback frames that are the program's own."""
    frames = [
        frame for frame in traceback.extract_tb(exc.__traceback__) if frame.filename == PROGRAM_FILE
    ]
    parts = (
        ["Traceback (most recent call last):\n", *traceback.format_list(frames)] if frames else []
    )
    parts.extend(traceback.format_exception_only(type(exc), exc))
    return "".join(parts).rstrip("\n")


async def _run(channel: _Channel, code: str, tool_names: list[str]) -> None:
    writer = _LogWriter(channel)
    sys.stdout = sys.stderr = writer
    linecache.cache[PROGRAM_FILE] = (len(code), None, code.splitlines(True), PROGRAM_FILE)
    try:
        program = compile_program(code)
    except (SyntaxError, ValueError, OverflowError, RecursionError, MemoryError) as exc:
        writer.finish()
        kind = "memory" if isinstance(exc, MemoryError) else "syntax"
        channel.frame("done", ok=False, kind=kind, message=format_exception(exc))
        return
    tools = Tools({name: _make_binding(channel, name) for name in tool_names})
    namespace: dict[str, Any] = {
        "__name__": "__main__",
        "__builtins__": builtins,
        "tools": tools,
        "ToolCallError": ToolCallError,
    }
    try:
        exec(program, namespace)
        main = namespace.pop("__ptc_main__")
        result = await main()
        writer.finish()
        if result is None:
            channel.frame("done", ok=True, has_result=False, result=None)
            return
        try:
            check_json(result)
            size = len(dumps(result).encode())
        except (TypeError, ValueError, RecursionError) as exc:
            message = f"TypeError: the return value is not lossless JSON: {exc}"
            channel.frame("done", ok=False, kind="exception", message=message)
            return
        if size + 1024 > min(channel.max_message_bytes, channel.max_output_bytes):
            message = f"the return value ({size} bytes) is larger than the output limit"
            channel.frame("done", ok=False, kind="output_limit", message=message)
            return
        channel.frame("done", ok=True, has_result=True, result=result)
    except BaseException as exc:  # the program's own failure is data
        writer.finish()
        kind = "memory" if isinstance(exc, MemoryError) else "exception"
        if isinstance(exc, SyntaxError) and exc.filename == PROGRAM_FILE:
            kind = "syntax"
        channel.frame("done", ok=False, kind=kind, message=format_exception(exc))


def attach(send: Send, version: str) -> Callable[[str], None]:
    """Announce readiness through ``send`` and return the handler for host frames."""
    channel = _Channel(send)
    channel.frame("ready", version=str(version))
    return channel.receive
