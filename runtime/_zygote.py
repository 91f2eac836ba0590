"""The fork server: one warm interpreter that forks a fresh sandboxed worker per run.

Runs in its own isolated interpreter (``python -I -S``, empty environment),
started by ``_pool``. It imports the bootstrap, the sandbox layers and the
allowed modules once, then serves fork requests from the host over a
``SOCK_SEQPACKET`` control socket. For each request it creates the run
channel (a socketpair), a status pipe and a private work directory, forks,
and hands the host its end of the channel and the read end of the status pipe
with ``SCM_RIGHTS``. The child puts itself in its own process group, enters
the sandbox and waits for its program (that is what makes a spare "already
sandboxed"). The zygote reaps every child and writes its raw wait status into
the status pipe, then removes the work directory.

It stays single-threaded: forking is only safe that way. When the control
socket closes, it kills every child's process group, reaps them and exits.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import importlib.util
import json
import os
import select
import shutil
import signal
import socket
import sys
import tempfile
from collections.abc import Sequence
from typing import Any, NoReturn

import orjson

from ._bootstrap import (
    EXIT_INTERNAL,
    WorkerSettings,
    new_worker_loop,
    serve,
    set_cpu_policy,
)
from ._protocol import encode_frame

__all__ = ["ZYGOTE_BOOT", "main"]

#: ``python -c`` text that imports this module without running ``runtime/__init__``
#: (which pulls in the host side) and calls :func:`main` with ``argv[2]``.
ZYGOTE_BOOT = (
    "import sys,types;m=types.ModuleType('runtime');m.__path__=[sys.argv[1]];"
    "sys.modules['runtime']=m;import json;sys.path[:0]=json.loads(sys.argv[2])['paths'];"
    "from runtime._zygote import main;main(sys.argv[2])"
)

_PR_SET_PDEATHSIG = 1
_REQUEST_BYTES = 1 << 16


class _LayerConfig:
    """Stand-in for ``SandboxConfig`` when ``runtime._sandbox`` is unavailable."""

    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)


def _load_sandbox() -> Any:
    try:
        return importlib.import_module("runtime._sandbox")
    except ImportError:
        return None


def _fallback_enter(config: Any, keep_fds: Sequence[int]) -> list[list[Any]]:
    """Limits only: what a worker gets when the sandbox module is missing."""
    import resource

    memory = int(config.memory_bytes)
    cpu = max(1, int(-(-config.cpu_seconds // 1)))
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_NOFILE, (config.max_open_files, config.max_open_files))
    keep = {0, 1, 2, *keep_fds}
    for fd in [int(name) for name in os.listdir("/proc/self/fd")]:
        if fd not in keep:
            with contextlib.suppress(OSError):
                os.close(fd)
    os.chdir(config.workdir)
    return [["rlimits", True, "address space, CPU time and open files"]]


def _loop_fds(loop: Any) -> list[int]:
    """The descriptors an asyncio selector loop owns (its selector and self-pipe)."""
    return [loop._selector.fileno(), loop._ssock.fileno(), loop._csock.fileno()]


class _Zygote:
    def __init__(
        self,
        ctl: socket.socket,
        tmp: str,
        settings: WorkerSettings,
        sandbox: Any,
    ) -> None:
        self.ctl = ctl
        self.tmp = tmp
        self.settings = settings
        self.sandbox = sandbox
        self.children: dict[int, tuple[int, str]] = {}
        self.pid = os.getpid()
        self.wake_r, self.wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.libc: Any = None
        try:
            import ctypes

            self.libc = ctypes.CDLL(None, use_errno=True)
        except (ImportError, OSError):
            self.libc = None

    def serve(self) -> NoReturn:
        signal.signal(signal.SIGCHLD, lambda signum, frame: None)
        signal.set_wakeup_fd(self.wake_w)
        # What the host needs to compile programs for the workers itself.
        self.ctl.send(
            orjson.dumps(
                {
                    "ready": os.getpid(),
                    "magic": importlib.util.MAGIC_NUMBER.hex(),
                    "optimize": sys.flags.optimize,
                }
            )
        )
        while True:
            readable, _, _ = select.select([self.ctl.fileno(), self.wake_r], [], [])
            if self.wake_r in readable:
                with contextlib.suppress(BlockingIOError):
                    os.read(self.wake_r, 4096)
            self.reap()
            if self.ctl.fileno() in readable:
                try:
                    request = self.ctl.recv(_REQUEST_BYTES)
                except OSError:
                    request = b""
                if not request:
                    self.shutdown()
                self.fork(orjson.loads(request))

    def reap(self) -> None:
        while True:
            try:
                pid, status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            entry = self.children.pop(pid, None)
            if entry is None:
                continue
            status_w, workdir = entry
            # The CPU time lets the host tell the CPU limit's SIGKILL from others,
            # the peak RSS (KiB) a real memory exhaustion from a claimed one.
            cpu = usage.ru_utime + usage.ru_stime
            with contextlib.suppress(OSError):
                os.write(status_w, b"%d %.3f %d" % (status, cpu, usage.ru_maxrss))
            os.close(status_w)
            shutil.rmtree(workdir, ignore_errors=True)

    def shutdown(self) -> NoReturn:
        for pid in self.children:
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
        signal.set_wakeup_fd(-1)
        for pid, (status_w, workdir) in self.children.items():
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
            os.close(status_w)
            shutil.rmtree(workdir, ignore_errors=True)
        os._exit(0)

    def fork(self, request: dict[str, Any]) -> None:
        request_id = request["id"]
        try:
            workdir = tempfile.mkdtemp(prefix="run-", dir=self.tmp)
            host_end, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        except OSError as exc:
            self.ctl.send(orjson.dumps({"id": request_id, "error": str(exc)}))
            return
        try:
            pid = os.fork()
        except OSError as exc:
            host_end.close()
            child_end.close()
            shutil.rmtree(workdir, ignore_errors=True)
            self.ctl.send(orjson.dumps({"id": request_id, "error": f"fork failed: {exc}"}))
            return
        if pid == 0:
            self.child(request, child_end, workdir)
        with contextlib.suppress(OSError):
            os.setpgid(pid, pid)  # also done by the child: whichever runs first wins
        child_end.close()
        status_r, status_w = os.pipe()
        self.children[pid] = (status_w, workdir)
        try:
            socket.send_fds(
                self.ctl,
                [orjson.dumps({"id": request_id, "pid": pid})],
                [host_end.fileno(), status_r],
            )
        except OSError:
            self.shutdown()  # the host went away
        finally:
            host_end.close()
            os.close(status_r)

    def child(self, request: dict[str, Any], sock: socket.socket, workdir: str) -> NoReturn:
        try:
            os.setpgid(0, 0)
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            if self.libc is not None:
                self.libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            if os.getppid() != self.pid:
                os._exit(EXIT_INTERNAL)  # the zygote died before the death signal was set
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            os.close(null)
            loop, replies = new_worker_loop()
            keep = [sock.fileno(), *_loop_fds(loop)]
            layers = self.enter(request, workdir, keep)
            serve(sock, loop, layers, self.settings, replies)
        except BaseException as exc:
            self.report_failure(sock, exc)
        os._exit(EXIT_INTERNAL)

    def enter(self, request: dict[str, Any], workdir: str, keep: list[int]) -> list[list[Any]]:
        fields = {
            "workdir": workdir,
            "memory_bytes": request["memory_bytes"],
            "cpu_seconds": request["cpu_seconds"],
            "max_open_files": request["max_open_files"],
            "namespaces": request["namespaces"],
            "seccomp": request["seccomp"],
            "landlock": request["landlock"],
            "strict": request["strict"],
        }
        if self.sandbox is None:
            if request["strict"]:
                raise _SandboxMissing("the sandbox layers are not available (strict mode)")
            return _fallback_enter(_LayerConfig(**fields), keep)
        statuses = self.sandbox.enter_sandbox(self.sandbox.SandboxConfig(**fields), keep_fds=keep)
        return [[status.name, status.active, status.detail] for status in statuses]

    def report_failure(self, sock: socket.socket, exc: BaseException) -> None:
        sandbox_error = getattr(self.sandbox, "SandboxError", _SandboxMissing)
        if isinstance(exc, sandbox_error | _SandboxMissing):
            message = f"sandbox: {exc}"
        else:
            message = f"the worker could not be set up: {type(exc).__name__}: {exc}"
        # Before "ready" the host reports this as a ``sandbox`` outcome; after
        # it, as a protocol failure.
        with contextlib.suppress(BaseException):
            sock.sendall(encode_frame({"type": "error", "kind": "sandbox", "message": message}))


class _SandboxMissing(Exception):
    pass


def _preimport(names: Sequence[str]) -> None:
    for name in names:
        with contextlib.suppress(Exception):
            importlib.import_module(name)


def main(options_json: str) -> NoReturn:
    """Entry point of the zygote process (see :data:`ZYGOTE_BOOT`)."""
    options = json.loads(options_json)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Forking and reaping are background work: the host's runs come first (a
    # worker switches back to the normal policy once it is ready).
    set_cpu_policy(background=True)
    stdlib_path = [entry for entry in sys.path if entry not in options["paths"]]
    settings = WorkerSettings(
        allowed_modules=(None if options["allowed"] is None else frozenset(options["allowed"])),
        restricted=options["restricted"],
    )
    sandbox = _load_sandbox()
    internal = ["runtime._imports"]
    if settings.restricted:
        internal.append("runtime._restricted")
    _preimport([*internal, *options["preimport"]])
    warm_paths = getattr(sandbox, "python_paths", None)
    if warm_paths is not None:
        # After the imports, so every mapped library is seen: fills the cache once
        # for every fork instead of each worker re-reading /proc/self/maps.
        warm_paths()
    # Everything the worker may import is loaded now: later imports (the
    # program's, through the allow-list) only ever see the standard library.
    sys.path[:] = stdlib_path
    ctl = socket.socket(fileno=options["fd"])
    zygote = _Zygote(ctl, options["tmp"], settings, sandbox)
    gc.collect()
    gc.freeze()  # children then share the zygote's heap pages instead of copying them
    zygote.serve()
