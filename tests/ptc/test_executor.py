"""CodeExecutor: run_code through the pipeline, the rolling pool, events, modes, rendering."""

from __future__ import annotations

from typing import Any

import anyio
import orjson
import pytest

from ptc import CODE_ONLY_RULE, CodeExecutor, ExecutorConfigError, ModelCall
from registry import (
    AbortSignal,
    Allow,
    Ask,
    Deny,
    RegistrationError,
    RestrictionError,
    ToolExecution,
    ToolRegistry,
)
from runtime import Limits, Runtime, SubprocessRuntime
from runtime.testing import InProcessRuntime, ToolBox

from .conftest import Recorder

pytestmark = pytest.mark.anyio


def executor(
    reg: ToolRegistry, rt: Runtime | None = None, **kwargs: Any
) -> tuple[CodeExecutor, list[dict[str, Any]]]:
    events: list[dict[str, Any]] = []
    ex = CodeExecutor(reg, runtime=rt or InProcessRuntime(), on_event=events.append, **kwargs)
    return ex, events


# ----------------------------------------------------------------------------- basics


async def test_run_code_returns_logs_and_result(tools: ToolRegistry, any_runtime: Runtime) -> None:
    ex, _ = executor(tools, any_runtime)
    r = await ex.run_code(
        "v = await tools.read({'key': 'a'})\nprint('got', v)\nreturn {'v': v, 'n': 2}",
        description="read a",
    )
    assert not r.is_error
    assert r.value == {"logs": ["got value-of-a"], "result": {"v": "value-of-a", "n": 2}}
    assert r.content[0]["text"] == 'got value-of-a\n{\n  "v": "value-of-a",\n  "n": 2\n}'


async def test_result_absent_when_program_returns_nothing(
    tools: ToolRegistry, any_runtime: Runtime
) -> None:
    ex, _ = executor(tools, any_runtime)
    r = await ex.run_code("print('only a line')")
    assert r.value == {"logs": ["only a line"]}
    assert r.content[0]["text"] == "only a line"


async def test_rendering_rules(tools: ToolRegistry) -> None:
    ex, _ = executor(tools)
    empty = await ex.run_code("x = 1")
    assert empty.content[0]["text"] == "(run_code completed with no output)"
    null = await ex.run_code("return None")
    assert null.value == {"logs": [], "result": None}
    assert null.content[0]["text"] == "null"
    raw = await ex.run_code("return 'plain\\ntext'")
    assert raw.content[0]["text"] == "plain\ntext"
    deep = await ex.run_code("return {'a': {'b': {'c': {'d': {'e': {'f': [1, 2]}}}}}}")
    text = deep.content[0]["text"]
    # Indentation is capped at ten characters; the deepest subtree stays compact.
    assert max(len(line) - len(line.lstrip(" ")) for line in text.splitlines()) == 10
    assert '"e": {"f":[1,2]}' in text


async def test_program_exception_is_code_run_failed_with_captured_output(
    tools: ToolRegistry, any_runtime: Runtime
) -> None:
    ex, _ = executor(tools, any_runtime)
    r = await ex.run_code("print('before')\nx = {}\nreturn x['missing']")
    assert r.is_error
    assert r.error.info is not None and r.error.info.code == "CODE_RUN_FAILED"
    assert r.error.message.startswith("code run failed (exception): ")
    assert "KeyError" in r.error.message
    assert r.error.message.endswith("Captured output:\nbefore")
    assert r.content[0]["text"] == f"Error: {r.error.message}"


async def test_syntax_error_kind(tools: ToolRegistry, any_runtime: Runtime) -> None:
    ex, _ = executor(tools, any_runtime)
    r = await ex.run_code("def broken(:\n    pass")
    assert r.is_error and r.error.message.startswith("code run failed (syntax): ")


async def test_tool_failure_reaches_program_as_tool_call_error(
    tools: ToolRegistry, any_runtime: Runtime
) -> None:
    ex, _ = executor(tools, any_runtime)
    r = await ex.run_code(
        "try:\n"
        "    await tools.fail({'why': 'disk full'})\n"
        "except ToolCallError as e:\n"
        "    return [e.tool_name, e.message]\n"
    )
    assert r.value == {"logs": [], "result": ["fail", "disk full"]}


async def test_invalid_sub_call_arguments_become_tool_call_error(tools: ToolRegistry) -> None:
    ex, _ = executor(tools)
    r = await ex.run_code(
        "try:\n    await tools.read({'key': 5})\nexcept ToolCallError as e:\n    return e.message"
    )
    assert "invalid arguments for read" in r.value["result"]


# ----------------------------------------------------------------------------- the pool


async def test_safe_calls_overlap_up_to_the_limit(
    tools: ToolRegistry, recorder: Recorder, any_runtime: Runtime
) -> None:
    ex, _ = executor(tools, any_runtime, max_parallel_sub_calls=3)
    # Each read lasts long enough (0.1 s) for the next ones to arrive on a loaded machine.
    code = "import asyncio\nreturn await asyncio.gather(*[tools.read({'key': str(i), 'delay': 0.1}) for i in range(7)])"
    r = await ex.run_code(code)
    assert not r.is_error
    assert r.value["result"] == [f"value-of-{i}" for i in range(7)]
    assert recorder.peak == 3
    starts = [key for event, _, key in recorder.log if event == "start"]
    assert starts == [str(i) for i in range(7)], "calls must start in submission order"


async def test_serial_when_limit_is_one(tools: ToolRegistry, recorder: Recorder) -> None:
    ex, _ = executor(tools, max_parallel_sub_calls=1)
    await ex.run_code(
        "import asyncio\nawait asyncio.gather(*[tools.read({'key': str(i)}) for i in range(4)])"
    )
    assert recorder.peak == 1
    assert [e for e, _, _ in recorder.log] == ["start", "end"] * 4


async def test_parallel_calls_really_overlap(
    tools: ToolRegistry, recorder: Recorder, any_runtime: Runtime
) -> None:
    # Two reads wait on gates that only a third, later read opens: serial execution would deadlock.
    ex, _ = executor(tools, any_runtime, max_parallel_sub_calls=10, limits=Limits(timeout=5))

    both_running = recorder.when_running(2)

    async def opener() -> None:
        await both_running.wait()
        recorder.gate("g").set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(opener)
        r = await ex.run_code(
            "import asyncio\nreturn await asyncio.gather(tools.read({'key': 'a', 'gate': 'g'}), tools.read({'key': 'b', 'gate': 'g'}))"
        )
    assert r.value["result"] == ["value-of-a", "value-of-b"]
    assert recorder.peak == 2


async def test_exclusive_call_is_a_barrier(
    tools: ToolRegistry, recorder: Recorder, any_runtime: Runtime
) -> None:
    ex, _ = executor(tools, any_runtime)
    code = (
        "import asyncio\n"
        "await asyncio.gather(\n"
        "    tools.read({'key': 'r1', 'delay': 0.02}),\n"
        "    tools.read({'key': 'r2', 'delay': 0.01}),\n"
        "    tools.write({'key': 'w', 'delay': 0.01}),\n"
        "    tools.read({'key': 'r3'}),\n"
        "    tools.read({'key': 'r4'}),\n"
        ")\n"
    )
    r = await ex.run_code(code)
    assert not r.is_error
    log = recorder.log
    w_start = log.index(("start", "write", "w"))
    w_end = log.index(("end", "write", "w"))
    assert log.index(("end", "read", "r1")) < w_start and log.index(("end", "read", "r2")) < w_start
    assert log.index(("start", "read", "r3")) > w_end and log.index(("start", "read", "r4")) > w_end
    assert w_end == w_start + 1, "the exclusive call ran alone"


# ----------------------------------------------------------------------------- events


async def test_events_ids_and_pairs(tools: ToolRegistry, any_runtime: Runtime) -> None:
    ex, events = executor(tools, any_runtime)
    r = await ex.run_code(
        "import asyncio\n"
        "a, b = await asyncio.gather(tools.read({'key': 'x'}), tools.read({'key': 'y'}))\n"
        "try:\n    await tools.fail({})\nexcept ToolCallError:\n    pass\n"
        "return a + b",
        call_id="call-7",
    )
    assert not r.is_error
    orjson.dumps(events)  # every event is JSON-serializable
    types = [e["type"] for e in events]
    assert types[0] == "tool/call" and types[-1] == "tool/result"
    assert events[0]["id"] == events[-1]["id"] == "call-7"
    starts = [e for e in events if e["type"] == "tool/ptc-dispatch-start"]
    settles = [e for e in events if e["type"] == "tool/ptc-dispatch"]
    assert [e["id"] for e in starts] == ["call-7:ptc:1", "call-7:ptc:2", "call-7:ptc:3"]
    assert sorted(e["id"] for e in settles) == [e["id"] for e in starts]
    for e in starts:
        assert e["parent_id"] == "call-7"
        assert set(e) == {"type", "id", "parent_id", "name", "arguments", "time"}
    assert starts[0]["arguments"] == {"key": "x"}
    failed = next(e for e in settles if e["name"] == "fail")
    assert failed["is_error"] is True
    assert failed["error"]["info"] == {"name": "ToolError", "code": "BROKEN"}
    assert failed["content"] == [{"type": "text", "text": "Error: it broke"}]
    ok = next(e for e in settles if e["id"] == "call-7:ptc:1")
    assert ok["is_error"] is False and ok["content"] == [{"type": "text", "text": "value-of-x"}]
    assert ok["duration"] >= 0 and ok["started"] <= ok["time"]


async def test_dispatch_log_hook_changes_only_the_logged_copy(
    tools: ToolRegistry, any_runtime: Runtime
) -> None:
    seen: list[str] = []

    def spill(log: Any) -> list[dict[str, Any]]:
        seen.append(log.sub_call_id)
        return [{"type": "text", "text": f"[spilled {log.name}]"}]

    ex, events = executor(tools, any_runtime, dispatch_log=spill)
    r = await ex.run_code("return await tools.read({'key': 'k'})", call_id="c")
    assert r.value["result"] == "value-of-k"
    settle = next(e for e in events if e["type"] == "tool/ptc-dispatch")
    assert settle["content"] == [{"type": "text", "text": "[spilled read]"}]
    assert seen == ["c:ptc:1"]


async def test_raising_dispatch_log_hook_is_contained(tools: ToolRegistry) -> None:
    def broken(log: Any) -> None:
        raise RuntimeError("hook bug")

    ex, events = executor(tools, dispatch_log=broken)
    r = await ex.run_code("return await tools.read({'key': 'k'})")
    assert r.value["result"] == "value-of-k"
    settle = next(e for e in events if e["type"] == "tool/ptc-dispatch")
    assert settle["content"] == [{"type": "text", "text": "value-of-k"}]


async def test_raising_event_sink_is_contained(tools: ToolRegistry) -> None:
    def sink(event: dict[str, Any]) -> None:
        raise RuntimeError("sink bug")

    ex = CodeExecutor(tools, runtime=InProcessRuntime(), on_event=sink)
    r = await ex.run_code("return await tools.read({'key': 'k'})")
    assert r.value["result"] == "value-of-k"


async def test_additional_contexts_are_deferred_in_dispatch_order(
    tools: ToolRegistry, any_runtime: Runtime
) -> None:
    ex, _ = executor(tools, any_runtime)
    r = await ex.run_code(
        "import asyncio\nawait asyncio.gather(*[tools.ctx_tool({'note': n}) for n in 'abc'])"
    )
    assert r.additional_contexts == ({"note": "a"}, {"note": "b"}, {"note": "c"})


# ----------------------------------------------------------------------------- policy on inner calls


async def test_policy_denial_reaches_program(tools: ToolRegistry, any_runtime: Runtime) -> None:
    async def deny_writes(execution: ToolExecution, call_next: Any) -> Any:
        if execution.name == "write":
            return Deny("writes are frozen today")
        return await call_next()

    tools.on_pre_execute(deny_writes)
    ex, events = executor(tools, any_runtime)
    r = await ex.run_code(
        "try:\n    await tools.write({'key': 'k'})\nexcept ToolCallError as e:\n    return e.message"
    )
    assert r.value["result"] == "writes are frozen today"
    settle = next(e for e in events if e["type"] == "tool/ptc-dispatch")
    assert settle["error"]["info"]["code"] == "TOOL_DENIED"


async def test_inner_calls_get_the_outer_token_as_parent_and_approval_runs(
    tools: ToolRegistry, any_runtime: Runtime
) -> None:
    seen: list[ToolExecution] = []
    asked: list[str] = []

    async def watch(execution: ToolExecution, call_next: Any) -> Any:
        seen.append(execution)
        if execution.name == "write":
            return Ask("writes need a human")
        return Allow()

    async def approve(execution: ToolExecution, reason: str | None) -> bool:
        asked.append(execution.name)
        return execution.arguments["key"] == "ok"

    tools.approval = approve
    tools.on_pre_execute(watch)
    ex, _ = executor(tools, any_runtime)
    r = await ex.run_code(
        "out = [await tools.write({'key': 'ok'})]\n"
        "try:\n    await tools.write({'key': 'no'})\nexcept ToolCallError as e:\n    out.append(e.message)\n"
        "return out"
    )
    assert r.value["result"][0] == {"written": "ok"}
    assert "rejected" in r.value["result"][1]
    assert asked == ["write", "write"]
    outer = next(e for e in seen if e.name == "run_code")
    inner = [e for e in seen if e.name != "run_code"]
    assert inner and all(e.parent is outer.token for e in inner)
    assert all(e.root_call_id == outer.call_id for e in inner)


async def test_outer_run_code_goes_through_policy(tools: ToolRegistry) -> None:
    async def no_code(execution: ToolExecution, call_next: Any) -> Any:
        if execution.name == "run_code":
            return Deny("no programs today")
        return await call_next()

    tools.on_pre_execute(no_code)
    runtime = InProcessRuntime()
    ex, _ = executor(tools, runtime)
    r = await ex.run_code("return 1")
    assert r.is_error and r.error.message == "no programs today"
    assert runtime.runs == 0


def test_run_code_name_is_reserved(tools: ToolRegistry) -> None:
    from registry import ToolDefinition, ToolOutput

    async def body(args: Any, ctx: Any) -> None:
        return None

    with pytest.raises(RegistrationError):
        tools.register(
            ToolDefinition(
                name="run_code",
                description="",
                parameters={"type": "object"},
                output=ToolOutput(schema={}),
                execute=body,
            )
        )
    with pytest.raises(RestrictionError):
        tools.restrict("agent", deny=["run_code"])


# ----------------------------------------------------------------------------- settlement


async def test_timeout_settles_in_flight_and_drops_queued(
    tools: ToolRegistry, recorder: Recorder, any_runtime: Runtime
) -> None:
    # (0.5 s: time enough for the first call to start on a loaded machine.)
    ex, events = executor(tools, any_runtime, max_parallel_sub_calls=1, limits=Limits(timeout=0.5))
    r = await ex.run_code(
        "import asyncio\nawait asyncio.gather(*[tools.read({'key': str(i), 'delay': 30}) for i in range(3)])",
        call_id="t",
    )
    assert r.is_error and r.error.message.startswith("code run failed (timeout): ")
    # The in-flight call was cancelled and awaited; the queued ones never started.
    assert recorder.running == 0 and recorder.cleanups == 1
    assert [e["id"] for e in events if e["type"] == "tool/ptc-dispatch-start"] == ["t:ptc:1"]
    settles = [e for e in events if e["type"] == "tool/ptc-dispatch"]
    assert [e["id"] for e in settles] == ["t:ptc:1"]
    assert settles[0]["error"]["info"]["code"] == "ABORTED"
    assert events[-1]["type"] == "tool/result"


async def test_cancellation_settles_every_sub_call(
    tools: ToolRegistry, recorder: Recorder, any_runtime: Runtime
) -> None:
    ex, events = executor(tools, any_runtime)
    signal = AbortSignal()

    all_running = recorder.when_running(3)

    async def abort_when_running() -> None:
        await all_running.wait()
        signal.abort("user pressed stop")

    async with anyio.create_task_group() as tg:
        tg.start_soon(abort_when_running)
        r = await ex.run_code(
            "import asyncio\nawait asyncio.gather(*[tools.read({'key': str(i), 'delay': 30}) for i in range(3)])",
            signal=signal,
        )
    assert r.is_error and r.error.info is not None and r.error.info.code == "ABORTED"
    assert recorder.running == 0 and recorder.cleanups == 3
    settles = [e for e in events if e["type"] == "tool/ptc-dispatch"]
    assert len(settles) == 3 and all(e["is_error"] for e in settles)


# ----------------------------------------------------------------------------- modes and batches


async def test_code_mode_routes_direct_calls_back_to_run_code(tools: ToolRegistry) -> None:
    called: list[str] = []

    async def watch(execution: ToolExecution, call_next: Any) -> Any:
        called.append(execution.name)
        return await call_next()

    tools.on_pre_execute(watch)
    ex, events = executor(tools)
    batch = await ex.execute([{"id": "1", "name": "read", "arguments": '{"key": "a"}'}])
    r = batch.results[0].result
    assert r.is_error and r.error.info is not None and r.error.info.code == "UNKNOWN_TOOL"
    assert r.error.message == (
        "only `run_code` is callable directly — call `read` from inside a `run_code` program instead"
    )
    assert called == []
    assert [e["type"] for e in events] == ["tool/call", "tool/result"]


async def test_both_mode_runs_native_and_code_calls_in_order(
    tools: ToolRegistry, recorder: Recorder
) -> None:
    ex, _ = executor(tools, mode="both")
    batch = await ex.execute(
        [
            ModelCall(call_id="1", name="read", arguments={"key": "n1", "delay": 0.01}),
            ModelCall(call_id="2", name="read", arguments={"key": "n2"}),
            ModelCall(
                call_id="3",
                name="run_code",
                arguments={"code": "return await tools.read({'key': 'p'})", "description": "d"},
            ),
            ModelCall(call_id="4", name="ctx_tool", arguments={"note": "z"}),
        ]
    )
    assert [c.call_id for c in batch.results] == ["1", "2", "3", "4"]
    assert batch.results[0].result.value == "value-of-n1"
    assert batch.results[2].result.value == {"logs": [], "result": "value-of-p"}
    assert batch.additional_contexts == [{"note": "z"}]
    # run_code is exclusive: the two native reads finished before the program's read started.
    assert recorder.log.index(("start", "read", "p")) > recorder.log.index(("end", "read", "n1"))


async def test_native_mode_has_no_run_code(tools: ToolRegistry) -> None:
    ex, _ = executor(tools, mode="native")
    d = ex.describe()
    assert d["sections"] == {}
    assert [t["name"] for t in d["tools"]] == ["ctx_tool", "fail", "read", "write"]
    batch = await ex.execute(
        [ModelCall(call_id="1", name="run_code", arguments={"code": "return 1", "description": ""})]
    )
    result = batch.results[0].result
    assert (
        result.is_error
        and result.error.info is not None
        and result.error.info.code == "UNKNOWN_TOOL"
    )


def test_describe_code_mode(tools: ToolRegistry) -> None:
    ex, _ = executor(tools)
    d = ex.describe()
    assert [t["name"] for t in d["tools"]] == ["run_code"]
    assert d["tools"][0]["parameters"]["required"] == ["code", "description"]
    assert d["sections"]["tools:code-only"] == CODE_ONLY_RULE
    sdk = d["sections"]["tools:sdk"]
    assert "async def read" in sdk and "async def write" in sdk
    assert ex.describe() == d
    assert orjson.dumps(ex.describe()) == orjson.dumps(d)


def test_describe_both_mode_and_scope(tools: ToolRegistry) -> None:
    tools.restrict("agent", deny=["write"])
    ex, _ = executor(tools, mode="both")
    d = ex.describe("agent")
    assert [t["name"] for t in d["tools"]] == ["ctx_tool", "fail", "read", "run_code"]
    assert d["sections"]["tools:code-only"] == ""
    assert "async def write" not in d["sections"]["tools:sdk"]


def test_sdk_cache_follows_registry_changes(tools: ToolRegistry) -> None:
    ex, _ = executor(tools)
    before = ex.sdk_text()
    dispose = tools.restrict("agent", deny=["fail"])
    assert "async def fail" not in ex.sdk_text("agent")
    dispose()
    assert ex.sdk_text("agent") == before


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "3"])
def test_max_parallel_validated(tools: ToolRegistry, bad: Any) -> None:
    with pytest.raises(ExecutorConfigError):
        CodeExecutor(tools, runtime=InProcessRuntime(), max_parallel_sub_calls=bad)


async def test_an_owned_runtime_is_closed_with_the_block(tools: ToolRegistry) -> None:
    async with CodeExecutor(tools) as ex:  # creates its own SubprocessRuntime
        runtime = ex._runtime
        assert isinstance(runtime, SubprocessRuntime)
        r = await ex.run_code("v = await tools.read({'key': 'a'})\nreturn v")
        assert r.value == {"logs": [], "result": "value-of-a"}
    assert ex._runtime is None
    assert runtime.closed
    assert runtime._pool.zygote_pid is None  # closed with the block


async def test_a_given_runtime_is_left_to_its_owner(tools: ToolRegistry) -> None:
    async with SubprocessRuntime(layers=()) as runtime:
        async with CodeExecutor(tools, runtime=runtime) as ex:
            await ex.run_code("return 1")
        assert runtime._pool.zygote_pid is not None  # still open
        assert (await runtime.run("return 2", tool_names=[], call_tool=ToolBox())).result == 2
