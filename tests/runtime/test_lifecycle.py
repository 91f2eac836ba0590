"""Nothing of a run outlives it, and the pool holds only what it will use (CPython worker).

A hostile program tries every way it has to detach itself from its run: it
clears its parent-death signal, asks to become a subreaper, dumpable and
traceable, leaves (or tries to leave) its session and process group, ignores
and blocks every signal it can, tries to fork, clone and spawn, holds a few
hundred MiB, then spins, blocks in a system call or stops itself. The run then
ends by its wall clock, by the host killing its worker, by a cancellation
(signal or cancel scope) or by the runtime closing; 100 ms after ``run()``
returned, no process of the run may still be running, with every OS layer on
and with each switched off in turn (the processes are found through ``/proc``,
as the run's worker and its descendants).

The pool: cancellations at random points of the hand-off bring the test
process's descendants back to their number before, within a second; a killed
zygote takes its spares with it and the host lets go of them at once; a
zygote that cannot import its own layers does not start, and says why.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

import anyio
import pytest

import runtime._host._launch
import runtime._host._pool
from runtime import Limits, RunOutcome, SubprocessRuntime, ToolAnswer
from runtime._exceptions import WorkerStartError
from runtime._host._pool import Worker
from runtime._worker._imports import DEFAULT_ALLOWED_MODULES
from runtime.testing import ToolBox

pytestmark = pytest.mark.anyio

MiB = 1 << 20
HELD_MIB = 300
ATTACK_MODULES = DEFAULT_ALLOWED_MODULES | {"ctypes", "os", "signal", "time"}
LIMITS = Limits(timeout=30, cpu_seconds=30, memory_bytes=1024 * MiB)
# After run() returns, every process of the run has ended within this.
GONE_WITHIN = 0.1

DETACH = """
import ctypes, os, signal, time

libc = ctypes.CDLL(None, use_errno=True)
libc.prctl.argtypes = [ctypes.c_int] + [ctypes.c_ulong] * 4
libc.syscall.restype = ctypes.c_long
tried = {}

def attempt(name, call):
    try:
        tried[name] = f"ok {call()}"
    except OSError as exc:
        tried[name] = f"{type(exc).__name__} {exc.errno}"

def prctl(option, arg=0):
    if libc.prctl(option, arg, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl")

def fork():
    pid = os.fork()
    if pid == 0:
        while True:
            time.sleep(1)
    return pid

def clone():
    number = {"x86_64": 56, "aarch64": 220}[os.uname().machine]
    pid = libc.syscall(number, signal.SIGCHLD, 0, 0, 0, 0)
    if pid == 0:
        while True:
            time.sleep(1)
    if pid < 0:
        raise OSError(ctypes.get_errno(), "clone")
    return pid

attempt("pdeathsig", lambda: prctl(1, 0))  # PR_SET_PDEATHSIG
attempt("subreaper", lambda: prctl(36, 1))  # PR_SET_CHILD_SUBREAPER
attempt("dumpable", lambda: prctl(4, 1))  # PR_SET_DUMPABLE
attempt("ptracer", lambda: prctl(0x59616D61, 2 ** 64 - 1))  # PR_SET_PTRACER, any
attempt("setsid", os.setsid)
attempt("setpgid-new", lambda: os.setpgid(0, 0))
attempt("setpgid-parent", lambda: os.setpgid(0, os.getppid()))
for number in signal.valid_signals():
    try:
        signal.signal(number, signal.SIG_IGN)
    except (OSError, ValueError, RuntimeError):
        pass
signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
attempt("fork", fork)
attempt("clone", clone)
attempt("spawn", lambda: os.posix_spawn("/bin/sleep", ["sleep", "1000"], {}))
held = b"x" * (@HELD@ * 1024 * 1024)
await tools.ready(tried)
@FINAL@
"""

# The program's last act, and the state /proc shows for it.
FINALS: dict[str, tuple[str, str]] = {
    "spin": ("while True:\n    pass", "R"),
    "block": ("os.read(os.pipe()[0], 1)", "S"),
    "stop": ("os.kill(os.getpid(), signal.SIGSTOP)\nwhile True:\n    pass", "T"),
}
ENDS = ("timeout", "kill", "cancel-signal", "cancel-scope", "close")
LAYER_CHOICES: dict[str, Collection[str] | None] = {
    "all": None,
    "namespaces-only": ("namespaces", "landlock"),
    "seccomp-only": ("seccomp", "landlock"),
    "none": (),
}
CASES = [
    *[("all", end, final) for end in ENDS for final in FINALS],
    *[("namespaces-only", end, "stop") for end in ENDS],
    *[("seccomp-only", end, "block") for end in ENDS],
    *[("none", end, "spin") for end in ENDS],
]


# --------------------------------------------------------------------------- /proc


def process_table() -> dict[int, tuple[int, str, int]]:
    """Every process: pid -> (parent pid, state, start time)."""
    table: dict[int, tuple[int, str, int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as stat:
                    fields = stat.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            table[int(entry)] = (int(fields[1]), fields[0].decode(), int(fields[19]))
    return table


def subtree(root: int, table: dict[int, tuple[int, str, int]]) -> set[int]:
    """``root`` and all its descendants."""
    found = {root} if root in table else set()
    frontier = set(found)
    while frontier:
        frontier = {pid for pid, (parent, _, _) in table.items() if parent in frontier}
        found |= frontier
    return found


def descendant_count() -> int:
    """How many processes descend from this test process (zombies included)."""
    return len(subtree(os.getpid(), process_table())) - 1


def running(processes: dict[int, int]) -> list[int]:
    """Those of ``processes`` (pid -> start time) that still run (not exited, not reaped)."""
    table = process_table()
    return [
        pid
        for pid, started in processes.items()
        if pid in table and table[pid][2] == started and table[pid][1] not in ("Z", "X")
    ]


def rss_mib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) // 1024
    return 0


async def poll(condition: Callable[[], bool], seconds: float) -> bool:
    """Whether ``condition`` holds within ``seconds`` (process state has no event to await)."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return condition()
        await anyio.sleep(0.005)
    return True


# --------------------------------------------------------------------------- harness


class Abort:
    """A cancellation signal (what ``Runtime.run`` takes as ``cancel``)."""

    def __init__(self) -> None:
        self.aborted = False
        self._listeners: list[Callable[[], None]] = []

    def add_listener(self, listener: Callable[[], None]) -> Callable[[], None]:
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def abort(self) -> None:
        self.aborted = True
        for listener in list(self._listeners):
            listener()


class RunWatch:
    """Knows the worker a run got and, once the program says it is ready, all its processes."""

    def __init__(self, backend: SubprocessRuntime) -> None:
        self.worker: Worker | None = None
        self.processes: dict[int, int] = {}
        self.program = 0
        self.tried: dict[str, str] = {}
        self.ready = anyio.Event()
        pool = backend._pool
        acquire = pool.acquire

        async def watched_acquire(key: Any) -> Worker:
            worker = await acquire(key)
            self.worker = worker
            return worker

        pool.acquire = watched_acquire  # type: ignore[method-assign]

    async def __call__(self, name: str, args: Any) -> ToolAnswer:
        assert name == "ready" and self.worker is not None
        table = process_table()
        run = subtree(self.worker.pid, table)
        self.processes = {pid: table[pid][2] for pid in run}
        # The program: the worker itself without a PID namespace or as its init;
        # under a supervisor, the init's child (the worker supervises the init).
        program = self.worker.pid
        while children := [pid for pid in run if table[pid][0] == program]:
            program = children[0]
        self.program = program
        self.tried = args
        self.ready.set()
        return ToolAnswer.success(None)


def program_state(pid: int) -> str:
    entry = process_table().get(pid)
    return entry[1] if entry else "gone"


async def run_hostile(layers: str, end: str, final: str) -> tuple[RunOutcome | None, RunWatch]:
    """Run the detaching program until ``end`` ends it; check that nothing of it is left."""
    backend = SubprocessRuntime(
        limits=LIMITS,
        allowed_modules=ATTACK_MODULES,
        spares=1,
        layers=LAYER_CHOICES[layers],  # type: ignore[arg-type]
    )
    watch = RunWatch(backend)
    code = DETACH.replace("@HELD@", str(HELD_MIB)).replace("@FINAL@", FINALS[final][0])
    limits = (
        Limits(timeout=1.2, cpu_seconds=30, memory_bytes=1024 * MiB) if end == "timeout" else None
    )
    abort = Abort()
    outcome: list[RunOutcome] = []
    returned: list[float] = []
    outlived: list[int] = []
    before = descendant_count()
    async with backend, anyio.create_task_group() as group:
        scope = anyio.CancelScope()

        async def run() -> None:
            with scope:
                outcome.append(
                    await backend.run(
                        code, tool_names=["ready"], call_tool=watch, limits=limits, cancel=abort
                    )
                )
            returned.append(time.monotonic())
            # Checked as run() returns, inside the runtime's block. A run the host
            # ended returns once every process of it is gone, where a PID
            # namespace lets the host know (reaped, memory freed); otherwise (no
            # namespace, or the worker killed from outside) they go within GONE_WITHIN.
            left = running(watch.processes)
            if not (end != "kill" and layers in ("all", "namespaces-only")):
                while left and time.monotonic() < returned[0] + GONE_WITHIN:
                    await anyio.sleep(0.002)
                    left = running(watch.processes)
            outlived.extend(left)

        group.start_soon(run)
        with anyio.fail_after(20):
            await watch.ready.wait()
        assert watch.worker is not None
        # Let the program reach its last act: then end the run. (The init of a
        # PID namespace ignores the SIGSTOP it sends itself: it goes on.)
        state = "R" if final == "stop" and watch.worker.init else FINALS[final][1]
        assert await poll(lambda: program_state(watch.program) == state, 10), program_state(
            watch.program
        )
        if end == "kill":
            watch.worker.kill()
        elif end == "cancel-signal":
            abort.abort()
        elif end == "cancel-scope":
            scope.cancel()
        elif end == "close":
            await backend.aclose()
    assert returned, "the run did not return"
    assert outlived == [], (
        f"{outlived} of the run's processes {sorted(watch.processes)} outlived it"
    )
    # And the host's own children (zombies included) are back at their number.
    assert await poll(lambda: descendant_count() == before, 1.0), (descendant_count(), before)
    return (outcome[0] if outcome else None), watch


# --------------------------------------------------------------------------- nothing outlives a run


@pytest.mark.parametrize(("layers", "end", "final"), CASES, ids=["-".join(c) for c in CASES])
async def test_nothing_of_a_detaching_program_outlives_its_run(
    layers: str, end: str, final: str
) -> None:
    outcome, watch = await run_hostile(layers, end, final)
    expected = {
        "timeout": "timeout",
        "kill": "crashed",
        "cancel-signal": "cancelled",
        "cancel-scope": None,  # run() was cancelled: no outcome
        "close": "crashed",
    }[end]
    assert (outcome.kind if outcome else None) == expected, outcome
    tried = watch.tried
    # Nothing could create a process, and what it held was real.
    for name in ("fork", "clone", "spawn"):
        assert not tried[name].startswith("ok"), (name, tried[name])
    if layers in ("all", "seccomp-only"):
        for name in ("pdeathsig", "subreaper", "dumpable", "ptracer", "setsid", "setpgid-new"):
            assert tried[name] == "PermissionError 1", (name, tried[name])
    assert watch.worker is not None
    namespaced = layers in ("all", "namespaces-only")
    # As root the zygote forks each namespaced worker as its PID namespace's init.
    assert watch.worker.init == (namespaced and os.geteuid() == 0)
    if namespaced and not watch.worker.init:
        assert len(watch.processes) == 3  # supervisor, init, program
    else:
        assert len(watch.processes) == 1  # the program (the namespace's init, if any)


async def test_the_program_holds_its_memory_until_the_end() -> None:
    # Keeps the test above honest: the program really held its memory while it ran.
    backend = SubprocessRuntime(limits=LIMITS, allowed_modules=ATTACK_MODULES, spares=0)
    watch = RunWatch(backend)
    code = DETACH.replace("@HELD@", str(HELD_MIB)).replace("@FINAL@", FINALS["block"][0])
    async with backend, anyio.create_task_group() as group:
        group.start_soon(lambda: backend.run(code, tool_names=["ready"], call_tool=watch))
        with anyio.fail_after(20):
            await watch.ready.wait()
        assert rss_mib(watch.program) >= HELD_MIB
        assert watch.tried["pdeathsig"] == "PermissionError 1"
        group.cancel_scope.cancel()


# --------------------------------------------------------------------------- prctl


PRCTL_PROGRAM = """
import ctypes, os

libc = ctypes.CDLL(None, use_errno=True)
libc.prctl.argtypes = [ctypes.c_int] + [ctypes.c_ulong] * 4
libc.syscall.restype = ctypes.c_long

def prctl(option, arg2=0, arg3=0):
    if libc.prctl(option, arg2, arg3, 0, 0) < 0:
        return f"errno {ctypes.get_errno()}"
    return "ok"

value = ctypes.c_int(-1)
name = ctypes.create_string_buffer(16)
denied = {
    "PR_SET_PDEATHSIG": prctl(1, 0),
    "PR_SET_DUMPABLE": prctl(4, 1),
    "PR_SET_KEEPCAPS": prctl(8, 1),
    "PR_SET_NAME": prctl(15, ctypes.addressof(name)),
    "PR_SET_SECCOMP": prctl(22, 1),
    "PR_SET_SECUREBITS": prctl(28, 0),
    "PR_SET_TIMERSLACK": prctl(29, 1),
    "PR_SET_MM": prctl(35, 8, 0),
    "PR_SET_CHILD_SUBREAPER": prctl(36, 1),
    "PR_SET_NO_NEW_PRIVS": prctl(38, 1),
    "PR_CAP_AMBIENT": prctl(47, 4),
    "PR_SET_SPECULATION_CTRL": prctl(53, 0, 2),
    "PR_SET_SYSCALL_USER_DISPATCH": prctl(59, 0),
    "PR_SET_PTRACER": prctl(0x59616D61, 2 ** 64 - 1),
}
if os.uname().machine == "x86_64":
    def arch_prctl(option, arg):
        if libc.syscall(ctypes.c_long(158), ctypes.c_long(option), ctypes.c_long(arg)) < 0:
            return f"errno {ctypes.get_errno()}"
        return "ok"
    denied["ARCH_SET_CPUID"] = arch_prctl(0x1012, 0)
    denied["ARCH_MAP_VDSO_64"] = arch_prctl(0x2003, 0x10000)
    fs = ctypes.c_ulong(0)
    read_fs = arch_prctl(0x1003, ctypes.addressof(fs))
else:
    read_fs = "ok"
allowed = {
    "PR_GET_PDEATHSIG": prctl(2, ctypes.addressof(value)),
    "PR_GET_DUMPABLE": libc.prctl(3, 0, 0, 0, 0),
    "PR_GET_NO_NEW_PRIVS": libc.prctl(39, 0, 0, 0, 0),
    "PR_GET_SECCOMP": libc.prctl(21, 0, 0, 0, 0),
    "PR_GET_NAME": prctl(16, ctypes.addressof(name)),
    "PR_CAPBSET_READ": libc.prctl(23, 0, 0, 0, 0),
    "ARCH_GET_FS": read_fs,
}
return {"denied": denied, "allowed": allowed, "pdeathsig": value.value}
"""

NORMAL_PROGRAM = """
import asyncio, json
answers = await asyncio.gather(*(tools.echo({"i": i}) for i in range(20)))
await asyncio.sleep(0.01)
print(json.dumps(answers[:2]))
return sum(answer["i"] for answer in answers)
"""


async def test_prctl_options_that_loosen_the_sandbox_are_denied() -> None:
    async with SubprocessRuntime(limits=LIMITS, allowed_modules=ATTACK_MODULES, spares=1) as rt:
        outcome = await rt.run(PRCTL_PROGRAM, tool_names=[], call_tool=ToolBox())
        assert outcome.ok, outcome.message
        result = outcome.result
        assert result["denied"] == dict.fromkeys(result["denied"], "errno 1")  # EPERM
        assert result["allowed"] == {
            "PR_GET_PDEATHSIG": "ok",
            "PR_GET_DUMPABLE": 0,
            "PR_GET_NO_NEW_PRIVS": 1,
            "PR_GET_SECCOMP": 2,
            "PR_GET_NAME": "ok",
            "PR_CAPBSET_READ": 0,
            "ARCH_GET_FS": "ok",
        }
        # The init of its namespace dies with the zygote; a program under an init
        # of ours needs no signal of its own.
        assert result["pdeathsig"] == (signal.SIGKILL if os.geteuid() == 0 else 0)
        # The worker still runs what programs normally do.
        normal = await rt.run(NORMAL_PROGRAM, tool_names=["echo"], call_tool=ToolBox())
        assert normal.ok and normal.result == 190, normal
        assert normal.logs == ['[{"i": 0}, {"i": 1}]']


# --------------------------------------------------------------------------- the pool


def pool_is_quiet(backend: SubprocessRuntime, spares: int) -> bool:
    """Nothing on its way, and ``spares`` ready (up to twice that after runs back to back)."""
    pool = backend._pool
    return (
        spares <= len(pool._spares) <= 2 * spares
        and not pool._spare_requests
        and not pool._replies
        and not pool._abandoned
        and all(spare.greeting is not None for spare in pool._spares)
    )


async def settle(backend: SubprocessRuntime, spares: int) -> int:
    """Wait until the spares are ready and nothing is on its way; the descendant count then."""
    await backend.start()  # (entering the runtime starts nothing)
    pool = backend._pool

    def quiet() -> bool:
        pool.tidy()  # (what a run does while its worker starts: the runtime has no task of its own)
        return pool_is_quiet(backend, spares)

    assert await poll(quiet, 20), "the pool did not settle"
    return descendant_count()


CANCELLED_PROGRAM = """
import asyncio
await tools.echo({"n": 1})
await asyncio.sleep(0.02)
return 1
"""


async def test_cancellation_at_any_point_of_the_hand_off_leaves_no_process() -> None:
    other = Limits(timeout=10, cpu_seconds=5, memory_bytes=768 * MiB)  # not the default key
    rng = random.Random(13)
    async with SubprocessRuntime(limits=Limits(timeout=10), spares=2) as backend:
        baseline = await settle(backend, 2)
        finished = 0
        for _ in range(100):
            limits = other if rng.random() < 0.5 else None
            with anyio.move_on_after(rng.uniform(0, 0.03)):
                await backend.run(
                    CANCELLED_PROGRAM, tool_names=["echo"], call_tool=ToolBox(), limits=limits
                )
                finished += 1
        assert finished < 100  # most runs were cut off somewhere
        pool = backend._pool

        def back_to_baseline() -> bool:
            pool.tidy()  # (what the next run would do first)
            # The runs came back to back: the pool may keep more spares than it
            # started with. Every other process is gone.
            extra = len(pool._spares) - 2
            return descendant_count() == baseline + extra and pool_is_quiet(backend, 2)

        assert await poll(back_to_baseline, 1.0), (descendant_count(), baseline, len(pool._spares))


@pytest.mark.parametrize("layers", ["all", "none"])
async def test_the_zygotes_death_takes_its_spares_with_it(layers: str) -> None:
    async with SubprocessRuntime(spares=2, layers=LAYER_CHOICES[layers]) as backend:  # type: ignore[arg-type]
        await settle(backend, 2)
        pool = backend._pool
        spares = list(pool._spares)
        table = process_table()
        processes = {pid: table[pid][2] for spare in spares for pid in subtree(spare.pid, table)}
        zygote = pool.zygote_pid
        assert zygote is not None
        os.kill(zygote, signal.SIGKILL)
        assert await poll(lambda: not running(processes), 1.0), running(processes)
        # The next run notices (the runtime has no task of its own), lets go
        # of them and runs on a new zygote.
        outcome = await backend.run("return 'alive'", tool_names=[], call_tool=ToolBox())
        assert outcome.result == "alive"
        assert pool.zygote_pid != zygote
        assert all(s._closed for s in spares) and not set(spares) & set(pool._spares)


# --------------------------------------------------------------------------- no fallbacks


@pytest.fixture
def broken_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[str], None]:
    """A copy of the ``runtime`` package for the zygote, with one module broken."""

    def breaks(module: str) -> None:
        copy = tmp_path / "runtime"
        source = Path(runtime._host._pool.__file__).parent.parent
        shutil.copytree(source, copy, ignore=shutil.ignore_patterns("__pycache__", "_pyodide"))
        (copy / f"{module}.py").write_text("raise ImportError('simulated failure')\n")
        monkeypatch.setattr(runtime._host._launch, "_PACKAGE_DIR", str(copy))

    return breaks


@pytest.mark.parametrize("module", ["_sandbox/_layers", "_worker/_imports", "_worker/_restricted"])
async def test_a_zygote_without_its_own_layers_does_not_start(
    module: str, broken_package: Callable[[str], None]
) -> None:
    broken_package(module)
    backend = SubprocessRuntime(spares=0, restricted=module.endswith("_restricted"))
    try:
        with pytest.raises(WorkerStartError, match="simulated failure"):
            await backend.start()
        with pytest.raises(WorkerStartError, match="simulated failure"):
            await backend.run("import json\nreturn 1", tool_names=[], call_tool=ToolBox())
    finally:
        await backend.aclose()
