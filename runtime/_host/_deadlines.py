"""Runs' wall-clock deadlines, kept by one task of the runtime instead of a scope per run.

Entering an anyio cancel scope with a deadline costs a run tens of
microseconds when the host's caches are cold (a run's first step after an
idle pause), several percent of a whole hand-off. A runtime used as an async
context manager keeps its runs' deadlines in one heap instead, watched by one
task that sleeps until the earliest: a run pushes an entry and, when it ends,
marks it done. Entries of runs that ended are dropped as they come up, so a
steady stream of runs wakes that task about once per timeout, not per run.

An entry that comes due is *expired*: its callback ends its run (see
``_session``, which then ends every wait of the run without a cancel scope).
When the task stops (the runtime's block ends), every entry still watched is
expired with ``closing=True``: no run is ever left without its deadline.
Deadlines are :func:`time.monotonic` times, and the keeper sleeps for the time
left: that clock is cheap to read (anyio's is not, with cold caches) and
whatever the event loop's own clock, only durations cross over to it.
"""

from __future__ import annotations

import heapq
import itertools
import math
import time
from collections.abc import Callable

import anyio
import anyio.abc

__all__ = ["Deadlines", "Expire", "Watch"]

#: What a watch calls: with ``False`` at its deadline, with ``True`` when the
#: keeper stops first. It must not raise (it runs in the keeper's task).
Expire = Callable[[bool], None]


class Watch:
    """One run's deadline (see :meth:`Deadlines.watch`)."""

    __slots__ = ("deadline", "expire", "order")

    def __init__(self, deadline: float, order: int, expire: Expire) -> None:
        self.deadline = deadline
        self.order = order
        self.expire: Expire | None = expire

    def __lt__(self, other: Watch) -> bool:
        return (self.deadline, self.order) < (other.deadline, other.order)

    @property
    def settled(self) -> bool:
        return self.expire is None


class Deadlines:
    """Deadlines watched by :meth:`keep`, a task of the runtime's own task group."""

    __slots__ = ("_armed", "_heap", "_live", "_order", "_running", "_wake")

    def __init__(self) -> None:
        self._heap: list[Watch] = []
        self._live = 0  # watches in the heap not settled
        self._order = itertools.count()
        self._armed = math.inf  # the deadline the keeper sleeps until
        self._wake: anyio.Event | None = None
        self._running = False

    @property
    def running(self) -> bool:
        """Whether :meth:`watch` takes deadlines (the keeper runs)."""
        return self._running

    def __len__(self) -> int:
        """Entries in the heap, done ones included."""
        return len(self._heap)

    def watch(self, deadline: float, expire: Expire) -> Watch | None:
        """Call ``expire(False)`` at ``deadline`` (a :func:`time.monotonic` time)
        unless :meth:`done` is called first.

        ``None`` when the keeper does not run: the caller keeps its own deadline.
        """
        if not self._running:
            return None
        heap = self._heap
        if len(heap) > 2 * self._live + 64:
            # Mostly runs that ended long before their deadline: drop them now.
            heap[:] = [entry for entry in heap if not entry.settled]
            heapq.heapify(heap)
            self._live = len(heap)
        entry = Watch(deadline, next(self._order), expire)
        heapq.heappush(heap, entry)
        self._live += 1
        if deadline < self._armed and self._wake is not None:
            self._armed = deadline
            self._wake.set()
        return entry

    async def keep(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Expire watches as they come due; runs until cancelled."""
        heap = self._heap
        self._running = True
        try:
            task_status.started()
            while True:
                now = time.monotonic()
                while heap and (heap[0].settled or heap[0].deadline <= now):
                    self._expire(heapq.heappop(heap), closing=False)
                self._wake = wake = anyio.Event()
                self._armed = heap[0].deadline if heap else math.inf
                with anyio.move_on_after(self._armed - now):
                    await wake.wait()
        finally:
            self._running = False
            self._wake = None
            while heap:
                self._expire(heap.pop(), closing=True)

    def done(self, entry: Watch) -> None:
        """The run of ``entry`` has ended: it never expires (and is let go of)."""
        if entry.expire is not None:
            entry.expire = None
            self._live -= 1

    def _expire(self, entry: Watch, *, closing: bool) -> None:
        expire = entry.expire
        if expire is not None:
            self.done(entry)
            expire(closing)
