"""The executor's promises at its edges: accounting under cancellation and raising
sinks, unique ids, the wall clock as a hard bound, malformed model calls, and
backpressure."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from typing import Any

import anyio
import orjson
import pytest

from ptc import (
    DUPLICATE_CALL_ID,
    EXECUTOR_BUSY,
    MALFORMED_CALL,
    CodeExecutor,
    ExecutorConfigError,
    ModelCall,
)
from registry import (
    ToolDefinition,
    ToolOutput,
    ToolRegistry,
    ToolRunContext,
)
from runtime import Limits, Runtime
from runtime.testing import InProcessRuntime

from .conftest import Recorder

pytestmark = pytest.mark.anyio

GATHER_READS = (
    "import asyncio\n"
    "return await asyncio.gather(*[tools.read({{'key': str(i), 'gate': '{gate}'}}) "
    "for i in range({n})])"
)


def _executor(
    reg: ToolRegistry, rt: Runtime | None = None, **kwargs: Any
) -> tuple[CodeExecutor, list[dict[str, Any]]]:
    events: list[dict[str, Any]] = []
    kwargs.setdefault("on_event", events.append)
    return CodeExecutor(reg, runtime=rt or InProcessRuntime(), **kwargs), events


async def _until(condition: Callable[[], bool], within: float = 5.0) -> None:
    """Poll ``condition`` until it holds; fail after ``within`` seconds."""
    with anyio.fail_after(within):
        while not condition():  # noqa: ASYNC110 - state that other tasks and threads change
            await anyio.sleep(0.005)


def _assert_accounting(events: list[dict[str, Any]]) -> None:
    """Every outer call one result, every started sub-call one settle event, ids unique."""
    calls = [e["id"] for e in events if e["type"] == "tool/call"]
    results = [e["id"] for e in events if e["type"] == "tool/result"]
    starts = [e["id"] for e in events if e["type"] == "tool/ptc-dispatch-start"]
    settles = [e["id"] for e in events if e["type"] == "tool/ptc-dispatch"]
    assert len(set(calls)) == len(calls), "outer call ids repeat"
    assert sorted(results) == sorted(calls)
    assert len(set(starts)) == len(starts), "sub-call ids repeat"
    assert sorted(settles) == sorted(starts)


# ----------------------------------------------------------------------------- 7. accounting


async def test_cancelling_run_code_from_outside_still_gives_each_call_its_result(
    tools: ToolRegistry, recorder: Recorder
) -> None:
    ex, events = _executor(tools)
    running = recorder.when_running(5)
    with anyio.move_on_after(10) as scope:
        async with anyio.create_task_group() as tg:
            for _ in range(5):
                tg.start_soon(ex.run_code, "return await tools.read({'key': 'k', 'gate': 'never'})")
            await running.wait()
            scope.cancel()
    assert scope.cancelled_caught
    results = [e for e in events if e["type"] == "tool/result"]
    assert len(results) == 5
    assert all(e["error"]["info"]["code"] == "ABORTED" for e in results)
    assert recorder.running == 0  # every sub-call stopped and was awaited
    _assert_accounting(events)
    assert len([e for e in events if e["type"] == "tool/ptc-dispatch"]) == 5


async def test_cancelling_a_batch_gives_each_started_call_its_result(tools: ToolRegistry) -> None:
    ex, events = _executor(tools)
    batch = [
        ModelCall(
            call_id=f"c{i}",
            name="run_code",
            arguments={"code": "import asyncio\nawait asyncio.sleep(30)", "description": "wait"},
        )
        for i in range(3)
    ]
    with anyio.move_on_after(0.3):
        await ex.execute(batch)
    # Code mode runs them one by one: the first started and was cancelled, the others never began.
    assert [(e["type"], e["id"]) for e in events] == [("tool/call", "c0"), ("tool/result", "c0")]
    assert events[-1]["error"]["info"]["code"] == "ABORTED"


async def test_cancelling_overlapping_native_calls_gives_each_its_result(
    tools: ToolRegistry, recorder: Recorder
) -> None:
    ex, events = _executor(tools, mode="both")
    running = recorder.when_running(3)
    batch = [
        ModelCall(call_id=f"n{i}", name="read", arguments={"key": str(i), "gate": "never"})
        for i in range(3)
    ]
    with anyio.move_on_after(10) as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(ex.execute, batch)
            await running.wait()
            scope.cancel()
    assert scope.cancelled_caught
    results = [e for e in events if e["type"] == "tool/result"]
    assert sorted(e["id"] for e in results) == ["n0", "n1", "n2"]
    assert all(e["error"]["info"]["code"] == "ABORTED" for e in results)
    assert recorder.running == 0
    _assert_accounting(events)


class _SinkBug(BaseException):
    pass


@pytest.mark.parametrize("exc", [_SinkBug, KeyboardInterrupt, SystemExit, RuntimeError])
async def test_a_sink_that_raises_anything_breaks_no_accounting(
    tools: ToolRegistry, exc: type[BaseException]
) -> None:
    seen: list[dict[str, Any]] = []

    def sink(event: dict[str, Any]) -> None:
        seen.append(event)
        raise exc("sink bug")

    async with CodeExecutor(tools, runtime=InProcessRuntime(), on_event=sink) as ex:
        first = await ex.run_code(
            "import asyncio\nreturn await asyncio.gather(tools.read({'key': 'a'}), tools.read({'key': 'b'}))"
        )
        second = await ex.run_code("return await tools.read({'key': 'c'})")
    assert first.value["result"] == ["value-of-a", "value-of-b"]
    assert second.value["result"] == "value-of-c"
    assert [e["type"] for e in seen].count("tool/result") == 2
    _assert_accounting(seen)


async def test_the_sink_runs_off_the_event_loop_in_order_and_in_the_callers_context(
    tools: ToolRegistry,
) -> None:
    from contextvars import ContextVar

    request: ContextVar[str] = ContextVar("request", default="-")
    seen: list[tuple[str, str, bool]] = []
    loop_thread = threading.get_ident()

    def sink(event: dict[str, Any]) -> None:
        seen.append((event["type"], request.get(), threading.get_ident() == loop_thread))

    ex, _ = _executor(tools, on_event=sink)
    request.set("req-1")
    await ex.run_code("return await tools.read({'key': 'a'})")
    assert seen == [
        ("tool/call", "req-1", False),
        ("tool/ptc-dispatch-start", "req-1", False),
        ("tool/ptc-dispatch", "req-1", False),
        ("tool/result", "req-1", False),
    ]


async def test_sub_calls_in_the_executors_block_see_the_callers_context() -> None:
    from contextvars import ContextVar

    request: ContextVar[str] = ContextVar("request", default="-")
    reg = ToolRegistry()

    @reg.tool(concurrency_safe=True)
    async def who() -> str:
        """Who is asking."""
        return request.get()

    async with CodeExecutor(reg, runtime=InProcessRuntime()) as ex:
        request.set("req-7")
        result = await ex.run_code("return await tools.who({})")
    assert result.value == {"logs": [], "result": "req-7"}


# ----------------------------------------------------------------------------- 8. ids


async def test_run_code_ids_are_unique_by_default(tools: ToolRegistry) -> None:
    ex, events = _executor(tools)
    for _ in range(2):
        await ex.run_code("return await tools.read({'key': 'a'})")
    ids = [e["id"] for e in events if e["type"] == "tool/call"]
    assert len(ids) == 2 and ids[0] != ids[1]
    assert all(re.fullmatch(r"run_code-[0-9a-f]{12}", i) for i in ids)
    subs = [e["id"] for e in events if e["type"] == "tool/ptc-dispatch-start"]
    assert subs == [f"{ids[0]}:ptc:1", f"{ids[1]}:ptc:1"]
    _assert_accounting(events)
    # An explicit id is kept as given.
    await ex.run_code("return 1", call_id="mine")
    assert events[-1]["id"] == "mine"


async def test_a_repeated_id_in_a_batch_is_an_error_of_its_own(tools: ToolRegistry) -> None:
    ex, events = _executor(tools, mode="both")
    batch = await ex.execute(
        [
            {"id": "a", "name": "read", "arguments": {"key": "1"}},
            {"id": "a", "name": "write", "arguments": {"key": "2"}},
            {"id": "b", "name": "read", "arguments": {"key": "3"}},
        ]
    )
    assert [r.call_id for r in batch.results] == ["a", "a", "b"]
    first, repeated, other = (r.result for r in batch.results)
    assert first.value == "value-of-1" and other.value == "value-of-3"
    assert repeated.is_error and repeated.error.info is not None
    assert repeated.error.info.code == DUPLICATE_CALL_ID
    assert repeated.error.message.startswith("duplicate call id 'a': ")
    _assert_accounting(events)  # the events of the repeat have an id of their own
    repeat_ids = [e["id"] for e in events if e["type"] == "tool/call" and e["name"] == "write"]
    assert len(repeat_ids) == 1 and re.fullmatch(r"a:dup-[0-9a-f]{12}", repeat_ids[0])


# ----------------------------------------------------------------------------- 9. the wall clock


def _stubborn_tools(release: threading.Event, how: str) -> ToolRegistry:
    """``stubborn`` ignores cancellation until ``release`` is set; ``quick`` answers at once."""
    reg = ToolRegistry()

    async def stubborn(args: dict[str, Any], ctx: ToolRunContext) -> str:
        if how == "thread":  # a sync worker thread cannot be cancelled
            await anyio.to_thread.run_sync(release.wait)
            return "late"
        try:
            await anyio.sleep(30)
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):  # and waits on, whatever happens
                await anyio.to_thread.run_sync(release.wait)
        return "late"

    async def quick(args: dict[str, Any], ctx: ToolRunContext) -> str:
        return "quick"

    for name, body in (("stubborn", stubborn), ("quick", quick)):
        reg.register(
            ToolDefinition(
                name=name,
                description=name,
                parameters={"type": "object"},
                output=ToolOutput(schema={"type": "string"}),
                execute=body,
                concurrency_safe=True,
            )
        )
    return reg


class _WithoutCallGroup(Runtime):
    """A runtime written before ``call_group`` existed (the in-process fake inside)."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = InProcessRuntime()

    async def run(
        self,
        code: str,
        *,
        tool_names: Any,
        call_tool: Any,
        limits: Limits | None = None,
        cancel: Any = None,
        on_log: Any = None,
    ) -> Any:
        return await self.inner.run(
            code,
            tool_names=tool_names,
            call_tool=call_tool,
            limits=limits,
            cancel=cancel,
            on_log=on_log,
        )

    async def _run(self, code: str, **_: Any) -> Any:
        raise AssertionError("run is overridden")


@pytest.mark.parametrize("how", ["catches-cancellation", "thread"])
async def test_a_sub_call_that_will_not_stop_is_abandoned_at_the_deadline(
    any_runtime: Runtime, how: str
) -> None:
    await _check_abandoned_at_the_deadline(any_runtime, how)


async def test_a_runtime_without_call_group_still_abandons_at_the_deadline() -> None:
    # Its run waits for every call it started: the executor runs each sub-call
    # in a task of its own group instead of in the runtime's task, and the run
    # lets go of it at the deadline as before.
    await _check_abandoned_at_the_deadline(_WithoutCallGroup(), "catches-cancellation")


async def _check_abandoned_at_the_deadline(any_runtime: Runtime, how: str) -> None:
    release = threading.Event()
    events: list[dict[str, Any]] = []
    limit, grace = 0.5, 0.5  # the default settle_grace
    async with anyio.create_task_group() as tg:
        # Today's executor waits for the tool: let it go after a while, so the
        # test fails on the time it took instead of hanging.
        async def let_go_later() -> None:
            await anyio.sleep(3.0)
            release.set()

        tg.start_soon(let_go_later)
        async with CodeExecutor(
            _stubborn_tools(release, how),
            runtime=any_runtime,
            limits=Limits(timeout=limit),
            on_event=events.append,
        ) as ex:
            started = time.monotonic()
            result = await ex.run_code(
                "import asyncio\nreturn await asyncio.gather(tools.quick({}), tools.stubborn({}))",
                call_id="slow",
            )
            elapsed = time.monotonic() - started
            # Well before the tool is let go (3 s), with room for a loaded machine.
            assert elapsed < limit + grace + 1.5, f"run_code took {elapsed:.2f}s"
            assert result.is_error
            assert result.error.message.startswith("code run failed (timeout): ")
            assert (
                "; abandoned 1 sub-call that did not stop within 0.5s of the run's end "
                "(it goes on and is logged when it ends): stubborn (slow:ptc:2)"
            ) in result.error.message
            assert events[-1]["type"] == "tool/result"
            assert events[-1]["abandoned_sub_calls"] == ["slow:ptc:2"]
            settled = [e["id"] for e in events if e["type"] == "tool/ptc-dispatch"]
            assert settled == ["slow:ptc:1"]  # the stubborn one has not ended yet
            release.set()
            await _until(lambda: len([e for e in events if e["type"] == "tool/ptc-dispatch"]) == 2)
        late = [e for e in events if e["type"] == "tool/ptc-dispatch"][-1]
        assert late["id"] == "slow:ptc:2" and late["abandoned"] is True
        _assert_accounting(events)
        tg.cancel_scope.cancel()


async def test_without_the_block_a_run_waits_for_its_sub_calls(caplog: Any) -> None:
    release = threading.Event()
    ex, events = _executor(
        _stubborn_tools(release, "catches-cancellation"),
        limits=Limits(timeout=0.2),
    )

    async def let_go() -> None:
        try:
            await _until(lambda: "the run waits for them" in caplog.text)
        finally:
            release.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(let_go)
        result = await ex.run_code("return await tools.stubborn({})")
    assert result.is_error and "abandoned" not in result.error.message
    assert [e.get("abandoned") for e in events if e["type"] == "tool/ptc-dispatch"] == [None]
    _assert_accounting(events)


async def test_a_slow_sink_does_not_hold_the_run(tools: ToolRegistry) -> None:
    delivered: list[str] = []

    def slow_sink(event: dict[str, Any]) -> None:
        time.sleep(0.15)
        delivered.append(event["type"])

    ex, _ = _executor(tools, on_event=slow_sink, limits=Limits(timeout=0.5))
    started = time.monotonic()
    ok = await ex.run_code(
        "import asyncio\nreturn await asyncio.gather(*[tools.read({'key': str(i)}) for i in range(3)])"
    )
    timed_out = await ex.run_code("import asyncio\nawait asyncio.sleep(30)")
    elapsed = time.monotonic() - started
    # On the event loop, the 10 events would add 1.5s; each call may wait 0.1s
    # for the sink. The bound sits between the two, with room for a loaded machine.
    assert elapsed < 0.5 + 2 * 0.1 + 0.9, f"took {elapsed:.2f}s"
    assert ok.value["result"] == [f"value-of-{i}" for i in range(3)]
    assert timed_out.is_error and "(timeout)" in timed_out.error.message
    await ex.aclose()  # delivers every event, in order, exactly once
    assert delivered[0] == "tool/call" and delivered[-1] == "tool/result"
    assert len(delivered) == 10 and delivered.count("tool/result") == 2


# ----------------------------------------------------------------------------- 10. malformed calls


async def test_malformed_model_calls_are_errors_of_their_own(tools: ToolRegistry) -> None:
    ex, events = _executor(tools)
    run = {"code": "return 1", "description": ""}
    batch = await ex.execute(
        [
            {"name": "run_code", "arguments": run},  # no id
            {"id": "b", "name": 5, "arguments": run},  # a name that is not a string
            ["not", "a", "call"],  # type: ignore[list-item]
            ModelCall(call_id="", name="run_code", arguments=run),  # an empty id
            {"id": "e", "name": "run_code", "arguments": run},
        ]
    )
    ids = [r.call_id for r in batch.results]
    assert re.fullmatch(r"call-[0-9a-f]{12}", ids[0]) and ids[1] == "b"
    assert re.fullmatch(r"call-[0-9a-f]{12}", ids[2]) and ids[4] == "e"
    assert len(set(ids)) == 5
    messages = [r.result.error.message for r in batch.results[:4]]
    assert messages == [
        "malformed tool call: it has no id; it was not run",
        "malformed tool call: its name is int 5, not a string; it was not run",
        "malformed tool call: a call is an object with an id, a name and arguments, "
        "not list ['not', 'a', 'call']; it was not run",
        "malformed tool call: its id is empty; it was not run",
    ]
    for r in batch.results[:4]:
        assert r.result.error.info is not None and r.result.error.info.code == MALFORMED_CALL
    assert batch.results[4].result.value == {"logs": [], "result": 1}
    orjson.dumps(events)
    _assert_accounting(events)
    assert [e["id"] for e in events if e["type"] == "tool/result"] == ids


# ----------------------------------------------------------------------------- 11. backpressure


async def test_runs_beyond_the_queue_are_busy_at_once(
    tools: ToolRegistry, recorder: Recorder
) -> None:
    ex, _ = _executor(tools)  # defaults: 16 running, 64 waiting
    results: list[Any] = []

    async def one(i: int) -> None:
        results.append(await ex.run_code(f"return await tools.read({{'key': '{i}', 'gate': 'g'}})"))

    async with anyio.create_task_group() as tg:
        for i in range(500):
            tg.start_soon(one, i)
        await _until(lambda: len(results) == 500 - 16 - 64 and recorder.running == 16)
        busy = [r for r in results if r.is_error]
        assert len(busy) == 420
        assert {r.error.info.code for r in busy} == {EXECUTOR_BUSY}
        assert busy[0].error.message == (
            "executor busy: all 16 run slots are taken and the queue of 64 is full; "
            "try again later (16 programs running, 64 waiting)"
        )
        recorder.gate("g").set()
    assert len(results) == 500 and sum(not r.is_error for r in results) == 80
    assert recorder.peak == 16


@pytest.mark.parametrize(("slots", "queue"), [(2, 0), (1, 3)])
async def test_the_run_slots_and_the_queue_are_configurable(
    tools: ToolRegistry, recorder: Recorder, slots: int, queue: int
) -> None:
    ex, _ = _executor(tools, max_concurrent_runs=slots, max_queued_runs=queue)
    results: list[Any] = []

    async def one(i: int) -> None:
        results.append(await ex.run_code(f"return await tools.read({{'key': '{i}', 'gate': 'g'}})"))

    async with anyio.create_task_group() as tg:
        for i in range(slots + queue + 3):
            tg.start_soon(one, i)
        await _until(lambda: len(results) == 3 and recorder.running == slots)
        assert all(r.is_error and r.error.info.code == EXECUTOR_BUSY for r in results)
        assert results[0].error.message.startswith(
            f"executor busy: all {slots} run slots are taken and the queue of {queue} is full; "
        )
        recorder.gate("g").set()
    assert sum(not r.is_error for r in results) == slots + queue
    assert recorder.peak == slots


async def test_waiting_for_a_run_slot_counts_against_the_wall_clock(
    tools: ToolRegistry, recorder: Recorder
) -> None:
    ex, events = _executor(tools, max_concurrent_runs=1, max_queued_runs=4)
    async with anyio.create_task_group() as tg:
        tg.start_soon(ex.run_code, "await tools.read({'key': 'a', 'gate': 'g'})")
        await _until(lambda: recorder.running == 1)
        ex.limits = Limits(timeout=0.4)  # for the runs from now on
        started = time.monotonic()
        queued = await ex.run_code("return 1")
        elapsed = time.monotonic() - started
        recorder.gate("g").set()
    assert 0.35 < elapsed < 2.0  # not until the gate opens, after run_code returned
    assert queued.is_error and queued.error.info is not None
    assert queued.error.info.code == EXECUTOR_BUSY
    assert queued.error.message.startswith(
        "executor busy: no run slot came free within the run's wall clock of 0.4s"
    )
    _assert_accounting(events)


async def test_a_queued_run_gets_what_is_left_of_its_wall_clock(
    tools: ToolRegistry, recorder: Recorder
) -> None:
    ex, _ = _executor(tools, max_concurrent_runs=1, limits=Limits(timeout=0.6))

    async def hold_the_slot() -> None:
        await ex.run_code("await tools.read({'key': 'a', 'delay': 0.3})")

    async with anyio.create_task_group() as tg:
        tg.start_soon(hold_the_slot)
        await _until(lambda: recorder.running == 1)
        late = await ex.run_code("import asyncio\nawait asyncio.sleep(0.45)\nreturn 1")
    assert late.is_error and late.error.message.startswith("code run failed (timeout): ")
    assert re.search(
        r"\(its wall clock was 0\.6s; it waited 0\.\d\ds for a run slot\)", late.error.message
    )


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("max_concurrent_runs", 0),
        ("max_queued_runs", -1),
        ("max_concurrent_runs", True),
        ("settle_grace", -1),
        ("settle_grace", float("nan")),
    ],
)
def test_bounds_are_validated(tools: ToolRegistry, option: str, value: Any) -> None:
    with pytest.raises(ExecutorConfigError, match=option):
        CodeExecutor(tools, runtime=InProcessRuntime(), **{option: value})
