"""Polling for a tool's answer, on both ends, before sleeping in the kernel.

The worker's :class:`ReplySelector` and the host's :class:`FrameChannel` poll
for a moment after a write that expects a reply; these tests pin down what the
poll may and may not change: what is read, when it falls back to the plain
wait, and how the wait's timeout is kept. Clocks are faked where time matters.
"""

from __future__ import annotations

import selectors
import socket
import struct
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from runtime._host import _channel
from runtime._host._channel import FrameChannel
from runtime._worker import _bootstrap
from runtime._worker._bootstrap import ReplySelector, WorkerSettings, _ChannelRun


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    ours, theirs = socket.socketpair()
    yield ours, theirs
    ours.close()
    theirs.close()


class FakeClock:
    """``time.perf_counter`` that moves by ``step`` each time it is read."""

    def __init__(self, step: float) -> None:
        self.now = 1000.0
        self.step = step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def _record_selects(monkeypatch: pytest.MonkeyPatch) -> list[float | None]:
    """The timeouts the selector's underlying ``select`` is called with."""
    timeouts: list[float | None] = []
    base: Callable[..., Any] = selectors.DefaultSelector.select

    def select(self: selectors.BaseSelector, timeout: float | None = None) -> Any:
        timeouts.append(timeout)
        return base(self, timeout)

    monkeypatch.setattr(selectors.DefaultSelector, "select", select)
    return timeouts


def _frame(payload: bytes) -> bytes:
    return struct.pack(">I", len(payload)) + payload


# --------------------------------------------------------------------------- worker


@pytest.fixture
def watching(
    pair: tuple[socket.socket, socket.socket],
) -> Iterator[tuple[ReplySelector, selectors.SelectorKey]]:
    """A selector watching our end of ``pair`` for reading."""
    with ReplySelector() as selector:
        yield selector, selector.register(pair[0], selectors.EVENT_READ)


def test_a_selector_told_of_nothing_waits_as_usual(
    monkeypatch: pytest.MonkeyPatch, watching: tuple[ReplySelector, selectors.SelectorKey]
) -> None:
    selector, _ = watching
    timeouts = _record_selects(monkeypatch)
    assert selector.select(0.001) == []
    assert timeouts == [0.001]


def test_after_a_call_the_selector_polls_then_waits_the_rest_of_the_timeout(
    monkeypatch: pytest.MonkeyPatch, watching: tuple[ReplySelector, selectors.SelectorKey]
) -> None:
    selector, _ = watching
    monkeypatch.setattr(_bootstrap, "_clock", FakeClock(step=10e-6))
    timeouts = _record_selects(monkeypatch)
    selector.expect_reply()
    assert selector.select(0.001) == []
    polls, wait = timeouts[:-1], timeouts[-1]
    # 100 µs of polling on a clock that moves 10 µs a read: several polls.
    assert polls and set(polls) == {0}
    assert len(polls) <= _bootstrap.REPLY_SPIN / 10e-6
    # The blocking wait gets what is left of the timeout, not all of it again.
    assert wait is not None and 0.001 - _bootstrap.REPLY_SPIN - 30e-6 < wait < 0.001


def test_polling_stops_at_a_timer_due_sooner(
    monkeypatch: pytest.MonkeyPatch, watching: tuple[ReplySelector, selectors.SelectorKey]
) -> None:
    selector, _ = watching
    monkeypatch.setattr(_bootstrap, "_clock", FakeClock(step=10e-6))
    timeouts = _record_selects(monkeypatch)
    selector.expect_reply()
    assert selector.select(25e-6) == []
    assert 1 <= len(timeouts) - 1 <= 3  # a poll or two, then the timer is due
    assert timeouts[-1] == 0.0


def test_an_answer_already_there_ends_the_poll_without_a_wait(
    monkeypatch: pytest.MonkeyPatch,
    pair: tuple[socket.socket, socket.socket],
    watching: tuple[ReplySelector, selectors.SelectorKey],
) -> None:
    selector, key = watching
    timeouts = _record_selects(monkeypatch)
    pair[1].sendall(b"x")
    selector.expect_reply()
    assert selector.select(None) == [(key, selectors.EVENT_READ)]
    assert timeouts == [0]


def test_non_blocking_selects_are_left_alone(
    monkeypatch: pytest.MonkeyPatch, watching: tuple[ReplySelector, selectors.SelectorKey]
) -> None:
    selector, _ = watching
    timeouts = _record_selects(monkeypatch)
    selector.expect_reply()
    assert selector.select(0) == []
    assert timeouts == [0]


def test_after_a_poll_that_came_to_nothing_the_next_calls_wait_without(
    monkeypatch: pytest.MonkeyPatch, watching: tuple[ReplySelector, selectors.SelectorKey]
) -> None:
    selector, _ = watching
    monkeypatch.setattr(_bootstrap, "_clock", FakeClock(step=10e-6))
    timeouts = _record_selects(monkeypatch)

    def call_and_wait() -> list[float | None]:
        timeouts.clear()
        selector.expect_reply()
        assert selector.select(0.001) == []
        return list(timeouts)

    assert len(call_and_wait()) > 1  # polled, in vain: the tool is slow
    for _ in range(_bootstrap.REPLY_SPIN_SKIP):
        assert call_and_wait() == [0.001]  # no polling
    assert len(call_and_wait()) > 1  # and then it tries again


def test_calls_sent_open_the_reply_window_and_logs_do_not(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    ours, _ = pair
    loop, selector = _bootstrap.new_worker_loop()
    try:
        run = _ChannelRun(
            ours, loop, WorkerSettings(allowed_modules=None, restricted=False), selector
        )
        run.max_calls = run.max_message = 1 << 20
        run.log("a line")
        assert selector.spin_until == 0.0
        run.call("t", {"q": 1})  # sent at once
        first = selector.spin_until
        assert first > 0.0
        run.call("t", {"q": 2})  # batched: sent with the loop's next turn
        assert selector.spin_until == first
        run.flush()
        assert selector.spin_until >= first
        for future, _name in run.pending.values():
            future.cancel()
    finally:
        loop.close()
        selector.close()


# --------------------------------------------------------------------------- host


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _count_waits(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    waits: list[object] = []
    wait_readable = anyio.wait_readable

    async def counting(obj: Any) -> None:
        waits.append(obj)
        await wait_readable(obj)

    monkeypatch.setattr(anyio, "wait_readable", counting)  # (the module _channel uses)
    return waits


async def _reply_after_a_turn(peer: socket.socket, data: bytes) -> None:
    await anyio.lowlevel.checkpoint()
    peer.sendall(data)


@pytest.mark.anyio
async def test_an_answer_right_after_a_write_is_read_by_polling(
    monkeypatch: pytest.MonkeyPatch, pair: tuple[socket.socket, socket.socket]
) -> None:
    ours, theirs = pair
    monkeypatch.setattr(_channel, "REPLY_SPIN", 60.0)  # no clock in the way
    waits = _count_waits(monkeypatch)
    channel = FrameChannel(ours, 1 << 20)
    await channel.send(_frame(b"answer"))
    async with anyio.create_task_group() as group:
        group.start_soon(_reply_after_a_turn, theirs, _frame(b"call one") + _frame(b"call two"))
        assert await channel.receive() == b"call one"
    assert await channel.receive() == b"call two"
    assert theirs.recv(64) == _frame(b"answer")
    assert waits == []  # read while polling, not after an event-loop wait


@pytest.mark.anyio
async def test_a_read_long_after_the_last_write_waits_for_the_loop(
    monkeypatch: pytest.MonkeyPatch, pair: tuple[socket.socket, socket.socket]
) -> None:
    ours, theirs = pair
    monkeypatch.setattr(_channel, "REPLY_SPIN", 0.0)
    waits = _count_waits(monkeypatch)
    channel = FrameChannel(ours, 1 << 20)
    await channel.send(_frame(b"answer"))
    async with anyio.create_task_group() as group:
        group.start_soon(_reply_after_a_turn, theirs, _frame(b"call"))
        assert await channel.receive() == b"call"
    assert waits == [ours]


@pytest.mark.anyio
async def test_the_worker_leaving_while_the_host_polls_is_seen(
    monkeypatch: pytest.MonkeyPatch, pair: tuple[socket.socket, socket.socket]
) -> None:
    ours, theirs = pair
    monkeypatch.setattr(_channel, "REPLY_SPIN", 60.0)
    channel = FrameChannel(ours, 1 << 20)
    await channel.send(_frame(b"answer"))

    async def leave() -> None:
        await anyio.lowlevel.checkpoint()
        theirs.sendall(_frame(b"last"))
        theirs.shutdown(socket.SHUT_WR)

    async with anyio.create_task_group() as group:
        group.start_soon(leave)
        assert await channel.receive() == b"last"
        assert await channel.receive() is None


@pytest.mark.anyio
async def test_a_polling_read_can_be_cancelled_and_loses_nothing(
    monkeypatch: pytest.MonkeyPatch, pair: tuple[socket.socket, socket.socket]
) -> None:
    ours, theirs = pair
    monkeypatch.setattr(_channel, "REPLY_SPIN", 60.0)
    channel = FrameChannel(ours, 1 << 20)
    await channel.send(_frame(b"answer"))
    with anyio.CancelScope() as scope:
        scope.cancel()
        await channel.receive()
        pytest.fail("the cancelled read returned")
    assert scope.cancelled_caught
    theirs.sendall(_frame(b"call"))
    assert await channel.receive() == b"call"


@pytest.mark.anyio
async def test_after_a_read_that_polled_in_vain_the_next_reads_do_not_poll(
    monkeypatch: pytest.MonkeyPatch, pair: tuple[socket.socket, socket.socket]
) -> None:
    ours, theirs = pair
    clock = FakeClock(step=10e-6)
    monkeypatch.setattr(_channel, "_clock", clock)
    waits = _count_waits(monkeypatch)
    channel = FrameChannel(ours, 1 << 20)

    async def exchange() -> int:
        """Write an answer; read a call that comes only once the read waits.
        Returns how often the read looked at the clock (it polls by it)."""
        await channel.send(_frame(b"answer"))
        theirs.recv(64)
        waited = len(waits)
        before = clock.now

        async def reply_once_waited() -> None:
            while len(waits) == waited:
                await anyio.lowlevel.checkpoint()
            theirs.sendall(_frame(b"call"))

        async with anyio.create_task_group() as group:
            group.start_soon(reply_once_waited)
            assert await channel.receive() == b"call"
        return round((clock.now - before) / clock.step)

    assert await exchange() > 2  # polled for the window, then waited
    for _ in range(_channel.REPLY_SPIN_SKIP):
        assert await exchange() == 0  # waited at once
    assert await exchange() > 2
