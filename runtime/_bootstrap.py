"""The in-worker half: run one untrusted program and report over the channel.

Runs inside a freshly forked, already sandboxed worker (see ``_zygote``). It
sends ``ready`` and waits, with its asyncio loop already running, for one
``run`` frame; it compiles the program as the body of an ``async def`` (or
loads the code object the host compiled for it) and runs it as a task.
``print`` and ``sys.stderr`` become
``log`` frames; each ``tools`` binding sends a ``call`` frame and returns a
future that the channel reader resolves when the host answers, so concurrent
calls overlap. The last frame is ``done`` or ``error``; then the process exits.

Nothing here is trusted by the host: this code shares the process with the
program, so every limit it enforces is enforced on the host again.
"""

from __future__ import annotations

import ast
import asyncio
import builtins
import contextlib
import io
import itertools
import linecache
import marshal
import os
import socket
import sys
import traceback
from collections.abc import Callable, Iterator
from types import CodeType, TracebackType
from typing import Any, NoReturn

import orjson

from ._protocol import FrameDecoder, NotJsonError, check_json, encode_frame

__all__ = [
    "EXIT_HOST_GONE",
    "EXIT_INTERNAL",
    "EXIT_MEMORY",
    "PROGRAM_FILENAME",
    "ToolCallError",
    "Tools",
    "WorkerSettings",
    "compile_for_worker",
    "compile_program",
    "format_program_exception",
    "serve",
    "set_cpu_policy",
]

PROGRAM_FILENAME = "<program>"
EXIT_MEMORY = 3
EXIT_INTERNAL = 4
EXIT_HOST_GONE = 5
_NOTHING_NAME = "__ptc_nothing__"
# A read asks for what the frame in progress still needs, within these bounds:
# a buffer over glibc's mmap threshold (128 KiB) costs an mmap and a munmap
# per read, several times the read itself for the small frames of a call.
_MIN_RECV = 1 << 16
_MAX_RECV = 1 << 20
# Failure messages are for a model to read: longer ones keep their head and tail.
_MAX_MESSAGE_CHARS = 32_768
# Partial lines are flushed as a line of their own once they get this long.
_MAX_PARTIAL_CHARS = 1 << 16

_INTERNAL_DIRS = (
    os.path.dirname(os.path.abspath(__file__)) + os.sep,
    os.path.dirname(os.path.abspath(asyncio.__file__)) + os.sep,
)


class _Nothing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<no result>"


_NOTHING = _Nothing()


class ToolCallError(Exception):
    """A tool call failed; ``tool_name`` and ``message`` say which and why."""

    def __init__(self, tool_name: str, message: str) -> None:
        super().__init__(tool_name, message)
        self.tool_name = tool_name
        self.message = message

    def __str__(self) -> str:
        return f"{self.tool_name}: {self.message}"


# Shown to the program (and in its tracebacks) as a builtin name.
ToolCallError.__module__ = "builtins"


class WorkerSettings:
    """Zygote-wide settings every worker gets (fixed when the zygote starts)."""

    __slots__ = ("allowed_modules", "restricted")

    def __init__(self, *, allowed_modules: frozenset[str] | None, restricted: bool) -> None:
        self.allowed_modules = allowed_modules
        self.restricted = restricted


# --------------------------------------------------------------------------- compile


class _TopLevel(ast.NodeTransformer):
    """Rewrite bare ``return`` to "no result" and reject ``yield`` at the top level."""

    def visit_Return(self, node: ast.Return) -> ast.Return:
        if node.value is None:
            node.value = ast.copy_location(ast.Name(id=_NOTHING_NAME, ctx=ast.Load()), node)
        return node

    def _yield(self, node: ast.Yield | ast.YieldFrom) -> NoReturn:
        error = SyntaxError("'yield' is not allowed at the top level of the program")
        error.filename = PROGRAM_FILENAME
        error.lineno = node.lineno
        error.offset = node.col_offset + 1
        raise error

    visit_Yield = _yield
    visit_YieldFrom = _yield

    def _scope(self, node: ast.AST) -> ast.AST:
        return node  # nested scopes keep their own return/yield semantics

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = visit_ClassDef = _scope


_NESTED_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _rewrite_bare_returns(statements: list[ast.stmt]) -> None:
    """What :class:`_TopLevel` does for ``return``, walking statements only.

    A ``return`` is always a statement (lambdas and comprehensions cannot hold
    one), so the expressions, most of a tree, need no visit.
    """
    for node in statements:
        if isinstance(node, ast.Return):
            if node.value is None:
                node.value = ast.copy_location(ast.Name(id=_NOTHING_NAME, ctx=ast.Load()), node)
        elif not isinstance(node, _NESTED_SCOPES):
            # if/for/while/with/try bodies; except handlers; match cases.
            for field in ("body", "orelse", "finalbody"):
                inner = getattr(node, field, None)
                if inner:
                    _rewrite_bare_returns(inner)
            for part in (*getattr(node, "handlers", ()), *getattr(node, "cases", ())):
                _rewrite_bare_returns(part.body)


def compile_program(code: str) -> CodeType:
    """Compile ``code`` as the body of an ``async def`` named ``<module>``.

    Line numbers stay the program's own; a falling-off or bare ``return``
    yields the "no result" sentinel.

    Raises:
        SyntaxError: the program does not compile.
    """
    tree = ast.parse(code, PROGRAM_FILENAME, "exec")
    body = tree.body
    hoisted: list[ast.stmt] = []
    while body and isinstance(body[0], ast.ImportFrom) and body[0].module == "__future__":
        hoisted.append(body.pop(0))
    # Keywords are ASCII in the source (look-alike letters make names): without
    # the words, no yield or return node can exist, and the statement-only
    # walk, far cheaper than a visit of every node, is enough.
    if "yield" in code:
        transformer = _TopLevel()
        body = [transformer.visit(statement) for statement in body]
    elif "return" in code:
        _rewrite_bare_returns(body)
    line = (body[-1].end_lineno or 1) if body else 1
    where = {"lineno": line, "end_lineno": line, "col_offset": 0, "end_col_offset": 0}
    nothing = ast.Name(id=_NOTHING_NAME, ctx=ast.Load(), **where)
    body.append(ast.Return(value=nothing, **where))
    function = ast.AsyncFunctionDef(
        name="<module>",
        args=ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[]),
        body=body,
        decorator_list=[],
        returns=None,
        type_comment=None,
        # Every other node has its position (parsed, or set above): no
        # fix_missing_locations walk over the whole tree.
        lineno=1,
        col_offset=0,
        end_lineno=1,
        end_col_offset=0,
    )
    module = ast.Module(body=[*hoisted, function], type_ignores=[])
    return compile(module, PROGRAM_FILENAME, "exec", dont_inherit=True)


# --------------------------------------------------------------------------- errors


def _is_internal(tb: TracebackType) -> bool:
    filename = tb.tb_frame.f_code.co_filename
    return filename.startswith(_INTERNAL_DIRS)


def _trim_traceback(tb: TracebackType | None) -> TracebackType | None:
    kept: list[TracebackType] = []
    while tb is not None:
        if not _is_internal(tb):
            kept.append(tb)
        tb = tb.tb_next
    for current, following in itertools.pairwise(kept):
        current.tb_next = following
    if kept:
        kept[-1].tb_next = None
        return kept[0]
    return None


def format_program_exception(exc: BaseException) -> str:
    """The traceback of ``exc`` in the program's own lines, runtime frames removed."""
    seen: set[int] = set()
    pending: list[BaseException | None] = [exc]
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        current.__traceback__ = _trim_traceback(current.__traceback__)
        pending.extend((current.__cause__, current.__context__))
    return "".join(traceback.format_exception(exc)).rstrip("\n")


def _syntax_message(exc: SyntaxError) -> str:
    where = f"line {exc.lineno}" if exc.lineno else "unknown line"
    if exc.offset:
        where += f", column {exc.offset}"
    head = f"SyntaxError at {where}: {exc.msg}"
    if not exc.text:
        return head
    detail = "".join(traceback.format_exception_only(exc)).rstrip("\n")
    return f"{head}\n{detail}"


# --------------------------------------------------------------------------- tools


class _Binding:
    __slots__ = ("_name", "_run")

    def __init__(self, run: _Run, name: str) -> None:
        self._run = run
        self._name = name

    def __call__(self, args: Any = None, /, **kwargs: Any) -> asyncio.Future[Any]:
        if args is None:
            args = kwargs
        elif kwargs:
            raise TypeError(
                f"tools[{self._name!r}]() takes one dict of arguments or keyword arguments, not both"
            )
        return self._run.call(self._name, args)

    def __repr__(self) -> str:
        return f"<tool {self._name!r}>"


class Tools:
    """The program's ``tools`` object: ``tools.name(...)`` or ``tools["any-name"](...)``."""

    __slots__ = ("_bindings",)

    def __init__(self, bindings: dict[str, _Binding]) -> None:
        self._bindings = bindings

    def _missing(self, name: object) -> str:
        names = ", ".join(sorted(self._bindings)) or "(none)"
        return f"no tool named {name!r}; available tools: {names}"

    def __getattr__(self, name: str) -> _Binding:
        try:
            return self._bindings[name]
        except KeyError:
            raise AttributeError(self._missing(name)) from None

    def __getitem__(self, name: str) -> _Binding:
        try:
            return self._bindings[name]
        except (KeyError, TypeError):
            raise KeyError(self._missing(name)) from None

    def __contains__(self, name: object) -> bool:
        return name in self._bindings

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._bindings))

    def __len__(self) -> int:
        return len(self._bindings)

    def __dir__(self) -> list[str]:
        return sorted(name for name in self._bindings if name.isidentifier())

    def __repr__(self) -> str:
        return f"<tools: {', '.join(sorted(self._bindings))}>"


# --------------------------------------------------------------------------- channel


class _LogWriter(io.TextIOBase):
    """``sys.stdout``/``sys.stderr`` of the program: complete lines become log frames."""

    def __init__(self, run: _Run) -> None:
        super().__init__()
        self._run = run
        self._partial: list[str] = []
        self._partial_chars = 0

    encoding = "utf-8"

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if type(text) is not str:
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        size = len(text)
        self._run.count_output(size)
        if "\n" in text:
            head, _, tail = text.rpartition("\n")
            if self._partial:
                head = "".join(self._partial) + head
                self._partial.clear()
                self._partial_chars = 0
            self._run.log(head)
            if tail:
                self._partial.append(tail)
                self._partial_chars = len(tail)
        elif text:
            self._partial.append(text)
            self._partial_chars += size
            if self._partial_chars > _MAX_PARTIAL_CHARS:
                self.drain()
        return size

    def drain(self) -> None:
        """Send a pending partial line as a line of its own."""
        if self._partial:
            text = "".join(self._partial)
            self._partial.clear()
            self._partial_chars = 0
            self._run.log(text)


class _Run:
    """One program run: the channel, the pending tool calls and the limits.

    Created (with the event loop running and the channel's reader registered)
    before the worker says "ready", so a run frame is picked up by a warm loop.
    """

    def __init__(
        self,
        sock: socket.socket,
        loop: asyncio.AbstractEventLoop,
        settings: WorkerSettings,
        guard: Callable[[], None] | None,
    ) -> None:
        self.sock = sock
        self.loop = loop
        self.settings = settings
        self.guard = guard
        # The run frame itself comes from the host: it is not limited.
        self.decoder = FrameDecoder(1 << 30)
        self.max_output = 1 << 62
        self.max_message = 1 << 30
        self.max_calls = 0
        self.output = 0
        self.calls = 0
        self.pending: dict[int, tuple[asyncio.Future[Any], str]] = {}
        self.outbox: list[bytes] = []
        self.writer = _LogWriter(self)
        self.run_frame: dict[str, Any] | None = None
        self.code = ""
        self.namespace: dict[str, Any] = {}
        self.task: asyncio.Task[Any] | None = None
        # Whether the program's return ends the worker (not so for the prewarm run).
        self.final = True
        self.setup_error: BaseException | None = None

    # -- sending -------------------------------------------------------------------

    def send(self, frame: dict[str, Any]) -> None:
        self.flush()
        self.send_bytes(encode_frame(frame))

    def finish(self, frame: dict[str, Any]) -> NoReturn:
        """Send the final frame and leave; nothing of the program outlives this."""
        self.send(frame)
        self.leave()

    def leave(self) -> NoReturn:
        """Exit once the host has the final frame and lets go of the channel.

        The host kills the worker as soon as it reads that frame; blocking until
        then leaves the CPU to the host, where exiting at once would first spend
        it on this process's teardown (and on the zygote's reaping).
        """
        set_cpu_policy(background=True)
        try:
            self.sock.setblocking(True)
            while self.sock.recv(_MIN_RECV):
                pass
        except BaseException:  # whatever ends the wait, the worker is done
            pass
        os._exit(0)

    def fail(self, kind: str, message: str) -> NoReturn:
        self.writer.drain()
        limit = min(_MAX_MESSAGE_CHARS, self.max_message // 8)
        if len(message) > limit:
            # Keep the head and the tail: the tail holds the exception line.
            head, tail = limit // 4, limit - limit // 4
            omitted = len(message) - head - tail
            message = f"{message[:head]}\n... [{omitted} characters omitted] ...\n{message[-tail:]}"
        try:
            self.finish({"type": "error", "kind": kind, "message": message})
        except orjson.JSONEncodeError:
            message = message.encode("utf-8", "backslashreplace").decode("utf-8")
            self.finish({"type": "error", "kind": kind, "message": message})

    def count_output(self, size: int) -> None:
        self.output += size
        if self.output > self.max_output:
            self.fail("output_limit", f"the program's output exceeded {self.max_output} bytes")

    def log(self, text: str) -> None:
        try:
            data = orjson.dumps({"type": "log", "text": text})
        except orjson.JSONEncodeError:
            text = text.encode("utf-8", "backslashreplace").decode("utf-8")
            data = orjson.dumps({"type": "log", "text": text})
        if len(data) > self.max_message:
            # One huge line: split it so every frame stays under the limit.
            step = max(1, self.max_message // 8)
            for start in range(0, len(text), step):
                self.log(text[start : start + step])
            return
        self.flush()  # keep logs and calls in the order the program made them
        self.send_bytes(len(data).to_bytes(4, "big") + data)

    # -- tool calls ----------------------------------------------------------------

    def call(self, name: str, args: Any) -> asyncio.Future[Any]:
        try:
            check_json(args)
            self.calls += 1
            call_id = self.calls
            data = orjson.dumps({"type": "call", "id": call_id, "name": name, "args": args})
        except (NotJsonError, orjson.JSONEncodeError) as exc:
            raise TypeError(f"arguments of tool {name!r} are not JSON: {exc}") from None
        if call_id > self.max_calls:
            self.fail("tool_call_limit", f"the program made more than {self.max_calls} tool calls")
        if len(data) > self.max_message:
            raise ToolCallError(
                name, f"arguments are {len(data)} bytes, over the limit of {self.max_message}"
            )
        future: asyncio.Future[Any] = self.loop.create_future()
        frame = len(data).to_bytes(4, "big") + data
        if self.pending or self.outbox:
            # Other calls are in flight (asyncio.gather and friends): batch
            # this one with whatever else is issued before the loop turns.
            if not self.outbox:
                self.loop.call_soon(self.flush)
            self.outbox.append(frame)
        else:
            self.send_bytes(frame)
        self.pending[call_id] = (future, name)
        return future

    def flush(self) -> None:
        """Send the batched call frames."""
        if self.outbox:
            data = b"".join(self.outbox)
            self.outbox.clear()
            self.send_bytes(data)

    def send_bytes(self, data: bytes) -> None:
        try:
            self.sock.sendall(data)
        except OSError:
            os._exit(EXIT_HOST_GONE)

    def on_readable(self) -> None:
        try:
            data = self.sock.recv(min(max(self.decoder.wanted(), _MIN_RECV), _MAX_RECV))
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            os._exit(EXIT_HOST_GONE)
        if not data:
            os._exit(EXIT_HOST_GONE)
        payloads = self.decoder.feed(data)
        if self.task is None:
            payloads = self.start_from(payloads)
        for payload in payloads:
            frame = orjson.loads(payload)
            entry = self.pending.pop(frame["id"], None)
            if entry is None or entry[0].done():
                continue
            future, name = entry
            if frame["ok"]:
                future.set_result(frame["value"])
            else:
                future.set_exception(ToolCallError(name, frame["message"]))

    # -- the program ---------------------------------------------------------------

    def start_from(self, payloads: list[bytes]) -> list[bytes]:
        """Take the run frame (and the compiled program) off ``payloads``; start the run."""
        index = 0
        try:
            while self.task is None and index < len(payloads):
                payload = payloads[index]
                index += 1
                if self.run_frame is None:
                    self.run_frame = frame = orjson.loads(payload)
                    self.prepare(frame)
                    if not frame.get("compiled"):
                        self.launch(None)
                else:
                    self.launch(payload)
        except BaseException as exc:  # not the program's: the worker failed to set up
            self.setup_error = exc
            self.loop.stop()
            return []
        return payloads[index:]

    def prepare(self, frame: dict[str, Any]) -> None:
        """Set the run up from its frame (while the compiled program is on its way)."""
        self.max_output = int(frame["max_output_bytes"])
        self.max_message = int(frame["max_message_bytes"])
        self.max_calls = int(frame["max_tool_calls"])
        self.decoder = FrameDecoder(self.max_message)
        self.code = code = frame["code"]
        tools = Tools({name: _Binding(self, name) for name in frame["tools"]})
        sys.stdout = sys.stderr = self.writer
        linecache.cache[PROGRAM_FILENAME] = (
            len(code),
            None,
            code.splitlines(True),
            PROGRAM_FILENAME,
        )
        self.namespace = _program_globals(tools, self.settings)

    def launch(self, compiled_bytes: bytes | None) -> None:
        """Start the program's task; ``compiled_bytes`` from the host, if any."""
        compiled: CodeType | None = None
        if compiled_bytes:
            # Compiled by the host (the trusted side) with this same interpreter.
            loaded = marshal.loads(compiled_bytes)
            if type(loaded) is CodeType:
                compiled = loaded
        if compiled is None:
            try:
                compiled = _compile(self.code, self.settings)
            except SyntaxError as exc:
                self.fail("syntax", _syntax_message(exc))
            except MemoryError:
                self.fail("memory", "MemoryError: the program is too large to compile")
            except RecursionError:
                self.fail("syntax", "SyntaxError: the program is nested too deeply to compile")
        namespace = self.namespace
        exec(compiled, namespace)
        main = namespace.pop("<module>")
        if self.guard is not None:
            self.guard()
        self.task = task = self.loop.create_task(self.execute(main))
        task.add_done_callback(self.on_done)

    def on_done(self, task: asyncio.Task[Any]) -> None:
        self.loop.stop()

    async def execute(self, main: Callable[[], Any]) -> Any:
        value = await main()
        if self.final:
            # Straight from the program's task: no done callback and no
            # loop.stop() turn between the return and the outcome. Failures
            # still end the loop and are reported by ``serve``.
            self.report(value)
        return value

    def report(self, value: Any) -> NoReturn:
        self.writer.drain()
        if value is _NOTHING:
            self.finish({"type": "done"})
        try:
            check_json(value)
            data = orjson.dumps({"type": "done", "result": value})
        except (NotJsonError, orjson.JSONEncodeError) as exc:
            self.fail(
                "exception",
                f"TypeError: the program's return value is not lossless JSON: {exc}",
            )
        if len(data) > self.max_message or self.output + len(data) > self.max_output:
            self.fail(
                "output_limit",
                f"the program's result ({len(data)} bytes) exceeds the output limit",
            )
        self.flush()
        self.send_bytes(len(data).to_bytes(4, "big") + data)
        self.leave()


def _program_globals(tools: Tools, settings: WorkerSettings) -> dict[str, Any]:
    namespace: dict[str, Any] = {
        "__name__": "__main__",
        "__builtins__": builtins,
        "tools": tools,
        "ToolCallError": ToolCallError,
        _NOTHING_NAME: _NOTHING,
    }
    if settings.restricted:
        from ._restricted import restricted_globals

        return restricted_globals(namespace, allowed=settings.allowed_modules)
    return namespace


def serve(
    sock: socket.socket,
    loop: asyncio.AbstractEventLoop,
    layers: list[list[Any]],
    settings: WorkerSettings,
) -> NoReturn:
    """Announce readiness, run the one program the host sends, report, exit.

    The event loop already runs (with the channel's reader) while the worker
    waits as a spare: the run frame starts the program from the reader.
    """
    asyncio.set_event_loop(loop)
    guard = _import_guard(settings)
    _prewarm(sock, loop, settings)
    run = _Run(sock, loop, settings, guard)
    loop.add_reader(sock.fileno(), run.on_readable)
    # Forked with the zygote's background policy: a worker that waits for its
    # host must be woken up at once, not when the CPU has nothing else to do.
    set_cpu_policy(background=False)
    sock.sendall(encode_frame({"type": "ready", "layers": layers}))
    escaped: BaseException | None = None
    try:
        loop.run_forever()
    except BaseException as exc:  # SystemExit and the like, out of the program's task
        escaped = exc
    if run.setup_error is not None:
        raise run.setup_error
    try:
        if escaped is not None:
            raise escaped
        task = run.task
        if task is None or not task.done():
            raise RuntimeError("Event loop stopped before Future completed.")
        value = task.result()
    except MemoryError:
        run.fail("memory", _memory_message())
    except BaseException as exc:  # the program's failure, whatever it raised
        try:
            message = format_program_exception(exc)
        except MemoryError:
            run.fail("memory", _memory_message())
        run.fail("exception", message)
    run.report(value)


_PREWARM_CODE = """\
values = [i * 2 for i in range(3)]
return {"n": len(values), "ok": [str(v) for v in values]}
"""


def _prewarm(
    sock: socket.socket, loop: asyncio.AbstractEventLoop, settings: WorkerSettings
) -> None:
    """Walk a run's own code path once (no frames sent, no import guard) so a
    fork's copy-on-write faults happen while the worker is a spare, not while
    a program waits."""
    run = _Run(sock, loop, settings, None)
    run.final = False
    frame = {
        "code": _PREWARM_CODE,
        "tools": ["prewarm"],
        "max_output_bytes": 1 << 20,
        "max_tool_calls": 1,
        "max_message_bytes": 1 << 20,
    }
    stdout, stderr = sys.stdout, sys.stderr
    try:
        run.prepare(frame)
        run.launch(marshal.dumps(_compile(_PREWARM_CODE, settings)))
        loop.run_forever()  # until the program's task is done
        task = run.task
        value = task.result() if task is not None else None
    finally:
        sys.stdout, sys.stderr = stdout, stderr
        linecache.cache.pop(PROGRAM_FILENAME, None)
    check_json(value)
    orjson.loads(encode_frame({"type": "done", "result": value})[4:])


def set_cpu_policy(*, background: bool) -> None:
    """Make this process yield the CPU to the host (``SCHED_BATCH``), or not.

    A background process does not preempt a running one when it wakes up: the
    zygote forking a spare, a worker's teardown and the zygote reaping it then
    wait for an idle CPU or the host's next wait, instead of delaying the host
    in the middle of handing a run over. Its share of the CPU stays the same.
    Best effort: where the policy cannot be set, nothing changes.
    """
    policy = getattr(os, "SCHED_BATCH" if background else "SCHED_OTHER", None)
    if policy is not None:
        with contextlib.suppress(OSError):
            os.sched_setscheduler(0, policy, os.sched_param(0))


def _memory_message() -> str:
    return "MemoryError: the program ran out of memory (it hit the worker's memory limit)"


def _compile(code: str, settings: WorkerSettings) -> CodeType:
    return _compile_source(code, restricted=settings.restricted)


def _compile_source(code: str, *, restricted: bool) -> CodeType:
    if restricted:
        from ._restricted import compile_restricted_program

        return compile_restricted_program(code, PROGRAM_FILENAME)
    return compile_program(code)


def compile_for_worker(code: str, *, restricted: bool) -> bytes | None:
    """Compile ``code`` as a worker would, for a worker of this same interpreter.

    Returns the code object as marshal bytes, or ``None`` when it does not
    compile here: the worker then compiles the source itself and reports why.
    """
    try:
        return marshal.dumps(_compile_source(code, restricted=restricted))
    except Exception:  # SyntaxError, RecursionError, MemoryError...: the worker's to report
        return None


def _import_guard(settings: WorkerSettings) -> Callable[[], None] | None:
    """Return the installer of the import allow-list, or ``None`` when it is off."""
    if settings.allowed_modules is None:
        return None
    try:
        from ._imports import install_import_guard
    except ImportError:
        return None
    allowed = settings.allowed_modules

    def install() -> None:
        install_import_guard(allowed)

    return install
