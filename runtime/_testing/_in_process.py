"""The in-process fake runtime: the workers' program semantics, in the host's event loop.

Security warning: :class:`InProcessRuntime` is NOT a sandbox. The program
runs in the host process, with the host's modules, files, network and
memory; it can read and change anything the host can. It exists to test
code that drives a :class:`~runtime.Runtime` (executors, bridges, policies)
quickly, as httpx's ``MockTransport`` does for transports. Never give it a
program you did not write.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import contextvars
import linecache
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import anyio
import anyio.abc
import orjson

from .._base import CallTool, CancelSignal, FailureKind, Limits, RunOutcome, Runtime, ToolAnswer
from .._base import ToolNames as ToolNames
from .._host._session import tell_lines
from .._worker._bootstrap import _MAX_MESSAGE_CHARS, _TOO_MANY_BRACKETS, _brackets
from .._worker._program import (
    NOTHING,
    NOTHING_NAME,
    PROGRAM_FILENAME,
    PROGRAM_FUNCTION,
    LogWriter,
    ToolCallError,
    Tools,
    compile_program,
    format_program_exception,
    memory_message,
    syntax_message,
)
from .._worker._wire import (
    MAX_FRAME_BRACKETS,
    NotJsonError,
    check_json,
    log_cost,
    overflow_frames,
)

__all__ = ["InProcessRuntime"]


# Frames of these directories are the runtime's, not the program's: a
# failure's traceback leaves them out, as a worker's does.
_INTERNAL_DIRS = (
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,
    os.path.dirname(os.path.abspath(asyncio.__file__)) + os.sep,
)


def _is_internal(filename: str) -> bool:
    return filename.startswith(_INTERNAL_DIRS)


class InProcessRuntime(Runtime):
    """Runs a program in the host's asyncio event loop. NOT A SANDBOX: tests only.

    Security warning: the program runs in the host process with no isolation
    at all: no fresh process per run (what one run imports or changes, the
    next one sees), no CPU, memory or import limits, and nothing can stop a
    program that never awaits (a busy loop hangs the host). Never give it
    untrusted code.

    What it keeps is everything else a backend promises, from the workers' own
    definitions (``runtime/_worker/_program.py``): the program compiled as the
    body of an ``async def`` (top-level ``await``, ``return``; a bare one
    means no result), the same ``tools`` object (namespaces, subscripts) and
    ``ToolCallError``, lossless JSON for arguments and results (no NaN, no
    tuples; an answer goes through JSON as a worker gets it), ``print``
    captured as log lines and counted in bytes as the workers' frames are,
    the output, tool-call and message limits and the wall-clock timeout with
    the real backends' outcome kinds and messages, the cancel signal, and
    ``on_log``. It passes the conformance suite
    (:func:`runtime.testing.check_runtime` with ``isolated=False``).

    Only ``print`` is captured (``sys.stdout`` stays the host's). The host
    loop must be asyncio (programs use asyncio).
    """

    name = "in-process"

    def __init__(self, *, limits: Limits | None = None) -> None:
        super().__init__(limits=limits)
        #: How many runs were started (for tests of what drives the runtime).
        self.runs = 0

    async def _run(
        self,
        code: str,
        *,
        tool_names: ToolNames,
        call_tool: CallTool,
        limits: Limits,
        cancel: CancelSignal | None,
        on_log: Callable[[str], None] | None,
        call_group: anyio.abc.TaskGroup | None = None,
        shield_calls: bool = False,
    ) -> RunOutcome:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            raise RuntimeError("InProcessRuntime runs programs in an asyncio event loop") from None
        self.runs += 1
        names = tool_names.in_order()
        run = _InProcessRun(code, names, call_tool, limits, on_log, call_group, shield_calls)
        return await run.run(cancel)


class _Stopped(BaseException):
    """Unwinds a program whose outcome is decided (as a worker's exit would end it).

    A ``BaseException``, so that the program's ``except Exception`` does not
    keep it running.
    """


class _InProcessRun:
    """One run: what a worker does with the program, and what the host counts.

    Each value that would cross the wire is serialized as its frame would be
    and counted as the host counts that frame, so limits fall where they fall
    for a real backend.
    """

    def __init__(
        self,
        code: str,
        tool_names: list[str],
        call_tool: CallTool,
        limits: Limits,
        on_log: Callable[[str], None] | None,
        call_group: anyio.abc.TaskGroup | None = None,
        shield_calls: bool = False,
    ) -> None:
        self.code = code
        # Calls are answered in tasks of call_group (when given), each in a
        # cancel scope the run cancels as it ends (unless shield_calls: then
        # shielded from the group's owner, as the subprocess runtime's, and
        # left to end), without waiting for them.
        self.call_group = call_group
        self.shield_calls = shield_calls
        self.answering: set[anyio.CancelScope] = set()
        self.tool_names = tool_names
        self.call_tool = call_tool
        self.limits = limits
        self.on_log = on_log
        self.log_failed = False
        self.logs: list[str] = []
        self.output = 0
        self.calls = 0
        self.outcome: RunOutcome | None = None
        self.group: anyio.abc.TaskGroup | None = None
        self.writer = LogWriter(self)
        # Calls and on_log run in copies of the caller's context, as in tasks it started.
        self.context = contextvars.copy_context()

    # -- the outcome ---------------------------------------------------------------

    def failure(self, kind: FailureKind, message: str) -> RunOutcome:
        return RunOutcome(kind=kind, message=message, logs=self.logs, tool_calls=self.calls)

    def decide(self, outcome: RunOutcome) -> None:
        """Settle the outcome (the first one counts) and end the program and its calls."""
        if self.outcome is not None:
            return
        self.outcome = outcome
        if self.group is not None:
            self.group.cancel_scope.cancel()

    def stop(self, outcome: RunOutcome) -> NoReturn:
        self.decide(outcome)
        raise _Stopped

    def output_limit(self) -> RunOutcome:
        return self.failure(
            "output_limit", f"the program's output exceeded {self.limits.max_output_bytes} bytes"
        )

    def count_final(self, frame_bytes: int) -> None:
        """Count a final frame (or what stands in for one); stop past the output limit."""
        self.output += frame_bytes
        if self.output > self.limits.max_output_bytes:
            self.stop(self.output_limit())

    # -- the run -------------------------------------------------------------------

    async def run(self, cancel: CancelSignal | None) -> RunOutcome:
        try:
            compiled = compile_program(self.code)
        except SyntaxError as exc:
            return self.fail_now("syntax", syntax_message(exc))
        except MemoryError:
            return self.fail_now("exception", "MemoryError: the program is too large to compile")
        except RecursionError:
            return self.fail_now(
                "syntax", "SyntaxError: the program is nested too deeply to compile"
            )
        namespace: dict[str, Any] = {
            "__name__": "__main__",
            "__builtins__": builtins,
            "tools": Tools(self, self.tool_names),
            "ToolCallError": ToolCallError,
            NOTHING_NAME: NOTHING,
            # The workers make sys.stdout their log writer; here only print is captured.
            "print": self.print,
        }
        exec(compiled, namespace)
        main = namespace.pop(PROGRAM_FUNCTION)
        dispose: Callable[[], None] | None = None
        try:
            with anyio.move_on_after(self.limits.timeout):
                async with anyio.create_task_group() as self.group:
                    if cancel is not None:
                        # Called at once when already fired: the program never starts.
                        dispose = cancel.add_listener(self.cancelled)
                    if self.outcome is None:
                        self.group.start_soon(self.execute, main)
        finally:
            if dispose is not None:
                dispose()
            for scope in self.answering:
                scope.cancel()
        if self.outcome is None:
            return self.failure(
                "timeout", f"the run exceeded its wall-clock limit of {self.limits.timeout:g} s"
            )
        return self.outcome

    def fail_now(self, kind: FailureKind, message: str) -> RunOutcome:
        with contextlib.suppress(_Stopped):
            self.fail(kind, message)
        assert self.outcome is not None
        return self.outcome

    def cancelled(self) -> None:
        self.decide(self.failure("cancelled", "the run was cancelled"))

    async def execute(self, main: Callable[[], Any]) -> None:
        try:
            try:
                value = await main()
            except _Stopped:
                return
            except asyncio.CancelledError as exc:
                task = asyncio.current_task()
                if self.outcome is not None or task is None or task.cancelling():
                    raise  # a real cancellation: not the program's to report
                self.report_failure(exc)  # the program raised it itself
            except (Exception, SystemExit) as exc:  # the program's failure is data
                self.report_failure(exc)
            else:
                self.report(value)
        except _Stopped:
            return

    def report(self, value: Any) -> NoReturn:
        """The outcome of the program's return ``value`` (a worker's ``done`` frame)."""
        self.writer.drain()
        if value is NOTHING:
            self.count_final(len(b'{"type":"done"}'))
            self.stop(RunOutcome(logs=self.logs, tool_calls=self.calls))
        try:
            check_json(value)
            data = orjson.dumps({"type": "done", "result": value})
        except (NotJsonError, orjson.JSONEncodeError) as exc:
            self.fail(
                "exception", f"TypeError: the program's return value is not lossless JSON: {exc}"
            )
        if len(data) > MAX_FRAME_BRACKETS and _brackets(data) > MAX_FRAME_BRACKETS:
            self.fail("exception", f"ValueError: the program's result holds {_TOO_MANY_BRACKETS}")
        limits = self.limits
        if len(data) > limits.max_message_bytes:
            frames = overflow_frames(
                len(data), self.output, limits.max_output_bytes, limits.max_message_bytes
            )
            if frames is None:
                self.fail(
                    "exception",
                    f"ValueError: the program's result is {len(data)} bytes, over the "
                    f"message limit of {limits.max_message_bytes} bytes",
                )
            for frame in frames:  # what the host counts instead (they pass the limit)
                self.count_final(len(frame))
        self.count_final(len(data))
        result = orjson.loads(data)["result"]  # a copy, as the host reads it
        self.stop(RunOutcome(logs=self.logs, result=result, has_result=True, tool_calls=self.calls))

    def report_failure(self, exc: BaseException) -> NoReturn:
        """Report the program's failure ``exc`` as an ``exception``, as a worker does."""
        # Tracebacks read the program's lines from linecache: set for this
        # formatting only (other runs in this process have programs of their own).
        previous = linecache.cache.get(PROGRAM_FILENAME)
        linecache.cache[PROGRAM_FILENAME] = (
            len(self.code),
            None,
            self.code.splitlines(True),
            PROGRAM_FILENAME,
        )
        try:
            message = format_program_exception(exc, internal=_is_internal)
        except MemoryError:
            message = memory_message()
        finally:
            if previous is None:
                linecache.cache.pop(PROGRAM_FILENAME, None)
            else:
                linecache.cache[PROGRAM_FILENAME] = previous
        self.fail("exception", message)

    def fail(self, kind: FailureKind, message: str) -> NoReturn:
        """A worker's ``error`` frame: the message bounded, then counted as the host counts it."""
        self.writer.drain()
        limit = min(_MAX_MESSAGE_CHARS, self.limits.max_message_bytes // 8)
        if len(message) > limit:
            head, tail = limit // 4, limit - limit // 4
            omitted = len(message) - head - tail
            message = f"{message[:head]}\n... [{omitted} characters omitted] ...\n{message[-tail:]}"
        try:
            data = orjson.dumps({"type": "error", "kind": kind, "message": message})
        except orjson.JSONEncodeError:
            message = message.encode("utf-8", "backslashreplace").decode("utf-8")
            data = orjson.dumps({"type": "error", "kind": kind, "message": message})
        self.count_final(len(data))
        # (A MemoryError stays an exception: there is no kernel account to weigh here.)
        self.stop(self.failure(kind, message))

    # -- what the program sees (runtime._worker._program.ProgramRun) ---------------

    def print(
        self,
        *values: object,
        sep: str | None = " ",
        end: str | None = "\n",
        file: Any = None,
        flush: bool = False,
    ) -> None:
        if file is None or file is sys.stdout or file is sys.stderr:
            file = self.writer
        builtins.print(*values, sep=sep, end=end, file=file, flush=flush)

    def log(self, text: str) -> None:
        """A worker's log frame of ``text``, counted and passed on as the host does."""
        if self.outcome is not None:
            raise _Stopped
        try:
            data = orjson.dumps({"type": "log", "text": text})
        except orjson.JSONEncodeError:
            text = text.encode("utf-8", "backslashreplace").decode("utf-8")
            data = orjson.dumps({"type": "log", "text": text})
        limits = self.limits
        if len(data) > limits.max_message_bytes or (
            len(data) > MAX_FRAME_BRACKETS and _brackets(data) > MAX_FRAME_BRACKETS
        ):
            # One huge line goes as several frames, as a worker splits it.
            step = max(1, min(limits.max_message_bytes // 8, MAX_FRAME_BRACKETS // 2))
            for start in range(0, len(text), step):
                self.log(text[start : start + step])
            return
        newlines = text.count("\n")
        self.output += log_cost(len(data), newlines)
        if self.output > limits.max_output_bytes:
            self.stop(self.output_limit())
        lines = text.split("\n") if newlines else [text]
        self.logs.extend(lines)
        if self.on_log is not None:
            self.tell(lines)

    def tell(self, lines: Sequence[str]) -> None:
        """Pass ``lines`` to ``on_log``; what it raises is logged (once with its traceback)."""
        assert self.on_log is not None
        self.log_failed = tell_lines(self.on_log, self.context, lines, failed=self.log_failed)

    def call(self, name: str, args: Any) -> asyncio.Future[Any]:
        """A worker's call frame: checked as lossless JSON and bounded, then answered."""
        if self.outcome is not None:
            raise _Stopped
        call_id = self.calls + 1
        try:
            check_json(args)
            data = orjson.dumps({"type": "call", "id": call_id, "name": name, "args": args})
        except (NotJsonError, orjson.JSONEncodeError) as exc:
            raise TypeError(f"arguments of tool {name!r} are not JSON: {exc}") from None
        limits = self.limits
        if len(data) > limits.max_message_bytes:
            raise ToolCallError(
                name,
                f"arguments are {len(data)} bytes, over the limit of {limits.max_message_bytes}",
            )
        if len(data) > MAX_FRAME_BRACKETS and _brackets(data) > MAX_FRAME_BRACKETS:
            raise ToolCallError(name, f"arguments hold {_TOO_MANY_BRACKETS}")
        self.calls = call_id
        if call_id > limits.max_tool_calls:
            self.calls = limits.max_tool_calls
            self.stop(
                self.failure(
                    "tool_call_limit",
                    f"the program made more than {limits.max_tool_calls} tool calls",
                )
            )
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        assert self.group is not None
        # The host's copy of the arguments, as it reads them off the wire.
        args = orjson.loads(data)["args"]
        if self.call_group is None:
            self.group.start_soon(self.answer, future, call_id, name, args)
        else:
            self.call_group.start_soon(self.answer_in_call_group, future, call_id, name, args)
        return future

    async def answer_in_call_group(
        self, future: asyncio.Future[Any], call_id: int, name: str, args: Any
    ) -> None:
        """:meth:`answer` in a task of the call group, which the run ends without waiting."""
        if self.outcome is not None:
            return  # too late to start
        with anyio.CancelScope(shield=self.shield_calls) as scope:
            if not self.shield_calls:
                self.answering.add(scope)
            try:
                await self.answer(future, call_id, name, args)
            finally:
                self.answering.discard(scope)

    async def answer(self, future: asyncio.Future[Any], call_id: int, name: str, args: Any) -> None:
        """Answer one call through ``call_tool``, and the answer through JSON, as the host does.

        (The task is the caller's: it runs in a copy of the caller's context.)
        """
        try:
            answer = await self.call_tool(name, args)
            if not isinstance(answer, ToolAnswer):
                answer = ToolAnswer.failure(
                    f"internal error: call_tool returned {type(answer).__name__}"
                )
        except Exception as exc:  # a tool's failure is data for the program
            answer = ToolAnswer.failure(f"{type(exc).__name__}: {exc}")
        frame: dict[str, Any]
        if answer.ok:
            frame = {"type": "answer", "id": call_id, "ok": True, "value": answer.value}
        else:
            frame = {"type": "answer", "id": call_id, "ok": False, "message": str(answer.message)}
            if answer.code is not None:
                frame["code"] = str(answer.code)
        try:
            data = orjson.dumps(frame)  # tuples become lists, NaN null, as on the wire
        except (TypeError, orjson.JSONEncodeError) as exc:
            frame = {"type": "answer", "id": call_id, "ok": False}
            frame["message"] = f"the answer is not JSON: {exc}"
            data = orjson.dumps(frame)
        limit = self.limits.max_message_bytes
        if len(data) > limit:
            frame = {
                "type": "answer",
                "id": call_id,
                "ok": False,
                "message": f"the answer is {len(data)} bytes, over the message limit of {limit}",
            }
        else:
            frame = orjson.loads(data)
        if future.done():  # the program gave up on it
            return
        if frame["ok"]:
            future.set_result(frame["value"])
        else:
            future.set_exception(ToolCallError(name, frame["message"], frame.get("code")))
