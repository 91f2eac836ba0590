"""One Deno process running one Pyodide instance: spawn, limits, status, kill.

The command line is the sandbox: ``--no-prompt`` and no ``--allow-*`` flag but
``--allow-read`` of the Pyodide assets, ``runtime/pyodide/`` and ``runtime/_program.py``
(the shared program semantics), so every other
Deno capability (net, run, env, write, ffi, sys, imports) is denied; V8 flags
cap the JS heap and the wasm memory and forbid code generation from strings.
The process gets its own session (its group is killed as one), an almost empty
environment and a private ``DENO_DIR``. Its stdin and stdout are one end of a
socket pair: the run channel, spoken with the frames of ``runtime._protocol``.

The process is started with :class:`subprocess.Popen` rather than an event
loop's subprocess API, so an idle spare belongs to no event loop.

Security warning: the program controls the Deno process's stdout (it can reach
``Deno.stdout`` through ``import js``). The run channel is read only through
``runtime._session``, which bounds and checks every frame; a worker is killed
after its one run and never reused.
"""

from __future__ import annotations

import contextlib
import math
import os
import resource
import signal
import socket
import subprocess
from collections import deque
from dataclasses import dataclass

import anyio

from ._pool import ExitStatus, Worker
from ._pyodide_assets import PROGRAM_MODULE, WORKER_DIR, PyodideInstall

__all__ = ["DenoWorker", "WorkerProfile", "deno_command"]

_MiB = 1024 * 1024
_WASM_PAGE = 64 * 1024
_MAX_WASM_PAGES = 65536  # wasm32: 4 GiB
_MIN_WASM_BYTES = 128 * _MiB  # the snapshot alone restores ~32 MiB
_STDERR_TAIL = 8192
_REAP_TIMEOUT = 5.0


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerProfile:
    """What is fixed when a Deno process starts (a spare serves only its profile).

    Attributes:
        wasm_bytes: the wasm memory maximum (``--wasm-max-mem-pages``).
        heap_mib: the V8 old-space limit (``--max-old-space-size``).
    """

    wasm_bytes: int
    heap_mib: int

    @classmethod
    def for_limits(cls, memory_bytes: int, max_message_bytes: int) -> WorkerProfile:
        wasm = min(max(int(memory_bytes), _MIN_WASM_BYTES), _MAX_WASM_PAGES * _WASM_PAGE)
        # The JS heap holds frames in transit (one may be decoded and re-encoded
        # at once) besides Pyodide's own objects.
        heap = 256 + 4 * int(max_message_bytes) // _MiB
        return cls(wasm_bytes=wasm // _WASM_PAGE * _WASM_PAGE, heap_mib=heap)


def deno_command(install: PyodideInstall, profile: WorkerProfile) -> list[str]:
    """The locked-down ``deno run`` command line of one worker."""
    v8_flags = ",".join(
        (
            f"--max-old-space-size={profile.heap_mib}",
            f"--wasm-max-mem-pages={profile.wasm_bytes // _WASM_PAGE}",
            "--disallow-code-generation-from-strings",
        )
    )
    command = [
        str(install.deno),
        "run",
        "--no-prompt",
        "--no-config",
        "--no-lock",
        "--no-npm",
        "--no-remote",
        f"--allow-read={install.assets},{WORKER_DIR},{PROGRAM_MODULE}",
        f"--v8-flags={v8_flags}",
        str(WORKER_DIR / "worker.js"),
        "serve",
        str(install.assets),
    ]
    if install.snapshot is not None:
        command.append(str(install.snapshot))
    return command


def _environment(install: PyodideInstall) -> dict[str, str]:
    return {
        "DENO_DIR": str(install.deno_dir),
        "DENO_NO_UPDATE_CHECK": "1",
        "NO_COLOR": "1",
    }


class DenoWorker(Worker):
    """A Deno worker process with the run channel ``sock`` (see :class:`~runtime._pool.Worker`).

    Always end it with :meth:`aclose` (which kills first).
    """

    __slots__ = (
        "_cpu_base",
        "_cpu_used",
        "_max_rss",
        "_status",
        "_stderr",
        "_tail",
        "memory_exceeded",
        "popen",
        "profile",
    )

    def __init__(
        self, popen: subprocess.Popen[bytes], sock: socket.socket, profile: WorkerProfile
    ) -> None:
        super().__init__(popen.pid, sock, -1)
        self.popen = popen
        self.profile = profile
        self.memory_exceeded = False
        self._status: int | None = None
        self._cpu_base = 0.0
        self._cpu_used = 0.0
        self._max_rss = 0
        assert popen.stderr is not None
        self._stderr = popen.stderr.fileno()
        os.set_blocking(self._stderr, False)
        self._tail: deque[bytes] = deque(maxlen=64)

    @classmethod
    def spawn(cls, install: PyodideInstall, profile: WorkerProfile) -> DenoWorker:
        """Start a Deno process; it loads Pyodide on its own, then sends ``ready``."""
        install.deno_dir.mkdir(parents=True, exist_ok=True)
        host, child = socket.socketpair()
        try:
            popen = subprocess.Popen(
                deno_command(install, profile),
                stdin=child.fileno(),
                stdout=child.fileno(),
                stderr=subprocess.PIPE,
                env=_environment(install),
                cwd=str(install.assets),
                start_new_session=True,
                close_fds=True,
            )
        except BaseException:
            host.close()
            raise
        finally:
            child.close()
        worker = cls(popen, host, profile)
        worker._prlimit(resource.RLIMIT_CORE, 0, 0)
        return worker

    @property
    def alive(self) -> bool:
        return not self._reap()

    # -- limits and diagnostics --------------------------------------------------------

    def _prlimit(self, which: int, soft: int, hard: int) -> None:
        prlimit = getattr(resource, "prlimit", None)  # Linux only; the wall clock stays
        if prlimit is not None:
            with contextlib.suppress(OSError, ValueError):
                prlimit(self.pid, which, (soft, hard))

    def limit_cpu(self, seconds: float) -> None:
        """Cap the CPU the run may burn from now on (SIGXCPU from the kernel past it).

        Loading Pyodide already used some; that is counted out of the run.
        """
        self._cpu_base = self.cpu_seconds()
        soft = math.ceil(self._cpu_base + seconds)
        self._prlimit(resource.RLIMIT_CPU, soft, soft + 1)

    def limit_memory(self, memory_bytes: int) -> None:
        """Cap the writable memory the run may still map (``RLIMIT_DATA``).

        ``RLIMIT_AS`` cannot work here: V8 reserves tens of GiB of address
        space up front. Reservations are not counted in ``RLIMIT_DATA`` until
        they are made writable, so the cap is what the process has now plus the
        run's memory and the JS heap's room; past it V8 aborts (an OOM).
        """
        data = self._status_kib("VmData")
        if data:
            limit = data * 1024 + memory_bytes + self.profile.heap_mib * _MiB
            self._prlimit(resource.RLIMIT_DATA, limit, limit)

    def _status_kib(self, field: str) -> int:
        try:
            with open(f"/proc/{self.pid}/status", "rb") as status:
                for line in status:
                    if line.startswith(field.encode() + b":"):
                        return int(line.split()[1])
        except (OSError, IndexError, ValueError):
            pass
        return 0

    def cpu_seconds(self) -> float:
        """CPU time the process has used so far (0 where ``/proc`` is unavailable)."""
        try:
            with open(f"/proc/{self.pid}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            return 0.0

    def rss_bytes(self) -> int:
        """Resident memory of the process (0 where ``/proc`` is unavailable)."""
        try:
            with open(f"/proc/{self.pid}/statm", "rb") as statm:
                return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, IndexError, ValueError):
            return 0

    def read_stderr(self) -> None:
        """Keep the tail of whatever the process wrote to stderr so far."""
        with contextlib.suppress(OSError):
            while chunk := os.read(self._stderr, 65536):
                self._tail.append(chunk)

    async def drain_stderr(self) -> None:
        """Read stderr until it closes (run it in the run's task group)."""
        with contextlib.suppress(OSError):
            while True:
                await anyio.wait_readable(self._stderr)
                chunk = os.read(self._stderr, 65536)
                if not chunk:
                    return
                self._tail.append(chunk)

    def stderr_text(self) -> str:
        self.read_stderr()
        return b"".join(self._tail)[-_STDERR_TAIL:].decode("utf-8", "replace")

    # -- Worker interface (used by runtime._session) ----------------------------------

    def kill(self) -> None:
        """SIGKILL the worker's process group (a no-op once it was reaped)."""
        if self._status is None:
            with contextlib.suppress(OSError):
                os.killpg(self.pid, signal.SIGKILL)

    async def wait_status(self, timeout: float) -> ExitStatus | None:  # noqa: ASYNC109
        """How the process ended (CPU seconds counted since the run began).

        ``None`` when it did not exit within ``timeout``.
        """
        with anyio.move_on_after(timeout):
            await self._process_exit()
        if self._status is None:
            return None
        return ExitStatus(self._status, max(0.0, self._cpu_used - self._cpu_base), self._max_rss)

    def _reap(self) -> bool:
        """Collect the exit status and CPU time if the process has exited."""
        if self._status is not None:
            return True
        try:
            pid, status, usage = os.wait4(self.pid, os.WNOHANG)
        except ChildProcessError:
            pid, status, usage = self.pid, 0, None
        if pid == 0:
            return False
        self._status = status
        if usage is not None:
            self._cpu_used = usage.ru_utime + usage.ru_stime
            self._max_rss = usage.ru_maxrss * 1024
        # Popen must know too, or it warns that the process is still running.
        self.popen.returncode = os.waitstatus_to_exitcode(status)
        return True

    async def _process_exit(self) -> None:
        if self._reap():
            return
        pidfd = -1
        with contextlib.suppress(AttributeError, OSError):
            pidfd = os.pidfd_open(self.pid)  # readable once the process exits (Linux)
        if pidfd >= 0:
            try:
                if not self._reap():
                    await anyio.wait_readable(pidfd)
            finally:
                os.close(pidfd)
        while not self._reap():  # noqa: ASYNC110 - no pidfd: poll
            await anyio.sleep(0.005)

    def close(self) -> None:
        """Kill and release the descriptors; :meth:`aclose` also reaps."""
        self.kill()
        with contextlib.suppress(OSError):
            self.sock.close()
        if self.popen.stderr is not None:
            with contextlib.suppress(OSError):
                self.popen.stderr.close()

    async def aclose(self) -> None:
        """Kill, reap and close, shielded from cancellation."""
        self.kill()
        with anyio.CancelScope(shield=True):
            await self.wait_status(_REAP_TIMEOUT)
        self.close()
