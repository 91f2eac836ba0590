"""The Pyodide backend: each run in a fresh CPython-on-WebAssembly instance inside Deno.

Security warning: the program is hostile and can reach every JS object of its
realm through ``import js``, ``pyodide.ffi`` and ``pyodide_js``. The walls are
(1) Deno's permission system: the process runs with ``--no-prompt`` and no
permission but reading the Pyodide assets and ``runtime/_pyodide/worker/``, so files,
network, subprocesses, environment, FFI, system information and
``Deno.permissions.request`` are all denied, and V8 refuses code generation
from strings (``eval``, ``Function``); (2) the lockdown (``worker.js``): before
the program runs, the realm keeps only an allow-list of globals, so what needs
no permission is gone too (``Deno`` and its exit, host paths and pid, Node's
``process`` and its ``vm``, web storage, the Cache API, workers); (3) each
worker's own home (its working directory and ``DENO_DIR``), removed once it
exited: nothing a run stores reaches another; (4) the host, which bounds and
checks every frame (a forged frame that is well-formed can only do what the
program may do anyway, anything else ends the run as ``protocol``), enforces
the wall clock, output and tool-call limits, caps CPU (``RLIMIT_CPU``),
writable memory (``RLIMIT_DATA``) and file size (``RLIMIT_FSIZE``), watches the
resident memory, kills the process group after the one run, and decides how a
run ended from its own evidence (never from Deno's stderr or exit code).
Inside, the wasm memory maximum and the V8 heap limit cap memory too. Where
the OS sandbox layers are available this is a second, independent wall next
to ``SubprocessRuntime``; where they are not (macOS, locked-down containers),
it is the one that still holds.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import threading
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Final

import anyio
import anyio.abc
import anyio.to_thread

from .._base import (
    CallTool,
    CancelSignal,
    Isolation,
    Limits,
    RunOutcome,
    Runtime,
    ToolNames,
)
from .._exceptions import WorkerStartError
from .._host._pool import ExitStatus
from .._host._session import OpenRuns, drive_run
from ._assets import PROGRAM_MODULE, WORKER_DIR, PyodideInstall, locate_pyodide
from ._deno import DenoWorker, WorkerProfile

__all__ = ["PyodideRuntime"]

logger = logging.getLogger("runtime")

#: Every outcome's isolation: Deno's permissions and WebAssembly, which do not
#: depend on the kernel (no layer can be missing); only the JS lockdown can be
#: switched off (``lockdown=False``).
_ISOLATION: Final = Isolation(mode="strict", runtime="pyodide")
_ISOLATION_UNLOCKED: Final = Isolation(mode="strict", runtime="pyodide", off=("js-globals",))
#: Loading Pyodide is the runtime's time, not the program's: bounded on its own.
_START_TIMEOUT: Final = 60.0
#: How long the housekeeping task waits for a killed worker to exit.
_EXIT_TIMEOUT: Final = 5.0
_MEMORY_POLL: Final = 0.05
#: Deno, V8 and the compiled Pyodide module, on top of the program's memory.
_BASE_RSS: Final = 384 * 1024 * 1024
#: How V8 ends the process on a fatal out-of-memory error (its heap limit, or an
#: allocation refused under ``RLIMIT_DATA``): an immediate crash, ``int3`` on
#: x86-64 and ``brk`` on arm64. The program cannot raise it: Deno grants no way
#: to signal a process, and the lockdown leaves no Deno or Node API to try.
_V8_OUT_OF_MEMORY: Final = signal.SIGTRAP
#: The tail of Deno's stderr shown with a crash, as captured output (UTF-8 bytes).
_STDERR_SHOWN: Final = 2048
#: Marks each line of Deno's stderr among the captured output: whatever the
#: program wrote there (``console.*``), never the host's own words.
STDERR_LABEL: Final = "[stderr] "


class PyodideRuntime(Runtime):
    """Run programs in Pyodide (CPython compiled to WebAssembly) inside locked-down Deno.

    Args:
        limits: default limits of a run (each :meth:`run` may pass its own).
        spares: Deno processes with a fresh Pyodide already loaded, kept ready.
        cache_dir: where ``ptc runtime install pyodide`` put the assets
            (default ``$PTC_CACHE_DIR`` or ``~/.cache/ptc-runner``).
        lockdown: strip the JS realm before the program runs (no ``Deno``
            namespace, web storage, workers, network or host information).
            ``False`` leaves Deno's permissions as the only wall inside the
            process, which each worker then reports as a layer switched off;
            meant for proving that those permissions hold by themselves.

    Raises:
        PyodideNotInstalledError: Deno or the pinned Pyodide assets are missing
            (a :class:`~runtime.RuntimeUnavailableError` naming the install command).

    Each run gets its own process and Pyodide instance, which is killed when
    that one run ends (its exit is collected by a later run or :meth:`aclose`).
    Spares start on :meth:`start` and are replaced after each run;
    :meth:`aclose` kills the idle ones. Many runs may proceed concurrently.
    """

    name = "pyodide"

    def __init__(
        self,
        *,
        limits: Limits | None = None,
        spares: int = 1,
        cache_dir: str | Path | None = None,
        lockdown: bool = True,
    ) -> None:
        if spares < 0:
            raise ValueError(f"spares must be >= 0, got {spares}")
        super().__init__(limits=limits)
        self._spare_count = spares
        self._lockdown = lockdown
        self._isolation = _ISOLATION if lockdown else _ISOLATION_UNLOCKED
        self._install: PyodideInstall = locate_pyodide(
            Path(cache_dir) if cache_dir is not None else None
        )
        self._default_profile = self._profile(self._limits)
        self._spares: deque[DenoWorker] = deque()
        # Killed workers whose exit is not collected or whose home is not
        # removed yet: tearing down a Deno process takes tens of ms, so a run
        # does not wait for its own (see _bury).
        self._dying: list[DenoWorker] = []
        # The thread removing homes and starting spares after a run (see _tidy).
        self._tidier: threading.Thread | None = None
        # The runs going on, ended by aclose().
        self._runs = OpenRuns()

    @property
    def install(self) -> PyodideInstall:
        """The Deno binary, assets and snapshot this runtime starts workers from."""
        return self._install

    @property
    def lockdown(self) -> bool:
        """Whether workers strip the JS realm before the program runs."""
        return self._lockdown

    def _profile(self, limits: Limits) -> WorkerProfile:
        return WorkerProfile.for_limits(
            limits.memory_bytes, limits.max_message_bytes, lockdown=self._lockdown
        )

    async def start(self) -> None:
        """Start the spares now (they load Pyodide in the background)."""
        self._refill()

    def _spawn(self, profile: WorkerProfile) -> DenoWorker:
        try:
            return DenoWorker.spawn(self._install, profile)
        except OSError as exc:
            raise WorkerStartError(f"cannot start Deno ({self._install.deno}): {exc}") from exc

    def _refill(self) -> None:
        while not self._closed and len(self._spares) < self._spare_count:
            self._spares.append(self._spawn(self._default_profile))

    def _acquire(self, profile: WorkerProfile) -> DenoWorker:
        """A ready spare when the run's limits match the default ones, else a new worker."""
        if profile == self._default_profile:
            while self._spares:
                worker = self._spares.popleft()
                if worker.alive:
                    return worker
                self._bury(worker)
        return self._spawn(profile)

    def _bury(self, worker: DenoWorker) -> None:
        """Kill ``worker`` and close its descriptors now; collect its exit and home later.

        Later is a run's end (:meth:`_tidy`), or :meth:`aclose`.
        """
        worker.close()
        self._dying.append(worker)

    def _tidy(self) -> None:
        """Start, in a thread, removing the exited workers' homes and starting the spares wanted.

        Called as a run ends. Both are slow system calls (unlinking files,
        executing Deno: several ms each): in a thread, the run's outcome does
        not wait for them, and a new Deno does not load while a program runs.
        What is shared is decided here, on the event loop; the thread only
        removes and starts what it is given, appending each new spare to
        ``_spares`` (a deque: appending is atomic). One thread at a time; the
        next run's end, or :meth:`aclose`, joins it.
        """
        tidier = self._tidier
        if tidier is not None:
            if tidier.is_alive():
                return  # the next run's end does what is left
            tidier.join()
            self._tidier = None
        exited: list[DenoWorker] = []
        dying: list[DenoWorker] = []
        for worker in self._dying:
            (dying if worker.alive else exited).append(worker)
        self._dying = dying
        wanted = 0 if self._closed else self._spare_count - len(self._spares)
        if exited or wanted > 0:
            self._tidier = threading.Thread(
                target=self._remove_and_start, args=(exited, wanted), name="ptc-pyodide-tidy"
            )
            self._tidier.start()

    def _remove_and_start(self, exited: list[DenoWorker], wanted: int) -> None:
        for worker in exited:
            worker.remove_home()
        for _ in range(wanted):
            try:
                self._spares.append(self._spawn(self._default_profile))
            except WorkerStartError:
                # Not a run's failure: the next run that finds no spare starts
                # its own worker, and fails with this if it recurs.
                logger.warning("cannot start a spare Pyodide worker", exc_info=True)
                return

    async def _run(
        self,
        code: str,
        *,
        tool_names: ToolNames,
        call_tool: CallTool,
        limits: Limits,
        cancel: CancelSignal | None,
        on_log: Callable[[str], None] | None,
        call_group: anyio.abc.TaskGroup | None = None,
        shield_calls: bool = False,
    ) -> RunOutcome:
        if cancel is not None and cancel.aborted:
            outcome = RunOutcome.failure("cancelled", "the run was cancelled before it started")
            return dataclasses.replace(outcome, isolation=self._isolation)
        worker = self._acquire(self._profile(limits))
        try:
            outcome = await self._drive(
                worker,
                code,
                tool_names,
                call_tool,
                limits,
                cancel,
                on_log,
                call_group=call_group,
                shield_calls=shield_calls,
            )
            return dataclasses.replace(outcome, isolation=self._isolation)
        finally:
            if self._closed:  # nobody would collect it later
                await worker.aclose()
            else:
                self._bury(worker)
                self._tidy()

    async def _aclose(self) -> None:
        """End the runs going on, kill the idle spares, wait for every killed worker."""
        self._runs.close()
        if self._tidier is not None:
            await anyio.to_thread.run_sync(self._tidier.join)
            self._tidier = None
        while self._spares:
            self._bury(self._spares.popleft())
        while self._dying:
            await self._dying.pop().aclose()

    async def _drive(
        self,
        worker: DenoWorker,
        code: str,
        names: ToolNames,
        call_tool: CallTool,
        limits: Limits,
        cancel: CancelSignal | None,
        on_log: Callable[[str], None] | None,
        call_group: anyio.abc.TaskGroup | None = None,
        shield_calls: bool = False,
    ) -> RunOutcome:
        # Wait for "ready" (or a dead worker) before the program's clock starts:
        # loading Pyodide is the runtime's time, bounded on its own.
        with anyio.move_on_after(_START_TIMEOUT) as waiting:
            dispose = cancel.add_listener(waiting.cancel) if cancel is not None else None
            try:
                await anyio.wait_readable(worker.sock)
            finally:
                if dispose is not None:
                    dispose()
        if cancel is not None and cancel.aborted:
            return RunOutcome.failure("cancelled", "the run was cancelled before it started")
        if waiting.cancelled_caught:
            logs = _stderr_lines(worker, self._install, limits.max_output_bytes)
            return RunOutcome.failure(
                "crashed",
                f"the Pyodide worker did not start within {_START_TIMEOUT:g} s{_see_stderr(logs)}",
                logs=logs,
            )
        worker.limit_cpu(limits.cpu_seconds)
        worker.limit_memory(limits.memory_bytes)
        async with anyio.create_task_group() as watchers:
            watchers.start_soon(worker.drain_stderr)
            watchers.start_soon(_watch_memory, worker, limits.memory_bytes)
            outcome = await drive_run(
                worker,
                code=code,
                tool_names=names,
                call_tool=call_tool,
                limits=limits,
                cancel=cancel,
                runs=self._runs,
                memory_baseline=worker.rss_bytes(),  # Deno's own, not the program's
                on_log=on_log,
                call_group=call_group,
                shield_calls=shield_calls,
            )
            watchers.cancel_scope.cancel()
        if not worker.finished and outcome.kind in ("crashed", "memory", "timeout"):
            # No final frame: the session judged the worker's end (its exit
            # status, or a run ended from outside). Deno's exit code means
            # nothing the host defined, and the process's own evidence is here.
            return await _explain_end(worker, outcome, limits, self._install)
        return outcome


async def _watch_memory(worker: DenoWorker, memory_bytes: int) -> None:
    """Kill the worker once its resident memory passes the limit (plus Deno's own)."""
    ceiling = memory_bytes + _BASE_RSS
    while worker.alive:
        if worker.rss_bytes() > ceiling:
            worker.memory_exceeded = True
            worker.kill()
            return
        await anyio.sleep(_MEMORY_POLL)


async def _explain_end(
    worker: DenoWorker, outcome: RunOutcome, limits: Limits, install: PyodideInstall
) -> RunOutcome:
    """The outcome of a run whose worker ended without a final frame, from the host's evidence.

    ``memory`` only from what the program cannot forge: the host's own
    resident-memory watchdog, the peak resident memory the kernel reports, or
    V8's out-of-memory crash (:data:`_V8_OUT_OF_MEMORY`). Deno's exit code and
    stderr decide nothing: a worker that ended otherwise ``crashed``, in the
    host's words, and what it wrote to stderr follows the captured output as
    lines marked :data:`STDERR_LABEL` (the host's own paths replaced), within
    the output limit.
    """
    status = await worker.wait_status(0)
    ceiling = limits.memory_bytes + _BASE_RSS
    out_of_memory = worker.memory_exceeded
    if status is not None and not out_of_memory:
        out_of_memory = status.max_rss_bytes > ceiling or (
            os.WIFSIGNALED(status.status) and os.WTERMSIG(status.status) == _V8_OUT_OF_MEMORY
        )
    if out_of_memory:
        return RunOutcome.failure(
            "memory",
            "the program ran out of memory (it hit the worker's memory limit)",
            logs=outcome.logs,
            tool_calls=outcome.tool_calls,
        )
    if outcome.kind == "timeout":
        return outcome  # the host's clock, or the kernel's CPU limit
    message = outcome.message
    if outcome.kind != "crashed":  # an exit code read as a limit: it is not one here
        message = _describe_exit(status)
    used = sum(len(line.encode()) + 1 for line in outcome.logs)
    shown = _stderr_lines(worker, install, limits.max_output_bytes - used)
    return RunOutcome.failure(
        "crashed",
        message + _see_stderr(shown),
        logs=[*outcome.logs, *shown],
        tool_calls=outcome.tool_calls,
    )


def _describe_exit(status: ExitStatus | None) -> str:
    if status is None:
        return "the Pyodide worker ended the run without a result"
    code = os.waitstatus_to_exitcode(status.status)
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"the Pyodide worker was killed by {name}"
    return f"the Pyodide worker exited with code {code}"


def _stderr_lines(worker: DenoWorker, install: PyodideInstall, room: int) -> list[str]:
    """The tail of Deno's stderr as captured output lines, within ``room`` bytes."""
    data = _without_host_paths(worker.stderr_text(), worker, install).strip().encode()
    if not data or room <= 0:
        return []
    tail = data[-_STDERR_SHOWN:]
    lines = tail.decode("utf-8", "ignore").splitlines()
    if len(tail) < len(data) and lines:
        lines[0] = "..."  # cut mid-line
    shown = [STDERR_LABEL + line for line in lines]
    size = sum(len(line.encode()) + 1 for line in shown)
    while shown and size > room:
        size -= len(shown.pop(0).encode()) + 1
    return shown


def _without_host_paths(text: str, worker: DenoWorker, install: PyodideInstall) -> str:
    """``text`` with the host's own paths (Deno's traces name them) replaced by neutral names."""
    paths = {
        str(install.assets): "<pyodide>",
        str(WORKER_DIR): "<worker>",
        str(PROGRAM_MODULE.parent): "<runtime>",
        str(install.deno): "<deno>",
        str(install.deno_dir): "<deno-dir>",
        str(worker.home): "<home>",
    }
    for path in sorted(paths, key=len, reverse=True):
        text = text.replace(path, paths[path])
    return text


def _see_stderr(lines: list[str]) -> str:
    return (
        f" (its stderr follows the captured output, marked {STDERR_LABEL.strip()})" if lines else ""
    )
