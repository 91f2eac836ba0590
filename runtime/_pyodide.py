"""The Pyodide backend: each run in a fresh CPython-on-WebAssembly instance inside Deno.

Security warning: the program is hostile and can reach every JS object of its
Deno process through ``import js``, ``pyodide.ffi`` and ``pyodide_js``. The
walls are (1) Deno's permission system: the process runs with ``--no-prompt``
and no permission but reading the Pyodide assets and ``runtime/pyodide/``, so
files, network, subprocesses, environment, FFI, system information and
``Deno.permissions.request`` are all denied, and V8 refuses code generation
from strings (``eval``, ``Function``); (2) the host, which bounds and checks
every frame (the program can write to the process's stdout: a forged frame that
is well-formed can only do what the program may do anyway, anything else ends
the run as ``protocol``), enforces the wall clock, output and tool-call limits,
caps CPU (``RLIMIT_CPU``) and writable memory (``RLIMIT_DATA``), watches the
resident memory and kills the process group after the one run. Inside, the
wasm memory maximum and the V8 heap limit cap memory too. Where the OS sandbox
layers are available this is a second, independent wall next to
``SubprocessRuntime``; where they are not (macOS, locked-down containers), it
is the one that still holds.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import anyio

from ._base import CallTool, CancelSignal, Limits, RunOutcome, Runtime, checked_run_arguments
from ._deadlines import Deadlines
from ._exceptions import WorkerStartError
from ._pyodide_assets import PyodideInstall, locate_pyodide
from ._pyodide_worker import DenoWorker, WorkerProfile
from ._runners import CallRunners, enter_services
from ._session import drive_run

__all__ = ["PyodideRuntime"]

#: Loading Pyodide is the runtime's time, not the program's: bounded on its own.
_START_TIMEOUT: Final = 60.0
_MEMORY_POLL: Final = 0.05
#: Deno, V8 and the compiled Pyodide module, on top of the program's memory.
_BASE_RSS: Final = 384 * 1024 * 1024
# What V8 prints when it aborts for lack of memory (heap limit or RLIMIT_DATA).
_OOM_MARKERS: Final = ("out of memory", "Out of memory")
_STDERR_IN_MESSAGE: Final = 600


class PyodideRuntime(Runtime):
    """Run programs in Pyodide (CPython compiled to WebAssembly) inside locked-down Deno.

    Args:
        limits: default limits of a run (each :meth:`run` may pass its own).
        spares: Deno processes with a fresh Pyodide already loaded, kept ready.
        cache_dir: where ``ptc runtime install pyodide`` put the assets
            (default ``$PTC_CACHE_DIR`` or ``~/.cache/ptc-runner``).

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
    ) -> None:
        if spares < 0:
            raise ValueError(f"spares must be >= 0, got {spares}")
        self._limits = limits if limits is not None else Limits()
        self._spare_count = spares
        self._install: PyodideInstall = locate_pyodide(
            Path(cache_dir) if cache_dir is not None else None
        )
        self._default_profile = self._profile(self._limits)
        self._spares: deque[DenoWorker] = deque()
        # Killed workers whose exit is not collected yet: tearing down a Deno
        # process takes tens of ms, so runs do not wait for it (see _bury).
        self._dying: list[DenoWorker] = []
        self._closed = False
        # Tasks answering tool calls, kept parked across runs while the runtime
        # is entered as a context manager (see ``_runners``).
        self._runners: CallRunners | None = None
        # The keeper of the runs' deadlines, while entered (see ``_deadlines``).
        self._deadlines: Deadlines | None = None
        self._exit_stack: contextlib.AsyncExitStack | None = None

    @property
    def limits(self) -> Limits:
        """The default limits of a run."""
        return self._limits

    @property
    def install(self) -> PyodideInstall:
        """The Deno binary, assets and snapshot this runtime starts workers from."""
        return self._install

    @staticmethod
    def _profile(limits: Limits) -> WorkerProfile:
        return WorkerProfile.for_limits(limits.memory_bytes, limits.max_message_bytes)

    async def start(self) -> None:
        """Start the spares now (they load Pyodide in the background)."""
        self._closed = False
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
        self._reap()
        if profile == self._default_profile:
            while self._spares:
                worker = self._spares.popleft()
                if worker.alive:
                    return worker
                self._bury(worker)
        return self._spawn(profile)

    def _bury(self, worker: DenoWorker) -> None:
        """Kill ``worker`` and close its descriptors now; collect its exit later."""
        worker.close()
        if worker.alive:
            self._dying.append(worker)

    def _reap(self) -> None:
        self._dying = [worker for worker in self._dying if worker.alive]

    async def run(
        self,
        code: str,
        *,
        tool_names: Sequence[str],
        call_tool: CallTool,
        limits: Limits | None = None,
        cancel: CancelSignal | None = None,
    ) -> RunOutcome:
        names = checked_run_arguments(code, tool_names)
        limits = limits if limits is not None else self._limits
        if cancel is not None and cancel.aborted:
            return RunOutcome.failure("cancelled", "the run was cancelled before it started")
        worker = self._acquire(self._profile(limits))
        try:
            return await self._drive(worker, code, names, call_tool, limits, cancel)
        finally:
            if self._closed:  # nobody would collect it later
                await worker.aclose()
            else:
                self._bury(worker)
                self._refill()

    async def aclose(self) -> None:
        """Kill every idle spare and wait until every killed worker has exited.

        Later runs still work; they start cold and leave no spares behind.
        """
        self._closed = True
        with anyio.CancelScope(shield=True):
            while self._spares:
                self._bury(self._spares.popleft())
            while self._dying:
                await self._dying.pop().aclose()

    async def __aenter__(self) -> PyodideRuntime:
        """Keep the tasks that answer tool calls, and the runs' deadline keeper, while the block runs."""
        async with contextlib.AsyncExitStack() as stack:
            stack.push_async_callback(self.aclose)
            _, self._runners, self._deadlines = await enter_services(stack)
            self._exit_stack = stack.pop_all()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        stack, self._exit_stack = self._exit_stack, None
        await (self.aclose() if stack is None else stack.aclose())

    async def _drive(
        self,
        worker: DenoWorker,
        code: str,
        names: list[str],
        call_tool: CallTool,
        limits: Limits,
        cancel: CancelSignal | None,
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
            detail = worker.stderr_text().strip()[-_STDERR_IN_MESSAGE:]
            return RunOutcome.failure(
                "crashed", f"the Pyodide worker did not start within {_START_TIMEOUT:g} s\n{detail}"
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
                runners=self._runners,
                deadlines=self._deadlines,
            )
            watchers.cancel_scope.cancel()
        if outcome.kind == "crashed":
            return _explain_crash(worker, outcome)
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


def _explain_crash(worker: DenoWorker, outcome: RunOutcome) -> RunOutcome:
    stderr = worker.stderr_text()
    if worker.memory_exceeded or any(marker in stderr for marker in _OOM_MARKERS):
        return RunOutcome.failure(
            "memory",
            "the program ran out of memory (it hit the worker's memory limit)",
            logs=outcome.logs,
            tool_calls=outcome.tool_calls,
        )
    detail = stderr.strip()[-_STDERR_IN_MESSAGE:]
    message = f"{outcome.message}\n{detail}" if detail else outcome.message
    return RunOutcome.failure("crashed", message, logs=outcome.logs, tool_calls=outcome.tool_calls)
