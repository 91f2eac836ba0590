"""Tasks that answer a run's tool calls, parked between jobs and reused.

Starting a task costs anyio several times what waking a parked one does (a
task handle, two events and a cancel scope each). A burst of concurrent calls
(``asyncio.gather`` over a hundred tools) therefore wakes parked tasks instead
of starting new ones. A runtime used as an async context manager keeps one
:class:`CallRunners` in its own task group for all its runs; a run without one
gets its own, in a task group on the run's stack that closes with the run.

Each call runs in a fresh copy of the run's caller's context, as in a task the
caller started, through :class:`InContext`. A job runs under its runner's
cancel scope, which the run cancels if it ends with the job still going (that
runner then leaves): a run settles its calls just as a task group of its own
would.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import Any, Final, Generic, TypeVar

import anyio
import anyio.abc

from ._deadlines import Deadlines

__all__ = ["RUNNERS_KEPT", "CallRunners", "InContext", "Job", "enter_services"]

#: Call-answering tasks a runtime keeps parked across runs (a task each, waiting
#: on an event): enough for a program's usual fan-out; a wider one starts more,
#: and those beyond this leave once their call is answered.
RUNNERS_KEPT: Final = 128

T = TypeVar("T")

#: Work for a runner, given the runner's cancel scope: cancelling that scope
#: cancels the job (and the runner then leaves). A job handles its own
#: failures. It may never start (its runner cancelled first, when the runtime
#: closes): whoever waits for jobs waits only for those that started.
Job = Callable[[anyio.CancelScope], Awaitable[None]]


class InContext(Generic[T]):
    """Await the rest of ``coro`` with each of its steps run in ``context``.

    What a task created in ``context`` would see (``contextvars`` set by the
    coroutine stay in ``context``), without starting that task: the awaiting
    task drives the coroutine, forwarding what it waits on and what is thrown
    into it (cancellation included).

    The caller runs the first step itself (``context.run(coro.send, None)``):
    a coroutine that finishes there (a quick tool) needs no more than that.
    ``signal`` is what that step yielded.
    """

    __slots__ = ("_context", "_coro", "_signal")

    def __init__(
        self, coro: Coroutine[Any, Any, T], context: contextvars.Context, signal: Any
    ) -> None:
        self._coro = coro
        self._context = context
        self._signal = signal

    def __await__(self) -> Generator[Any, Any, T]:
        coro = self._coro
        run = self._context.run
        signal = self._signal
        try:
            while True:
                try:
                    value = yield signal
                except GeneratorExit:
                    run(coro.close)
                    raise
                except BaseException as exc:  # thrown in by the event loop: passed on
                    signal = run(coro.throw, exc)
                else:
                    signal = run(coro.send, value)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]


class _Parked:
    __slots__ = ("event", "job")

    def __init__(self) -> None:
        self.event = anyio.Event()
        self.job: Job | None = None


class CallRunners:
    """Runner tasks in ``group``; up to ``keep`` of them stay parked between jobs.

    :meth:`close` sends the parked runners away (and any that park later);
    then :meth:`submit` refuses.
    """

    __slots__ = ("_closed", "_group", "_keep", "_parked")

    def __init__(self, group: anyio.abc.TaskGroup, *, keep: int) -> None:
        self._group = group
        self._keep = keep
        self._parked: list[_Parked] = []
        self._closed = False

    @property
    def bound(self) -> bool:
        """Whether jobs can be submitted (not closed)."""
        return not self._closed

    @property
    def parked(self) -> int:
        """How many runners wait for a job."""
        return len(self._parked)

    def submit(self, job: Job) -> None:
        """Run ``job`` in a parked runner, or in a new one.

        Raises:
            RuntimeError: closed (see :attr:`bound`), or the task group no longer runs tasks.
        """
        if self._parked:
            parked = self._parked.pop()
            parked.job = job
            parked.event.set()
            return
        if self._closed:
            raise RuntimeError("the call runners are closed")
        self._group.start_soon(self._serve, job, name="ptc-call")

    def close(self) -> None:
        """Let every parked runner leave; from now on runners leave after their job."""
        self._closed = True
        while self._parked:
            self._parked.pop().event.set()  # no job: leave

    async def _serve(self, job: Job) -> None:
        # One scope for the runner's life, not one per job: a job is cancelled
        # by cancelling it (rarely: a run that ends with calls in flight).
        with anyio.CancelScope() as scope:
            while True:
                await job(scope)
                del job  # a parked runner holds on to nothing of its last run
                if scope.cancel_called or self._closed or len(self._parked) >= self._keep:
                    return
                parked = _Parked()
                self._parked.append(parked)
                try:
                    await parked.event.wait()
                except BaseException:  # cancelled (the runtime closes)
                    if not parked.event.is_set():
                        self._parked.remove(parked)
                    raise
                if parked.job is None:
                    return
                job = parked.job


async def enter_services(
    stack: contextlib.AsyncExitStack,
) -> tuple[anyio.abc.TaskGroup, CallRunners, Deadlines]:
    """A task group on ``stack`` for a runtime's own tasks, with its call runners
    and the keeper of its runs' deadlines (see ``_deadlines``).

    Leaving ``stack`` sends the parked runners away, cancels the group's tasks
    (runs still waiting on a call, or still watched by the keeper, end as
    ``crashed``) and waits for them.
    """
    group = await stack.enter_async_context(anyio.create_task_group())
    stack.callback(group.cancel_scope.cancel)
    runners = CallRunners(group, keep=RUNNERS_KEPT)
    stack.callback(runners.close)  # (first: parked runners leave before the group waits)
    deadlines = Deadlines()
    await group.start(deadlines.keep, name="ptc-deadlines")
    return group, runners, deadlines
