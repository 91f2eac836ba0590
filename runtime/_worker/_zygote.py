"""The fork server: one warm interpreter that forks a fresh sandboxed worker per run.

Runs in its own isolated interpreter (``python -I -S``, empty environment),
spawned by ``runtime._host._launch``. It imports the bootstrap, the sandbox layers and the
allowed modules once, then serves fork requests from the host over a
``SOCK_SEQPACKET`` control socket (and cancellations: ``{"cancel": id}`` kills
the worker forked for request ``id`` if it still lives; its run gave up). A
request may ask to be forked ``after`` a moment (at most :data:`_MAX_DEFER`
seconds; a deferred request cancelled is answered as refused). For
each request it creates the run channel (a socketpair), a status pipe and a
private work directory, forks, and hands the host its end of the channel and
the read end of the status pipe with ``SCM_RIGHTS``. The child puts itself
in its own process group, enters the sandbox and waits for its program (that
is what makes a spare "already sandboxed"); a request's ``start_bytes`` (the
host's guess of the size of the run's start) is how much room it makes for
that while it waits (see ``_bootstrap.start_room``). Run as root, the zygote
also writes each child's user-namespace id maps when the child asks (a root
process outside the namespace must; this spares every worker the fork of a
helper), and forks each namespaced child
into a PID namespace of its own (``unshare(CLONE_NEWPID)`` before the fork,
``setns`` back after it): the child is that namespace's init and runs the
program itself. A run is then one process, where a worker that makes its own
PID namespace needs three (a supervisor, an init and the program). The zygote
reaps every child and writes its raw wait status into the status pipe, then
removes the work directory.

It stays single-threaded: forking is only safe that way. When the control
socket closes, it kills every child's process group, reaps them and exits. It
is a child subreaper: the init of a killed supervisor's PID namespace is
reparented to it and reaped here, not left to the machine's init.

The sandbox layers, the import guard and (with ``restricted``) RestrictedPython
are not optional: if the zygote cannot import them it does not start, and the
host reports why (there is no fallback with fewer layers).
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import functools
import gc
import importlib
import importlib.util
import json
import os
import select
import signal
import socket
import sys
import time
import types
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import orjson

from .._exceptions import SandboxError
from .._sandbox._libc import PR_SET_CHILD_SUBREAPER, PR_SET_PDEATHSIG, fork_unhooked, prctl
from ._bootstrap import (
    EXIT_INTERNAL,
    WorkerSettings,
    new_worker_loop,
    serve,
    set_cpu_policy,
)
from ._prewarm import prewarm, warm_up
from ._protocol import encode_frame

__all__ = ["main"]

_REQUEST_BYTES = 1 << 16
# The longest a request may ask to be deferred (its "after", in seconds).
_MAX_DEFER = 0.1


def _loop_fds(loop: Any) -> list[int]:
    """The descriptors an asyncio selector loop owns (its selector and self-pipe)."""
    return [loop._selector.fileno(), loop._ssock.fileno(), loop._csock.fileno()]


class _ForkServer:
    def __init__(
        self,
        ctl: socket.socket,
        tmp: str,
        settings: WorkerSettings,
        sandbox: types.ModuleType,
        template: Any,
    ) -> None:
        self.ctl = ctl
        self.tmp = tmp
        self.settings = settings
        self.sandbox = sandbox
        # pid -> (its status pipe, its host work directory or None, its request id)
        self.children: dict[int, tuple[int, str | None, int]] = {}
        # The worker each request got, while it lives (for cancellations).
        self.requests: dict[int, int] = {}
        self.pid = os.getpid()
        self.wake_r, self.wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.namespaces = importlib.import_module("runtime._sandbox._namespaces")
        # Workers waiting for their id maps: the pipe each asks on -> (pid, answer pipe).
        self.mapping: dict[int, tuple[int, int]] = {}
        self.maps_ids = os.geteuid() == 0
        # As root, the zygote makes each namespaced worker's PID namespace as it
        # forks it: the worker is its init (PID 1), with no supervisor process
        # between (one fork, one process per run). Its own PID namespace, to
        # return to after each fork; -1 once that is refused (workers then make
        # their own, under a supervisor).
        self.pid_ns = -1
        if self.maps_ids:
            with contextlib.suppress(OSError):
                self.pid_ns = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
        # The write end of each init's lifeline, closed as it is reaped (or
        # as this process dies): the init's parent cannot be seen from inside.
        self.lifelines: dict[int, int] = {}
        # Requests to fork later ("after" seconds from their arrival), by when, oldest first.
        self.deferred: list[tuple[float, dict[str, Any]]] = []
        # The user namespace and read-only root each namespaced worker joins
        # (None where refused: such workers make their own).
        self.template = template

    def serve(self) -> NoReturn:
        signal.signal(signal.SIGCHLD, lambda signum, frame: None)
        signal.set_wakeup_fd(self.wake_w)
        # What the host needs to compile programs for the workers itself.
        ready = {
            "ready": os.getpid(),
            "magic": importlib.util.MAGIC_NUMBER.hex(),
            "optimize": sys.flags.optimize,
        }
        try:
            self.ctl.send(orjson.dumps(ready))
        except OSError:
            self.shutdown()  # the host went away while this booted
        while True:
            watched = [self.ctl.fileno(), self.wake_r, *self.mapping]
            timeout = None
            if self.deferred:
                timeout = max(0.0, self.deferred[0][0] - time.monotonic())
            readable, _, _ = select.select(watched, [], [], timeout)
            if self.wake_r in readable:
                with contextlib.suppress(BlockingIOError):
                    os.read(self.wake_r, 4096)
            for fd in readable:
                if fd in self.mapping:
                    self.map_ids(fd)
            self.reap()
            if self.ctl.fileno() in readable:
                try:
                    request = self.ctl.recv(_REQUEST_BYTES)
                except OSError:
                    request = b""
                if not request:
                    self.shutdown()
                message = orjson.loads(request)
                if "cancel" in message:
                    self.cancel(message["cancel"])
                elif delay := _deferral(message):
                    due = time.monotonic() + delay
                    bisect.insort(self.deferred, (due, message), key=lambda item: item[0])
                else:
                    self.fork(message)
            while self.deferred and self.deferred[0][0] <= time.monotonic():
                self.fork(self.deferred.pop(0)[1])

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
                continue  # an init, reparented here when its supervisor died
            status_w, workdir, request_id = entry
            self.requests.pop(request_id, None)
            lifeline = self.lifelines.pop(pid, None)
            if lifeline is not None:
                os.close(lifeline)
            for ask, (child, _answer) in list(self.mapping.items()):
                if child == pid:
                    self.end_mapping(ask)
            # The CPU time lets the host tell the CPU limit's SIGKILL from others,
            # the peak RSS (KiB) a real memory exhaustion from a claimed one.
            cpu = usage.ru_utime + usage.ru_stime
            with contextlib.suppress(OSError):
                os.write(status_w, b"%d %.3f %d" % (status, cpu, usage.ru_maxrss))
            os.close(status_w)
            if workdir is not None:
                _remove_workdir(workdir)

    def shutdown(self) -> NoReturn:
        for pid in self.children:
            _kill_worker(pid)
        signal.set_wakeup_fd(-1)
        # Every child, and the inits reparented here as their supervisors die.
        while True:
            try:
                pid, _ = os.waitpid(-1, 0)
            except ChildProcessError:
                break
            entry = self.children.pop(pid, None)
            if entry is not None:
                os.close(entry[0])
                if entry[1] is not None:
                    _remove_workdir(entry[1])
        # Its own directory too: a host killed (or one that never closed its
        # runtime) cannot remove it, and the socket's end is all the zygote sees.
        _remove_workdir(self.tmp)
        os._exit(0)

    def map_ids(self, ask: int) -> None:
        """Write the id maps of the worker that asked on ``ask`` (it unshared), and answer."""
        pid, answer = self.mapping[ask]
        try:
            asked = os.read(ask, 1)
        except OSError:
            asked = b""
        if asked == b"1":
            try:
                self.namespaces.write_id_maps(pid)
                done = b"1"
            except OSError:
                done = b"0"
            with contextlib.suppress(OSError):
                os.write(answer, done)
        self.end_mapping(ask)

    def end_mapping(self, ask: int) -> None:
        _pid, answer = self.mapping.pop(ask)
        os.close(ask)
        os.close(answer)

    def cancel(self, request_id: int) -> None:
        """Kill the worker of ``request_id``, unless it was reaped already (or never forked).

        A request still deferred is dropped, and answered as refused.
        """
        for index, (_due, request) in enumerate(self.deferred):
            if request["id"] == request_id:
                del self.deferred[index]
                self.ctl.send(orjson.dumps({"id": request_id, "error": "cancelled"}))
                return
        pid = self.requests.pop(request_id, None)
        if pid is not None and pid in self.children:
            _kill_worker(pid)

    def fork(self, request: dict[str, Any]) -> None:
        request_id = request["id"]
        # A worker that joins the template has a tmpfs of its own for a workdir.
        templated = bool(request["namespaces"]) and self.template is not None
        workdir: str | None = None
        try:
            if not templated:
                # Named by the request: ids are unique for the zygote's life, and
                # its directory is its own (mode 0700; mkdtemp's random names and
                # their retries would buy nothing here but work on every fork).
                workdir = os.path.join(self.tmp, f"run-{int(request_id)}")
                os.mkdir(workdir, 0o700)
            host_end, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        except OSError as exc:
            if workdir is not None:
                _remove_workdir(workdir)
            self.ctl.send(orjson.dumps({"id": request_id, "error": str(exc)}))
            return
        pipes: tuple[int, int, int, int] | None = None
        lifeline: tuple[int, int] | None = None
        try:
            if self.maps_ids and request["namespaces"] and not templated:
                pipes = (*os.pipe(), *os.pipe())  # the worker's ask, the zygote's answer
            pid: int | None = None
            if request["namespaces"] and self.pid_ns >= 0:
                lifeline = os.pipe()
                pid = self.namespaces.fork_as_init(self.pid_ns)
                if pid is None:  # refused: workers make their own from now on
                    os.close(self.pid_ns)
                    self.pid_ns = -1
                    os.close(lifeline[0])
                    os.close(lifeline[1])
                    lifeline = None
            if pid is None:
                pid = fork_unhooked()
        except SandboxError:
            self.shutdown()  # a later worker would join an earlier one's namespace
        except OSError as exc:
            host_end.close()
            child_end.close()
            for fd in (*(pipes or ()), *(lifeline or ())):
                os.close(fd)
            if workdir is not None:
                _remove_workdir(workdir)
            self.ctl.send(orjson.dumps({"id": request_id, "error": f"fork failed: {exc}"}))
            return
        if pid == 0:
            self.child(request, child_end, workdir, pipes, lifeline, templated)
        if lifeline is not None:
            os.close(lifeline[0])
            self.lifelines[pid] = lifeline[1]
        with contextlib.suppress(OSError):
            os.setpgid(pid, pid)  # also done by the child: whichever runs first wins
        child_end.close()
        if pipes is not None:
            ask_r, ask_w, answer_r, answer_w = pipes
            os.close(ask_w)
            os.close(answer_r)
            self.mapping[ask_r] = (pid, answer_w)
        status_r, status_w = os.pipe()
        self.children[pid] = (status_w, workdir, request_id)
        self.requests[request_id] = pid
        try:
            socket.send_fds(
                self.ctl,
                [orjson.dumps({"id": request_id, "pid": pid, "init": lifeline is not None})],
                [host_end.fileno(), status_r],
            )
        except OSError:
            self.shutdown()  # the host went away
        finally:
            host_end.close()
            os.close(status_r)

    def child(
        self,
        request: dict[str, Any],
        sock: socket.socket,
        workdir: str | None,
        pipes: tuple[int, int, int, int] | None,
        lifeline: tuple[int, int] | None,
        templated: bool,
    ) -> NoReturn:
        try:
            os.setpgid(0, 0)
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            # (enter_sandbox sets it again after each credential change.)
            prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            # Unless the zygote died before the death signal was set (an init
            # sees no parent: its lifeline tells).
            if lifeline is not None:
                os.close(lifeline[1])
                self.sandbox.check_lifeline(lifeline[0])
            elif os.getppid() != self.pid:
                os._exit(EXIT_INTERNAL)
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            os.close(null)
            loop, replies = new_worker_loop()
            keep = [sock.fileno(), *_loop_fds(loop)]
            template = self.template if templated else None
            if template is not None:
                keep += template.descriptors
            elif self.template is not None:
                self.template.close()
            id_mapper = None
            as_init = None
            if lifeline is not None:
                as_init = lifeline[0]
                keep.append(as_init)
            if pipes is not None:
                ask_r, ask_w, answer_r, answer_w = pipes
                os.close(ask_r)
                os.close(answer_w)
                keep += [ask_w, answer_r]
                id_mapper = functools.partial(_ask_for_id_maps, ask_w, answer_r)
            layers = self.enter(request, workdir, template, keep, id_mapper, as_init)
            start_bytes = request.get("start_bytes", 0)
            if type(start_bytes) is not int:
                start_bytes = 0
            asyncio.set_event_loop(loop)
            # (Sandboxed: what it touches is the worker's. Skipped when a run waits.)
            warm = request.get("prewarm", True) is not False
            if warm:
                prewarm(sock, loop, self.settings)
            serve(sock, loop, layers, self.settings, replies, start_bytes, prewarmed=warm)
        except BaseException as exc:
            self.report_failure(sock, exc)
        os._exit(EXIT_INTERNAL)

    def enter(
        self,
        request: dict[str, Any],
        workdir: str | None,
        template: Any,
        keep: list[int],
        id_mapper: Callable[[bool], bool] | None,
        as_init: int | None,
    ) -> list[list[Any]]:
        fields = {
            "workdir": workdir,
            "template": template,
            "memory_bytes": request["memory_bytes"],
            "cpu_seconds": request["cpu_seconds"],
            "max_open_files": request["max_open_files"],
            "namespaces": request["namespaces"],
            "seccomp": request["seccomp"],
            "landlock": request["landlock"],
            "strict": request["strict"],
        }
        statuses = self.sandbox.enter_sandbox(
            self.sandbox.SandboxConfig(**fields),
            keep_fds=keep,
            id_mapper=id_mapper,
            as_init=as_init,
        )
        return [[status.name, status.active, status.detail] for status in statuses]

    def report_failure(self, sock: socket.socket, exc: BaseException) -> None:
        if isinstance(exc, self.sandbox.SandboxError):
            message = f"sandbox: {exc}"
        else:
            message = f"the worker could not be set up: {type(exc).__name__}: {exc}"
        # Before "ready" the host reports this as a ``sandbox`` outcome; after
        # it, as a protocol failure.
        with contextlib.suppress(BaseException):
            sock.sendall(encode_frame({"type": "error", "kind": "sandbox", "message": message}))


def _deferral(request: dict[str, Any]) -> float:
    """How long to wait before forking for ``request``: its ``after``, within bounds."""
    after = request.get("after", 0)
    if type(after) not in (int, float):
        return 0.0
    return float(min(max(after, 0), _MAX_DEFER))


def _ask_for_id_maps(ask: int, answer: int, unshared: bool) -> bool:
    """In a worker: have the zygote write its id maps; whether it did. Closes both pipes."""
    try:
        os.write(ask, b"1" if unshared else b"0")
        return unshared and os.read(answer, 1) == b"1"
    finally:
        os.close(ask)
        os.close(answer)


def _remove_workdir(workdir: str) -> None:
    """Remove a worker's directory: most programs leave it empty, so try that first."""
    try:
        os.rmdir(workdir)
    except OSError:
        # Imported when first needed: shutil loads bz2 and lzma, and their four
        # shared libraries would be mapped in every worker, which a fork copies
        # and an exit tears down (18 of the zygote's 236 mappings).
        import shutil

        shutil.rmtree(workdir, ignore_errors=True)


def _kill_worker(pid: int) -> None:
    """SIGKILL a worker's process group, or the worker alone if it left the group."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


def _preimport(names: Sequence[str]) -> None:
    """Import the modules programs may use, where this interpreter has them."""
    for name in names:
        with contextlib.suppress(Exception):
            importlib.import_module(name)


def _load_layers(restricted: bool) -> types.ModuleType:
    """Import the sandbox and the language layers; any failure is the zygote's end."""
    sandbox = importlib.import_module("runtime._sandbox._layers")
    importlib.import_module("runtime._worker._imports")
    if restricted:
        importlib.import_module("runtime._worker._restricted")
    return sandbox


def _refuse_to_start(ctl: socket.socket, exc: BaseException) -> NoReturn:
    """Tell the host why the zygote cannot serve (instead of "ready"), and exit."""
    reason = f"{type(exc).__name__}: {exc}"
    with contextlib.suppress(OSError):
        ctl.send(orjson.dumps({"error": f"the sandbox cannot be set up: {reason}"[:2000]}))
    os._exit(EXIT_INTERNAL)


def main(options_json: str) -> NoReturn:
    """Entry point of the zygote process (see ``runtime._host._launch.ZYGOTE_BOOT``)."""
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
    ctl = socket.socket(fileno=options["fd"])
    try:
        sandbox = _load_layers(settings.restricted)
        _preimport(options["preimport"])
        # Before the trust pass: whatever the warm-up loads is loaded in every worker too.
        with contextlib.suppress(Exception):  # (only a speed-up: a worker's prewarm says why)
            warm_up(settings)
        # The import guard's trusted code, found once here rather than in every worker.
        importlib.import_module("runtime._worker._imports").trust_loaded_modules()
        # After the imports, so every mapped library is seen: what each worker
        # would otherwise redo (read /proc/self/maps, probe close_range, scrub the
        # environment block, build the seccomp filter of an init) is done once.
        sandbox.prepare_for_workers()
        # The user namespace and read-only root every namespaced worker joins,
        # made once (a workdir of its own is all a worker adds). Where that is
        # refused, workers make their own namespaces and report what fails.
        template = None
        with contextlib.suppress(sandbox.SandboxError):
            template = sandbox.make_root_template(options["tmp"])
        # Workers' orphans (the inits of killed workers' namespaces) come back here.
        prctl(PR_SET_CHILD_SUBREAPER, 1)
    except BaseException as exc:  # whatever it is, the host must hear of it
        _refuse_to_start(ctl, exc)
    # Everything the worker may import is loaded now: later imports (the
    # program's, through the allow-list) only ever see the standard library.
    sys.path[:] = stdlib_path
    zygote = _ForkServer(ctl, options["tmp"], settings, sandbox, template)
    # Children then share the zygote's heap pages instead of copying them. Not
    # collected first: the boot, GC off (``ZYGOTE_BOOT``), leaves some 800 of
    # its 34,000 objects unreachable (the warm-up's loops, closed), less than
    # the 5-6 ms a full collection takes on the path of a cold ``ptc run``.
    gc.freeze()
    gc.enable()
    zygote.serve()
