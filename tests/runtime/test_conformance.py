"""The conformance suite every :class:`runtime.Runtime` backend must pass.

Parametrized over backends by the ``runtime`` fixture: the subprocess backend
with its OS layers on (the default) and off, and Pyodide when its backend is
importable (marked ``pyodide``, so ``-m "not pyodide"`` leaves it out; skipped
when Deno or its assets are missing). A new backend adds one entry to
``_BACKENDS``.
"""

from __future__ import annotations

import contextvars
import os
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import pytest

from runtime import (
    Limits,
    RunOutcome,
    Runtime,
    RuntimeUnavailableError,
    SubprocessRuntime,
    ToolAnswer,
    get_runtime,
)
from runtime.testing import TOOL_NAMES, ManualCancel, ToolBox

pytestmark = pytest.mark.anyio

MiB = 1024 * 1024


def _pyodide_missing() -> str | None:
    """Why the Pyodide worker cannot run here, or None. CI must have it: never skip there."""
    from runtime._pyodide._assets import PyodideNotInstalledError, locate_pyodide

    try:
        locate_pyodide()
    except PyodideNotInstalledError as exc:
        if os.environ.get("CI"):
            raise
        return str(exc)
    return None


_PYODIDE_MISSING = _pyodide_missing()
_BACKENDS: list[Any] = [
    pytest.param(lambda: SubprocessRuntime(), id="subprocess"),
    pytest.param(lambda: SubprocessRuntime(layers=()), id="subprocess-no-layers"),
    pytest.param(
        lambda: get_runtime("pyodide"),
        id="pyodide",
        marks=[pytest.mark.pyodide]
        + ([pytest.mark.skip(reason=_PYODIDE_MISSING)] if _PYODIDE_MISSING else []),
    ),
]


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module", params=_BACKENDS)
async def runtime(request: pytest.FixtureRequest) -> AsyncIterator[Runtime]:
    factory: Callable[[], Runtime] = request.param
    try:
        backend = factory()
    except RuntimeUnavailableError as exc:  # e.g. Deno or the Pyodide assets missing
        pytest.skip(str(exc))
    async with backend:
        yield backend


async def run(
    runtime: Runtime,
    code: str,
    *,
    tools: ToolBox | None = None,
    limits: Limits | None = None,
    cancel: ManualCancel | None = None,
) -> RunOutcome:
    return await runtime.run(
        code,
        tool_names=TOOL_NAMES,
        call_tool=tools or ToolBox(),
        limits=limits,
        cancel=cancel,
    )


# --------------------------------------------------------------------------- results


async def test_result_and_logs(runtime: Runtime) -> None:
    outcome = await run(
        runtime,
        "print('hello')\n"
        "print('a', 'b', sep='-')\n"
        "print('two\\nlines')\n"
        "print('partial', end='')\n"
        "print(' continued')\n"
        "return {'x': [1, 2.5, 'three', None, True]}\n",
    )
    assert outcome.ok, outcome.message
    assert outcome.has_result
    assert outcome.result == {"x": [1, 2.5, "three", None, True]}
    assert outcome.logs == ["hello", "a-b", "two", "lines", "partial continued"]


async def test_partial_last_line_is_kept(runtime: Runtime) -> None:
    outcome = await run(runtime, "print('no newline', end='')")
    assert outcome.ok, outcome.message
    assert outcome.logs == ["no newline"]
    assert not outcome.has_result


async def test_no_return_has_no_result(runtime: Runtime) -> None:
    for code in ("x = 1", "return", "if True:\n    return\nreturn 5"):
        outcome = await run(runtime, code)
        assert outcome.ok, outcome.message
        assert not outcome.has_result, code
        assert outcome.result is None


async def test_return_none_is_a_result(runtime: Runtime) -> None:
    outcome = await run(runtime, "return None")
    assert outcome.ok
    assert outcome.has_result
    assert outcome.result is None


async def test_async_constructs(runtime: Runtime) -> None:
    code = """
import asyncio
import contextlib

class Counter:
    def __init__(self):
        self.n = 0
    def __aiter__(self):
        return self
    async def __anext__(self):
        if self.n >= 3:
            raise StopAsyncIteration
        self.n += 1
        await asyncio.sleep(0)
        return self.n

@contextlib.asynccontextmanager
async def managed():
    yield 10

total = 0
async for value in Counter():
    total += value
async with managed() as ten:
    total += ten
squares = [x * x async for x in Counter()]
await asyncio.sleep(0.001)
return [total, squares]
"""
    outcome = await run(runtime, code)
    assert outcome.ok, outcome.message
    assert outcome.result == [16, [1, 4, 9]]


async def test_program_functions_see_top_level_names(runtime: Runtime) -> None:
    code = "LIMIT = 3\ndef fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\nreturn [fib(i) for i in range(LIMIT * 3)]"
    outcome = await run(runtime, code)
    assert outcome.ok, outcome.message
    assert outcome.result == [0, 1, 1, 2, 3, 5, 8, 13, 21]


async def test_every_run_is_fresh(runtime: Runtime) -> None:
    first = await run(runtime, "import json\njson.marker = 1\nreturn 1")
    assert first.ok, first.message
    second = await run(runtime, "import json\nreturn hasattr(json, 'marker')")
    assert second.ok, second.message
    assert second.result is False


# --------------------------------------------------------------------------- failures


async def test_exception_has_program_line_numbers(runtime: Runtime) -> None:
    code = "x = 1\n\ndef inner(value):\n    return value / 0\n\nprint('before')\ninner(x)\n"
    outcome = await run(runtime, code)
    assert outcome.kind == "exception", outcome.message
    assert outcome.logs == ["before"]
    message = outcome.message
    assert "ZeroDivisionError: division by zero" in message
    assert 'File "<program>", line 7' in message
    assert 'File "<program>", line 4, in inner' in message
    assert "return value / 0" in message
    for internal in ("_bootstrap", "runtime/", "asyncio", "site-packages"):
        assert internal not in message, message


async def test_exception_chain_is_trimmed(runtime: Runtime) -> None:
    code = "try:\n    {}['k']\nexcept KeyError as exc:\n    raise ValueError('wrapped') from exc\n"
    outcome = await run(runtime, code)
    assert outcome.kind == "exception", outcome.message
    assert "KeyError: 'k'" in outcome.message
    assert "ValueError: wrapped" in outcome.message
    assert "_bootstrap" not in outcome.message


async def test_syntax_error(runtime: Runtime) -> None:
    outcome = await run(runtime, "x = 1\ny = = 2\n")
    assert outcome.kind == "syntax", outcome.message
    assert "line 2" in outcome.message
    assert "y = = 2" in outcome.message
    assert not outcome.has_result


async def test_yield_at_top_level_is_a_syntax_error(runtime: Runtime) -> None:
    outcome = await run(runtime, "x = 1\nyield x\n")
    assert outcome.kind == "syntax", outcome.message
    assert "line 2" in outcome.message


async def test_non_json_result(runtime: Runtime) -> None:
    for code, fragment in (
        ("return (1, 2)", "tuple"),
        ("return {'a': {1, 2}}", "set"),
        ("return float('nan')", "nan"),
        ("return {1: 'x'}", "key"),
        ("return 2 ** 70", "64 bits"),
        ("class C: pass\nreturn [C()]", "C"),
    ):
        outcome = await run(runtime, code)
        assert outcome.kind == "exception", code
        assert "not lossless JSON" in outcome.message, outcome.message
        assert fragment in outcome.message, outcome.message


async def test_system_exit_is_an_exception(runtime: Runtime) -> None:
    outcome = await run(runtime, "raise SystemExit(3)")
    assert outcome.kind == "exception", outcome.message
    assert "SystemExit" in outcome.message


# --------------------------------------------------------------------------- tools


async def test_tool_call_round_trip(runtime: Runtime) -> None:
    tools = ToolBox()
    outcome = await run(
        runtime,
        "a = await tools.echo({'q': 'x', 'n': [1, 2]})\n"
        "b = await tools.echo(q='kw')\n"
        "c = await tools['my-tool']()\n"
        "return [a, b, c]",
        tools=tools,
    )
    assert outcome.ok, outcome.message
    assert outcome.result == [{"q": "x", "n": [1, 2]}, {"q": "kw"}, "mine"]
    assert tools.calls == [
        ("echo", {"q": "x", "n": [1, 2]}),
        ("echo", {"q": "kw"}),
        ("my-tool", {}),
    ]
    assert outcome.tool_calls == 3


async def test_concurrent_tool_calls_overlap(runtime: Runtime) -> None:
    tools = ToolBox()
    started = time.perf_counter()
    outcome = await run(
        runtime,
        "import asyncio\n"
        "results = await asyncio.gather(*[tools.sleep({'i': i}) for i in range(100)])\n"
        "return [r['i'] for r in results]",
        tools=tools,
    )
    elapsed = time.perf_counter() - started
    assert outcome.ok, outcome.message
    assert outcome.result == list(range(100))
    assert outcome.tool_calls == 100
    # All 100 were in flight at once: the proof of overlap. The wall-clock bound
    # only rules out serial execution (5 s), with room for a loaded machine;
    # the speed itself is measured in tests/benchmarks, not asserted here.
    assert tools.max_in_flight == 100
    assert elapsed < 4.0, elapsed


async def test_a_pending_call_does_not_hold_up_later_ones(runtime: Runtime) -> None:
    # Each call is answered by the task that read it (after passing the reading
    # on): a call that never ends must not keep the next ones from being read.
    tools = ToolBox()
    code = """
import asyncio
pending = asyncio.ensure_future(tools.hang())
first = await tools.echo({'n': 1})
await asyncio.sleep(0.05)
second = await tools.sleep({'seconds': 0.01})
print('still pending:', not pending.done())
return [first, second]
"""
    outcome = await run(runtime, code, tools=tools)  # a stuck read would end in a timeout
    assert outcome.ok, outcome.message
    assert outcome.result == [{"n": 1}, {"seconds": 0.01}]
    assert outcome.logs == ["still pending: True"]
    assert outcome.tool_calls == 3
    # The program ended with the hanging call in flight: it was abandoned.
    assert tools.cancelled == 1
    assert tools.in_flight == 0


async def test_calls_in_a_burst_and_alone_mix(runtime: Runtime) -> None:
    # A burst (several calls read at once) and lone calls, in any order, all get
    # their own answers, and start in the order the program made them.
    tools = ToolBox()
    code = """
import asyncio
out = []
for round in range(5):
    out.append(await tools.echo({'lone': round}))
    out.extend(await asyncio.gather(*[tools.echo({'r': round, 'i': i}) for i in range(7)]))
return out
"""
    outcome = await run(runtime, code, tools=tools)
    assert outcome.ok, outcome.message
    expected: list[Any] = []
    for round_ in range(5):
        expected.append({"lone": round_})
        expected.extend({"r": round_, "i": i} for i in range(7))
    assert outcome.result == expected
    assert outcome.tool_calls == 40
    assert [args for _, args in tools.calls] == expected


_request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="none")


async def test_calls_run_in_the_callers_context(runtime: Runtime) -> None:
    # Each call sees the context variables of the task that called run() (a
    # tracing span, a request id), as in a task that task started; what a call
    # sets stays in that call.
    seen: list[str] = []

    async def call_tool(name: str, args: Any) -> ToolAnswer:
        seen.append(_request_id.get())
        _request_id.set(f"set by call {args['i']}")
        await anyio.sleep(0.01)
        return ToolAnswer.success(_request_id.get())

    code = """
import asyncio
first = await tools.echo({'i': 0})
rest = await asyncio.gather(*[tools.echo({'i': i}) for i in range(1, 6)])
last = await tools.echo({'i': 6})
return [first, *rest, last]
"""
    token = _request_id.set("run 42")
    try:
        outcome = await runtime.run(code, tool_names=["echo"], call_tool=call_tool)
        assert _request_id.get() == "run 42"
    finally:
        _request_id.reset(token)
    assert outcome.ok, outcome.message
    assert seen == ["run 42"] * 7
    assert outcome.result == [f"set by call {i}" for i in range(7)]


async def test_tool_failure_raises_tool_call_error(runtime: Runtime) -> None:
    code = """
try:
    await tools.fail({'message': 'denied by policy'})
except ToolCallError as exc:
    caught = [exc.tool_name, exc.message, str(exc)]
await tools.fail({'message': 'second'})
"""
    outcome = await run(runtime, code)
    assert outcome.kind == "exception", outcome.message
    assert "ToolCallError: fail: second" in outcome.message
    assert 'File "<program>", line 6' in outcome.message
    caught = await run(
        runtime,
        "try:\n    await tools.fail({'message': 'm'})\nexcept ToolCallError as exc:\n"
        "    return [exc.tool_name, exc.message, str(exc), isinstance(exc, Exception)]",
    )
    assert caught.result == ["fail", "m", "fail: m", True]


async def test_call_tool_exception_becomes_tool_call_error(runtime: Runtime) -> None:
    outcome = await run(
        runtime,
        "try:\n    await tools.explode()\nexcept ToolCallError as exc:\n    return exc.message",
    )
    assert outcome.ok, outcome.message
    assert "the tool exploded" in outcome.result


async def test_unknown_tool(runtime: Runtime) -> None:
    outcome = await run(runtime, "await tools.nope()")
    assert outcome.kind == "exception", outcome.message
    assert "AttributeError" in outcome.message
    assert "echo" in outcome.message  # lists the available tools
    subscript = await run(runtime, "await tools['no-such-tool']()")
    assert subscript.kind == "exception", subscript.message
    assert "KeyError" in subscript.message


async def test_tools_object_lists_names(runtime: Runtime) -> None:
    outcome = await run(runtime, "return [list(tools), 'my-tool' in tools, len(tools)]")
    assert outcome.ok, outcome.message
    assert outcome.result == [sorted(TOOL_NAMES), True, len(TOOL_NAMES)]


NAMESPACED = ["git", "git.status", "git.log", "git.my-tool", "time.now", "echo", "_x.y"]


async def _answer_name(name: str, args: Any) -> ToolAnswer:
    return ToolAnswer.success([name, args])


async def test_namespaced_tools(runtime: Runtime) -> None:
    outcome = await runtime.run(
        "import asyncio\n"
        "a = await tools.git.status({'n': 1})\n"
        "b = await tools.git['my-tool']({'n': 2})\n"
        "c = await tools['time.now'](tz='UTC')\n"
        "d = await tools.git({'n': 3})\n"  # a tool named like its namespace is both
        "e = await tools['_x.y']()\n"
        "gathered = await asyncio.gather(tools.time.now({}), tools.git.log({}), tools.echo({}))\n"
        "return [a, b, c, d, e, gathered, list(tools), len(tools), dir(tools),\n"
        "        list(tools.git), 'log' in tools.git, dir(tools.git), repr(tools.time)]",
        tool_names=NAMESPACED,
        call_tool=_answer_name,
    )
    assert outcome.ok, outcome.message
    assert outcome.result == [
        ["git.status", {"n": 1}],
        ["git.my-tool", {"n": 2}],
        ["time.now", {"tz": "UTC"}],
        ["git", {"n": 3}],
        ["_x.y", {}],
        [["time.now", {}], ["git.log", {}], ["echo", {}]],
        sorted(NAMESPACED),
        len(NAMESPACED),
        ["echo", "git", "time"],
        ["log", "my-tool", "status"],
        True,
        ["log", "status"],
        "<tools.time: now>",
    ]
    assert outcome.tool_calls == 8


async def test_unknown_namespaced_tool(runtime: Runtime) -> None:
    attribute = await runtime.run(
        "await tools.time.later()", tool_names=NAMESPACED, call_tool=_answer_name
    )
    assert attribute.kind == "exception", attribute.message
    assert (
        "AttributeError: no tool named 'time.later' in namespace 'time'; "
        "available tools: time.now" in attribute.message
    )
    subscript = await runtime.run(
        "await tools.git['push']()", tool_names=NAMESPACED, call_tool=_answer_name
    )
    assert subscript.kind == "exception", subscript.message
    assert "KeyError" in subscript.message
    assert "git.log, git.my-tool, git.status" in subscript.message
    assert attribute.tool_calls == subscript.tool_calls == 0


async def test_non_json_tool_arguments(runtime: Runtime) -> None:
    tools = ToolBox()
    outcome = await run(
        runtime,
        "try:\n    await tools.echo({'t': (1, 2)})\nexcept TypeError as exc:\n    return str(exc)",
        tools=tools,
    )
    assert outcome.ok, outcome.message
    assert "not JSON" in outcome.result
    assert tools.calls == []


# --------------------------------------------------------------------------- limits


async def test_wall_clock_timeout_busy_loop(runtime: Runtime) -> None:
    started = time.perf_counter()
    outcome = await run(
        runtime, "print('started')\nwhile True:\n    pass", limits=Limits(timeout=0.5)
    )
    assert outcome.kind == "timeout", outcome.message
    assert outcome.logs == ["started"]
    assert time.perf_counter() - started < 5


async def test_wall_clock_covers_tool_calls(runtime: Runtime) -> None:
    tools = ToolBox()
    outcome = await run(runtime, "await tools.hang()", tools=tools, limits=Limits(timeout=0.3))
    assert outcome.kind == "timeout", outcome.message
    assert tools.cancelled == 1
    assert tools.in_flight == 0


async def test_cpu_limit(runtime: Runtime) -> None:
    outcome = await run(runtime, "while True:\n    pass", limits=Limits(cpu_seconds=1, timeout=20))
    assert outcome.kind == "timeout", outcome.message
    assert "CPU" in outcome.message


async def test_memory_limit(runtime: Runtime) -> None:
    outcome = await run(
        runtime,
        "blocks = []\nwhile True:\n    blocks.append(bytearray(64 * 1024 * 1024))",
        limits=Limits(memory_bytes=512 * MiB),
    )
    assert outcome.kind == "memory", outcome.message


async def test_output_limit(runtime: Runtime) -> None:
    outcome = await run(
        runtime,
        "for i in range(100000):\n    print('x' * 100)",
        limits=Limits(max_output_bytes=10_000),
    )
    assert outcome.kind == "output_limit", outcome.message
    assert 0 < len(outcome.logs) <= 100


async def test_result_counts_toward_output_limit(runtime: Runtime) -> None:
    outcome = await run(runtime, "return 'y' * 50_000", limits=Limits(max_output_bytes=10_000))
    assert outcome.kind == "output_limit", outcome.message


async def test_tool_call_limit(runtime: Runtime) -> None:
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


async def test_message_limit_on_tool_arguments(runtime: Runtime) -> None:
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


async def test_cancel_signal_cancels_in_flight_calls(runtime: Runtime) -> None:
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


async def test_cancel_signal_already_fired(runtime: Runtime) -> None:
    cancel = ManualCancel()
    cancel.fire()
    outcome = await run(runtime, "return 1", cancel=cancel)
    assert outcome.kind == "cancelled", outcome.message


async def test_task_cancellation_propagates(runtime: Runtime) -> None:
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


async def test_concurrent_runs(runtime: Runtime) -> None:
    results: dict[int, Any] = {}

    async def one(index: int) -> None:
        outcome = await run(runtime, f"r = await tools.sleep({{'i': {index}}})\nreturn r['i']")
        results[index] = outcome.result

    async with anyio.create_task_group() as tg:
        for index in range(6):
            tg.start_soon(one, index)
    assert results == {index: index for index in range(6)}


async def test_huge_failure_message_is_bounded(runtime: Runtime) -> None:
    outcome = await run(runtime, "raise ValueError('v' * 1_000_000)")
    assert outcome.kind == "exception", outcome.message
    assert "ValueError" in outcome.message
    assert len(outcome.message) < 100_000


async def test_unencodable_text_is_escaped_in_logs(runtime: Runtime) -> None:
    outcome = await run(runtime, "print('a\\ud800b')\nreturn 1")
    assert outcome.ok, outcome.message
    assert outcome.logs == ["a\\ud800b"]


# --------------------------------------------------------------------------- output in bytes


# With 1000 bytes of output: a line costs its text as JSON escapes it (UTF-8,
# "\u0001", "\n") plus 4 bytes, and the final frame ({"type":"done"}) 15.
@pytest.mark.parametrize(
    ("text", "fits"),
    [
        ("'x' * 981", True),
        ("'x' * 982", False),
        ("'\\U0001f600' * 245", True),
        ("'\\U0001f600' * 246", False),
        ("'\\x01' * 163", True),
        ("'\\x01' * 164", False),
        ("'\\n' * 200", True),  # 201 lines, and the print's own
        ("'\\n' * 300", False),
    ],
)
async def test_output_is_counted_in_bytes_as_json_escapes_it(
    runtime: Runtime, text: str, fits: bool
) -> None:
    outcome = await run(runtime, f"print({text})", limits=Limits(max_output_bytes=1000))
    if fits:
        assert outcome.ok, outcome.message
        assert "\n".join(outcome.logs) == eval(text)
    else:
        assert outcome.kind == "output_limit", outcome.message
        assert sum(len(line.encode()) + 4 for line in outcome.logs) <= 1000


async def test_a_result_too_big_for_any_frame(runtime: Runtime) -> None:
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


async def test_on_log_sees_each_line_as_the_program_prints_it(runtime: Runtime) -> None:
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


async def test_on_log_lines_are_the_logs_of_a_failed_run(runtime: Runtime) -> None:
    seen: list[str] = []
    outcome = await runtime.run(
        "print('step 1')\nprint('step 2')\n1/0\n",
        tool_names=[],
        call_tool=ToolBox(),
        on_log=seen.append,
    )
    assert outcome.kind == "exception", outcome.message
    assert seen == outcome.logs == ["step 1", "step 2"]


async def test_on_log_gets_no_line_past_the_output_limit(runtime: Runtime) -> None:
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


async def test_an_on_log_that_raises_changes_nothing(
    runtime: Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    calls: list[str] = []

    def on_log(line: str) -> None:
        calls.append(line)
        raise RuntimeError(f"broken sink on {line}")

    with caplog.at_level("DEBUG", logger="runtime"):
        outcome = await runtime.run(
            "print('a')\nprint('b')\nx = await tools.echo({'v': 1})\nprint('c')\nreturn x",
            tool_names=TOOL_NAMES,
            call_tool=ToolBox(),
            on_log=on_log,
        )
    assert outcome.ok, outcome.message
    assert outcome.result == {"v": 1}
    assert calls == outcome.logs == ["a", "b", "c"]  # still called for every line
    failures = [r for r in caplog.records if r.name == "runtime" and r.exc_info]
    # The first failure with its traceback, the others only at debug level.
    assert [r.levelname for r in failures] == ["ERROR", "DEBUG", "DEBUG"]
    assert "broken sink on a" in str(failures[0].exc_info[1])  # type: ignore[index]


async def test_on_log_runs_in_the_callers_context(runtime: Runtime) -> None:
    # Also when the line is read by a task answering calls (after a burst).
    seen: list[tuple[str, str]] = []
    code = (
        "import asyncio\n"
        "print('first')\n"
        "await asyncio.gather(*[tools.echo({'i': i}) for i in range(20)])\n"
        "print('after the burst')\n"
    )
    token = _request_id.set("run 7")
    try:
        outcome = await runtime.run(
            code,
            tool_names=TOOL_NAMES,
            call_tool=ToolBox(),
            on_log=lambda line: seen.append((line, _request_id.get())),
        )
    finally:
        _request_id.reset(token)
    assert outcome.ok, outcome.message
    assert seen == [("first", "run 7"), ("after the burst", "run 7")]
