"""The in-Pyodide half of a ptc-runner worker: ``tools``, ``ToolCallError``, the run.

``worker.js`` imports this module before the memory snapshot is taken (so it is
already loaded when a worker starts) and calls :func:`attach` with the function
that writes one frame to the host. The frames are those of ``runtime/_worker/_protocol.py``,
written here with the standard library only, since neither orjson nor sockets
exist inside Pyodide. The program semantics (compiling, ``tools``,
``ToolCallError``, ``print``, tracebacks) are ``runtime/_worker/_program.py``, shared with
the CPython worker: ``worker.js`` loads it first, as the module ``_ptc_program``.

Security warning: this module runs in the same interpreter as the untrusted
program, which can patch it, read its state and forge any frame. It enforces
nothing the host relies on; the host checks every frame and every limit again.
"""

from __future__ import annotations

import asyncio
import builtins
import collections
import contextlib
import json
import linecache
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:  # the same file, as the type checker finds it
    from runtime._worker._program import (
        NOTHING,
        NOTHING_NAME,
        PROGRAM_FILENAME,
        PROGRAM_FUNCTION,
        LogWriter,
        ToolCallError,
        Tools,
        compile_program,
        memory_message,
        pack_names,
        run_frame,
        syntax_message,
    )
    from runtime._worker._program import format_program_exception as _format_exception
    from runtime._worker._wire import (
        MAX_FRAME_BRACKETS,
        NotJsonError,
        check_json,
        log_cost,
        overflow_frames,
    )
else:  # loaded by worker.js from runtime/_worker/_program.py and _wire.py, before this module
    from _ptc_program import (
        NOTHING,
        NOTHING_NAME,
        PROGRAM_FILENAME,
        PROGRAM_FUNCTION,
        LogWriter,
        ToolCallError,
        Tools,
        compile_program,
        memory_message,
        pack_names,
        run_frame,
        syntax_message,
    )
    from _ptc_program import format_program_exception as _format_exception
    from _ptc_wire import (
        MAX_FRAME_BRACKETS,
        NotJsonError,
        check_json,
        log_cost,
        overflow_frames,
    )

_MAX_MESSAGE_CHARS = 32_768

Send = Callable[[Any], object]


class _Finished(BaseException):
    """Unwinds the program after the final frame was sent (a limit was hit)."""


# --------------------------------------------------------------------------- json


def _not_json(value: object) -> NoReturn:
    raise TypeError(f"{type(value).__name__} is not JSON")


# One C encoder and scanner for every frame: ``json.dumps``/``json.loads`` with
# options build new ones per call, and wrap them in Python-level checks. No
# cycle check: every value sent passed check_json (or is a frame built here).
_ENCODE: Callable[[object, int], list[str]] | None = None
with contextlib.suppress(AttributeError, TypeError):
    _ENCODE = json.encoder.c_make_encoder(  # type: ignore[attr-defined]
        None, _not_json, json.encoder.encode_basestring, None, ":", ",", False, False, False
    )
_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))
_DECODER = json.JSONDecoder()


def dumps(value: object) -> str:
    """The JSON text of ``value`` (through the C encoder where there is one)."""
    if _ENCODE is not None:
        return "".join(_ENCODE(value, 0))
    return _ENCODER.encode(value)


def loads(text: str) -> Any:
    """The value the JSON ``text`` holds (the fast scanner first, the full decoder if need be)."""
    try:
        value, end = _DECODER.scan_once(text, 0)  # type: ignore[attr-defined]
    except StopIteration:
        end = -1
    if end != len(text):  # whitespace around it, or not JSON: the full decoder decides
        return _DECODER.decode(text)
    return value


def format_program_exception(exc: BaseException) -> str:
    """The traceback of ``exc`` in the program's own lines only."""
    return _format_exception(exc, internal=_not_the_program)


def _not_the_program(filename: str) -> bool:
    return filename != PROGRAM_FILENAME


def _utf8_size(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode())


_TOO_MANY_BRACKETS = (
    f"more than {MAX_FRAME_BRACKETS} arrays and objects (or '[' and '{{' in strings), "
    "too many for one message"
)


def _brackets(text: str) -> int:
    return text.count("[") + text.count("{")


class _PyodideRun:
    """One program run: the channel, the pending tool calls and the limits."""

    def __init__(self, send: Send, frame: dict[str, Any]) -> None:
        self._send = send
        self.max_output = int(frame["max_output_bytes"])
        self.max_message = int(frame["max_message_bytes"])
        self.max_calls = int(frame["max_tool_calls"])
        self.output = 0
        self.calls = 0
        self.finished = False
        self.pending: dict[int, tuple[asyncio.Future[Any], str]] = {}
        self.loop = asyncio.get_event_loop()
        self.writer = LogWriter(self)
        # Call frames wait here until the program yields, then leave in one
        # write: a burst of concurrent calls reaches the host at once.
        self.outbox: list[str] = []

    def send(self, frame: dict[str, Any]) -> None:
        self.send_text(dumps(frame))

    def send_text(self, data: str) -> None:
        self.flush()
        if not self.finished:
            self._send(data)

    def flush(self) -> None:
        if self.outbox and not self.finished:
            # JSON text never holds a raw newline: worker.js splits the batch
            # there and frames each part (a str crosses to JS far cheaper
            # than bytes do).
            batch = "\n".join(self.outbox)
            self.outbox.clear()
            self._send(batch)

    def queue(self, text: str) -> None:
        if not self.outbox:
            if _READY is not None:
                _READY.defer(self.flush)
            else:
                self.loop.call_soon(self.flush)
        self.outbox.append(text)

    def finish(self, frame: dict[str, Any]) -> None:
        """Send the final frame; the host kills the worker when it reads it."""
        if frame["type"] == "error":
            frame["message"] = self.clip(frame["message"])
        self.send(frame)
        self.finished = True

    def clip(self, message: str) -> str:
        limit = min(_MAX_MESSAGE_CHARS, self.max_message // 8)
        if len(message) > limit:
            # Keep the head and the tail: the tail holds the exception line.
            head, tail = limit // 4, limit - limit // 4
            omitted = len(message) - head - tail
            message = f"{message[:head]}\n... [{omitted} characters omitted] ...\n{message[-tail:]}"
        return message.encode("utf-8", "backslashreplace").decode("utf-8")

    def stop(self) -> NoReturn:
        """Stop the program without a final frame: the host sees the limit it passed."""
        self.finished = True
        raise _Finished

    def log(self, text: str) -> None:
        # One frame per write, like the CPython worker: a line printed just
        # before a busy loop or a crash still reaches the host.
        # 4 bytes per character bound UTF-8; the brackets of a frame are bounded too.
        step = max(1, min(self.max_message // 8, MAX_FRAME_BRACKETS // 2))
        for start in range(0, len(text), step) if len(text) > step else (0,):
            chunk = text[start : start + step]
            chunk = chunk.encode("utf-8", "backslashreplace").decode()
            data = dumps({"type": "log", "text": chunk})
            self.send_text(data)
            # Counted as the host counts it: past the limit, the host ends the run.
            self.output += log_cost(_utf8_size(data), chunk.count("\n"))
            if self.output > self.max_output:
                self.stop()

    def call(self, name: str, args: Any) -> asyncio.Future[Any]:
        call_id = self.calls + 1
        try:
            check_json(args)
            frame = {"type": "call", "id": call_id, "name": name, "args": args}
            text = dumps(frame)
            size = _utf8_size(text)
        except (NotJsonError, ValueError, RecursionError) as exc:  # UnicodeEncodeError too
            raise TypeError(f"arguments of tool {name!r} are not JSON: {exc}") from None
        if size > self.max_message:  # not sent: the id goes to the next call
            raise ToolCallError(
                name, f"arguments are {size} bytes, over the limit of {self.max_message}"
            )
        if size > MAX_FRAME_BRACKETS and _brackets(text) > MAX_FRAME_BRACKETS:
            raise ToolCallError(name, f"arguments hold {_TOO_MANY_BRACKETS}")
        self.calls = call_id
        if call_id > self.max_calls:
            # One call too many: the host counts it and ends the run.
            self.send_text(text)
            self.stop()
        # A plain Future: the WebLoop's create_future() adds a done callback
        # (one more trip through the ready queue per call) and a JS-facing subclass.
        future: asyncio.Future[Any] = asyncio.Future(loop=self.loop)
        self.pending[call_id] = (future, name)
        self.queue(text)
        return future

    def answer(self, frame: dict[str, Any]) -> None:
        entry = self.pending.pop(frame["id"], None)
        if entry is None or entry[0].done():
            return
        future, name = entry
        if frame["ok"]:
            future.set_result(frame["value"])
        else:
            future.set_exception(ToolCallError(name, frame["message"], frame.get("code")))

    def report(self, value: Any) -> None:
        self.writer.drain()
        if value is NOTHING:
            self.finish({"type": "done"})
            return
        try:
            check_json(value)
            data = dumps({"type": "done", "result": value})
            size = _utf8_size(data)
        except (NotJsonError, ValueError, RecursionError) as exc:  # UnicodeEncodeError too
            message = f"TypeError: the program's return value is not lossless JSON: {exc}"
            self.finish({"type": "error", "kind": "exception", "message": message})
            return
        if size > MAX_FRAME_BRACKETS and _brackets(data) > MAX_FRAME_BRACKETS:
            message = f"ValueError: the program's result holds {_TOO_MANY_BRACKETS}"
            self.finish({"type": "error", "kind": "exception", "message": message})
            return
        if size > self.max_message:
            # No frame can carry it: send what shows the host the output limit
            # passed (the host decides), or, within the limit, fail as the program's error.
            frames = overflow_frames(size, self.output, self.max_output, self.max_message)
            if frames is None:
                message = (
                    f"ValueError: the program's result is {size} bytes, over the "
                    f"message limit of {self.max_message} bytes"
                )
                self.finish({"type": "error", "kind": "exception", "message": message})
                return
            for frame in frames:
                self.send_text(frame)
            self.finished = True
            return
        self.send_text(data)
        self.finished = True


async def _guarded(run: _PyodideRun, code: str, tool_names: str) -> None:
    try:
        await _execute(run, code, tool_names)
    except BaseException as exc:  # a bug here must end the run, not hang it
        if not run.finished:
            message = f"internal error in the Pyodide bootstrap: {exc!r}"
            run.finish({"type": "error", "kind": "exception", "message": message})


async def _execute(run: _PyodideRun, code: str, tool_names: str) -> None:
    tools = Tools(run, tool_names)
    sys.stdout = sys.stderr = run.writer
    linecache.cache[PROGRAM_FILENAME] = (len(code), None, code.splitlines(True), PROGRAM_FILENAME)
    try:
        compiled = compile_program(code)
    except SyntaxError as exc:
        run.finish({"type": "error", "kind": "syntax", "message": syntax_message(exc)})
        return
    except MemoryError:  # an exception like any other: the host decides whether it was the limit
        message = "MemoryError: the program is too large to compile"
        run.finish({"type": "error", "kind": "exception", "message": message})
        return
    except RecursionError:
        message = "SyntaxError: the program is nested too deeply to compile"
        run.finish({"type": "error", "kind": "syntax", "message": message})
        return
    namespace: dict[str, Any] = {
        "__name__": "__main__",
        "__builtins__": builtins,
        "tools": tools,
        "ToolCallError": ToolCallError,
        NOTHING_NAME: NOTHING,
    }
    try:
        exec(compiled, namespace)
        main = namespace.pop(PROGRAM_FUNCTION)
        value = await main()
    except _Finished:
        return
    except BaseException as exc:  # the program's failure, whatever it raised (MemoryError too)
        if run.finished:
            return
        try:
            message = format_program_exception(exc)
        except MemoryError:
            message = memory_message()
        run.writer.drain()
        run.finish({"type": "error", "kind": "exception", "message": message})
        return
    if not run.finished:
        run.report(value)


class _Worker:
    """Routes host frames: one ``run``, then ``answer`` frames for its calls."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self.run: _PyodideRun | None = None
        self.task: asyncio.Future[None] | None = None

    def receive(self, text: str) -> None:
        if _READY is None:
            self._receive(text)
            return
        # What the frame makes ready (the task awaiting an answer) runs now,
        # not in another trip through the JS event loop.
        _READY.hold()
        try:
            self._receive(text)
        finally:
            _READY.run_inline()

    def _receive(self, text: str) -> None:
        frame = loads(text)
        kind = frame.get("type")
        if kind == "answer" and self.run is not None:
            self.run.answer(frame)
        elif kind == "run" and self.run is None:
            self.run = _PyodideRun(self._send, frame)
            names = str(frame["tools"])  # (packed: see _ptc_program.pack_names)
            self.task = asyncio.ensure_future(_guarded(self.run, str(frame["code"]), names))


class _ReadyQueue:
    """``call_soon`` for Pyodide's WebLoop without one JS callback per handle.

    The stock WebLoop wraps every ready handle in a fresh JS callable that may
    switch stacks (JSPI); that costs hundreds of microseconds per task step.
    Here ready handles wait in a deque and one persistent JS callable runs them
    in batches, scheduled through ``worker.js`` (a microtask, a macrotask now
    and then so frames keep being read). A host frame's handler runs the
    batches it made ready at once (:meth:`run_inline`), and callbacks deferred
    with :meth:`defer` (the outgoing frames) run at the end of each batch.
    """

    _INLINE_ROUNDS = 64

    def __init__(self, loop: Any, schedule: Callable[[object, int], object]) -> None:
        from pyodide.ffi import create_proxy  # type: ignore[import-not-found, unused-ignore]

        self._loop = loop
        self._schedule = schedule
        self._ready: collections.deque[asyncio.Handle] = collections.deque()
        self._deferred: list[Callable[[], object]] = []
        self._pending = False
        self._inline = False
        self._in_batch = False
        self._run_proxy = create_proxy(self._run)

    def call_soon(
        self, callback: Callable[..., object], *args: object, context: Any = None
    ) -> asyncio.Handle:
        handle = asyncio.Handle(callback, args, self._loop, context=context)
        self._ready.append(handle)
        self._wake()
        return handle

    def defer(self, callback: Callable[[], object]) -> None:
        """Run ``callback`` once the current batch is done (or soon, outside one)."""
        if self._in_batch:
            self._deferred.append(callback)
        else:
            self.call_soon(callback)

    def hold(self) -> None:
        """Collect what becomes ready from now on; :meth:`run_inline` runs it."""
        self._inline = True

    def run_inline(self) -> None:
        """Run what is ready now, a bounded number of rounds; schedule the rest."""
        self._inline = True
        try:
            for _ in range(self._INLINE_ROUNDS):
                if not self._ready:
                    break
                self._batch()
        finally:
            self._inline = False
        self._wake()

    def _wake(self) -> None:
        if self._ready and not self._pending and not self._inline:
            self._pending = True
            self._schedule(self._run_proxy, 0)

    def _run(self) -> None:
        self._pending = False
        self._batch()
        self._wake()

    def _batch(self) -> None:
        loop = self._loop
        loop._install_running_loop()
        loop._install_asyncgen_hooks()
        ready = self._ready
        self._in_batch = True
        try:
            for _ in range(len(ready)):  # handles queued meanwhile run in the next batch
                handle = ready.popleft()
                if handle.cancelled():
                    continue
                # SystemExit/KeyboardInterrupt re-raised by a task: the task holds it too.
                with contextlib.suppress(BaseException):
                    handle._run()
        finally:
            self._in_batch = False
        deferred, self._deferred = self._deferred, []
        for callback in deferred:
            with contextlib.suppress(Exception):
                callback()


_READY: _ReadyQueue | None = None


def _install_ready_queue(schedule: Any) -> None:
    global _READY
    loop = asyncio.get_event_loop()
    if not all(
        hasattr(loop, name) for name in ("_install_running_loop", "_install_asyncgen_hooks")
    ):
        return  # not the WebLoop this was written for: keep the stock one
    queue = _ReadyQueue(loop, schedule)
    loop.call_soon = queue.call_soon  # type: ignore[method-assign]
    loop.call_soon_threadsafe = queue.call_soon  # type: ignore[method-assign]
    _READY = queue
    # The loop's timers (call_later) go through worker.js too: it must know
    # whether anything is due before the next answer (see mayBlock there).
    webloop = sys.modules.get(type(loop).__module__)
    if webloop is not None and hasattr(webloop, "scheduleCallback"):
        webloop.scheduleCallback = schedule  # type: ignore[attr-defined]


_WARM_UP_PROGRAM = """
total = 0
for index in range(40):
    total += index * 2
names = sorted(str(index) for index in range(10))
return {"total": total, "names": names, "nested": [{"a": 1.5, "b": None, "c": True}]}
"""


_WARM_UP_CALLS = """
values = []
for index in range(4):
    values.append(await tools.echo({"index": index, "text": "x"}))
return values
"""


def warm_up(send: Send | None = None) -> None:
    """Run the hot paths of a run once, leaving no state, so V8 tiers them up.

    A spare calls this in short slices while it waits for its run: a fresh
    instance otherwise runs its first program on baseline-compiled wasm.
    ``send`` frames what the throwaway run sends without writing it.
    """
    namespace: dict[str, Any] = {"__builtins__": builtins, NOTHING_NAME: NOTHING}
    exec(compile_program(_WARM_UP_PROGRAM), namespace)
    coroutine = namespace[PROGRAM_FUNCTION]()
    try:
        coroutine.send(None)
    except StopIteration as stop:
        value = stop.value
    else:  # pragma: no cover - the program above never awaits
        coroutine.close()
        return
    check_json(value)
    loads(dumps({"type": "done", "result": value}))
    _warm_up_calls(send)


def _warm_up_calls(send: Send | None) -> None:
    """A throwaway run with tool calls, answered here: the path of a real run."""
    sent: list[str] = []

    def capture(text: Any) -> None:
        if send is not None:
            send(text)
        sent.append(str(text))

    stdout, stderr = sys.stdout, sys.stderr
    worker = _Worker(capture)
    frame = run_frame(
        _WARM_UP_CALLS,
        pack_names(["echo"]),
        max_output_bytes=1 << 20,
        max_tool_calls=8,
        max_message_bytes=1 << 20,
    )
    try:
        worker.receive(dumps(frame))
        for _ in range(8):  # each answer runs the program to its next call (inline)
            calls = [
                loads(part)
                for text in sent
                for part in text.split("\n")
                if part.startswith('{"type":"call"')
            ]
            sent.clear()
            if not calls:
                break
            for call in calls:
                answer = {"type": "answer", "id": call["id"], "ok": True, "value": call["args"]}
                worker.receive(dumps(answer))
    finally:
        sys.stdout, sys.stderr = stdout, stderr
        if worker.task is not None and not worker.task.done():
            worker.task.cancel()


def attach(send: Send, layers: str, schedule: object = None) -> Callable[[str], None]:
    r"""Send the ``ready`` frame through ``send``; return the handler for host frames.

    ``layers`` is the JSON list of ``[name, active, detail]`` triples the host
    shows as this worker's isolation layers; ``schedule`` replaces the event
    loop's JS callback scheduler (``scheduleCallback(callback, delay_ms)``), for
    ready callbacks and timers alike. ``send`` takes the JSON text of one frame,
    or of several joined by ``"\n"``.
    """
    # Ready goes out first: the host's first frame is on its way while the
    # rest is set up (~5 ms); it is read only after this returns.
    send(dumps({"type": "ready", "layers": json.loads(layers)}))
    if schedule is not None:
        _install_ready_queue(schedule)
    return _Worker(send).receive
