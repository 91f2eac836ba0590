"""Soak: 2,000 runs back to back leave no extra processes, fds or work directories."""

from __future__ import annotations

import os
from typing import Any

import anyio
import pytest

from runtime import Limits, SubprocessRuntime, ToolAnswer

from .conftest import collected_spares

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

RUNS = 2_000


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _descendants(root: int) -> set[int]:
    """Every live (non-zombie) process below ``root``."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as file:
                fields = file.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            parents[int(entry)] = int(fields[1])
    found: set[int] = set()
    frontier = {root}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


async def _echo(name: str, args: Any) -> ToolAnswer:
    return ToolAnswer.success(args)


@pytest.mark.parametrize("layers", [None, ()], ids=["layers-on", "layers-off"])
async def test_two_thousand_runs_leak_nothing(layers: Any) -> None:
    spares = 2
    backend = SubprocessRuntime(layers=layers, spares=spares)
    try:
        await backend.start()
        zygote = backend._pool.zygote_pid
        assert zygote is not None
        spares_before = await collected_spares(backend._pool)
        fds_before = _open_fds()
        own_children = _descendants(os.getpid())
        for index in range(RUNS):
            if index % 100 == 99:  # now and then a run that the host has to kill
                outcome = await backend.run(
                    "while True:\n    pass",
                    tool_names=[],
                    call_tool=_echo,
                    limits=Limits(timeout=0.05),
                )
                assert outcome.kind == "timeout", outcome
                continue
            outcome = await backend.run(
                f"r = await tools.echo({{'i': {index}}})\nprint(r)\nreturn r['i']",
                tool_names=["echo"],
                call_tool=_echo,
            )
            assert outcome.result == index, outcome
        assert backend._pool.zygote_pid == zygote  # never restarted

        # The zygote reaps asynchronously: give it a moment, then only the spares
        # remain, one process each (a worker is its namespace's init): up to
        # twice ``spares`` after runs back to back (see WorkerPool), each with a
        # channel and a status pipe in this process.
        held = await collected_spares(backend._pool)
        assert spares_before == spares and spares <= held <= 2 * spares
        workdirs = os.path.join(backend._pool._zygote.tmp if backend._pool._zygote else "", "")
        with anyio.fail_after(30):
            while len(_descendants(zygote)) > held or len(os.listdir(workdirs)) > held:  # noqa: ASYNC110
                await anyio.sleep(0.05)
        assert _open_fds() <= fds_before + 2 * (held - spares)
        await backend.aclose()
        assert _descendants(os.getpid()) <= own_children
        assert not os.path.exists(workdirs)  # noqa: ASYNC240
    finally:
        await backend.aclose()  # (a failed check above leaves nothing behind)
