"""Host side of the fork server: the zygote process, its spares and each worker.

:class:`WorkerPool` starts the zygote lazily (or adopts one spawned ahead, see
``_launch``), asks it for workers and keeps up to ``spares`` pre-forked,
already sandboxed workers ready for runs with the default sandbox settings
(twice as many while runs end back to back).
The spares are asked for as soon as the zygote is spawned: the requests wait
in its control socket while it boots. A run that finds no spare ready has one forked for
it at once rather than waiting for another run to finish, as long as fewer
than ``max_workers`` workers live (running, spare or being forked); past that
bound runs queue for the next worker let go. Fork requests are
fire-and-forget packets; replies are collected by whichever task needs a
worker next, or by a run while its worker starts (:meth:`WorkerPool.tidy`). A worker is used for
one run and never again. Workers for other settings are forked on demand and
never held: when a run stops waiting for its worker (cancelled, or out of
time), the zygote kills that worker at once and the host closes the reply
whenever it is collected. A dead zygote takes its workers with it (their
parent-death signal, or their lifeline); the next request notices it, lets go
of its spares and replaces it.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
import select
import shutil
import signal
import socket
import sys
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, ClassVar, NamedTuple

import anyio
import anyio.to_thread
import orjson

from .._exceptions import WorkerStartError
from .._worker._protocol import HEADER, ProtocolError, parse_worker_frame
from ._launch import SpawnedZygote, ZygoteSettings, spawn_zygote

__all__ = ["ExitStatus", "SandboxKey", "Worker", "WorkerPool"]

_START_TIMEOUT = 60.0
_STOP_TIMEOUT = 5.0
_REPLY_BYTES = 4096
# A worker's greeting is a few hundred bytes ("ready" and its layers).
_GREETING_BYTES = 1 << 16
_MAGIC = importlib.util.MAGIC_NUMBER.hex()
# How many runs' starts the size asked of the next spares is the largest of.
_STARTS_KEPT = 8
# Runs that end less than this apart keep the machine busy: the spares asked
# for then skip the prewarm. Such a spare is taken within milliseconds, and the
# prewarm's CPU (about 0.5 ms a worker) competes with the runs; where runs are
# further apart the prewarm runs on an idle CPU and shortens the next hand-off.
_BUSY_INTERVAL = 0.010
# The zygote forks a spare asked for after a run ends, while runs are not busy,
# only this long after: the run's caller finishes with it first (its event
# flush, two thread wake-ups, then took 1.1-1.5 ms more while the fork and
# the spare's sandboxing had the other CPU: run_code with an event sink, 2.44
# -> 1.34 ms on a 2-vCPU VM).
_SPARE_AFTER_RUN_DELAY = 0.003


class ExitStatus(NamedTuple):
    """How a worker process ended, as the kernel reported it to its parent.

    Attributes:
        status: the raw wait status.
        cpu_seconds: user plus system CPU time of the worker and its descendants.
        max_rss_bytes: the peak resident set size of the worker or of its largest
            descendant (``ru_maxrss``): the host's own evidence of memory use.
    """

    status: int
    cpu_seconds: float
    max_rss_bytes: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SandboxKey:
    """What a worker's sandbox is fixed to at fork time; spares share one key."""

    memory_bytes: int
    cpu_seconds: float
    max_open_files: int
    namespaces: bool
    seccomp: bool
    landlock: bool
    strict: bool


def layer_states(greeting: Mapping[str, Any] | None) -> dict[str, bool]:
    """Each layer a worker's ``ready`` frame reports, and whether it is active.

    Empty without a ``ready`` frame (the worker never read the program).
    """
    layers = greeting.get("layers") if greeting is not None else None
    if greeting is None or greeting.get("type") != "ready" or not isinstance(layers, list):
        return {}
    return {
        str(layer[0]): layer[1] is True
        for layer in layers
        if isinstance(layer, list) and len(layer) >= 2
    }


def take_greeting(sock: socket.socket) -> dict[str, Any] | None:
    """A new worker's first frame, taken off its channel if it is whole and well formed.

    Taken from a spare between runs (see :meth:`WorkerPool.greet`), so that a
    run need not read and check it on its way. ``None`` leaves the channel as
    it was (the frame has not come yet, or is not a greeting): the run then
    reads the frame itself (and tells what is wrong with it).
    """
    try:
        head = sock.recv(_GREETING_BYTES, socket.MSG_PEEK)
    except OSError:
        return None
    if len(head) < HEADER.size:
        return None
    end = HEADER.size + HEADER.unpack_from(head)[0]
    if len(head) < end:
        return None
    try:
        frame: dict[str, Any] = parse_worker_frame(head[HEADER.size : end])  # type: ignore[assignment]
    except ProtocolError:
        return None
    if frame["type"] not in ("ready", "error"):
        return None
    try:
        taken = len(sock.recv(end))  # all of it: it is in the buffer
    except OSError:
        taken = 0
    return frame if taken == end else {"type": "torn"}


class Worker:
    """One forked worker: its pid (= process group), run channel and status pipe.

    ``finished`` is set by the run once the worker's own final frame was read:
    the worker then only waits to be let go (see ``_bootstrap._ChannelRun.leave``).
    ``start_bytes`` by the run as it sends its start: the pool makes later
    spares ready for starts as big (see :meth:`WorkerPool.release`).
    """

    #: Whether the worker reads the run's tool names in a frame of their own
    #: after the run frame (see ``_protocol``), not in it.
    names_apart: ClassVar[bool] = True

    __slots__ = (
        "_closed",
        "_exited",
        "_status_data",
        "_status_done",
        "finished",
        "greeting",
        "init",
        "pid",
        "sock",
        "start_bytes",
        "status_fd",
    )

    def __init__(
        self, pid: int, sock: socket.socket, status_fd: int, *, init: bool = False
    ) -> None:
        self.pid = pid
        # Forked by the zygote as the init of a new PID namespace (no supervisor).
        self.init = init
        self.sock = sock
        self.status_fd = status_fd
        self.finished = False
        self.start_bytes = 0
        # Its first frame ("ready", or a set-up failure), read ahead of its run.
        self.greeting: dict[str, Any] | None = None
        self._exited = False
        self._closed = False
        self._status_data = bytearray()
        self._status_done = False

    def kill(self) -> None:
        """SIGKILL the worker's whole process group (a no-op once it was reaped).

        The zygote writes the status only after reaping, so a status in the
        pipe means the pid may already be reused: then nothing is signalled.
        """
        if not self._exited:
            self._read_status()
        if not self._exited:
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                # No group: a worker without a PID namespace (and seccomp) may
                # have moved to another one. Its pid is still its own.
                with contextlib.suppress(OSError):
                    os.kill(self.pid, signal.SIGKILL)
            except OSError:
                pass

    async def end(self, grace: float) -> None:
        """End a worker whose run did not finish; return once all of it is gone.

        A worker with a PID namespace is the namespace's init, or its
        supervisor (outside the namespace and the program's reach). The init
        is killed; the supervisor is asked to end (SIGTERM), kills the init and
        exits once it is reaped. Either way the kernel kills and reaps every
        process of the namespace before its init is reaped, so the status the
        zygote reports means none is left and their memory is freed. Waiting is
        bounded by ``grace``; the whole process group is killed after it
        either way (and at once for a worker without a namespace).
        """
        if not self._exited:
            self._read_status()
        if not self._exited and self.supervised:
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGKILL if self.init else signal.SIGTERM)
            await self.wait_status(grace)
        self.kill()

    @property
    def supervised(self) -> bool:
        """Whether the worker's ``ready`` frame reports it runs in a PID namespace of its own.

        (Sent before the worker read the program: nothing the program wrote.)
        """
        return layer_states(self.greeting).get("pid-namespace", False)

    def _read_status(self) -> bool:
        """Read what the status pipe has without blocking; ``False`` if it would block."""
        while not self._status_done:
            try:
                chunk = os.read(self.status_fd, 64)
            except BlockingIOError:
                return False
            except OSError:
                chunk = b""
            if not chunk:
                self._status_done = True
            self._status_data += chunk
        self._exited = bool(self._status_data)
        return True

    async def wait_status(self, grace: float) -> ExitStatus | None:
        """How the worker ended, once the zygote reaped it.

        ``None`` when it is not known within ``grace`` seconds (or the zygote is gone).
        """
        with anyio.move_on_after(grace):
            while not self._read_status():
                await anyio.wait_readable(self.status_fd)
        if not self._exited:
            return None
        try:
            status, cpu, max_rss_kib = self._status_data.split()
            return ExitStatus(int(status), float(cpu), int(max_rss_kib) * 1024)
        except ValueError:
            return None

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.sock.close()
            os.close(self.status_fd)


class _ZygoteProcess:
    """The zygote process and the host end of its control socket.

    Made as soon as the process is spawned; :meth:`greet` then reads its first
    message (``ready``, or why it cannot serve). Fork requests may be sent
    before that: they wait in the socket until the zygote has booted.
    """

    def __init__(self, spawned: SpawnedZygote) -> None:
        self.process = spawned.process
        self.ctl = spawned.ctl
        self.tmp = spawned.tmp
        self._pidfd = spawned.pidfd
        self.alive = True
        self.closing = False
        # Whether its greeting was read: only then is what comes on ``ctl`` a reply.
        self.ready = False
        # Whether code objects compiled here run unchanged in its workers.
        self.compiles_like_host = False
        self._poller = select.poll()
        self._poller.register(self.ctl, select.POLLIN)

    async def greet(self) -> None:
        """Wait for the zygote's greeting; on any failure close it and raise.

        Raises:
            WorkerStartError: it refused to start, exited, or did not become ready in time.
        """
        try:
            with anyio.fail_after(_START_TIMEOUT):
                try:
                    await anyio.wait_readable(self.ctl)
                except anyio.ClosedResourceError:  # the runtime closed meanwhile
                    raise WorkerStartError("the runtime is closed") from None
            try:
                hello = self.ctl.recv(_REPLY_BYTES)
            except OSError:  # reset: it exited with fork requests unread
                hello = b""
            try:
                greeting = orjson.loads(hello) if hello else None
            except orjson.JSONDecodeError:
                greeting = None
            if type(greeting) is dict and isinstance(greeting.get("error"), str):
                raise WorkerStartError(f"the zygote did not start: {greeting['error']}")
            if not hello:
                with anyio.move_on_after(1.0):
                    await self._exited()
                raise WorkerStartError(
                    "the zygote exited before it was ready "
                    f"(exit status {self.process.returncode}; its standard error says why)"
                )
            if type(greeting) is not dict or "ready" not in greeting:
                raise WorkerStartError(f"the zygote did not start (got {hello[:80]!r})")
            self.compiles_like_host = (
                greeting.get("magic") == _MAGIC and greeting.get("optimize") == sys.flags.optimize
            )
            self.ready = True
        except BaseException as exc:
            await self.aclose()
            if isinstance(exc, TimeoutError):
                raise WorkerStartError("the zygote did not become ready in time") from None
            raise

    async def _exited(self) -> None:
        """Return once the process has exited, and reap it."""
        while self.process.poll() is None:
            if self._pidfd is None:
                await anyio.to_thread.run_sync(self.process.wait, abandon_on_cancel=True)
            else:
                await anyio.wait_readable(self._pidfd)

    def request(
        self,
        request_id: int,
        key: SandboxKey,
        start_bytes: int = 0,
        *,
        prewarm: bool = True,
        after: float = 0.0,
    ) -> None:
        """Ask for a worker for ``key`` that makes room for a run's start of ``start_bytes``.

        Without ``prewarm`` the worker skips the prewarm program: a run waits for
        it. With ``after``, the zygote forks it that many seconds from now.
        """
        request: dict[str, object] = {"id": request_id, **_request_fields(key)}
        if start_bytes:
            request["start_bytes"] = start_bytes
        if not prewarm:
            request["prewarm"] = False
        if after:
            request["after"] = after
        try:
            self.ctl.send(orjson.dumps(request))
        except OSError:
            # A full or broken control socket: the zygote is unusable.
            self.alive = False

    def cancel(self, request_id: int) -> None:
        """Have the zygote kill the worker it forked (or forks) for ``request_id``."""
        try:
            self.ctl.send(orjson.dumps({"cancel": request_id}))
        except OSError:
            self.alive = False

    def news(self) -> int:
        """What waits on the control socket: ``POLLIN`` (replies), ``POLLHUP`` (its end), 0."""
        ready = self._poller.poll(0)
        return ready[0][1] if ready else 0

    def collect(self) -> list[tuple[int, Worker | str]]:
        """Read every reply already waiting: ``(request id, worker or error text)``."""
        replies: list[tuple[int, Worker | str]] = []
        while self.alive:
            try:
                message, fds, _flags, _addr = socket.recv_fds(
                    self.ctl, _REPLY_BYTES, 2, socket.MSG_CMSG_CLOEXEC
                )
            except BlockingIOError:
                break
            except OSError:
                message, fds = b"", []
            if not message:
                for fd in fds:
                    os.close(fd)
                self.alive = False
                break
            reply = orjson.loads(message)
            if len(fds) == 2 and "pid" in reply:
                # Naming the socket's kind spares the system calls that would
                # detect it. The status pipe must never block the event loop
                # (the zygote made it non-blocking; this makes sure).
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, 0, fds[0])
                # Non-blocking now, while the worker waits as a spare, rather
                # than when a run takes it.
                sock.setblocking(False)
                os.set_blocking(fds[1], False)
                worker = Worker(reply["pid"], sock, fds[1], init=reply.get("init") is True)
                replies.append((reply["id"], worker))
            else:
                for fd in fds:
                    os.close(fd)
                replies.append((reply["id"], str(reply.get("error", "fork failed"))))
        return replies

    async def aclose(self) -> None:
        """Close the control socket (the zygote then kills its children), wait, clean up."""
        self.alive = False
        if self.closing:
            return
        self.closing = True
        with anyio.CancelScope(shield=True):
            anyio.notify_closing(self.ctl)
            self.ctl.close()
            try:
                with anyio.move_on_after(_STOP_TIMEOUT):
                    await self._exited()
                if self.process.returncode is None:
                    self.process.kill()
                    await self._exited()
            finally:
                if self._pidfd is not None:
                    os.close(self._pidfd)
                    self._pidfd = None
                shutil.rmtree(self.tmp, ignore_errors=True)


class WorkerPool:
    """Lazily started zygote plus up to ``spares`` ready workers for ``default_key``.

    While runs end back to back (less than ``_BUSY_INTERVAL`` apart) it keeps
    twice ``spares``: forking and sandboxing a spare then takes longer than a
    run takes to use one, and a lone caller would wait for each.

    At most ``max_workers`` workers live at once (handed out, spare or asked
    for); within that bound a run that finds no spare gets a worker forked for it.
    """

    def __init__(
        self,
        *,
        settings: ZygoteSettings,
        spares: int,
        default_key: SandboxKey,
        max_workers: int = 64,
        zygote: SpawnedZygote | None = None,
    ) -> None:
        self._settings = settings
        self._max_workers = max(1, max_workers)
        self._target = min(max(0, spares), self._max_workers)
        # While runs are busy (see _BUSY_INTERVAL), twice as many: a spare
        # takes longer to fork and sandbox than a run to use one.
        self._busy_target = min(2 * self._target, self._max_workers)
        # Workers handed out and not yet killed, and the runs waiting for a
        # default-key worker: each of those gets a fork request of its own.
        self._in_use = 0
        self._waiting = 0
        self._freed: anyio.Event | None = None
        self._default_key = default_key
        self._zygote: _ZygoteProcess | None = None
        self._start_lock = anyio.Lock()
        self._read_lock = anyio.Lock()
        self._spares: deque[Worker] = deque()
        self._spare_requests: set[int] = set()
        self._replies: dict[int, Worker | str] = {}
        # Requests whose run gave up waiting: their workers are killed on arrival.
        self._abandoned: set[int] = set()
        self._next_id = 0
        # The sizes of the last runs' starts: the next spares make room for the largest.
        self._starts: deque[int] = deque(maxlen=_STARTS_KEPT)
        # When the last run ended, and whether it ended within _BUSY_INTERVAL
        # of the one before.
        self._last_release = float("-inf")
        self._busy = False
        self._closed = False
        self._spare_error: str | None = None
        if zygote is not None:
            zygote.take()
            self._zygote = _ZygoteProcess(zygote)
            # Asked for now, before the zygote's greeting: it forks them as
            # soon as it has booted, while the caller is still getting ready.
            with contextlib.suppress(_ZygoteDied):  # its greeting will say why
                self._replenish(self._zygote)

    @property
    def zygote_pid(self) -> int | None:
        return None if self._zygote is None else self._zygote.process.pid

    @property
    def compiles_like_host(self) -> bool:
        """Whether the workers run code objects compiled in this process unchanged."""
        zygote = self._zygote
        return zygote is not None and zygote.compiles_like_host

    async def start(self) -> None:
        """Start the zygote (if needed) and ask for the spares."""
        await self._ensure_zygote()

    async def acquire(self, key: SandboxKey) -> Worker:
        """A fresh worker for ``key``, never handed out before.

        Raises:
            WorkerStartError: the zygote cannot be started, keeps dying or hangs.
        """
        zygote = self._zygote
        if (
            zygote is not None
            and zygote.ready
            and zygote.alive
            and self._target
            and key == self._default_key
        ):
            # The common case, without a timeout scope: a spare is ready and the
            # zygote alive (a zero-timeout poll, far cheaper than a receive).
            # Replies waiting are collected later, while the run's worker starts.
            if self._spares and not zygote.news() & select.POLLHUP:
                return self._hand_out(self._spares.popleft())
            try:
                self._collect_now(zygote)
            except _ZygoteDied:
                pass
            else:
                if self._spares:
                    return self._hand_out(self._spares.popleft())
        for attempt in range(2):
            zygote = await self._ensure_zygote()
            try:
                with anyio.fail_after(_START_TIMEOUT):
                    return await self._acquire(zygote, key)
            except _ZygoteDied:
                await self._drop_zygote(zygote)
                if attempt:
                    raise WorkerStartError("the zygote died twice in a row") from None
            except TimeoutError:
                await self._drop_zygote(zygote)
                raise WorkerStartError("the zygote did not fork a worker in time") from None
        raise AssertionError("unreachable")

    def _hand_out(self, worker: Worker) -> Worker:
        self._in_use += 1
        return worker

    def _live(self) -> int:
        """Workers that exist or are on their way: handed out, spare or asked for."""
        return self._in_use + len(self._spares) + len(self._spare_requests)

    async def _acquire(self, zygote: _ZygoteProcess, key: SandboxKey) -> Worker:
        self._collect_now(zygote)
        if key == self._default_key and self._target:
            if self._spares:
                # No replenishing here: a spare forked now would compete with
                # this run for the CPU. :meth:`release` asks for the replacement.
                return self._hand_out(self._spares.popleft())
            # None ready: unless one is on its way, one is asked for on this
            # run's behalf (within the bound); it takes whichever comes first.
            self._waiting += 1
            try:
                while not self._spares:
                    self._replenish(zygote)
                    await self._wait(zygote, lambda: bool(self._spares))
            finally:
                self._waiting -= 1
            return self._hand_out(self._spares.popleft())
        while self._live() >= self._max_workers:
            # At the bound: the next worker killed makes room.
            if self._freed is None:
                self._freed = anyio.Event()
            await self._freed.wait()
        request_id = self._send(zygote, key)
        self._in_use += 1  # counted from the request on, like a spare's
        try:
            await self._wait(zygote, lambda: request_id in self._replies)
        except BaseException:
            self._in_use -= 1
            self._abandon(zygote, request_id)
            raise
        reply = self._replies.pop(request_id)
        if isinstance(reply, str):
            self._in_use -= 1
            raise WorkerStartError(reply)
        return reply

    def _abandon(self, zygote: _ZygoteProcess, request_id: int) -> None:
        """Nobody waits for ``request_id`` any more: its worker ends now.

        If the reply has not come yet, the zygote kills the worker (it forks in
        request order, so the worker exists by the time it reads this), and
        the reply's descriptors are closed whenever it is collected.
        """
        reply = self._replies.pop(request_id, None)
        if reply is None:
            self._abandoned.add(request_id)
            if zygote.alive:
                zygote.cancel(request_id)
        elif isinstance(reply, Worker):
            reply.kill()
            reply.close()

    def _send(
        self, zygote: _ZygoteProcess, key: SandboxKey, *, prewarm: bool = False, after: float = 0.0
    ) -> int:
        self._next_id += 1
        start_bytes = max(self._starts, default=0)
        zygote.request(self._next_id, key, start_bytes, prewarm=prewarm, after=after)
        if not zygote.alive:
            raise _ZygoteDied
        return self._next_id

    def _replenish(self, zygote: _ZygoteProcess, *, after_run: bool = False) -> None:
        """Ask for spares up to the target, or one per waiting run if more, within the bound.

        (A waiting run takes a spare already asked for: it comes sooner than a new one.)
        ``after_run``: a run has just ended; a spare nobody waits for is forked a
        moment later (see _SPARE_AFTER_RUN_DELAY), unless runs are busy.
        """
        wanted = max(self._busy_target if self._busy else self._target, self._waiting)
        while (coming := len(self._spares) + len(self._spare_requests)) < wanted and (
            self._live() < self._max_workers
        ):
            # One a run already waits for skips the prewarm, which would only
            # delay that run (by about 0.7 ms) to spare it less (about 0.1 ms),
            # and costs CPU when runs outnumber the spares. So does one asked
            # for while runs end back to back (see _BUSY_INTERVAL).
            prewarm = coming >= self._waiting and not self._busy
            after = _SPARE_AFTER_RUN_DELAY if after_run and prewarm else 0.0
            request_id = self._send(zygote, self._default_key, prewarm=prewarm, after=after)
            self._spare_requests.add(request_id)

    def _collect(self, zygote: _ZygoteProcess) -> None:
        for request_id, reply in zygote.collect():
            if request_id in self._spare_requests:
                self._spare_requests.discard(request_id)
                if isinstance(reply, Worker):
                    self._spares.append(reply)
                else:
                    self._spare_error = reply
            elif request_id in self._abandoned:
                self._abandoned.discard(request_id)
                if isinstance(reply, Worker):
                    reply.kill()
                    reply.close()
            else:
                self._replies[request_id] = reply
        if not zygote.alive:
            raise _ZygoteDied

    def _collect_now(self, zygote: _ZygoteProcess) -> None:
        """:meth:`_collect`, unless a task waits on the control socket: it collects then.

        (Reading under a waiting task could take the reply it waits for, and
        then nothing would wake it.)
        """
        if not self._read_lock.locked():
            self._collect(zygote)

    async def _wait(self, zygote: _ZygoteProcess, ready: Callable[[], bool]) -> None:
        while not ready():
            async with self._read_lock:
                # (Another task may have collected a failed spare while
                # this one waited for the lock: no reply is coming then.)
                if self._spare_error is None and not ready():
                    try:
                        await anyio.wait_readable(zygote.ctl)
                    except anyio.ClosedResourceError:
                        raise _ZygoteDied from None
                    self._collect(zygote)
                if self._spare_error is not None:
                    message, self._spare_error = self._spare_error, None
                    raise WorkerStartError(message)

    def greet(self) -> None:
        """Take the greeting ("ready") of each spare that has sent it since last time.

        Between runs (the housekeeping after each one, or :meth:`tidy`): a spare
        that sent it while the last run went on is then handed to the next
        run greeted, and that run does not read it. A spare still setting up
        keeps it in its channel; its run reads it as it comes.
        """
        for spare in self._spares:
            if spare.greeting is None:
                spare.greeting = take_greeting(spare.sock)

    def tidy(self) -> None:
        """Take in the replies waiting on the control socket and the spares' greetings.

        The replies are new spares, if any; for the greetings see :meth:`greet`.

        For a moment when the host would otherwise wait (a run calls it while its
        worker starts): the next :meth:`acquire` then finds them collected. A
        task waiting for a reply collects for itself; this leaves them to it.
        """
        self.greet()
        zygote = self._zygote
        if (
            zygote is not None
            and zygote.ready
            and zygote.alive
            and not self._read_lock.locked()
            and zygote.news()
        ):
            with contextlib.suppress(_ZygoteDied):  # noticed (and replaced) on the next acquire
                self._collect(zygote)

    def release(self, worker: Worker) -> None:
        """Kill and close ``worker`` after its run, then top the spares up again.

        The spares asked for from then on make room for a start as big as the
        largest of the last runs' (a large set of tool names is most of it).
        """
        if worker.start_bytes:
            self._starts.append(worker.start_bytes)
        now = time.monotonic()
        self._busy = now - self._last_release < _BUSY_INTERVAL
        self._last_release = now
        self._retire(worker)

    def _retire(self, worker: Worker) -> None:
        worker.kill()
        worker.close()
        self._in_use -= 1
        if self._freed is not None:
            self._freed.set()
            self._freed = None
        zygote = self._zygote
        if zygote is not None and zygote.alive and not self._closed:
            self._replenish(zygote, after_run=True)

    async def _ensure_zygote(self) -> _ZygoteProcess:
        if self._closed:
            raise WorkerStartError("the runtime is closed")
        zygote = self._zygote
        if zygote is not None and zygote.ready and zygote.alive:
            return zygote
        async with self._start_lock:
            zygote = self._zygote
            if zygote is not None and zygote.ready and zygote.alive:
                return zygote
            if zygote is not None and zygote.ready:
                await self._drop_zygote(zygote)
            if self._closed:
                raise WorkerStartError("the runtime is closed")
            if self._zygote is None:
                # Its spares asked for at once: they wait in the control socket
                # and are forked as soon as it has booted.
                zygote = self._zygote = _ZygoteProcess(spawn_zygote(self._settings))
                with contextlib.suppress(_ZygoteDied):  # its greeting will say why
                    self._replenish(zygote)
            else:
                zygote = self._zygote  # spawned ahead (the ``zygote`` argument), not yet greeted
            try:
                await zygote.greet()
            except BaseException:
                await self._drop_zygote(zygote)
                raise
            return zygote

    async def _drop_zygote(self, zygote: _ZygoteProcess) -> None:
        if self._zygote is zygote:
            self._zygote = None
            while self._spares:
                self._spares.popleft().close()
            self._spare_requests.clear()
            for reply in self._replies.values():
                if isinstance(reply, Worker):
                    reply.close()
            self._replies.clear()
            # Its remaining children die with it (see _ZygoteProcess.aclose).
            self._abandoned.clear()
        await zygote.aclose()

    async def aclose(self) -> None:
        """Release the spares and stop the zygote; safe to call twice."""
        self._closed = True
        zygote = self._zygote
        if zygote is not None:
            with anyio.CancelScope(shield=True):
                await self._drop_zygote(zygote)


@functools.cache
def _request_fields(key: SandboxKey) -> dict[str, object]:
    return asdict(key)


class _ZygoteDied(Exception):
    pass
