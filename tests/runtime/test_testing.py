"""``runtime.testing``: the in-process fake keeps the workers' semantics; check_runtime reports.

The fake passes the conformance suite (``test_conformance.py``, isolation
checks skipped); here it is also run side by side with the subprocess
backend on programs whose outcome must be the same to the byte, and
:func:`check_runtime` is shown to pass a conforming backend and to name the
checks a broken one fails.
"""

from __future__ import annotations

import math
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import pytest

import ptc.testing
from runtime import (
    CallTool,
    CancelSignal,
    Limits,
    RunOutcome,
    SubprocessRuntime,
    ToolAnswer,
    ToolNames,
)
from runtime.testing import (
    InProcessRuntime,
    ToolBox,
    check_runtime,
    runtime_checks,
)

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def subprocess_runtime() -> AsyncIterator[SubprocessRuntime]:
    async with SubprocessRuntime() as backend:
        yield backend


# --------------------------------------------------------------------------- the same outcome


async def _odd_answers(name: str, args: Any) -> ToolAnswer:
    """Answers that only survive as a worker receives them (through JSON)."""
    if name == "pair":
        return ToolAnswer.success((1, [2, (3,)]))  # tuples reach the program as lists
    if name == "nan":
        return ToolAnswer.success({"x": math.nan})  # NaN reaches it as null
    if name == "set":
        return ToolAnswer.success({1, 2})  # no JSON at all: a failed call
    if name == "coded":
        return ToolAnswer.failure("no such key", "NOT_FOUND")
    if name == "big":
        return ToolAnswer.success("b" * 20_000)
    return ToolAnswer.success(args)


_ODD_TOOLS = ["pair", "nan", "set", "coded", "big", "echo"]

# (the program, its limits): each is run on both backends, which must agree.
_SAME_OUTCOME: list[tuple[str, Limits | None]] = [
    ("x = 1\n\ndef inner(v):\n    return v / 0\n\nprint('before')\ninner(x)\n", None),
    ("try:\n    {}['k']\nexcept KeyError as exc:\n    raise ValueError('w') from exc\n", None),
    ("x = 1\ny = = 2\n", None),
    ("x = 1\nyield x\n", None),
    ("return (1, 2)", None),
    ("return float('inf')", None),
    ("return {1: 'x'}", None),
    ("return 2 ** 70", None),
    ("raise SystemExit(3)", None),
    ("import asyncio\nraise asyncio.CancelledError()", None),
    ("await tools.echo({'v': float('nan')})", None),
    ("await tools.echo({'t': (1, 2)})", None),
    ("return [await tools.pair(), await tools.nan()]", None),
    ("await tools.set()", None),
    (
        "try:\n    await tools.coded()\nexcept ToolCallError as exc:\n"
        "    return [exc.tool_name, exc.message, exc.code, str(exc)]",
        None,
    ),
    ("await tools.big()", Limits(max_message_bytes=10_000)),
    ("await tools.echo({'big': 'z' * 20_000})", Limits(max_message_bytes=10_000)),
    ("print('x\\r', end='')\nprint('\\ny')\nprint('a\\rb\\n\\nc')", None),
    ("print('a\\ud800b')\nraise ValueError('\\ud800')", None),
    ("print('x' * 100_000)\nprint('y' * 70_000, end='')\nprint('z')", None),
    ("for i in range(10):\n    print(i)\nreturn 'r' * 100", Limits(max_output_bytes=100)),
    ("for i in range(10):\n    await tools.echo({'i': i})", Limits(max_tool_calls=3)),
    ("raise ValueError('v' * 100_000)", None),
    ("return 'x' * 20_000", Limits(max_message_bytes=10_000, max_output_bytes=15_000)),
    ("print('p')\nreturn 'x' * 20_000", Limits(max_message_bytes=10_000)),
    ("print('no newline', end='')", None),
    ("return", None),
    ("return None", None),
    ("return {'tools': list(tools), 'git': dir(tools)}", None),
]


def _fields(outcome: RunOutcome) -> dict[str, Any]:
    return {
        "kind": outcome.kind,
        "message": outcome.message,
        "logs": outcome.logs,
        "result": outcome.result,
        "has_result": outcome.has_result,
        "tool_calls": outcome.tool_calls,
    }


@pytest.mark.parametrize(("code", "limits"), _SAME_OUTCOME)
async def test_the_same_outcome_as_a_sandboxed_run(
    subprocess_runtime: SubprocessRuntime, code: str, limits: Limits | None
) -> None:
    real_lines: list[str] = []
    fake_lines: list[str] = []
    real = await subprocess_runtime.run(
        code, tool_names=_ODD_TOOLS, call_tool=_odd_answers, limits=limits, on_log=real_lines.append
    )
    fake = await InProcessRuntime().run(
        code, tool_names=_ODD_TOOLS, call_tool=_odd_answers, limits=limits, on_log=fake_lines.append
    )
    assert _fields(fake) == _fields(real)
    assert fake_lines == real_lines == real.logs


async def test_lines_reach_on_log_as_they_are_printed() -> None:
    # (Moved from the executor's live-log tests; "\r" is no line break, as in a worker.)
    seen: list[str] = []

    async def call_tool(name: str, args: Any) -> ToolAnswer:
        return ToolAnswer.success(list(seen))

    outcome = await InProcessRuntime().run(
        "print('a\\nb', end='')\n"
        "print('c')\n"
        "print('x\\r', end='')\n"
        "print('\\ny')\n"
        "before = await tools.snapshot({})\n"
        "print('tail', end='')\n"
        "return before\n",
        tool_names=["snapshot"],
        call_tool=call_tool,
        on_log=seen.append,
    )
    assert outcome.ok, outcome.message
    assert outcome.result == ["a", "bc", "x\r", "y"]
    assert seen == outcome.logs == ["a", "bc", "x\r", "y", "tail"]


async def test_an_on_log_that_raises_is_logged_once_with_its_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def on_log(line: str) -> None:
        raise ValueError(line)

    async def no_tool(name: str, args: Any) -> ToolAnswer:
        raise AssertionError("no tool call expected")

    with caplog.at_level("DEBUG", logger="runtime"):
        outcome = await InProcessRuntime().run(
            "print(1)\nprint(2)\nreturn 3", tool_names=[], call_tool=no_tool, on_log=on_log
        )
    assert outcome.ok and outcome.result == 3 and outcome.logs == ["1", "2"]
    failures = [r for r in caplog.records if r.exc_info]
    assert [(r.name, r.levelname) for r in failures] == [("runtime", "ERROR"), ("runtime", "DEBUG")]


async def test_concurrent_failures_show_their_own_lines() -> None:
    # Tracebacks read the program's source: each run's own, also when runs overlap.
    async def slow(name: str, args: Any) -> ToolAnswer:
        await anyio.sleep(0.01)
        return ToolAnswer.success(None)

    runtime = InProcessRuntime()
    outcomes: dict[int, RunOutcome] = {}

    async def one(index: int) -> None:
        code = f"await tools.slow()\nraise ValueError('run {index}')  # line of run {index}"
        outcomes[index] = await runtime.run(code, tool_names=["slow"], call_tool=slow)

    async with anyio.create_task_group() as tg:
        for index in range(5):
            tg.start_soon(one, index)
    for index, outcome in outcomes.items():
        assert outcome.kind == "exception", outcome.message
        assert f"raise ValueError('run {index}')  # line of run {index}" in outcome.message
        assert f"ValueError: run {index}" in outcome.message
    assert runtime.runs == 5


async def test_it_claims_no_isolation() -> None:
    outcome = await InProcessRuntime().run("return 1", tool_names=[], call_tool=ToolBox())
    assert outcome.isolation.mode == "none"
    assert "NOT A SANDBOX" in (InProcessRuntime.__doc__ or "")


async def test_a_closed_runtime_refuses_to_run() -> None:
    from runtime import RuntimeClosedError

    runtime = InProcessRuntime()
    async with runtime:
        pass
    with pytest.raises(RuntimeClosedError):
        await runtime.run("return 1", tool_names=[], call_tool=ToolBox())


def test_ptc_testing_still_offers_it() -> None:
    assert ptc.testing.InProcessRuntime is InProcessRuntime


def test_runtime_testing_needs_no_pytest() -> None:
    code = (
        "import sys, runtime.testing; sys.exit('pytest' in sys.modules or '_pytest' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


# --------------------------------------------------------------------------- check_runtime


async def test_check_runtime_passes_the_fake_without_the_isolation_checks() -> None:
    await check_runtime(InProcessRuntime, isolated=False)
    names = {check.name for check in runtime_checks()}
    skipped = names - {check.name for check in runtime_checks(isolated=False)}
    assert skipped == {
        "every_run_is_fresh",
        "wall_clock_timeout_busy_loop",
        "cpu_limit",
        "memory_limit",
    }


class _ForgetsLogs(InProcessRuntime):
    """A broken backend: its outcomes drop the logs."""

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
        outcome = await super()._run(
            code,
            tool_names=tool_names,
            call_tool=call_tool,
            limits=limits,
            cancel=cancel,
            on_log=on_log,
        )
        outcome.logs.clear()
        return outcome


class _Hangs(InProcessRuntime):
    """A broken backend: a run with no tools never ends."""

    async def _run(self, code: str, **kwargs: Any) -> RunOutcome:
        if not kwargs["tool_names"]:
            await anyio.sleep_forever()
        return await super()._run(code, **kwargs)


async def test_check_runtime_names_every_check_a_backend_fails() -> None:
    with pytest.raises(AssertionError) as caught:
        await check_runtime(_ForgetsLogs, isolated=False)
    report = str(caught.value)
    header, *lines = report.splitlines()
    failed = [
        line.split(":")[0].strip()
        for line in lines
        if line.startswith("  ") and not line.startswith("    ")
    ]
    assert (
        header == f"{len(failed)} of {len(runtime_checks(isolated=False))} runtime checks failed:"
    )
    assert "result_and_logs" in failed
    assert "on_log_sees_each_line_as_the_program_prints_it" in failed
    assert "tool_call_round_trip" not in failed
    # Where the check found it (the checks' asserts carry no message of their own).
    assert "(at _checks_program.py:" in report
    assert "assert outcome.logs == " in report
    assert isinstance(caught.value.__cause__, AssertionError)


async def test_check_runtime_bounds_each_check() -> None:
    with pytest.raises(AssertionError) as caught:
        await check_runtime(_Hangs, isolated=False, check_timeout=0.2)
    report = str(caught.value)
    assert "on_log_lines_are_the_logs_of_a_failed_run: TimeoutError: took longer than 0.2 s" in (
        report
    )
    assert "result_and_logs" not in report


async def test_check_runtime_reports_a_program_exit_that_escapes() -> None:
    class LetsExitOut(InProcessRuntime):
        async def _run(self, code: str, **kwargs: Any) -> RunOutcome:
            if "SystemExit" in code:
                raise SystemExit(3)
            return await super()._run(code, **kwargs)

    with pytest.raises(AssertionError) as caught:
        await check_runtime(LetsExitOut, isolated=False)
    total = len(runtime_checks(isolated=False))
    assert str(caught.value).startswith(
        f"1 of {total} runtime checks failed:\n"
        "  system_exit_is_an_exception: SystemExit: 3 (at _checks.py:"
    )
