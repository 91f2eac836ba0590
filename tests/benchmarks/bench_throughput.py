"""Sustained throughput of the subprocess runtime, next to the fork-plus-unshare ceiling.

Run by hand: ``python tests/benchmarks/bench_throughput.py [--runs N] [--rounds R]``.
Prints medians, measured in the same run:

* the **ceiling**: cores ÷ the time to fork a process that enters the six
  namespaces a worker uses (user, mount, network, IPC, UTS, PID: the flags of
  ``runtime._sandbox._layers._enter_namespaces``) and exits, reaped by its
  parent — the least a fresh, namespaced process per run can cost. Forked
  from this process, an interpreter of about the zygote's size (fork and exit
  cost grow with the pages mapped); the same from a bare ``python -I -S`` is
  printed for reference;
* runs/s of ``return 1`` with strict isolation and every layer (one fresh
  worker per run), back to back from one caller, and from 16 concurrent
  callers (an anyio task group);
* each as a ratio to the ceiling (target: at least 0.45 in both modes);
* for reference, back to back with no OS layer at all (``layers=()``: the same
  fresh worker per run, without namespaces, seccomp or Landlock): how much of
  the gap to the ceiling is the layers' and how much the worker's own;
* 16 concurrent runs that each wait 1 s on a tool, with the default spares
  (target: about 1 s of wall time);
* the machine's CPU time per run (every process and kernel thread, from
  ``/proc/stat``: the host, the zygote, the worker, and the kernel's deferred
  namespace teardown), for the ceiling's fork-unshare-exit and for each mode:
  less noisy than runs/s, and the budget a leaner worker has to meet (at
  0.45 x the ceiling, the cores' time divided by 0.45 x its runs/s).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import statistics
import subprocess
import sys
import time
from typing import Any

import anyio

from runtime import SubprocessRuntime, ToolAnswer
from runtime._sandbox import _namespaces

_FLAGS = (
    _namespaces.CLONE_NEWUSER
    | _namespaces.CLONE_NEWNS
    | _namespaces.CLONE_NEWNET
    | _namespaces.CLONE_NEWIPC
    | _namespaces.CLONE_NEWUTS
    | _namespaces.CLONE_NEWPID
)
_CALLERS = 16


async def _echo(name: str, args: Any) -> ToolAnswer:
    return ToolAnswer.success(args)


async def _wait_one_second(name: str, args: Any) -> ToolAnswer:
    await anyio.sleep(1.0)
    return ToolAnswer.success(args)


_TICKS = os.sysconf("SC_CLK_TCK")


def machine_cpu() -> float:
    """Seconds of CPU the whole machine has spent (every state but idle and I/O wait)."""
    with open("/proc/stat") as stat:
        ticks = [int(field) for field in stat.readline().split()[1:]]
    return (sum(ticks) - ticks[3] - ticks[4]) / _TICKS


class CpuPerRun:
    """Machine CPU per run over a block of runs: ``with meter: ...`` then :meth:`add`."""

    def __init__(self) -> None:
        self.samples: list[float] = []
        self._start = self._spent = 0.0

    def __enter__(self) -> CpuPerRun:
        self._start = machine_cpu()
        return self

    def __exit__(self, *exc: object) -> None:
        self._spent = machine_cpu() - self._start

    def add(self, runs: int) -> None:
        self.samples.append(self._spent / runs)

    def median_ms(self) -> float:
        return statistics.median(self.samples) * 1e3


def _fork_unshare_exit_seconds(samples: int, meter: CpuPerRun | None = None) -> float:
    """Median wall time of fork, unshare of the six namespaces, exit and reap."""
    libc = ctypes.CDLL(None, use_errno=True)
    times = []
    with meter or contextlib.nullcontext():
        for _ in range(samples):
            started = time.perf_counter()
            pid = os.fork()
            if pid == 0:
                os._exit(0 if libc.unshare(ctypes.c_int(_FLAGS)) == 0 else 1)
            _, status = os.waitpid(pid, 0)
            times.append(time.perf_counter() - started)
            if status != 0:
                raise SystemExit(f"unshare of the six namespaces failed (status {status})")
        if meter is not None:
            time.sleep(0.05)  # the kernel's deferred teardown of the last namespaces
    if meter is not None:
        meter.add(samples)
    return statistics.median(times)


def ceiling(samples: int, meter: CpuPerRun | None = None) -> float:
    """Runs/s if every core did nothing but fork, unshare and exit (forked from here)."""
    cores = len(os.sched_getaffinity(0))
    return cores / _fork_unshare_exit_seconds(samples, meter)


def bare_ceiling(samples: int) -> float:
    """:func:`ceiling`, forked from a bare ``python -I -S`` (no anyio, no runtime)."""
    code = (
        "import ctypes, os, statistics, sys, time\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "times = []\n"
        "for _ in range(int(sys.argv[2])):\n"
        "    started = time.perf_counter()\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n"
        "        os._exit(0 if libc.unshare(ctypes.c_int(int(sys.argv[1]))) == 0 else 1)\n"
        "    os.waitpid(pid, 0)\n"
        "    times.append(time.perf_counter() - started)\n"
        "print(len(os.sched_getaffinity(0)) / statistics.median(times))\n"
    )
    command = [sys.executable, "-I", "-S", "-c", code, str(_FLAGS), str(samples)]
    return float(subprocess.run(command, check=True, capture_output=True).stdout)


async def back_to_back(rt: SubprocessRuntime, runs: int, meter: CpuPerRun | None = None) -> float:
    started = time.perf_counter()
    with meter or contextlib.nullcontext():
        for _ in range(runs):
            outcome = await rt.run("return 1", tool_names=[], call_tool=_echo)
            assert outcome.result == 1, outcome
    elapsed = time.perf_counter() - started
    if meter is not None:
        meter.add(runs)
    return runs / elapsed


async def concurrent(
    rt: SubprocessRuntime, runs: int, callers: int = _CALLERS, meter: CpuPerRun | None = None
) -> float:
    left = runs

    async def caller() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            outcome = await rt.run("return 1", tool_names=[], call_tool=_echo)
            assert outcome.result == 1, outcome

    started = time.perf_counter()
    with meter or contextlib.nullcontext():
        async with anyio.create_task_group() as group:
            for _ in range(callers):
                group.start_soon(caller)
    elapsed = time.perf_counter() - started
    if meter is not None:
        meter.add(runs)
    return runs / elapsed


async def waiting_runs(rt: SubprocessRuntime, callers: int = _CALLERS) -> float:
    """Wall time of ``callers`` concurrent runs that each wait 1 s on a tool."""

    async def one() -> None:
        outcome = await rt.run(
            "return await tools.wait({})", tool_names=["wait"], call_tool=_wait_one_second
        )
        assert outcome.result == {}, outcome

    started = time.perf_counter()
    async with anyio.create_task_group() as group:
        for _ in range(callers):
            group.start_soon(one)
    return time.perf_counter() - started


async def main(runs: int, rounds: int) -> None:
    ceilings: list[float] = []
    serial: list[float] = []
    parallel: list[float] = []
    waits: list[float] = []
    bare: list[float] = []
    unlayered: list[float] = []
    cpu = {label: CpuPerRun() for label in ("ceiling", "serial", "parallel", "unlayered")}
    async with SubprocessRuntime() as rt, SubprocessRuntime(layers=()) as plain:
        await back_to_back(rt, 20)  # warm-up
        await back_to_back(plain, 20)
        for _ in range(rounds):
            # Interleaved, so that a slow patch of the machine hits every figure.
            ceilings.append(ceiling(max(20, runs // 4), cpu["ceiling"]))
            bare.append(bare_ceiling(max(20, runs // 4)))
            serial.append(await back_to_back(rt, runs, cpu["serial"]))
            parallel.append(await concurrent(rt, runs, meter=cpu["parallel"]))
            unlayered.append(await back_to_back(plain, runs, cpu["unlayered"]))
        for _ in range(max(1, rounds // 2)):
            waits.append(await waiting_runs(rt))
    top = statistics.median(ceilings)
    print(f"cores: {len(os.sched_getaffinity(0))}, {rounds} rounds of {runs} runs, medians")
    print(f"ceiling (cores / fork+unshare+exit): {top:8.1f} runs/s")
    print(f"  the same from a bare interpreter:    {statistics.median(bare):8.1f} runs/s")
    for label, values in (("back to back", serial), (f"{_CALLERS} callers", parallel)):
        value = statistics.median(values)
        print(f"{label:>12}: {value:8.1f} runs/s  = {value / top:5.2f} x ceiling (target >= 0.45)")
    value = statistics.median(unlayered)
    print(f"  no OS layer, back to back: {value:8.1f} runs/s  = {value / top:5.2f} x ceiling")
    print(f"{_CALLERS} runs waiting 1 s on a tool: {statistics.median(waits):6.2f} s wall")
    floor = cpu["ceiling"].median_ms()
    print("machine CPU per run (every process and kernel thread; medians):")
    print(f"  fork+unshare+exit: {floor:6.2f} ms")
    for label, key in (
        ("back to back", "serial"),
        (f"{_CALLERS} callers", "parallel"),
        ("no OS layer, back to back", "unlayered"),
    ):
        value = cpu[key].median_ms()
        print(f"  {label + ':':<27}{value:6.2f} ms  = {value / floor:4.1f} x fork+unshare+exit")
    budget = len(os.sched_getaffinity(0)) / (0.45 * top) * 1e3
    print(f"  budget for 0.45 x ceiling (cores / 0.45 x {top:.0f} runs/s): {budget:5.2f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    anyio.run(main, args.runs, args.rounds)
