"""One Deno process running one Pyodide instance: spawn, limits, status, kill.

The command line is the sandbox (built by ``_assets.worker_command``, which the
installer uses too): ``--no-prompt`` and no ``--allow-*`` flag but
``--allow-read`` of the Pyodide assets, ``runtime/_pyodide/worker/`` and
``runtime/_worker/_program.py`` (the shared program semantics), so every other
Deno capability (net, run, env, write, ffi, sys, imports) is denied; V8 flags
cap the JS heap and the wasm memory and forbid code generation from strings.
The process gets its own session (its group is killed as one), an almost empty
environment and a home of its own: a fresh temporary directory (its working
directory and ``DENO_DIR``), removed once it has exited, with each file
Deno writes capped by ``RLIMIT_FSIZE``. Deno's web cache and KV store are kept
in memory there; only the compiled-code cache of the worker's own modules is
shared (see :func:`make_home`). Nothing a run leaves behind is seen by another:
``worker.js`` removes every web storage API before the program runs, and this
home goes with the process. Its stdin and stdout are one end of a socket pair:
the run channel, spoken with the frames of ``runtime._worker._protocol``.

The process is started with :class:`subprocess.Popen` rather than an event
loop's subprocess API, so an idle spare belongs to no event loop.

Security warning: the program controls the Deno process's stdout (it can reach
``Deno.stdout`` through ``import js``). The run channel is read only through
``runtime._host._session``, which bounds and checks every frame; a worker is killed
after its one run and never reused.
"""

from __future__ import annotations

import contextlib
import math
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import anyio

from .._host._pool import ExitStatus, Worker
from ._assets import PyodideInstall, worker_command

__all__ = ["HOME_PREFIX", "DenoWorker", "WorkerProfile", "deno_command", "make_home"]

_MiB = 1024 * 1024
_WASM_PAGE = 64 * 1024
_MAX_WASM_PAGES = 65536  # wasm32: 4 GiB
_MIN_WASM_BYTES = 128 * _MiB  # the snapshot alone restores ~32 MiB
_STDERR_TAIL = 8192
_REAP_TIMEOUT = 5.0
# ``ru_maxrss`` is in KiB on Linux but in bytes on macOS: read as KiB there, any
# worker that ended without a result would pass for a memory kill.
_RU_MAXRSS_UNIT = 1 if sys.platform == "darwin" else 1024
#: The name every worker's home directory starts with (in the system's temp dir).
HOME_PREFIX = "ptc-deno-"
#: The largest file a worker's Deno may write (``RLIMIT_FSIZE``): its caches stay
#: far below; the program itself can write no file at all.
_MAX_FILE_BYTES = 64 * _MiB
# Deno's caches of the modules it loaded (the worker's own, fixed set): V8's
# compiled code, and the module analysis (without it Deno analyses Pyodide's
# large loaders again on every cold start). Shared between workers: together
# they save about 40% of a cold start.
_SHARED_CACHES = ("v8_code_cache_v2", "dep_analysis_cache_v2")


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerProfile:
    """What is fixed when a Deno process starts (a spare serves only its profile).

    Attributes:
        wasm_bytes: the wasm memory maximum (``--wasm-max-mem-pages``).
        heap_mib: the V8 old-space limit (``--max-old-space-size``).
        lockdown: whether ``worker.js`` strips the JS realm before the program
            runs (see ``lockDown`` there); off only to prove that Deno's
            permissions hold by themselves.
    """

    wasm_bytes: int
    heap_mib: int
    lockdown: bool = True

    @classmethod
    def for_limits(
        cls, memory_bytes: int, max_message_bytes: int, *, lockdown: bool = True
    ) -> WorkerProfile:
        wasm = min(max(int(memory_bytes), _MIN_WASM_BYTES), _MAX_WASM_PAGES * _WASM_PAGE)
        # The JS heap holds frames in transit (one may be decoded and re-encoded
        # at once) besides Pyodide's own objects.
        heap = 256 + 4 * int(max_message_bytes) // _MiB
        return cls(wasm_bytes=wasm // _WASM_PAGE * _WASM_PAGE, heap_mib=heap, lockdown=lockdown)


def deno_command(install: PyodideInstall, profile: WorkerProfile) -> list[str]:
    """The locked-down ``deno run`` command line of one worker."""
    v8_flags = (
        f"--max-old-space-size={profile.heap_mib}",
        f"--wasm-max-mem-pages={profile.wasm_bytes // _WASM_PAGE}",
        "--disallow-code-generation-from-strings",
    )
    snapshot = () if install.snapshot is None else (str(install.snapshot),)
    mode = "serve" if profile.lockdown else "serve-unlocked"
    return worker_command(install.deno, install.assets, mode, *snapshot, v8_flags=v8_flags)


def make_home(install: PyodideInstall) -> Path:
    """A fresh home for one worker: its working directory, holding its ``DENO_DIR``.

    Only Deno's compiled-code and module-analysis caches are shared with the
    installation's Deno directory (symbolic links; SQLite keeps its journal
    next to the target). They hold what Deno derived from the modules it
    loaded, keyed by their source: the worker's own files, as a program can
    import nothing. Everything else Deno would keep (web storage, caches)
    lands here and is removed with the home.
    """
    home = Path(tempfile.mkdtemp(prefix=HOME_PREFIX))
    try:
        deno_dir = home / "deno"
        deno_dir.mkdir()
        for name in _SHARED_CACHES:
            shared = install.deno_dir / name
            if shared.is_file():
                (deno_dir / name).symlink_to(shared)
    except BaseException:
        shutil.rmtree(home, ignore_errors=True)
        raise
    return home


def _environment(home: Path) -> dict[str, str]:
    return {
        "DENO_DIR": str(home / "deno"),
        "DENO_NO_UPDATE_CHECK": "1",
        "DENO_NO_PACKAGE_JSON": "1",
        # Defence in depth: worker.js removes these APIs before the program runs.
        "DENO_CACHE_DB_MODE": "memory",
        "DENO_KV_DB_MODE": "memory",
        # Neutral values instead of the host's time zone.
        "TZ": "UTC",
        "NO_COLOR": "1",
    }


class DenoWorker(Worker):
    """A Deno worker process with the run channel ``sock`` (see :class:`~runtime._host._pool.Worker`).

    Always end it with :meth:`aclose` (which kills first).
    """

    names_apart = False  # (its bootstrap reads them in the run frame)

    __slots__ = (
        "_cpu_base",
        "_cpu_used",
        "_max_rss",
        "_status",
        "_stderr",
        "_tail",
        "home",
        "memory_exceeded",
        "popen",
        "profile",
    )

    def __init__(
        self,
        popen: subprocess.Popen[bytes],
        sock: socket.socket,
        profile: WorkerProfile,
        home: Path,
    ) -> None:
        super().__init__(popen.pid, sock, -1)
        self.popen = popen
        self.profile = profile
        self.home = home
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
        home = make_home(install)
        host, child = socket.socketpair()
        try:
            popen = subprocess.Popen(
                deno_command(install, profile),
                stdin=child.fileno(),
                stdout=child.fileno(),
                stderr=subprocess.PIPE,
                env=_environment(home),
                cwd=str(home),
                start_new_session=True,
                close_fds=True,
            )
        except BaseException:
            host.close()
            shutil.rmtree(home, ignore_errors=True)
            raise
        finally:
            child.close()
        worker = cls(popen, host, profile, home)
        worker._prlimit(resource.RLIMIT_CORE, 0, 0)
        worker._prlimit(resource.RLIMIT_FSIZE, _MAX_FILE_BYTES, _MAX_FILE_BYTES)
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

    # -- Worker interface (used by runtime._host._session) ----------------------------------

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
            self._max_rss = usage.ru_maxrss * _RU_MAXRSS_UNIT
        # Popen must know too, or it warns that the process is still running.
        self.popen.returncode = os.waitstatus_to_exitcode(status)
        return True

    def remove_home(self) -> bool:
        """Remove the worker's home once it has exited; whether it is gone.

        Nothing writes there once the process is gone (Deno cannot start others).
        """
        if not self._reap():
            return False
        shutil.rmtree(self.home, ignore_errors=True)
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
        """Kill, reap, close and remove the home, shielded from cancellation."""
        self.kill()
        with anyio.CancelScope(shield=True):
            await self.wait_status(_REAP_TIMEOUT)
        self.close()
        self.remove_home()
