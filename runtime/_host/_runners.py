"""Tasks that answer one run's tool calls, parked between calls and reused within the run.

Kept over a task per call because it pays: starting an anyio task costs about
3.5x waking a parked one (``bench_overhead.py``'s micro-figures: 82 µs against
22 µs here, on a busy 2-core machine), and a program's calls come in long
sequences and bursts (``asyncio.gather`` over a hundred tools). The runners
are tasks of the run's own task group: they end with the run, which waits
for them (nothing of a run outlives it); or, with ``Runtime.run(call_group=)``,
shielded tasks of the caller's group, each job ended by its run (see
``_session``). The executor's bridge runs each sub-call in the runner that
answers it (see ``ptc._bridge``).

Each call runs in a fresh copy of the run's caller's context, as in a task the
caller started, through :class:`InContext`: a reused task would otherwise
carry one call's ``contextvars`` into the next.
"""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import Any, Final, Generic, TypeVar

import anyio
import anyio.abc

__all__ = ["RUNNERS_KEPT", "CallRunners", "InContext", "Job"]

#: Call-answering tasks a run keeps parked (a task each, waiting on an event):
#: enough for sequences of calls and small bursts. Those beyond it leave once
#: their call is answered, while the program runs on: every parked one is woken
#: to leave when the run ends, after its outcome is known (100 parked cost a
#: 100 x 50 ms fan-out ~15%, bench_runtime.py (e), against 8).
RUNNERS_KEPT: Final = 8

T = TypeVar("T")

#: Work for a runner, given the runner's cancel scope: cancelling it ends the
#: job, and the runner with it (a scope per job would cost each call one more).
#: A job handles its own failures. It may never start (the run's task group
#: cancelled first): whoever waits for jobs waits for the group.
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
    """Runner tasks in ``group`` (the run's); up to ``keep`` of them stay parked between jobs.

    :meth:`close` sends the parked runners away (and any that park later);
    then :meth:`submit` refuses.

    With ``shield``, a runner is never cancelled from outside, parked or not:
    a job submitted always runs to its end, and the runners leave only once
    :meth:`close` is called (which whoever waits for ``group`` must do).
    """

    __slots__ = ("_closed", "_group", "_keep", "_parked", "_shield")

    def __init__(self, group: anyio.abc.TaskGroup, *, keep: int, shield: bool = False) -> None:
        self._group = group
        self._keep = keep
        self._shield = shield
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
        with anyio.CancelScope(shield=self._shield) as scope:  # (once per runner, not per job)
            while True:
                await job(scope)
                del job  # a parked runner holds on to nothing of its last call
                if self._closed or len(self._parked) >= self._keep:
                    return
                parked = _Parked()
                self._parked.append(parked)
                try:
                    await parked.event.wait()
                except BaseException:  # cancelled (the run's group)
                    if not parked.event.is_set():
                        self._parked.remove(parked)
                    raise
                if parked.job is None:
                    return
                job = parked.job
