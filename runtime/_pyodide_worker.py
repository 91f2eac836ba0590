"""One Deno process running one Pyodide instance: spawn, frames, limits, kill.

The command line is the sandbox: ``--no-prompt`` and no ``--allow-*`` flag but
``--allow-read`` of the Pyodide assets and ``runtime/pyodide/``, so every other
Deno capability (net, run, env, write, ffi, sys, imports) is denied; V8 flags
cap the JS heap and the wasm memory and forbid code generation from strings.
The process gets its own session (so its group is killed as one), an almost
empty environment and a private ``DENO_DIR``.

Security warning: the program controls the Deno process's stdout (it can reach
``Deno.stdout`` through ``import js``). Every frame read here is bounded by
:class:`~runtime._protocol.FrameDecoder` and checked by
:func:`~runtime._protocol.parse_worker_frame`; callers kill the worker on any
:class:`~runtime._protocol.ProtocolError` and never reuse it.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
from collections import deque
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel

from ._protocol import FrameDecoder, WorkerFrame, encode_frame, parse_worker_frame
from ._pyodide_assets import WORKER_DIR, PyodideInstall

__all__ = ["PyodideWorker", "WorkerGone", "WorkerProfile", "deno_command"]

_MiB = 1024 * 1024
_WASM_PAGE = 64 * 1024
_MAX_WASM_PAGES = 65536  # wasm32: 4 GiB
_MIN_WASM_BYTES = 128 * _MiB  # the snapshot alone restores ~32 MiB
_READ_CHUNK = 1 << 16
_STDERR_TAIL = 8192


class WorkerGone(Exception):
    """The worker's stdout closed: the process exited or was killed."""


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
        wasm = min(max(memory_bytes, _MIN_WASM_BYTES), _MAX_WASM_PAGES * _WASM_PAGE)
        # The JS heap holds frames in transit (a frame may be JSON-parsed and
        # re-encoded at once) and Pyodide's own JS objects.
        heap = 256 + 4 * max_message_bytes // _MiB
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
        f"--allow-read={install.assets},{WORKER_DIR}",
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
        "PATH": "/nonexistent",
    }


class PyodideWorker:
    """A spawned Deno worker; frames in and out, and the means to end it.

    Use :meth:`spawn`, then :meth:`receive`/:meth:`send`, and always
    :meth:`aclose` (which kills first). A worker serves at most one run.
    """

    def __init__(
        self, process: anyio.abc.Process, profile: WorkerProfile, max_frame_bytes: int
    ) -> None:
        self.process = process
        self.profile = profile
        self.token = anyio.lowlevel.current_token()
        self.killed = False
        self.stderr_tail: deque[bytes] = deque()
        self._stderr_size = 0
        self._decoder = FrameDecoder(max_frame_bytes)
        self._ready: list[WorkerFrame] = []
        self._send_lock = anyio.Lock()

    @classmethod
    async def spawn(
        cls, install: PyodideInstall, profile: WorkerProfile, *, max_frame_bytes: int
    ) -> PyodideWorker:
        """Start a Deno process; it loads Pyodide on its own and then sends ``ready``."""
        install.deno_dir.mkdir(parents=True, exist_ok=True)
        process = await anyio.open_process(
            deno_command(install, profile),
            env=_environment(install),
            cwd=str(install.assets),
            start_new_session=True,
        )
        worker = cls(process, profile, max_frame_bytes)
        worker._set_rlimit("RLIMIT_CORE", 0)
        return worker

    # -- frames ---------------------------------------------------------------------

    def set_max_frame_bytes(self, max_bytes: int) -> None:
        self._decoder = FrameDecoder(max_bytes)

    async def receive(self) -> WorkerFrame:
        """The next frame from the worker.

        Raises:
            ProtocolError: the bytes are not a well-formed, bounded frame.
            WorkerGone: the worker's stdout closed.
        """
        while not self._ready:
            stdout = self.process.stdout
            assert stdout is not None
            try:
                data = await stdout.receive(_READ_CHUNK)
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                raise WorkerGone from None
            self._ready.extend(parse_worker_frame(payload) for payload in self._decoder.feed(data))
            self._ready.reverse()
        return self._ready.pop()

    async def send(self, frame: dict[str, Any]) -> None:
        """Write one frame to the worker's stdin (safe from concurrent tasks)."""
        stdin = self.process.stdin
        assert stdin is not None
        data = encode_frame(frame)
        async with self._send_lock:
            try:
                await stdin.send(data)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                raise WorkerGone from None

    async def drain_stderr(self) -> None:
        """Keep the last few KiB of stderr (for crash messages); returns at EOF."""
        stderr = self.process.stderr
        if stderr is None:
            return
        with contextlib.suppress(
            anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError
        ):
            while True:
                chunk = await stderr.receive(_READ_CHUNK)
                self.stderr_tail.append(chunk)
                self._stderr_size += len(chunk)
                while self._stderr_size > _STDERR_TAIL and len(self.stderr_tail) > 1:
                    self._stderr_size -= len(self.stderr_tail.popleft())

    def stderr_text(self) -> str:
        return b"".join(self.stderr_tail).decode("utf-8", "replace")[-_STDERR_TAIL:]

    # -- limits ---------------------------------------------------------------------

    def _set_rlimit(self, name: str, value: int) -> None:
        # prlimit(2) is Linux-only; elsewhere the host's wall clock still applies.
        prlimit = getattr(resource, "prlimit", None)
        if prlimit is None:
            return
        with contextlib.suppress(OSError, ValueError):
            prlimit(self.process.pid, getattr(resource, name), (value, value))

    def limit_cpu(self, seconds: float) -> None:
        """Cap the CPU the process may still burn (SIGKILL by the kernel past it)."""
        self._set_rlimit("RLIMIT_CPU", int(self.cpu_seconds() + seconds) + 1)

    def cpu_seconds(self) -> float:
        """CPU time the process has used so far (0 where ``/proc`` is unavailable)."""
        try:
            with open(f"/proc/{self.process.pid}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def rss_bytes(self) -> int:
        """Resident memory of the process (0 where ``/proc`` is unavailable)."""
        try:
            with open(f"/proc/{self.process.pid}/statm", "rb") as statm:
                return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, IndexError, ValueError):
            return 0

    # -- ending ---------------------------------------------------------------------

    def kill(self) -> None:
        """SIGKILL the worker's process group now (idempotent, never raises)."""
        self.killed = True
        if self.process.returncode is not None:
            return
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            with contextlib.suppress(ProcessLookupError):
                self.process.kill()

    async def aclose(self) -> None:
        """Kill, then release the pipes and reap the process, shielded from cancellation."""
        self.kill()
        with anyio.CancelScope(shield=True):
            await self.process.aclose()
