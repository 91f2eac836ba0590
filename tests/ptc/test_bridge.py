"""Where the bridge runs a sub-call: in the task that asked for it, in its caller's context."""

from __future__ import annotations

from contextvars import ContextVar

import anyio
import pytest

from ptc import CodeExecutor, ModelCall
from ptc._bridge import Bridge, Settlement
from registry import ToolCall, ToolRegistry, ToolRunContext, snapshot_json
from registry import _pipeline as registry_pipeline
from runtime.testing import InProcessRuntime

pytestmark = pytest.mark.anyio

_seen: ContextVar[str] = ContextVar("seen", default="-")


def _registry(tasks: list[object]) -> ToolRegistry:
    reg = ToolRegistry()

    @reg.tool(concurrency_safe=True)
    async def mark(label: str) -> str:
        """Set a context variable and return what it was before."""
        tasks.append(anyio.get_current_task().id)
        before = _seen.get()
        _seen.set(label)  # never reset: a sub-call after it must not see it
        await anyio.lowlevel.checkpoint()
        return before

    return reg


SEQUENCE = "return [await tools.mark({'label': str(i)}) for i in range(6)]"
GATHER = (
    "import asyncio\n"
    "return await asyncio.gather(*[tools.mark({'label': str(i)}) for i in range(6)])"
)


@pytest.mark.parametrize("block", [True, False], ids=["in-block", "no-block"])
async def test_a_sub_call_runs_in_the_task_that_asked_for_it_and_sees_only_its_context(
    block: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One scheduler: the runtime's task that calls call_tool runs the sub-call
    # itself (no task of the bridge's own), in the run's caller's context.
    tasks: list[object] = []
    asked: list[object] = []
    call_tool = Bridge.call_tool

    async def spied(self: Bridge, name: str, arguments: object) -> object:
        asked.append(anyio.get_current_task().id)
        return await call_tool(self, name, arguments)

    monkeypatch.setattr(Bridge, "call_tool", spied)
    ex = CodeExecutor(_registry(tasks), runtime=InProcessRuntime())
    _seen.set("caller")
    if block:
        async with ex:
            result = await ex.run_code(SEQUENCE)
    else:
        result = await ex.run_code(SEQUENCE)
    assert result.value["result"] == ["caller"] * 6
    assert len(tasks) == 6 and tasks == asked


@pytest.mark.parametrize("max_parallel", [1, 2, 6])
async def test_queued_sub_calls_run_in_their_callers_context_not_their_starters(
    max_parallel: int,
) -> None:
    # A queued call is started by the sub-call that settled before it, on that
    # sub-call's runner: it must still see only its own caller's context.
    tasks: list[object] = []
    _seen.set("caller")
    async with CodeExecutor(
        _registry(tasks), runtime=InProcessRuntime(), max_parallel_sub_calls=max_parallel
    ) as ex:
        result = await ex.run_code(GATHER)
    assert result.value["result"] == ["caller"] * 6


@pytest.mark.parametrize("inline", [True, False], ids=["inline", "apart"])
async def test_a_started_sub_call_runs_to_its_end_though_its_caller_is_cancelled(
    inline: bool,
) -> None:
    # Shielded: a sub-call asked for as its caller's scope is cancelled (the
    # run ending) still runs, so it settles and is logged, and whoever waits
    # for it is not left waiting. Inline it runs in the caller's task; apart
    # (a runtime that takes no call_group), in a task of the group.
    tasks: list[object] = []
    reg = _registry(tasks)
    contexts: list[ToolRunContext] = []

    @reg.tool()
    async def outer(ctx: ToolRunContext) -> int:
        """Stand in for run_code: hands out its context."""
        contexts.append(ctx)
        return 0

    await reg.execute(ToolCall(call_id="run", name="outer", arguments={}))
    second = None
    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            bridge = Bridge(
                registry=reg,
                ctx=contexts[0],
                task_group=group,
                can_abandon=True,  # (a call lost would be given up on, not waited for)
                settlement=Settlement(5),
                max_parallel=4,
                publish=None,
                dispatch_log=None,
                inline=inline,
            )
            caller = anyio.get_current_task().id
            first = await bridge.call_tool("mark", {"label": "a"})
            group.cancel_scope.cancel()
            with anyio.move_on_after(5, shield=True):
                second = await bridge.call_tool("mark", {"label": "b"})
            bridge.settle()
            assert await bridge.drain() == []
    assert first.ok and second is not None and second.ok
    assert len(tasks) == 2
    if inline:
        assert tasks == [caller, caller]
    else:
        assert caller not in tasks


def _counted_total(
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[ToolRegistry, list[object], list[object]]:
    """A registry with ``total`` whose validations and argument snapshots are counted."""
    reg = ToolRegistry()

    @reg.tool(concurrency_safe=True)
    async def total(items: list[int]) -> int:
        """Add the items."""
        return sum(items)

    validations: list[object] = []
    parameters = reg.view()["total"].parameters
    fast = parameters.fast
    assert fast is not None

    def counted_fast(value: object) -> bool:
        validations.append(value)
        return fast(value)

    parameters.fast = counted_fast
    snapshots: list[object] = []

    def counted_snapshot(value: object) -> object:
        if isinstance(value, dict) and "items" in value:
            snapshots.append(value)
        return snapshot_json(value)

    monkeypatch.setattr(registry_pipeline, "snapshot_json", counted_snapshot)
    return reg, validations, snapshots


async def test_a_sub_calls_arguments_are_snapshotted_and_validated_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The mode is decided on the same checked arguments the pipeline runs the
    # call with: a 10,000-item list is copied and checked once, not twice.
    reg, validations, snapshots = _counted_total(monkeypatch)
    async with CodeExecutor(reg, runtime=InProcessRuntime()) as ex:
        result = await ex.run_code("return await tools.total({'items': list(range(10_000))})")
    assert not result.is_error, result.content
    assert result.value["result"] == sum(range(10_000))
    assert len(validations) == 1
    assert len(snapshots) == 1


async def test_a_native_calls_arguments_are_snapshotted_and_validated_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The same for an outer call in native mode: its scheduling mode and its
    # execution share one check (execute(call, checked=...)).
    reg, validations, snapshots = _counted_total(monkeypatch)
    ex = CodeExecutor(reg, runtime=InProcessRuntime(), mode="native")
    batch = await ex.execute(
        [
            ModelCall(call_id="a", name="total", arguments={"items": list(range(10_000))}),
            ModelCall(call_id="b", name="total", arguments={"items": [1, 2]}),
        ]
    )
    assert [r.result.value for r in batch.results] == [sum(range(10_000)), 3]
    assert len(validations) == 2  # one per call
    assert len(snapshots) == 2
