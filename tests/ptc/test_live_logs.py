"""Live output: a program's printed lines as ``tool/ptc-log`` events, bounded on the host."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import anyio
import pytest

import ptc._live
from ptc import CodeExecutor, ExecutorConfigError, LiveLogs
from registry import ToolRegistry
from runtime import CallTool, CancelSignal, Limits, RunOutcome, Runtime, SubprocessRuntime
from runtime.testing import InProcessRuntime

pytestmark = pytest.mark.anyio


def _registry(
    on_tick: Callable[[], None] | None = None, entered: anyio.Event | None = None
) -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool(concurrency_safe=True)
    async def echo(x: int) -> int:
        """Return x."""
        return x

    @registry.tool(concurrency_safe=True)
    async def tick() -> None:
        """Let time pass (the test's clock)."""
        if on_tick is not None:
            on_tick()

    @registry.tool(concurrency_safe=True)
    async def hang() -> None:
        """Block until cancelled."""
        if entered is not None:
            entered.set()
        await anyio.sleep_forever()

    return registry


def _shape(events: Sequence[dict[str, Any]]) -> list[tuple[str, str, str | None]]:
    return [(e["type"], e["id"], e.get("text")) for e in events]


class _Spy(InProcessRuntime):
    """Records the ``on_log`` each run was given."""

    def __init__(self) -> None:
        super().__init__()
        self.given: list[Callable[[str], None] | None] = []

    async def run(
        self,
        code: str,
        *,
        tool_names: Sequence[str],
        call_tool: CallTool,
        limits: Limits | None = None,
        cancel: CancelSignal | None = None,
        on_log: Callable[[str], None] | None = None,
    ) -> RunOutcome:
        self.given.append(on_log)
        return await super().run(
            code,
            tool_names=tool_names,
            call_tool=call_tool,
            limits=limits,
            cancel=cancel,
            on_log=on_log,
        )


# --------------------------------------------------------------------------- events


async def test_lines_are_events_in_the_order_things_happened() -> None:
    events: list[dict[str, Any]] = []
    async with CodeExecutor(
        _registry(), runtime=InProcessRuntime(), on_event=events.append
    ) as executor:
        result = await executor.run_code(
            "print('before')\nx = await tools.echo({'x': 1})\nprint('after', x)\nreturn x",
            call_id="run-1",
        )
    assert not result.is_error, result
    assert _shape(events) == [
        ("tool/call", "run-1", None),
        ("tool/ptc-log", "run-1", "before"),
        ("tool/ptc-dispatch-start", "run-1:ptc:1", None),
        ("tool/ptc-dispatch", "run-1:ptc:1", None),
        ("tool/ptc-log", "run-1", "after 1"),
        ("tool/result", "run-1", None),
    ]
    log = events[1]
    assert set(log) == {"type", "id", "text", "time"}
    assert events[0]["time"] <= log["time"] <= events[2]["time"]
    assert result.value == {"logs": ["before", "after 1"], "result": 1}


async def test_a_long_line_is_cut_with_a_marker_and_the_result_keeps_it_whole() -> None:
    events: list[dict[str, Any]] = []
    async with CodeExecutor(
        _registry(),
        runtime=InProcessRuntime(),
        on_event=events.append,
        live_logs=LiveLogs(max_chars=10),
    ) as executor:
        result = await executor.run_code(
            "print('x' * 10)\nprint('y' * 11)\nprint('é' * 5000)", call_id="run-2"
        )
    logs = [e for e in events if e["type"] == "tool/ptc-log"]
    assert [(e["text"], e.get("truncated")) for e in logs] == [
        ("x" * 10, None),  # exactly the cap: whole
        ("y" * 9 + "…", True),
        ("é" * 9 + "…", True),
    ]
    assert result.value == {"logs": ["x" * 10, "y" * 11, "é" * 5000]}
    assert result.content[0]["text"] == "\n".join(["x" * 10, "y" * 11, "é" * 5000])


async def test_the_default_cap_is_2000_characters() -> None:
    events: list[dict[str, Any]] = []
    async with CodeExecutor(
        _registry(), runtime=InProcessRuntime(), on_event=events.append
    ) as executor:
        await executor.run_code("print('z' * 100_000)")
    (log,) = [e for e in events if e["type"] == "tool/ptc-log"]
    assert len(log["text"]) == 2000 and log["text"].endswith("z…") and log["truncated"] is True


async def test_lines_over_the_burst_are_counted_in_one_event_before_the_result() -> None:
    events: list[dict[str, Any]] = []
    async with CodeExecutor(
        _registry(),
        runtime=InProcessRuntime(),
        on_event=events.append,
        live_logs=LiveLogs(burst=3, rate=0),
    ) as executor:
        result = await executor.run_code(
            "for i in range(10):\n    print(i)\nreturn 'done'", call_id="run-3"
        )
    assert _shape(events) == [
        ("tool/call", "run-3", None),
        ("tool/ptc-log", "run-3", "0"),
        ("tool/ptc-log", "run-3", "1"),
        ("tool/ptc-log", "run-3", "2"),
        ("tool/ptc-log", "run-3", "7 lines of output not shown live (over the rate limit)"),
        ("tool/result", "run-3", None),
    ]
    assert events[4]["dropped"] == 7
    # The run's result has every line.
    assert result.value == {"logs": [str(i) for i in range(10)], "result": "done"}


async def test_the_rate_refills_the_bucket(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1000.0]
    monkeypatch.setattr(ptc._live, "monotonic", lambda: now[0])

    def one_second_later() -> None:
        now[0] += 1.0

    events: list[dict[str, Any]] = []
    async with CodeExecutor(
        _registry(on_tick=one_second_later),
        runtime=InProcessRuntime(),
        on_event=events.append,
        live_logs=LiveLogs(burst=2, rate=2.0),
    ) as executor:
        await executor.run_code(
            "for i in range(3):\n    print(i)\n"  # 2 shown, 1 dropped
            "await tools.tick({})\n"  # a second: 2 more tokens
            "for i in range(3, 6):\n    print(i)\n",  # 2 shown, 1 dropped
            call_id="run-4",
        )
    logs = [e for e in events if e["type"] == "tool/ptc-log"]
    assert [e.get("text") for e in logs[:-1]] == ["0", "1", "3", "4"]
    assert logs[-1]["dropped"] == 2
    assert logs[-1]["text"] == "2 lines of output not shown live (over the rate limit)"


async def test_one_line_dropped_is_said_in_the_singular() -> None:
    events: list[dict[str, Any]] = []
    async with CodeExecutor(
        _registry(),
        runtime=InProcessRuntime(),
        on_event=events.append,
        live_logs=LiveLogs(burst=1, rate=0),
    ) as executor:
        await executor.run_code("print(1)\nprint(2)")
    assert events[-2]["dropped"] == 1
    assert events[-2]["text"] == "1 line of output not shown live (over the rate limit)"


async def test_a_failed_program_shows_its_lines_and_its_dropped_count() -> None:
    events: list[dict[str, Any]] = []
    async with CodeExecutor(
        _registry(),
        runtime=InProcessRuntime(),
        on_event=events.append,
        live_logs=LiveLogs(burst=1, rate=0),
    ) as executor:
        result = await executor.run_code("print('a')\nprint('b')\n1/0", call_id="run-5")
    assert result.is_error
    assert [e["type"] for e in events] == [
        "tool/call",
        "tool/ptc-log",
        "tool/ptc-log",
        "tool/result",
    ]
    assert events[1]["text"] == "a" and events[2]["dropped"] == 1
    assert result.content[0]["text"].endswith("Captured output:\na\nb")


async def test_a_cancelled_run_says_what_it_dropped_before_its_result() -> None:
    events: list[dict[str, Any]] = []
    entered = anyio.Event()
    async with (
        CodeExecutor(
            _registry(entered=entered),
            runtime=InProcessRuntime(),
            on_event=events.append,
            live_logs=LiveLogs(burst=2, rate=0),
        ) as executor,
        anyio.create_task_group() as group,
    ):

        async def run() -> None:
            await executor.run_code(
                "for i in range(5):\n    print(i)\nawait tools.hang({})", call_id="run-6"
            )

        group.start_soon(run)
        await entered.wait()
        group.cancel_scope.cancel()
    assert [(e["type"], e.get("text"), e.get("dropped")) for e in events] == [
        ("tool/call", None, None),
        ("tool/ptc-log", "0", None),
        ("tool/ptc-log", "1", None),
        ("tool/ptc-dispatch-start", None, None),
        # The run ends (its output with it), then its sub-call is stopped.
        ("tool/ptc-log", "3 lines of output not shown live (over the rate limit)", 3),
        ("tool/ptc-dispatch", None, None),
        ("tool/result", None, None),
    ]
    assert events[-1]["error"]["info"]["code"] == "ABORTED"


async def test_each_run_has_its_own_bucket() -> None:
    events: list[dict[str, Any]] = []
    async with CodeExecutor(
        _registry(),
        runtime=InProcessRuntime(),
        on_event=events.append,
        live_logs=LiveLogs(burst=1, rate=0),
    ) as executor:
        await executor.run_code("print('a')", call_id="first")
        await executor.run_code("print('b')", call_id="second")
    assert [(e["id"], e["text"]) for e in events if e["type"] == "tool/ptc-log"] == [
        ("first", "a"),
        ("second", "b"),
    ]


# --------------------------------------------------------------------------- no work without a sink


async def test_without_a_sink_the_runtime_gets_no_on_log() -> None:
    runtime = _Spy()
    async with CodeExecutor(_registry(), runtime=runtime) as executor:
        result = await executor.run_code("print('quiet')\nreturn 1")
    assert result.value == {"logs": ["quiet"], "result": 1}
    assert runtime.given == [None]


async def test_live_logs_none_turns_the_events_off() -> None:
    runtime = _Spy()
    events: list[dict[str, Any]] = []
    async with CodeExecutor(
        _registry(), runtime=runtime, on_event=events.append, live_logs=None
    ) as executor:
        await executor.run_code("print('quiet')")
    assert runtime.given == [None]
    assert [e["type"] for e in events] == ["tool/call", "tool/result"]


async def test_a_runtime_without_on_log_still_runs_with_a_sink() -> None:
    class Older(Runtime):
        """A runtime written before ``on_log`` existed."""

        async def run(
            self,
            code: str,
            *,
            tool_names: Sequence[str],
            call_tool: CallTool,
            limits: Limits | None = None,
            cancel: CancelSignal | None = None,
        ) -> RunOutcome:
            return RunOutcome(logs=["printed"], result=code, has_result=True)

        async def _run(self, code: str, **_: Any) -> RunOutcome:
            raise AssertionError("run is overridden")

    events: list[dict[str, Any]] = []
    async with CodeExecutor(_registry(), runtime=Older(), on_event=events.append) as executor:
        result = await executor.run_code("return 1")
    assert result.value == {"logs": ["printed"], "result": "return 1"}
    assert [e["type"] for e in events] == ["tool/call", "tool/result"]


@pytest.mark.parametrize(
    ("live_logs", "message"),
    [
        (LiveLogs(burst=0), "LiveLogs.burst must be a positive integer"),
        (LiveLogs(burst=True), "LiveLogs.burst must be a positive integer"),
        (LiveLogs(rate=-1), "LiveLogs.rate must be a non-negative number"),
        (LiveLogs(rate=float("inf")), "LiveLogs.rate must be a non-negative number"),
        (LiveLogs(max_chars=1), "LiveLogs.max_chars must be an integer of at least 2"),
        ({"burst": 5}, "live_logs must be a LiveLogs or None"),
    ],
)
def test_bad_live_log_settings_are_refused(live_logs: Any, message: str) -> None:
    with pytest.raises(ExecutorConfigError, match=message):
        CodeExecutor(_registry(), runtime=InProcessRuntime(), live_logs=live_logs)


# --------------------------------------------------------------------------- the real worker


async def test_lines_from_the_subprocess_worker_are_events_in_order() -> None:
    events: list[dict[str, Any]] = []
    async with (
        SubprocessRuntime() as runtime,
        CodeExecutor(
            _registry(),
            runtime=runtime,
            on_event=events.append,
            live_logs=LiveLogs(burst=4, rate=0, max_chars=20),
        ) as executor,
    ):
        result = await executor.run_code(
            "print('before')\n"
            "x = await tools.echo({'x': 2})\n"
            "print('after', x)\n"
            "print('w' * 50)\n"
            "for i in range(5):\n    print(i)\n"
            "return x",
            call_id="sub-1",
        )
    assert not result.is_error, result
    assert _shape(events) == [
        ("tool/call", "sub-1", None),
        ("tool/ptc-log", "sub-1", "before"),
        ("tool/ptc-dispatch-start", "sub-1:ptc:1", None),
        ("tool/ptc-dispatch", "sub-1:ptc:1", None),
        ("tool/ptc-log", "sub-1", "after 2"),
        ("tool/ptc-log", "sub-1", "w" * 19 + "…"),
        ("tool/ptc-log", "sub-1", "0"),
        ("tool/ptc-log", "sub-1", "4 lines of output not shown live (over the rate limit)"),
        ("tool/result", "sub-1", None),
    ]
    assert result.value == {
        "logs": ["before", "after 2", "w" * 50, "0", "1", "2", "3", "4"],
        "result": 2,
    }
