"""Fixtures shared by the runtime tests."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import anyio
import orjson
import pytest

from runtime._base import ToolAnswer
from runtime._host import _pool
from runtime._worker._protocol import FrameDecoder
from runtime.testing import ToolBox


@dataclass(frozen=True)
class AskedWorker:
    """One request the host sent its zygote for a worker."""

    start_bytes: int
    prewarm: bool
    after: float = 0.0


@pytest.fixture
def asked_workers(monkeypatch: pytest.MonkeyPatch) -> list[AskedWorker]:
    """Every worker the pools ask their zygote for from now on, in order (still sent)."""
    asked: list[AskedWorker] = []
    request = _pool._ZygoteProcess.request

    def recording(
        self: _pool._ZygoteProcess,
        request_id: int,
        key: _pool.SandboxKey,
        start_bytes: int = 0,
        *,
        prewarm: bool = True,
        after: float = 0.0,
    ) -> None:
        asked.append(AskedWorker(start_bytes, prewarm, after))
        request(self, request_id, key, start_bytes, prewarm=prewarm, after=after)

    monkeypatch.setattr(_pool._ZygoteProcess, "request", recording)
    return asked


class MeetingToolBox(ToolBox):
    """A :class:`ToolBox` whose ``sleep`` first waits until ``count`` calls are in flight.

    Then ``max_in_flight`` says whether the runs overlapped, however slowly
    the machine forks their workers: were one run to wait for another to
    end, the meeting would stay short of ``count`` until ``within`` seconds
    pass. The calls meet once; after that each ``sleep`` sleeps at once, and
    its sleep keeps the calls overlapping, so that a bound on the workers
    that did not hold shows as more calls in flight than it allows.
    """

    def __init__(self, count: int, within: float = 30.0) -> None:
        super().__init__()
        self._count = count
        self._within = within
        self._met = anyio.Event()

    async def _answer(self, name: str, args: Any) -> ToolAnswer:
        if name == "sleep":
            if self.in_flight >= self._count:
                self._met.set()
            with anyio.move_on_after(self._within):
                await self._met.wait()
        return await super()._answer(name, args)


def greeting_of(worker: _pool.Worker) -> dict[str, Any]:
    """A freshly forked worker's first frame, read off its channel (30 s at most)."""
    worker.sock.settimeout(30)
    decoder = FrameDecoder(1 << 16)
    payloads: list[bytes] = []
    while not payloads:
        payloads = decoder.feed(worker.sock.recv(4096))
    frame: dict[str, Any] = orjson.loads(payloads[0])
    return frame


def children_of(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` now (from ``/proc``: a gone one is skipped)."""
    children = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as file:
                    stat = file.read()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                children.append(int(entry))
    return children


async def collected_spares(pool: _pool.WorkerPool, seconds: float = 10) -> int:
    """How many spares ``pool`` holds once every one it asked for has come in.

    A spare's descriptors (its channel and status pipe) reach the host only
    when its reply is collected, so descriptor counts compare at this point.
    """
    with anyio.fail_after(seconds):
        zygote = await pool._ensure_zygote()
        # The pool's own wait: woken by each reply on the zygote's control socket.
        await pool._wait(zygote, lambda: not pool._spare_requests)
    return len(pool._spares)
