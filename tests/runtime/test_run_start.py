"""A run's start on the CPython worker: the tool names in a frame of their own, room made ahead.

The host sends the packed tool names after the run frame, not in it; a spare
reads the start into a buffer it touched while it waited, as big as the pool
expects from the last runs' starts. Whatever the room, a program sees exactly
the names sent for its own run.
"""

from __future__ import annotations

import asyncio
import linecache
import marshal
import socket
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import orjson
import pytest

from runtime import SubprocessRuntime, ToolAnswer
from runtime._host import _pool
from runtime._worker import _bootstrap
from runtime._worker._bootstrap import WorkerSettings, _ChannelRun, start_room
from runtime._worker._program import PROGRAM_FILENAME, pack_names, run_frame
from runtime._worker._protocol import HEADER, encode_frame

from .conftest import AskedWorker, greeting_of

pytestmark = pytest.mark.anyio

# The packed names of a large set take far more than a spare's smallest room.
MANY = [f"tool_{index:05d}" for index in range(5_000)]
FEW = ["alpha", "beta", "git.log", "git.status"]
SEEN = "return {'count': len(tools), 'names': list(tools), 'probe': 'tool_00042' in tools}"


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def shared() -> AsyncIterator[SubprocessRuntime]:
    """One runtime (every layer on) for runs with different sets of tool names."""
    async with SubprocessRuntime(spares=2) as backend:
        yield backend


async def _unused(name: str, args: Any) -> ToolAnswer:
    raise AssertionError("no tool is called")


async def _seen(backend: SubprocessRuntime, names: list[str]) -> dict[str, Any]:
    outcome = await backend.run(SEEN, tool_names=names, call_tool=_unused)
    assert outcome.ok, outcome
    seen: dict[str, Any] = outcome.result
    return seen


# --------------------------------------------------------------------------- in the worker


def _start(code: str, names: list[str], *, compiled: bool) -> bytes:
    packed = pack_names(sorted(names)).encode()
    frame = run_frame(
        code,
        None,
        max_output_bytes=1 << 20,
        max_tool_calls=10,
        max_message_bytes=1 << 20,
        compiled=compiled,
    )
    data = encode_frame(frame) + HEADER.pack(len(packed)) + packed
    if compiled:
        program = marshal.dumps(_bootstrap.compile_program(code))
        data += HEADER.pack(len(program)) + program
    return data


@pytest.fixture
def channel(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[socket.socket, _ChannelRun]]:
    """A worker's run on one end of a socket pair (the test writes the host's end)."""
    ours, host = socket.socketpair()
    loop = asyncio.new_event_loop()
    # A run's setup takes the output streams: put back as the test ends.
    monkeypatch.setattr(sys, "stdout", sys.stdout)
    monkeypatch.setattr(sys, "stderr", sys.stderr)
    run = _ChannelRun(ours, loop, WorkerSettings(allowed_modules=None, restricted=False))
    run.final = False  # the program's return must not end the test's process
    loop.add_reader(ours.fileno(), run.on_readable)  # (as the worker's loop reads answers)
    try:
        yield host, run
    finally:
        linecache.cache.pop(PROGRAM_FILENAME, None)
        loop.close()
        ours.close()
        host.close()


@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.parametrize("room", [1, 4096, 1 << 20])
def test_the_start_is_read_whole_whatever_the_room(
    channel: tuple[socket.socket, _ChannelRun], compiled: bool, room: int
) -> None:
    # A room smaller than the names grows to take them; what follows the
    # start (an answer, here) is read with it into a large room, and by the
    # loop otherwise.
    host, run = channel
    names = MANY[:2_000] + FEW
    future = run.loop.create_future()
    run.pending[1] = (future, "alpha")
    answer = encode_frame({"type": "answer", "id": 1, "ok": True, "value": 7})
    host.sendall(_start("return sorted(tools)[:2], len(tools)", names, compiled=compiled) + answer)
    run.read_start(bytearray(room))
    assert run.setup_error is None and run.task is not None
    assert run.loop.run_until_complete(run.task) == (["alpha", "beta"], len(names))
    assert run.loop.run_until_complete(asyncio.wait_for(future, 10)) == 7


def test_the_start_is_read_as_it_comes(channel: tuple[socket.socket, _ChannelRun]) -> None:
    # In pieces (the host writes what the socket does not take later on).
    host, run = channel
    data = _start("return list(tools)", FEW, compiled=True)

    def dribble() -> None:
        for offset in range(0, len(data), 7):
            host.sendall(data[offset : offset + 7])
            time.sleep(0.001)

    writer = threading.Thread(target=dribble)
    writer.start()
    try:
        run.read_start(bytearray(8))
    finally:
        writer.join()
    assert run.task is not None
    assert run.loop.run_until_complete(run.task) == sorted(FEW)


def test_a_run_frame_with_its_names_in_it_is_read_too(
    channel: tuple[socket.socket, _ChannelRun],
) -> None:
    host, run = channel
    frame = run_frame(
        "return list(tools)",
        pack_names(FEW),
        max_output_bytes=1 << 20,
        max_tool_calls=10,
        max_message_bytes=1 << 20,
    )
    host.sendall(encode_frame(frame))
    run.read_start(bytearray(4096))
    assert run.task is not None
    assert run.loop.run_until_complete(run.task) == FEW


def test_a_start_frame_past_the_bound_is_refused_before_room_is_made_for_it(
    channel: tuple[socket.socket, _ChannelRun],
) -> None:
    host, run = channel
    host.sendall(HEADER.pack((1 << 30) + 1))
    run.read_start(bytearray(4096))
    assert isinstance(run.setup_error, ValueError) and run.task is None


def test_the_room_is_bounded() -> None:
    assert len(start_room(0)) == len(start_room(100)) == _bootstrap._START_BYTES
    assert len(start_room(60_000)) == 60_000
    assert len(start_room(1 << 40)) == _bootstrap._MAX_START_ROOM


# --------------------------------------------------------------------------- through the pool


async def test_each_run_sees_its_own_names_whatever_its_spare_made_room_for(
    shared: SubprocessRuntime,
) -> None:
    # The spares forked after a run with many names make room for as many; a
    # run with few names on one of them sees its few, and the other way round
    # (the first run with many has a spare forked before any such start).
    for _ in range(3):
        many = await _seen(shared, MANY)
        assert many == {"count": len(MANY), "names": MANY, "probe": True}
        few = await _seen(shared, FEW)
        assert few == {"count": len(FEW), "names": sorted(FEW), "probe": False}


async def test_spares_are_asked_for_with_room_for_the_last_starts(
    asked_workers: list[AskedWorker],
) -> None:
    def asked() -> list[int]:
        return [one.start_bytes for one in asked_workers]

    async with SubprocessRuntime(layers=(), spares=1) as backend:
        await _seen(backend, FEW)
        assert max(asked()) < 4096  # nothing large yet
        asked_workers.clear()
        await _seen(backend, MANY)
        packed = len(pack_names(MANY).encode())
        assert asked() and packed < asked()[-1] < packed + 4096  # the names and a little more
        await _seen(backend, FEW)
        assert asked()[-1] == max(asked())  # the largest of the last starts


async def test_a_zygote_takes_no_start_size_but_a_number() -> None:
    # (The host's to send; anything else is no room at all.)
    async with SubprocessRuntime(layers=(), spares=0) as backend:
        pool = backend._pool
        zygote = await pool._ensure_zygote()
        fields = _pool._request_fields(backend._default_key)
        zygote.ctl.send(orjson.dumps({"id": 999, **fields, "start_bytes": "lots"}))
        await pool._wait(zygote, lambda: 999 in pool._replies)
        worker = pool._replies.pop(999)
        assert isinstance(worker, _pool.Worker)
        try:
            assert greeting_of(worker)["type"] == "ready"
        finally:
            worker.kill()
            worker.close()
