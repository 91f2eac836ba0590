"""The keeper of runs' wall-clock deadlines (``runtime._host._deadlines``)."""

from __future__ import annotations

import gc
import time
import weakref
from collections.abc import AsyncIterator

import anyio
import anyio.abc
import pytest

from runtime._host._deadlines import Deadlines, Expire

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Recorder:
    """Expire callbacks that record when (and how) they were called."""

    def __init__(self) -> None:
        self.expired: list[tuple[str, bool, float]] = []
        self.changed = anyio.Event()

    def expire(self, name: str) -> Expire:
        def expire(closing: bool) -> None:
            self.expired.append((name, closing, time.monotonic()))
            self.changed.set()

        return expire

    async def wait_for(self, count: int) -> None:
        with anyio.fail_after(10):
            while len(self.expired) < count:
                self.changed = anyio.Event()
                await self.changed.wait()


@pytest.fixture
async def keeper() -> AsyncIterator[tuple[Deadlines, anyio.abc.TaskGroup]]:
    async with anyio.create_task_group() as group:
        deadlines = Deadlines()
        await group.start(deadlines.keep)
        yield deadlines, group
        group.cancel_scope.cancel()


async def test_no_watch_without_a_keeper() -> None:
    deadlines = Deadlines()
    assert not deadlines.running
    assert deadlines.watch(time.monotonic() + 1, lambda closing: None) is None


async def test_watches_expire_in_deadline_order_and_not_before(
    keeper: tuple[Deadlines, anyio.abc.TaskGroup],
) -> None:
    deadlines, _ = keeper
    record = Recorder()
    now = time.monotonic()
    due = {"c": now + 0.09, "a": now + 0.03, "b": now + 0.06}
    for name, deadline in due.items():
        assert deadlines.watch(deadline, record.expire(name)) is not None
    await record.wait_for(3)
    assert [name for name, _, _ in record.expired] == ["a", "b", "c"]
    for name, closing, when in record.expired:
        assert not closing
        assert when >= due[name]


async def test_a_watch_done_in_time_never_expires(
    keeper: tuple[Deadlines, anyio.abc.TaskGroup],
) -> None:
    deadlines, _ = keeper
    record = Recorder()
    now = time.monotonic()
    early = deadlines.watch(now + 0.02, record.expire("done"))
    assert early is not None
    deadlines.done(early)
    deadlines.watch(now + 0.05, record.expire("due"))
    await record.wait_for(1)
    assert [name for name, _, _ in record.expired] == ["due"]
    deadlines.done(early)  # twice: no effect


async def test_an_earlier_deadline_wakes_a_keeper_sleeping_toward_a_later_one(
    keeper: tuple[Deadlines, anyio.abc.TaskGroup],
) -> None:
    deadlines, _ = keeper
    record = Recorder()
    now = time.monotonic()
    deadlines.watch(now + 3600, record.expire("late"))
    await anyio.lowlevel.checkpoint()  # the keeper now sleeps toward the late one
    deadlines.watch(now + 0.02, record.expire("soon"))
    await record.wait_for(1)
    assert [name for name, _, _ in record.expired] == ["soon"]


async def test_a_keeper_that_stops_expires_what_it_still_watches() -> None:
    record = Recorder()
    async with anyio.create_task_group() as group:
        deadlines = Deadlines()
        await group.start(deadlines.keep)
        now = time.monotonic()
        left = deadlines.watch(now + 3600, record.expire("left"))
        deadlines.watch(now + 3600, record.expire("watched"))
        assert left is not None
        deadlines.done(left)
        group.cancel_scope.cancel()
    assert [(name, closing) for name, closing, _ in record.expired] == [("watched", True)]
    assert not deadlines.running
    assert len(deadlines) == 0


async def test_runs_that_ended_are_neither_kept_nor_held_on_to(
    keeper: tuple[Deadlines, anyio.abc.TaskGroup],
) -> None:
    deadlines, _ = keeper

    class Run:
        def expire(self, closing: bool) -> None:
            raise AssertionError("a run that ended expired")

    run = Run()
    gone = weakref.ref(run)
    far = time.monotonic() + 3600
    for _ in range(1000):
        watch = deadlines.watch(far, run.expire)
        assert watch is not None
        deadlines.done(watch)
    del run
    gc.collect()
    assert gone() is None
    # Ended runs far from their deadline are dropped as new ones come.
    assert len(deadlines) <= 64 + 1
