"""Event delivery: every event reaches the sink once, in order, away from the event loop.

The sink is the caller's code and may be slow (it writes a file or a socket)
or raise. Called on the event loop, a slow sink would hold every run past its
wall clock, since nothing can interrupt a synchronous call; so events go
through a queue to a thread of the executor's own, which calls the sink one
event at a time, in the order they were published, each in a copy of the
context that published it.

Events are delivered in batches, as tracing exporters do, so the event loop
pays a lock and an append per event rather than a thread switch: the thread
takes the queue when an outer call waits for its events, when
:data:`BATCH_EVENTS` are waiting, or :data:`BATCH_DELAY_SECONDS` after the
oldest of them, whichever comes first. It starts with the first event and ends
after :data:`LINGER_SECONDS` without one, or when the executor closes.

Whatever the sink raises is logged and contained, ``BaseException`` included:
the sink runs in the delivery thread, away from every run, so there is no call
it could stop, and the next event must still be delivered. (Cancellation and
interrupts never reach that thread.)

An outer call waits for its own events (:meth:`EventDelivery.flush`) before it
returns, but at most :data:`FLUSH_GRACE_SECONDS`: a sink that is behind gets
the rest later, still in order and exactly once.
"""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from collections import deque
from typing import Any, Final

import anyio

from ._events import EventSink

__all__ = [
    "BATCH_DELAY_SECONDS",
    "BATCH_EVENTS",
    "FLUSH_GRACE_SECONDS",
    "LINGER_SECONDS",
    "EventDelivery",
]

logger = logging.getLogger("ptc")

#: How long an outer call waits, once its result is ready, for the sink to take its events.
FLUSH_GRACE_SECONDS: Final = 0.1
#: Events that make the delivery thread take the queue at once.
BATCH_EVENTS: Final = 256
#: The longest an event waits in the queue while nobody waits for it.
BATCH_DELAY_SECONDS: Final = 0.05
#: How long the delivery thread waits for another event before it ends.
LINGER_SECONDS: Final = 1.0

_Item = tuple[EventSink, dict[str, Any], contextvars.Context]


class EventDelivery:
    """One executor's ordered, exactly-once event queue and the thread that drains it."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._queue: deque[_Item] = deque()
        self._oldest = 0.0  # when the oldest queued event was published (monotonic)
        self._published = 0
        self._delivered = 0
        self._flushing: list[int] = []  # what each waiter waits for (it wants the queue taken now)
        self._soonest = 0  # the least of them: reaching it wakes the waiters
        self._thread: threading.Thread | None = None
        self._closing = False
        # Waiting for the sink costs a thread while it waits: a few are plenty.
        self._waiters = anyio.CapacityLimiter(8)

    def publish(self, sink: EventSink, event: dict[str, Any]) -> int:
        """Queue ``event`` for ``sink``; returns its sequence number (never blocks, never raises)."""
        context = contextvars.copy_context()
        with self._lock:
            self._published += 1
            self._queue.append((sink, event, context))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._deliver, name="ptc event delivery", daemon=True
                )
                self._thread.start()
            if len(self._queue) == 1:
                self._oldest = time.monotonic()
                self._lock.notify_all()  # the thread now waits for the batch's delay
            elif len(self._queue) == BATCH_EVENTS:
                self._lock.notify_all()
            return self._published

    @property
    def published(self) -> int:
        return self._published

    def delivered(self, upto: int) -> bool:
        """Whether every event up to sequence number ``upto`` has been delivered."""
        return self._delivered >= upto

    async def flush(self, upto: int, within: float | None) -> bool:
        """Wait until events up to ``upto`` are delivered, at most ``within`` seconds.

        Returns whether they were. Cancelling the wait leaves delivery going on.
        """
        if self._delivered >= upto:
            return True
        if within is not None and within <= 0:
            return False

        def wait() -> bool:
            with self._lock:
                self._flushing.append(upto)
                self._soonest = min(self._flushing)
                self._lock.notify_all()
                try:
                    return self._lock.wait_for(lambda: self._delivered >= upto, within)
                finally:
                    self._flushing.remove(upto)
                    self._soonest = min(self._flushing, default=0)

        with anyio.move_on_after(within):
            return await anyio.to_thread.run_sync(
                wait, abandon_on_cancel=True, limiter=self._waiters
            )
        return self._delivered >= upto

    async def aclose(self) -> None:
        """Deliver every event published so far, then let the thread end."""
        try:
            await self.flush(self._published, None)
        finally:
            with self._lock:
                self._closing = True
                self._lock.notify_all()

    def _deliver(self) -> None:
        while True:
            with self._lock:
                batch = self._take()
                if batch is None:
                    return
            for sink, event, context in batch:
                try:
                    context.run(sink, event)
                except BaseException:  # contained, whatever it is: see the module docstring
                    logger.exception("the event sink raised on %s", event.get("type"))
                with self._lock:
                    self._delivered += 1
                    if self._flushing and self._delivered >= self._soonest:
                        self._lock.notify_all()

    def _take(self) -> list[_Item] | None:
        """(Holding the lock.) Wait for a batch to deliver; ``None``: the thread ends."""
        while True:
            if self._queue:
                due = self._oldest + BATCH_DELAY_SECONDS - time.monotonic()
                if self._flushing or self._closing or due <= 0 or len(self._queue) >= BATCH_EVENTS:
                    batch = list(self._queue)
                    self._queue.clear()
                    return batch
                self._lock.wait(due)
            else:
                idle = self._closing or not self._lock.wait(LINGER_SECONDS)
                if idle and not self._queue:
                    self._thread = None
                    self._closing = False
                    return None
