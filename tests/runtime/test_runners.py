"""The tasks that answer tool calls: parked between jobs, reused, cancelled as a run ends."""

from __future__ import annotations

import contextvars
import gc
import weakref
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
import pytest

from runtime._host._runners import CallRunners, InContext

pytestmark = pytest.mark.anyio

request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


async def _in_context(coro: Any, context: contextvars.Context) -> Any:
    """What the session does: the first step here, the rest through ``InContext``."""
    try:
        signal = context.run(coro.send, None)
    except StopIteration as done:
        return done.value
    return await InContext(coro, context, signal)


# --------------------------------------------------------------------------- InContext


async def test_each_step_runs_in_the_given_context_and_changes_stay_there() -> None:
    request_id.set("caller")
    context = contextvars.copy_context()
    seen: list[str] = []

    async def tool() -> str:
        seen.append(request_id.get())
        request_id.set("tool")
        await anyio.lowlevel.checkpoint()  # a second step, after a wait
        seen.append(request_id.get())
        await anyio.sleep(0.01)
        return "answer"

    context.run(request_id.set, "the run's")
    assert await _in_context(tool(), context) == "answer"
    assert seen == ["the run's", "tool"]
    assert context[request_id] == "tool"
    assert request_id.get() == "caller"  # the awaiting task's own context is untouched


async def test_a_coroutine_that_finishes_in_its_first_step() -> None:
    async def quick() -> int:
        return 7

    assert await _in_context(quick(), contextvars.copy_context()) == 7


async def test_an_exception_comes_out_with_its_traceback() -> None:
    async def failing() -> None:
        await anyio.lowlevel.checkpoint()
        raise ValueError("bad input")

    with pytest.raises(ValueError, match="bad input") as caught:
        await _in_context(failing(), contextvars.copy_context())
    assert any(entry.name == "failing" for entry in caught.traceback)


async def test_cancellation_reaches_the_coroutine_and_stops_at_its_scope() -> None:
    cleaned = anyio.Event()

    async def hang() -> None:
        try:
            await anyio.sleep_forever()
        finally:
            cleaned.set()

    with anyio.CancelScope() as scope:
        scope.cancel()
        await _in_context(hang(), contextvars.copy_context())
    assert scope.cancelled_caught
    assert cleaned.is_set()


async def test_a_timeout_inside_the_coroutine_works() -> None:
    async def slow() -> str:
        with anyio.move_on_after(0.01):
            await anyio.sleep_forever()
        return "moved on"

    with anyio.fail_after(5):
        assert await _in_context(slow(), contextvars.copy_context()) == "moved on"


# --------------------------------------------------------------------------- CallRunners


class _Jobs:
    """Jobs that record which task ran them and can be held until released."""

    def __init__(self) -> None:
        self.tasks: list[int] = []
        self.scopes: list[anyio.CancelScope] = []
        self.release = anyio.Event()
        self.cancelled = 0

    def quick(self) -> Any:
        async def job(scope: anyio.CancelScope) -> None:
            self.tasks.append(anyio.get_current_task().id)

        return job

    def held(self) -> Any:
        async def job(scope: anyio.CancelScope) -> None:
            self.scopes.append(scope)
            self.tasks.append(anyio.get_current_task().id)
            try:
                await self.release.wait()
            except anyio.get_cancelled_exc_class():
                self.cancelled += 1
                raise

        return job


async def _settle() -> None:
    for _ in range(10):
        await anyio.lowlevel.checkpoint()


async def test_a_finished_runner_parks_and_takes_the_next_job() -> None:
    jobs = _Jobs()
    async with anyio.create_task_group() as group:
        runners = CallRunners(group, keep=4)
        runners.submit(jobs.quick())
        await _settle()
        assert runners.parked == 1
        runners.submit(jobs.quick())
        await _settle()
        assert runners.parked == 1
        assert len(jobs.tasks) == 2
        assert jobs.tasks[0] == jobs.tasks[1]  # the same task ran both
        runners.close()
    assert runners.parked == 0


async def test_a_parked_runner_keeps_nothing_of_its_last_job() -> None:
    class Job:
        async def __call__(self, scope: anyio.CancelScope) -> None:
            pass

    job = Job()
    gone = weakref.ref(job)
    async with anyio.create_task_group() as group:
        runners = CallRunners(group, keep=4)
        runners.submit(job)
        del job
        await _settle()
        assert runners.parked == 1
        gc.collect()
        assert gone() is None  # (a job holds its run: logs, results, the worker)
        runners.close()


async def test_runners_beyond_keep_leave() -> None:
    jobs = _Jobs()
    async with anyio.create_task_group() as group:
        runners = CallRunners(group, keep=2)
        for _ in range(5):
            runners.submit(jobs.held())
        await _settle()
        assert len(set(jobs.tasks)) == 5  # none was parked: five tasks
        jobs.release.set()
        await _settle()
        assert runners.parked == 2
        runners.close()


async def test_cancelling_the_runs_group_cancels_the_jobs_and_the_runners_leave() -> None:
    # (How a run abandons the calls in flight when its outcome is decided.)
    jobs = _Jobs()
    async with anyio.create_task_group() as group:
        runners = CallRunners(group, keep=4)
        runners.submit(jobs.held())
        runners.submit(jobs.held())
        await _settle()
        group.cancel_scope.cancel()
    assert jobs.cancelled == 2
    assert runners.parked == 0


async def test_a_runner_cancelled_while_parked_is_no_longer_counted() -> None:
    jobs = _Jobs()
    runners: CallRunners | None = None
    async with anyio.create_task_group() as group:
        runners = CallRunners(group, keep=4)
        runners.submit(jobs.quick())
        await _settle()
        assert runners.parked == 1
        group.cancel_scope.cancel()  # the run ends, without close()
    assert runners.parked == 0


async def test_closed_runners_refuse_jobs() -> None:
    jobs = _Jobs()
    async with anyio.create_task_group() as group:
        runners = CallRunners(group, keep=4)
        assert runners.bound
        runners.close()
        assert not runners.bound
        with pytest.raises(RuntimeError):
            runners.submit(jobs.quick())
    assert jobs.tasks == []  # nothing ran


@pytest.mark.parametrize("shield", [False, True])
async def test_cancelling_the_scope_a_job_was_given_ends_it_and_its_runner(shield: bool) -> None:
    # (How a run ends the jobs of the call group: each job has its runner's scope.)
    jobs = _Jobs()
    async with anyio.create_task_group() as group:
        runners = CallRunners(group, keep=4, shield=shield)
        runners.submit(jobs.held())
        runners.submit(jobs.held())
        await _settle()
        assert len(set(jobs.tasks)) == 2 and len(jobs.scopes) == 2
        jobs.scopes[0].cancel()
        await _settle()
        assert jobs.cancelled == 1  # the other job goes on
        assert runners.parked == 0  # the cancelled runner left, it did not park
        jobs.release.set()
        await _settle()
        assert runners.parked == 1  # the other one parked after its job
        runners.submit(jobs.quick())
        await _settle()
        assert jobs.tasks[-1] == jobs.tasks[1]  # and took the next one
        runners.close()
    assert jobs.cancelled == 1
