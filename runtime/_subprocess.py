"""The CPython backend: each run in a fresh, sandboxed, forked worker process.

Security warning: the program is hostile. Isolation comes from the OS layers of
``runtime._sandbox._layers`` (namespaces, seccomp, Landlock, rlimits, uid drop); the
import allow-list and, with ``restricted=True``, RestrictedPython are language
conveniences on top, not a boundary. The backend fails closed: where the machine
lacks an OS layer, a run ends as ``sandbox`` with a message that names the
layer, unless the caller chose ``isolation="best-effort"`` explicitly (then
every outcome lists the layers it ran without). ``ptc doctor`` lists what the
machine provides. Limits are enforced by the host as well, so a worker that
ignores them is killed.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any, Final, Literal, TypeAlias

import anyio
from anyio.abc import TaskGroup

from ._base import (
    CallTool,
    CancelSignal,
    Isolation,
    Limits,
    RunOutcome,
    Runtime,
    ToolNames,
)
from ._host._launch import SpawnedZygote, zygote_settings
from ._host._pool import SandboxKey, WorkerPool, layer_states
from ._host._session import OpenRuns, drive_run
from ._worker._bootstrap import compile_for_worker

__all__ = ["LAYERS", "Layer", "SubprocessIsolation", "SubprocessRuntime"]

Layer = Literal["namespaces", "seccomp", "landlock"]
#: The optional OS layers; every one is on unless ``layers`` says otherwise.
LAYERS: Final[frozenset[str]] = frozenset({"namespaces", "seccomp", "landlock"})
#: ``strict`` (the default) refuses to run without an OS layer the machine
#: lacks; ``best-effort`` runs with the layers there are and says so.
SubprocessIsolation: TypeAlias = Literal["strict", "best-effort"]
_ISOLATION_MODES: Final = ("strict", "best-effort")
# The layers (as ``ptc doctor`` names them) each optional layer stands for.
_LAYER_STATUSES: Final[Mapping[str, tuple[str, ...]]] = {
    "namespaces": (
        "user-namespace",
        "mount-namespace",
        "network-namespace",
        "pid-namespace",
        "ipc-namespace",
        "uts-namespace",
    ),
    "landlock": ("landlock",),
    "seccomp": ("seccomp",),
}
_WAYS_OUT: Final = (
    "`ptc doctor` lists the layers and why each is missing. Ways out: the Pyodide "
    'worker (runtime "pyodide", `ptc run --runtime pyodide`), which needs none of '
    'these kernel features, or an explicit SubprocessRuntime(isolation="best-effort") '
    "(`ptc run --isolation best-effort`), which runs with the layers this machine has "
    "and lists the missing ones in every outcome."
)
_WAYS_OUT_BEST_EFFORT: Final = (
    '`ptc doctor` lists the layers. The Pyodide worker (runtime "pyodide") needs '
    "none of these kernel features."
)
_MAX_OPEN_FILES: Final = 64
# Programs up to this size are compiled on the host (cheaper than in a worker
# that just woke up); bigger ones would hold up the host's event loop.
_HOST_COMPILE_MAX_CHARS: Final = 16_384
#: How long a run that did not finish waits for its worker's processes to be
#: gone (killed, reaped and their memory freed by the kernel) before it returns.
_TEARDOWN_WAIT: Final = 0.5
# Compiled programs kept for programs that come again (retries, the same
# snippet over many inputs): at most this many, each at most the size above.
_COMPILED_PROGRAMS_KEPT: Final = 64


def _missing_layers(greeting: Mapping[str, Any] | None, off: tuple[str, ...]) -> tuple[str, ...]:
    """The layers a worker's ``ready`` frame reports inactive, but for those ``off``.

    (No ``ready`` frame: the worker never read the program, nothing ran.)
    """
    return tuple(
        name for name, active in layer_states(greeting).items() if not active and name not in off
    )


class SubprocessRuntime(Runtime):
    """Run programs in forked CPython workers from a warm zygote.

    Args:
        limits: default limits of a run (each :meth:`run` may pass its own).
        allowed_modules: top-level modules a program may import; ``None`` means
            the safe standard-library default of ``runtime._worker._imports``.
        restricted: also compile programs with RestrictedPython.
        isolation: ``"strict"`` (the default) fails closed: a run on a machine
            without one of the OS layers ends as ``sandbox``, with a message
            naming the layer and the ways out. ``"best-effort"`` is the
            explicit opt-in to run with the layers the machine has; each
            outcome's :attr:`~runtime.RunOutcome.isolation` lists the missing ones.
        spares: pre-forked, already sandboxed workers kept ready; twice as
            many while runs end back to back (within 10 ms of each other).
        max_workers: the most workers alive at once (running a program,
            spare, or being forked). A run that finds no spare has a worker
            forked for it while fewer live; beyond that it waits for a run to
            finish. Each worker may use up to ``limits.memory_bytes``.
        layers: the optional OS layers to use (``None``: all of
            ``namespaces``, ``seccomp``, ``landlock``; ``()``: none, for tests
            and debugging). A layer left out is off by configuration: it never
            fails a run, and every outcome lists it in ``isolation.off``.
            Limits (rlimits) always apply.
        python: the interpreter that runs the zygote.
        zygote: a zygote process spawned ahead with
            ``runtime._host._launch.spawn_zygote`` and this runtime's settings
            (as ``ptc run`` does before its imports, so that the zygote's
            boot overlaps them). The runtime adopts it: it is this runtime's
            first zygote, and :meth:`aclose` (not the caller) ends it. One
            spawned with other settings is refused (``ValueError``) and
            stays the caller's to discard.

    Many :meth:`run` calls may proceed concurrently; each gets its own worker,
    which is never reused. The zygote starts on the first run (or
    :meth:`start`), unless one spawned ahead was given, and :meth:`aclose`
    stops it and every spare.
    """

    name = "subprocess"

    def __init__(
        self,
        *,
        limits: Limits | None = None,
        allowed_modules: Iterable[str] | None = None,
        restricted: bool = False,
        isolation: SubprocessIsolation = "strict",
        spares: int = 2,
        max_workers: int = 64,
        layers: Collection[Layer] | None = None,
        python: str | None = None,
        zygote: SpawnedZygote | None = None,
    ) -> None:
        chosen = LAYERS if layers is None else frozenset(layers)
        unknown = chosen - LAYERS
        if unknown:
            raise ValueError(f"unknown sandbox layers: {sorted(unknown)}")
        if isolation not in _ISOLATION_MODES:
            raise ValueError(f"isolation must be 'strict' or 'best-effort', got {isolation!r}")
        if spares < 0:
            raise ValueError(f"spares must be >= 0, got {spares}")
        if max_workers < 1:
            raise ValueError(f"max_workers must be >= 1, got {max_workers}")
        super().__init__(limits=limits)
        self._layers = chosen
        self._strict = isolation == "strict"
        self._off = tuple(
            status
            for layer, statuses in _LAYER_STATUSES.items()
            if layer not in chosen
            for status in statuses
        )
        # Strict runs have every layer that is not off, so they share one value.
        self._isolation = Isolation(mode=isolation, runtime=self.name, off=self._off)
        self._default_key = self._key(self._limits)
        # The marshalled code object only: every worker loads its own copy.
        self._compile = functools.lru_cache(maxsize=_COMPILED_PROGRAMS_KEPT)(
            functools.partial(compile_for_worker, restricted=restricted)
        )
        settings = zygote_settings(
            python=python, allowed_modules=allowed_modules, restricted=restricted
        )
        if zygote is not None and zygote.settings != settings:
            raise ValueError(
                "the zygote given was spawned with other settings (interpreter, allowed "
                "modules or restricted) than this runtime's"
            )
        self._pool = WorkerPool(
            settings=settings,
            spares=spares,
            default_key=self._default_key,
            max_workers=max_workers,
            zygote=zygote,
        )
        # The runs going on, ended by aclose().
        self._runs = OpenRuns()
        # Runs holding a worker, and the event aclose() waits on for them to let go.
        self._holding = 0
        self._let_go: anyio.Event | None = None

    @property
    def isolation(self) -> SubprocessIsolation:
        """The isolation mode runs get: ``"strict"`` unless ``"best-effort"`` was chosen."""
        return "strict" if self._strict else "best-effort"

    def _key(self, limits: Limits) -> SandboxKey:
        return SandboxKey(
            memory_bytes=int(limits.memory_bytes),
            cpu_seconds=float(math.ceil(limits.cpu_seconds)),
            max_open_files=_MAX_OPEN_FILES,
            namespaces="namespaces" in self._layers,
            seccomp="seccomp" in self._layers,
            landlock="landlock" in self._layers,
            strict=self._strict,
        )

    async def start(self) -> None:
        """Start the zygote and its spares now instead of on the first run."""
        await self._pool.start()

    async def _run(
        self,
        code: str,
        *,
        tool_names: ToolNames,
        call_tool: CallTool,
        limits: Limits,
        cancel: CancelSignal | None,
        on_log: Callable[[str], None] | None,
        call_group: TaskGroup | None = None,
        shield_calls: bool = False,
    ) -> RunOutcome:
        if cancel is not None and cancel.aborted:
            outcome = RunOutcome.failure("cancelled", "the run was cancelled before it started")
            return dataclasses.replace(outcome, isolation=self._isolation)
        key = self._default_key if limits is self._limits else self._key(limits)
        worker = await self._pool.acquire(key)
        compile_program = (
            self._compile
            if len(code) <= _HOST_COMPILE_MAX_CHARS and self._pool.compiles_like_host
            else None
        )
        self._holding += 1
        try:
            outcome = await drive_run(
                worker,
                code=code,
                tool_names=tool_names,
                call_tool=call_tool,
                limits=limits,
                cancel=cancel,
                compile_program=compile_program,
                # The pool's housekeeping overlaps the worker's start (no task
                # of the runtime's own does it: a runtime is the same in a block or not).
                while_waiting=self._pool.tidy,
                runs=self._runs,
                on_log=on_log,
                call_group=call_group,
                shield_calls=shield_calls,
            )
        finally:
            if not worker.finished:
                # The program may still be running (a deadline, a cancellation,
                # the runtime closing): the run returns once all of it is gone.
                with anyio.CancelScope(shield=True):
                    await worker.end(_TEARDOWN_WAIT)
            self._pool.release(worker)
            self._holding -= 1
            if not self._holding and self._let_go is not None:
                self._let_go.set()
        return self._reported(outcome, worker.greeting)

    def _reported(self, outcome: RunOutcome, greeting: Mapping[str, Any] | None) -> RunOutcome:
        """``outcome`` with the isolation the run had, and a refusal's ways out.

        ``greeting`` is the worker's first frame, sent before it read the
        program: its sandbox report (``ready``), or why it did not enter the
        sandbox (``error``: the run ended as ``sandbox`` without running).
        """
        if greeting is not None and greeting.get("type") == "error":
            if outcome.kind != "sandbox":
                return dataclasses.replace(outcome, isolation=self._isolation)
            ways_out = _WAYS_OUT if self._strict else _WAYS_OUT_BEST_EFFORT
            message = f"{outcome.message.rstrip().rstrip('.')}. {ways_out}"
            return dataclasses.replace(outcome, message=message, isolation=self._isolation)
        missing = _missing_layers(greeting, self._off)
        isolation = (
            dataclasses.replace(self._isolation, missing=missing) if missing else self._isolation
        )
        return dataclasses.replace(outcome, isolation=isolation)

    async def _aclose(self) -> None:
        self._runs.close()
        if self._holding:
            # The runs just ended end their workers themselves (see _run), which
            # lets them know when all of a worker is gone; then the pool goes.
            self._let_go = anyio.Event()
            with anyio.move_on_after(2 * _TEARDOWN_WAIT):
                await self._let_go.wait()
        await self._pool.aclose()
