"""Conformance checks: results, failures in the program's own lines, the ``tools`` object."""

from __future__ import annotations

import time
from typing import Any

import anyio

from .._base import Runtime, ToolAnswer
from .._worker._program import DESCRIBE_CALL, SEARCH_CALL
from ._checks import RuntimeCheck, checker, request_id, run
from ._tools import TOOL_NAMES, ToolBox

__all__ = ["CHECKS"]

#: These checks, in the order they run.
CHECKS: list[RuntimeCheck] = []
check = checker(CHECKS)

# --------------------------------------------------------------------------- results


@check()
async def _result_and_logs(runtime: Runtime) -> None:
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


@check()
async def _partial_last_line_is_kept(runtime: Runtime) -> None:
    outcome = await run(runtime, "print('no newline', end='')")
    assert outcome.ok, outcome.message
    assert outcome.logs == ["no newline"]
    assert not outcome.has_result


@check()
async def _no_return_has_no_result(runtime: Runtime) -> None:
    for code in ("x = 1", "return", "if True:\n    return\nreturn 5"):
        outcome = await run(runtime, code)
        assert outcome.ok, outcome.message
        assert not outcome.has_result, code
        assert outcome.result is None


@check()
async def _return_none_is_a_result(runtime: Runtime) -> None:
    outcome = await run(runtime, "return None")
    assert outcome.ok
    assert outcome.has_result
    assert outcome.result is None


@check()
async def _async_constructs(runtime: Runtime) -> None:
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


@check()
async def _program_functions_see_top_level_names(runtime: Runtime) -> None:
    code = "LIMIT = 3\ndef fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\nreturn [fib(i) for i in range(LIMIT * 3)]"
    outcome = await run(runtime, code)
    assert outcome.ok, outcome.message
    assert outcome.result == [0, 1, 1, 2, 3, 5, 8, 13, 21]


@check(isolation=True)
async def _every_run_is_fresh(runtime: Runtime) -> None:
    first = await run(runtime, "import json\njson.marker = 1\nreturn 1")
    assert first.ok, first.message
    second = await run(runtime, "import json\nreturn hasattr(json, 'marker')")
    assert second.ok, second.message
    assert second.result is False


# --------------------------------------------------------------------------- failures


@check()
async def _exception_has_program_line_numbers(runtime: Runtime) -> None:
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


@check()
async def _exception_chain_is_trimmed(runtime: Runtime) -> None:
    code = "try:\n    {}['k']\nexcept KeyError as exc:\n    raise ValueError('wrapped') from exc\n"
    outcome = await run(runtime, code)
    assert outcome.kind == "exception", outcome.message
    assert "KeyError: 'k'" in outcome.message
    assert "ValueError: wrapped" in outcome.message
    assert "_bootstrap" not in outcome.message


@check()
async def _syntax_error(runtime: Runtime) -> None:
    outcome = await run(runtime, "x = 1\ny = = 2\n")
    assert outcome.kind == "syntax", outcome.message
    assert "line 2" in outcome.message
    assert "y = = 2" in outcome.message
    assert not outcome.has_result


@check()
async def _yield_at_top_level_is_a_syntax_error(runtime: Runtime) -> None:
    outcome = await run(runtime, "x = 1\nyield x\n")
    assert outcome.kind == "syntax", outcome.message
    assert "line 2" in outcome.message


@check()
async def _non_json_result(runtime: Runtime) -> None:
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


@check()
async def _system_exit_is_an_exception(runtime: Runtime) -> None:
    outcome = await run(runtime, "raise SystemExit(3)")
    assert outcome.kind == "exception", outcome.message
    assert "SystemExit" in outcome.message


# --------------------------------------------------------------------------- tools


@check()
async def _tool_call_round_trip(runtime: Runtime) -> None:
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


@check()
async def _concurrent_tool_calls_overlap(runtime: Runtime) -> None:
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


@check()
async def _a_pending_call_does_not_hold_up_later_ones(runtime: Runtime) -> None:
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


@check()
async def _calls_in_a_burst_and_alone_mix(runtime: Runtime) -> None:
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


@check()
async def _calls_run_in_the_callers_context(runtime: Runtime) -> None:
    # Each call sees the context variables of the task that called run() (a
    # tracing span, a request id), as in a task that task started; what a call
    # sets stays in that call.
    seen: list[str] = []

    async def call_tool(name: str, args: Any) -> ToolAnswer:
        seen.append(request_id.get())
        request_id.set(f"set by call {args['i']}")
        await anyio.sleep(0.01)
        return ToolAnswer.success(request_id.get())

    code = """
import asyncio
first = await tools.echo({'i': 0})
rest = await asyncio.gather(*[tools.echo({'i': i}) for i in range(1, 6)])
last = await tools.echo({'i': 6})
return [first, *rest, last]
"""
    token = request_id.set("run 42")
    try:
        outcome = await runtime.run(code, tool_names=["echo"], call_tool=call_tool)
        assert request_id.get() == "run 42"
    finally:
        request_id.reset(token)
    assert outcome.ok, outcome.message
    assert seen == ["run 42"] * 7
    assert outcome.result == [f"set by call {i}" for i in range(7)]


@check()
async def _tool_failure_raises_tool_call_error(runtime: Runtime) -> None:
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


@check()
async def _call_tool_exception_becomes_tool_call_error(runtime: Runtime) -> None:
    outcome = await run(
        runtime,
        "try:\n    await tools.explode()\nexcept ToolCallError as exc:\n    return exc.message",
    )
    assert outcome.ok, outcome.message
    assert "the tool exploded" in outcome.result


@check()
async def _unknown_tool(runtime: Runtime) -> None:
    outcome = await run(runtime, "await tools.nope()")
    assert outcome.kind == "exception", outcome.message
    assert "AttributeError" in outcome.message
    assert "echo" in outcome.message  # lists the available tools
    subscript = await run(runtime, "await tools['no-such-tool']()")
    assert subscript.kind == "exception", subscript.message
    assert "KeyError" in subscript.message


@check()
async def _tools_object_lists_names(runtime: Runtime) -> None:
    outcome = await run(runtime, "return [list(tools), 'my-tool' in tools, len(tools)]")
    assert outcome.ok, outcome.message
    assert outcome.result == [sorted(TOOL_NAMES), True, len(TOOL_NAMES)]


@check()
async def _discovery_methods_call_the_host(runtime: Runtime) -> None:
    seen: list[tuple[str, Any]] = []

    async def call_tool(name: str, args: Any) -> ToolAnswer:
        seen.append((name, args))
        if name == SEARCH_CALL:
            return ToolAnswer.success([{"name": "search", "summary": args["query"]}])
        if name == DESCRIBE_CALL and args["name"] == "search":
            return ToolAnswer.success("async def search(...)")
        if name == DESCRIBE_CALL:
            return ToolAnswer.failure(f"no tool named {args['name']!r}", code="UNKNOWN_TOOL")
        return ToolAnswer.success(["tool", name, args])

    code = """
found = await tools.search('find things', limit=3)
text = await tools.describe(found[0]['name'])
tool = await tools['search']({'q': 1})
try:
    await tools.describe('nope')
except ToolCallError as exc:
    failed = [exc.tool_name, exc.message, exc.code]
wrong = []
for bad in (lambda: tools.search(3), lambda: tools.search('q', limit='2'),
            lambda: tools.describe(None)):
    try:
        await bad()
    except TypeError as exc:
        wrong.append(str(exc))
return [found, text, tool, failed, len(wrong), 'search' in dir(tools)]
"""
    outcome = await runtime.run(code, tool_names=["search", "echo"], call_tool=call_tool)
    assert outcome.ok, outcome.message
    found, text, tool, failed, wrong, listed = outcome.result
    assert found == [{"name": "search", "summary": "find things"}]
    assert text == "async def search(...)"
    assert tool == ["tool", "search", {"q": 1}]  # the tool so named, by subscript
    assert failed == ["tools.describe", "no tool named 'nope'", "UNKNOWN_TOOL"]
    assert wrong == 3 and listed
    assert seen == [
        (SEARCH_CALL, {"query": "find things", "limit": 3}),
        (DESCRIBE_CALL, {"name": "search"}),
        ("search", {"q": 1}),
        (DESCRIBE_CALL, {"name": "nope"}),
    ]
    assert outcome.tool_calls == 4  # discovery calls count toward max_tool_calls


NAMESPACED = ["git", "git.status", "git.log", "git.my-tool", "time.now", "echo", "_x.y"]


async def _answer_name(name: str, args: Any) -> ToolAnswer:
    return ToolAnswer.success([name, args])


@check()
async def _namespaced_tools(runtime: Runtime) -> None:
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


@check()
async def _unknown_namespaced_tool(runtime: Runtime) -> None:
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


@check()
async def _non_json_tool_arguments(runtime: Runtime) -> None:
    tools = ToolBox()
    outcome = await run(
        runtime,
        "try:\n    await tools.echo({'t': (1, 2)})\nexcept TypeError as exc:\n    return str(exc)",
        tools=tools,
    )
    assert outcome.ok, outcome.message
    assert "not JSON" in outcome.result
    assert tools.calls == []
