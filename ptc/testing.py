"""Test helpers for code that uses ``ptc``: an in-process fake runtime.

Security warning: :class:`InProcessRuntime` runs the program *in the host
process* with no isolation at all. It exists to test executors, bridges and
policies quickly (like httpx's ``MockTransport``); never give it untrusted code.
"""

from __future__ import annotations

import ast
import asyncio
import logging
import traceback
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import orjson

from runtime import CallTool, CancelSignal, Limits, RunOutcome, Runtime, ToolAnswer, ToolNames
from runtime._worker._program import ToolCallError as _ToolCallError  # the workers' own class
from runtime._worker._program import Tools as _WorkerTools

__all__ = ["InProcessRuntime"]

logger = logging.getLogger("ptc")

_FILENAME = "<program>"


class _Calls:
    """The one part of a worker's run the ``tools`` object needs: ``call``."""

    __slots__ = ("_call",)

    def __init__(self, call: Callable[[str, Any], Awaitable[Any]]) -> None:
        self._call = call

    def call(self, name: str, args: Any) -> asyncio.Future[Any]:
        return asyncio.ensure_future(self._call(name, {} if args is None else args))

    def log(self, text: str) -> None:  # pragma: no cover - print is captured separately
        raise NotImplementedError


class InProcessRuntime(Runtime):
    """Runs a program in the host's event loop (no sandbox; tests only).

    It keeps the runtime contract that executors rely on: program semantics
    (body of an ``async def``), ``tools``/``ToolCallError``, captured ``print``,
    JSON results, the wall-clock and tool-call limits, and cancellation
    (and ``on_log``: each printed line as it is printed). The host loop must
    be asyncio.
    """

    name = "in-process"

    def __init__(self, *, limits: Limits | None = None) -> None:
        super().__init__(limits=limits)
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
    ) -> RunOutcome:
        self.runs += 1
        printed: list[str] = []
        calls = 0
        live = _LiveLines(on_log) if on_log is not None else None

        def logs() -> list[str]:
            if live is not None:
                live.finish()  # the last partial line is a line of the logs too
            return "".join(printed).splitlines()

        try:
            module = ast.parse(code, filename=_FILENAME)
        except SyntaxError as exc:
            return RunOutcome.failure("syntax", f"SyntaxError: {exc.msg} (line {exc.lineno})")
        wrapper = ast.parse("async def __ptc_main__():\n    pass\n")
        func = wrapper.body[0]
        assert isinstance(func, ast.AsyncFunctionDef)
        # A bare ``return`` or falling off the end means "no result"; ``return None`` is null.
        nothing = object()
        for node in ast.walk(module):
            if isinstance(node, ast.Return) and node.value is None:
                node.value = ast.Name(id="__ptc_nothing__", ctx=ast.Load())
        func.body = [*module.body, ast.Return(value=ast.Name(id="__ptc_nothing__", ctx=ast.Load()))]
        ast.fix_missing_locations(wrapper)

        class LimitHit(Exception):
            pass

        async def call(name: str, args: Any) -> Any:
            nonlocal calls
            calls += 1
            if calls > limits.max_tool_calls:
                raise LimitHit(f"more than {limits.max_tool_calls} tool calls")
            args = orjson.loads(orjson.dumps(args))
            answer: ToolAnswer = await call_tool(name, args)
            if not answer.ok:
                raise _ToolCallError(name, answer.message, answer.code)
            return answer.value

        def program_print(
            *values: Any, sep: str | None = " ", end: str | None = "\n", **_: Any
        ) -> None:
            text = (sep if sep is not None else " ").join(str(v) for v in values)
            text += end if end is not None else "\n"
            printed.append(text)
            if live is not None:
                live.write(text)

        namespace: dict[str, Any] = {
            "__name__": "__program__",
            "asyncio": asyncio,
            "print": program_print,
            # The workers' own ``tools`` object: the same names, namespaces and errors.
            "tools": _WorkerTools(_Calls(call), sorted(tool_names)),
            "ToolCallError": _ToolCallError,
            "__ptc_nothing__": nothing,
        }
        try:
            exec(compile(wrapper, _FILENAME, "exec"), namespace)
        except SyntaxError as exc:
            return RunOutcome.failure("syntax", f"SyntaxError: {exc.msg} (line {exc.lineno})")

        cancelled = False
        outcome: RunOutcome | None = None
        with anyio.move_on_after(limits.timeout) as deadline:
            with anyio.CancelScope() as scope:
                detach = cancel.add_listener(scope.cancel) if cancel is not None else None
                try:
                    value = await namespace["__ptc_main__"]()
                    try:
                        result = None if value is nothing else orjson.loads(orjson.dumps(value))
                    except TypeError as exc:
                        outcome = RunOutcome.failure(
                            "exception", f"TypeError: the result is not JSON: {exc}", logs=logs()
                        )
                    else:
                        outcome = RunOutcome(
                            logs=logs(),
                            result=result,
                            has_result=value is not nothing,
                            tool_calls=calls,
                        )
                except LimitHit as exc:
                    outcome = RunOutcome.failure(
                        "tool_call_limit", str(exc), logs=logs(), tool_calls=calls
                    )
                except Exception as exc:
                    frames = [
                        f
                        for f in traceback.extract_tb(exc.__traceback__)
                        if f.filename == _FILENAME
                    ]
                    where = "".join(f"  line {f.lineno}\n" for f in frames)
                    outcome = RunOutcome.failure(
                        "exception",
                        f"{type(exc).__name__}: {exc}\n{where}".rstrip(),
                        logs=logs(),
                        tool_calls=calls,
                    )
                finally:
                    if detach is not None:
                        detach()
            cancelled = scope.cancelled_caught
        if cancelled:
            return RunOutcome.failure(
                "cancelled", "the run was cancelled", logs=logs(), tool_calls=calls
            )
        if deadline.cancelled_caught or outcome is None:
            return RunOutcome.failure(
                "timeout",
                f"the run took longer than {limits.timeout:g}s",
                logs=logs(),
                tool_calls=calls,
            )
        return outcome


class _LiveLines:
    """``on_log`` of one run: each line of the printed text, as ``str.splitlines`` cuts the whole."""

    __slots__ = ("_failed", "_on_log", "_pending")

    def __init__(self, on_log: Callable[[str], None]) -> None:
        self._on_log = on_log
        self._pending = ""  # the start of a line not yet complete
        self._failed = False

    def write(self, text: str) -> None:
        lines = (self._pending + text).splitlines(keepends=True)
        last = lines[-1] if lines else ""
        # A line still open, or a "\r" that a "\n" may follow (one line break).
        if last and (last.splitlines()[0] == last or last.endswith("\r")):
            self._pending = lines.pop()
        else:
            self._pending = ""
        for line in lines:
            self._tell(line.splitlines()[0])

    def finish(self) -> None:
        pending, self._pending = self._pending, ""
        for line in pending.splitlines():
            self._tell(line)

    def _tell(self, line: str) -> None:
        try:
            self._on_log(line)
        except Exception:
            if self._failed:
                logger.debug("on_log raised again", exc_info=True)
            else:
                self._failed = True
                logger.exception("on_log raised (the run goes on)")
