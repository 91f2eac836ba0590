"""Conformance checks: the limits, cancellation, output counted in bytes, ``on_log``."""

from __future__ import annotations

import logging
import time
from typing import Any

import anyio

from .._base import Limits, RunOutcome, Runtime, ToolAnswer
from ._checks import MiB, RuntimeCheck, checker, request_id, run
from ._tools import TOOL_NAMES, ManualCancel, ToolBox

__all__ = ["CHECKS"]

#: These checks, in the order they run.
CHECKS: list[RuntimeCheck] = []
check = checker(CHECKS)

# --------------------------------------------------------------------------- limits


@check(isolation=True)
async def _wall_clock_timeout_busy_loop(runtime: Runtime) -> None:
    started = time.perf_counter()
    outcome = await run(
        runtime, "print('started')\nwhile True:\n    pass", limits=Limits(timeout=0.5)
    )
    assert outcome.kind == "timeout", outcome.message
    assert outcome.logs == ["started"]
    assert time.perf_counter() - started < 5


@check()
async def _wall_clock_covers_tool_calls(runtime: Runtime) -> None:
    tools = ToolBox()
    outcome = await run(runtime, "await tools.hang()", tools=tools, limits=Limits(timeout=0.3))
    assert outcome.kind == "timeout", outcome.message
    assert tools.cancelled == 1
    assert tools.in_flight == 0


@check(isolation=True)
async def _cpu_limit(runtime: Runtime) -> None:
    outcome = await run(runtime, "while True:\n    pass", limits=Limits(cpu_seconds=1, timeout=20))
    assert outcome.kind == "timeout", outcome.message
    assert "CPU" in outcome.message


@check(isolation=True)
async def _memory_limit(runtime: Runtime) -> None:
    outcome = await run(
        runtime,
        "blocks = []\nwhile True:\n    blocks.append(bytearray(64 * 1024 * 1024))",
        limits=Limits(memory_bytes=512 * MiB),
    )
    assert outcome.kind == "memory", outcome.message


@check()
async def _output_limit(runtime: Runtime) -> None:
    outcome = await run(
        runtime,
        "for i in range(100000):\n    print('x' * 100)",
        limits=Limits(max_output_bytes=10_000),
    )
    assert outcome.kind == "output_limit", outcome.message
    assert 0 < len(outcome.logs) <= 100


@check()
async def _result_counts_toward_output_limit(runtime: Runtime) -> None:
    outcome = await run(runtime, "return 'y' * 50_000", limits=Limits(max_output_bytes=10_000))
    assert outcome.kind == "output_limit", outcome.message


@check()
async def _tool_call_limit(runtime: Runtime) -> None:
    tools = ToolBox()
    outcome = await run(
        runtime,
        "for i in range(10):\n    await tools.echo({'i': i})",
        tools=tools,
        limits=Limits(max_tool_calls=5),
    )
    assert outcome.kind == "tool_call_limit", outcome.message
    assert len(tools.calls) == 5
    assert outcome.tool_calls == 5


@check()
async def _message_limit_on_tool_arguments(runtime: Runtime) -> None:
    tools = ToolBox()
    outcome = await run(
        runtime,
        "try:\n    await tools.echo({'big': 'z' * 20000})\nexcept ToolCallError as exc:\n"
        "    return exc.message",
        tools=tools,
        limits=Limits(max_message_bytes=10_000),
    )
    assert outcome.ok, outcome.message
    assert "limit" in outcome.result
    assert tools.calls == []


# --------------------------------------------------------------------------- cancellation


@check()
async def _cancel_signal_cancels_in_flight_calls(runtime: Runtime) -> None:
    tools = ToolBox()
    cancel = ManualCancel()
    outcome: RunOutcome | None = None

    async def go() -> None:
        nonlocal outcome
        outcome = await run(
            runtime, "print('waiting')\nawait tools.hang()", tools=tools, cancel=cancel
        )

    async with anyio.create_task_group() as tg:
        tg.start_soon(go)
        with anyio.fail_after(10):
            await tools.started.wait()
        cancel.fire()
    assert outcome is not None
    assert outcome.kind == "cancelled", outcome.message
    assert outcome.logs == ["waiting"]
    assert tools.cancelled == 1
    assert tools.in_flight == 0
    assert cancel.listener_count == 0


@check()
async def _cancel_signal_already_fired(runtime: Runtime) -> None:
    cancel = ManualCancel()
    cancel.fire()
    outcome = await run(runtime, "return 1", cancel=cancel)
    assert outcome.kind == "cancelled", outcome.message


@check()
async def _task_cancellation_propagates(runtime: Runtime) -> None:
    tools = ToolBox()
    with anyio.move_on_after(10) as outer:
        async with anyio.create_task_group() as tg:

            async def go() -> None:
                await run(runtime, "await tools.hang()", tools=tools)
                raise AssertionError("run() returned after its task was cancelled")

            tg.start_soon(go)
            await tools.started.wait()
            tg.cancel_scope.cancel()
    assert not outer.cancelled_caught
    assert tools.cancelled == 1
    assert tools.in_flight == 0
    after = await run(runtime, "return 'still works'")
    assert after.result == "still works"


@check()
async def _concurrent_runs(runtime: Runtime) -> None:
    results: dict[int, Any] = {}

    async def one(index: int) -> None:
        outcome = await run(runtime, f"r = await tools.sleep({{'i': {index}}})\nreturn r['i']")
        results[index] = outcome.result

    async with anyio.create_task_group() as tg:
        for index in range(6):
            tg.start_soon(one, index)
    assert results == {index: index for index in range(6)}


@check()
async def _huge_failure_message_is_bounded(runtime: Runtime) -> None:
    outcome = await run(runtime, "raise ValueError('v' * 1_000_000)")
    assert outcome.kind == "exception", outcome.message
    assert "ValueError" in outcome.message
    assert len(outcome.message) < 100_000


@check()
async def _unencodable_text_is_escaped_in_logs(runtime: Runtime) -> None:
    outcome = await run(runtime, "print('a\\ud800b')\nreturn 1")
    assert outcome.ok, outcome.message
    assert outcome.logs == ["a\\ud800b"]


@check()
async def _a_long_line_is_one_line(runtime: Runtime) -> None:
    # A line longer than a worker holds back goes out in pieces of its own,
    # but the newline print writes after it ends it: no empty line follows.
    outcome = await run(runtime, "print('x' * 100_000)\nprint('y' * 70_000)\nprint()")
    assert outcome.ok, outcome.message
    assert outcome.logs == ["x" * 100_000, "y" * 70_000, ""]
    joined = await run(runtime, "print('y' * 70_000, end='')\nprint('z')")
    assert joined.ok, joined.message
    assert joined.logs == ["y" * 70_000, "z"]  # the long part went as a line of its own


# --------------------------------------------------------------------------- output in bytes


# With 1000 bytes of output: a line costs its text as JSON escapes it (UTF-8,
# "\u0001", "\n") plus 4 bytes, and the final frame ({"type":"done"}) 15.
# (the program's text, the text printed, whether it fits)
_OUTPUT_CASES = [
    ("'x' * 981", "x" * 981, True),
    ("'x' * 982", "x" * 982, False),
    ("'\\U0001f600' * 245", "\U0001f600" * 245, True),
    ("'\\U0001f600' * 246", "\U0001f600" * 246, False),
    ("'\\x01' * 163", "\x01" * 163, True),
    ("'\\x01' * 164", "\x01" * 164, False),
    ("'\\n' * 200", "\n" * 200, True),  # 201 lines, and the print's own
    ("'\\n' * 300", "\n" * 300, False),
]


@check()
async def _output_is_counted_in_bytes_as_json_escapes_it(runtime: Runtime) -> None:
    for text, printed, fits in _OUTPUT_CASES:
        outcome = await run(runtime, f"print({text})", limits=Limits(max_output_bytes=1000))
        if fits:
            assert outcome.ok, f"print({text}): {outcome.message}"
            assert "\n".join(outcome.logs) == printed, f"print({text})"
        else:
            assert outcome.kind == "output_limit", f"print({text}): {outcome.message}"
            assert sum(len(line.encode()) + 4 for line in outcome.logs) <= 1000, f"print({text})"


@check()
async def _a_result_too_big_for_any_frame(runtime: Runtime) -> None:
    # Over the output limit: the host counts what stands in for it and decides.
    over = await run(
        runtime,
        "return 'x' * 20_000",
        limits=Limits(max_message_bytes=10_000, max_output_bytes=15_000),
    )
    assert over.kind == "output_limit", over.message
    # Within it: the program's error (no frame can carry it).
    within = await run(
        runtime,
        "print('before')\nreturn 'x' * 20_000",
        limits=Limits(max_message_bytes=10_000, max_output_bytes=100_000),
    )
    assert within.kind == "exception", within.message
    assert "over the message limit" in within.message
    assert within.logs == ["before"]


# --------------------------------------------------------------------------- live output (on_log)


@check()
async def _on_log_sees_each_line_as_the_program_prints_it(runtime: Runtime) -> None:
    # When the program's tool call arrives, the lines printed before it have
    # been passed on already: on_log runs as each log frame is read.
    seen: list[str] = []

    async def call_tool(name: str, args: Any) -> ToolAnswer:
        return ToolAnswer.success(list(seen))

    code = (
        "print('one')\n"
        "print('two\\nthree')\n"
        "print('half', end='')\n"
        "before = await tools.snapshot({})\n"
        "print(' and half')\n"
        "print('no newline', end='')\n"
        "return before\n"
    )
    outcome = await runtime.run(
        code, tool_names=["snapshot"], call_tool=call_tool, on_log=seen.append
    )
    assert outcome.ok, outcome.message
    assert outcome.result == ["one", "two", "three"]  # not the half line: not a line yet
    assert seen == outcome.logs == ["one", "two", "three", "half and half", "no newline"]


@check()
async def _on_log_lines_are_the_logs_of_a_failed_run(runtime: Runtime) -> None:
    seen: list[str] = []
    outcome = await runtime.run(
        "print('step 1')\nprint('step 2')\n1/0\n",
        tool_names=[],
        call_tool=ToolBox(),
        on_log=seen.append,
    )
    assert outcome.kind == "exception", outcome.message
    assert seen == outcome.logs == ["step 1", "step 2"]


@check()
async def _on_log_gets_no_line_past_the_output_limit(runtime: Runtime) -> None:
    seen: list[str] = []
    outcome = await runtime.run(
        "for i in range(100000):\n    print('x' * 100)",
        tool_names=[],
        call_tool=ToolBox(),
        limits=Limits(max_output_bytes=10_000),
        on_log=seen.append,
    )
    assert outcome.kind == "output_limit", outcome.message
    assert 0 < len(seen) <= 100
    assert seen == outcome.logs


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@check()
async def _an_on_log_that_raises_changes_nothing(runtime: Runtime) -> None:
    # What on_log raises is logged on the "runtime" logger (or one below it).
    calls: list[str] = []

    def on_log(line: str) -> None:
        calls.append(line)
        raise RuntimeError(f"broken sink on {line}")

    runtime_logger = logging.getLogger("runtime")
    handler = _Records()
    level = runtime_logger.level
    runtime_logger.setLevel(logging.DEBUG)
    runtime_logger.addHandler(handler)
    try:
        outcome = await runtime.run(
            "print('a')\nprint('b')\nx = await tools.echo({'v': 1})\nprint('c')\nreturn x",
            tool_names=TOOL_NAMES,
            call_tool=ToolBox(),
            on_log=on_log,
        )
    finally:
        runtime_logger.removeHandler(handler)
        runtime_logger.setLevel(level)
    assert outcome.ok, outcome.message
    assert outcome.result == {"v": 1}
    assert calls == outcome.logs == ["a", "b", "c"]  # still called for every line
    failures = [
        r
        for r in handler.records
        if (r.name == "runtime" or r.name.startswith("runtime.")) and r.exc_info
    ]
    # The first failure with its traceback, the others only at debug level.
    assert [r.levelname for r in failures] == ["ERROR", "DEBUG", "DEBUG"]
    assert failures[0].exc_info is not None
    assert "broken sink on a" in str(failures[0].exc_info[1])


@check()
async def _on_log_runs_in_the_callers_context(runtime: Runtime) -> None:
    # Also when the line is read by a task answering calls (after a burst).
    seen: list[tuple[str, str]] = []
    code = (
        "import asyncio\n"
        "print('first')\n"
        "await asyncio.gather(*[tools.echo({'i': i}) for i in range(20)])\n"
        "print('after the burst')\n"
    )
    token = request_id.set("run 7")
    try:
        outcome = await runtime.run(
            code,
            tool_names=TOOL_NAMES,
            call_tool=ToolBox(),
            on_log=lambda line: seen.append((line, request_id.get())),
        )
    finally:
        request_id.reset(token)
    assert outcome.ok, outcome.message
    assert seen == [("first", "run 7"), ("after the burst", "run 7")]
