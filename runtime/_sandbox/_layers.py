"""OS isolation layers for one worker process, applied in a fixed order.

:func:`enter_sandbox` runs in a freshly forked, single-threaded worker before
any untrusted code. Each layer is applied where the machine supports it and
reported as a :class:`LayerStatus`; with ``strict`` a missing layer raises
:class:`SandboxError` instead. The order matters, because later layers forbid
what earlier ones need:

1. **fds**: every descriptor not in ``keep_fds`` (plus 0, 1, 2) is closed.
2. **environment**: ``os.environ``, ``posix.environ`` and the C environment are
   emptied and the process's original environment block is zeroed in memory.
3. **workdir**: the cwd becomes the private work directory.
4. **namespaces**: user, mount, network, IPC, UTS and PID namespaces in one
   ``unshare``; a private root (read-only Python installation, three devices,
   the workdir at ``/tmp``) through ``pivot_root``; then two internal forks.
   A worker of a zygote joins the zygote's :class:`RootTemplate` instead: the
   user namespace and the read-only root it made once (:func:`make_root_template`),
   then a copy of that mount namespace, new IPC, UTS and PID namespaces, and
   a tmpfs of its own at ``/tmp`` for the workdir; where its seccomp filter
   will deny it every new socket it joins the template's empty network
   namespace too, else it makes its own.
   The calling process becomes the *supervisor* (outside the new PID
   namespace, in the caller's process group, which is what the host kills);
   its child is the namespace's *init* (PID 1, our code, in the same process
   group, ``SIGKILL`` when the supervisor dies); the init's child is the
   program (PID 2), the only process that returns. When the init dies, for
   whatever reason, the kernel kills every process of the namespace, whatever
   they did to their signals, groups or sessions: nothing of a run outlives
   it. The init reaps and reports the program's wait status to the supervisor,
   which exits the same way (re-raising its signal, and reporting ``SIGXCPU``
   when the CPU hard limit caused a ``SIGKILL``). A worker the zygote forked
   as root is already the init of a PID namespace made for it (``as_init``):
   it forks nothing and is the program, PID 1 — one process per run — and
   its end is the namespace's.
5. **privileges**: supplementary groups dropped, uid/gid switched to an
   unprivileged id (see ``_namespaces``), the capability bounding, ambient,
   permitted and effective sets emptied, ``no_new_privs`` and non-dumpable set.
   A credential change resets the parent-death signal: the caller's (the
   zygote's ``SIGKILL``) is set again after each one.
6. **rlimits**: ``RLIMIT_CORE`` 0, ``RLIMIT_NOFILE``, ``RLIMIT_FSIZE``,
   ``RLIMIT_NPROC`` 1, ``RLIMIT_MEMLOCK``/``RLIMIT_MSGQUEUE`` 0, ``RLIMIT_CPU``
   (``SIGXCPU``, then ``SIGKILL`` a second later) and ``RLIMIT_AS`` last.
7. **landlock**: read-only Python installation, read-write workdir, the
   devices; no TCP; no signals or abstract sockets out of the domain.
8. **seccomp**: last, since it forbids ``mount``, ``unshare``, ``setuid``,
   ``setsid``, the ``prctl`` options that would undo the layers above... See
   ``_seccomp`` for the list.

Contract with the worker bootstrap:

* The worker is single threaded afterwards: ``clone`` is denied, threads too
  (``threading.Thread.start`` raises ``RuntimeError``), so asyncio's default
  executor is unusable.
* The asyncio event loop may be created before (pass its epoll and self-pipe
  fds in ``keep_fds``) or after: ``epoll_create1`` and
  ``socketpair(AF_UNIX)`` stay allowed, every other socket call is denied.
* Late imports work from the standard library and ``site-packages`` only;
  pre-import (``_imports.preload_modules``) what the program may use.
* A worker killed by the filter dies of ``SIGSYS``; by the CPU limit,
  of ``SIGXCPU`` as seen by the host; by memory, usually a ``MemoryError``.
* The program can write anything to the channel (it shares the process with
  the bootstrap), including ``SCM_RIGHTS`` messages: the host must read the
  channel with plain ``recv`` (never accept passed descriptors) and validate
  every frame.
* The program runs in a session of its own: killing the worker's process
  group kills the supervisor and the init, and the namespace with the init.
  Without a PID namespace the worker itself is the program; it stays in its
  process group (seccomp denies ``setsid`` and ``setpgid``).

Security warning: this is the security boundary for hostile programs; the
import allow-list and RestrictedPython are extra, bypassable conveniences.
Layers that a machine lacks are reported, not faked: use ``strict`` to refuse
to run without them.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import json
import math
import os
import posix
import resource
import signal
import sys
import sysconfig
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final, NoReturn

from .._exceptions import SandboxError
from . import _landlock, _namespaces, _seccomp
from ._libc import (
    PR_CAP_AMBIENT,
    PR_CAP_AMBIENT_CLEAR_ALL,
    PR_CAPBSET_DROP,
    PR_GET_NO_NEW_PRIVS,
    PR_GET_PDEATHSIG,
    PR_SET_DUMPABLE,
    PR_SET_NO_NEW_PRIVS,
    PR_SET_PDEATHSIG,
    fork_unhooked,
    libc,
    prctl,
)

__all__ = [
    "LayerStatus",
    "RootTemplate",
    "SandboxConfig",
    "SandboxError",
    "check_lifeline",
    "enter_sandbox",
    "make_root_template",
    "prepare_for_workers",
    "probe_layers",
    "python_paths",
]

_CAP_VERSION_3: Final = 0x20080522
# capget/capset's struct __user_cap_header_struct (version, pid) and its two
# __user_cap_data_struct (effective, permitted, inheritable), made at import
# (in the zygote): made by a forked worker, each ctypes type costs it about
# 40 us and a dozen copied pages.
_CapHeader: Final = ctypes.c_uint32 * 2
_CapData: Final = ctypes.c_uint32 * 6
_HOSTNAME: Final = "ptc-sandbox"

PROTECTS: Final = {
    "environment": "host secrets in environment variables (also scrubbed from memory)",
    "workdir": "relative paths landing outside the run's private directory",
    "user-namespace": "host root: sandbox ids map to unprivileged host ids",
    "mount-namespace": "host files: a private root with read-only Python and the workdir only",
    "network-namespace": "network access: no interface but a loopback that is down",
    "pid-namespace": "seeing or signalling host processes; outliving the run (every process "
    "of the namespace dies with its init)",
    "ipc-namespace": "host SysV and POSIX IPC objects",
    "uts-namespace": "the host name",
    "privileges": "capabilities, set-uid escalation and files owned by the host's users",
    "rlimits": "exhausting memory, CPU, disk, file descriptors; core dumps",
    "landlock": "file access outside Python and the workdir; TCP; signals leaving the sandbox",
    "seccomp": "fork/exec, sockets, ptrace, mounts, namespaces, undoing the layers above "
    "(prctl by option, setsid), kernel attack surface",
}

_NAMESPACE_LAYERS: Final = (
    "user-namespace",
    "mount-namespace",
    "network-namespace",
    "pid-namespace",
    "ipc-namespace",
    "uts-namespace",
)


@dataclass(frozen=True, slots=True)
class RootTemplate:
    """A user namespace, a private root and an empty network, made once for every worker.

    Made by :func:`make_root_template` in the zygote. Each worker joins the
    user namespace, makes a copy of the mount namespace (its root is the
    read-only private root, ``/tmp`` an empty mount point), mounts a tmpfs of
    its own at ``/tmp`` and unshares the IPC, UTS and PID namespaces as any
    worker does. A worker whose seccomp filter will deny it every new socket
    (seccomp on, on a machine where the filter holds) joins the network
    namespace too, which has nothing in it but a loopback that is down; any
    other worker makes its own. What a worker would otherwise redo per run (a
    user namespace and its id maps, a copy of the host's whole mount table, a
    tmpfs root, a bind mount per path, ``pivot_root`` and the detaching of the
    old root; a network namespace, the costliest to make and tear down) is
    done once.

    Attributes:
        user: a descriptor of the user namespace (``/proc/<pid>/ns/user``).
        mount: a descriptor of the mount namespace holding the root.
        network: a descriptor of the empty network namespace, which the user
            namespace owns.
        mapping: how the namespace's ids map: ``"privileged"`` (root: the
            sandbox ids map to unprivileged host ids) or ``"self"`` (our own
            host ids, the one mapping an unprivileged user may write).
        read_only: the paths bound read-only into the root.
        devices: the devices bound into it.
        sockets_denied: whether a worker's seccomp filter, which denies it
            every new socket, holds on this machine (the holder installed it
            before it exited). Only then do workers share the network namespace.
    """

    user: int
    mount: int
    network: int
    mapping: str
    read_only: tuple[str, ...]
    devices: tuple[str, ...]
    sockets_denied: bool = False

    @property
    def descriptors(self) -> tuple[int, int, int]:
        """The namespaces' descriptors, which a worker must keep open until it joins."""
        return (self.user, self.mount, self.network)

    def close(self) -> None:
        """Close the descriptors (a worker, once it has joined; the zygote, at its end)."""
        for fd in self.descriptors:
            with contextlib.suppress(OSError):
                os.close(fd)


@dataclass(frozen=True, slots=True, kw_only=True)
class SandboxConfig:
    """What to apply to one worker.

    Attributes:
        workdir: the private, empty directory the host created for this run;
            ``None`` with a ``template``, whose workers get a tmpfs of their own.
        memory_bytes: ``RLIMIT_AS`` of the program.
        cpu_seconds: CPU time; rounded up to whole seconds (``RLIMIT_CPU``).
        max_file_bytes: ``RLIMIT_FSIZE``; the default 0 lets the program create
            files but not write a single byte to them.
        max_open_files: ``RLIMIT_NOFILE``.
        namespaces, seccomp, landlock: switch an OS layer off (tests, debugging).
        strict: raise :class:`SandboxError` when a switched-on layer is unavailable.
        template: the zygote's :class:`RootTemplate`, joined when ``namespaces``
            is on (its descriptors must be among the kept ones; they are closed).
    """

    workdir: str | None
    memory_bytes: int
    cpu_seconds: float
    max_file_bytes: int = 0
    max_open_files: int = 64
    namespaces: bool = True
    seccomp: bool = True
    landlock: bool = True
    strict: bool = False
    template: RootTemplate | None = None


@dataclass(frozen=True, slots=True)
class LayerStatus:
    """One layer's state: ``active`` or not, why, and what it protects against."""

    name: str
    active: bool
    detail: str
    protects: str


class _Report:
    """Collects layer statuses; with ``strict``, :meth:`check` refuses if a layer failed.

    Every layer is tried before the refusal, so that it names all that are missing.
    """

    def __init__(self, strict: bool) -> None:
        self.strict = strict
        self.statuses: list[LayerStatus] = []
        self.missing: dict[str, list[str]] = {}  # reason -> the required layers it took

    def add(self, name: str, active: bool, detail: str, *, required: bool = True) -> None:
        self.statuses.append(LayerStatus(name, active, detail, PROTECTS[name]))
        if required and not active:
            self.missing.setdefault(detail, []).append(name)

    def check(self) -> None:
        if not self.strict or not self.missing:
            return
        parts = []
        for detail, names in self.missing.items():
            if len(names) == 1:
                parts.append(f"layer {names[0]!r} is unavailable: {detail}")
            else:
                listed = ", ".join(repr(name) for name in names)
                parts.append(f"layers {listed} are unavailable: {detail}")
        raise SandboxError("; ".join(parts))


@functools.cache
def python_paths() -> tuple[str, ...]:
    """Directories the worker reads late imports and shared libraries from.

    The standard library and ``site-packages`` of the running and the base
    installation, this package, and the directories of mapped shared libraries.
    Cached: the zygote computes it once after its imports, and every forked
    worker inherits the answer instead of re-reading ``/proc/self/maps``.
    """
    found = set(_installation_paths())
    with contextlib.suppress(OSError), open("/proc/self/maps", encoding="utf-8") as maps:
        for line in maps:
            fields = line.split(maxsplit=5)
            if len(fields) == 6 and ".so" in fields[5]:
                found.add(os.path.dirname(fields[5].strip()))
    real = sorted({os.path.realpath(path) for path in found if os.path.isdir(path)})
    # Keep only the outermost directories: a bind mount of a parent covers its children.
    kept: list[str] = []
    for path in real:
        if not any(path.startswith(parent.rstrip("/") + "/") for parent in kept):
            kept.append(path)
    return tuple(kept)


@functools.cache
def _installation_paths() -> tuple[str, ...]:
    # sysconfig is slow on first use: computed once, in the zygote ideally.
    found: set[str] = {os.path.dirname(os.path.abspath(__file__))}
    for scheme_vars in (None, {"base": sys.base_prefix, "platbase": sys.base_exec_prefix}):
        paths = sysconfig.get_paths(vars=scheme_vars)
        found.update(paths[key] for key in ("stdlib", "platstdlib", "purelib", "platlib"))
    return tuple(sorted(found))


def prepare_for_workers() -> None:
    """Do once, in a process that forks workers (the zygote), what every worker would redo.

    What it computes or scrubs is inherited by every child forked afterwards:
    the paths the workers read (:func:`python_paths`), whether the kernel
    closes descriptor ranges, its last capability number, the scrubbed
    original environment block, the seccomp filter of an init (PID 1 in its
    namespace). Each worker still
    applies every layer itself; only the preparation is shared.
    """
    python_paths()
    _close_range()
    _last_capability()
    _clear_environment()
    with contextlib.suppress(_seccomp.SeccompUnavailableError):
        _seccomp.prepare_filter(1)


def make_root_template(staging: str) -> RootTemplate:
    """Make the :class:`RootTemplate` every worker of this process joins.

    Forks a short-lived holder that unshares a user, a mount and a network
    namespace, gets its id maps (as root this process writes them: the
    sandbox ids map to unprivileged host ids, as for a worker; otherwise the
    holder maps itself) and builds the read-only private root with ``/tmp``
    as an empty mount point, using ``staging`` (an existing directory: the
    zygote's own) as its mount point in the holder's namespace only. This
    process opens the three namespaces, which outlive the holder as long as
    the descriptors are open.

    Raises:
        SandboxError: with the reason, when this machine has no user
            namespaces for us or the root cannot be built (the zygote's
            workers then make their own namespaces, and report what fails).
    """
    staging = os.path.realpath(staging)
    # A read-only path above the staging directory would show every run's workdir.
    read_only = tuple(
        path for path in python_paths() if not (staging + "/").startswith(path.rstrip("/") + "/")
    )
    privileged = os.geteuid() == 0
    report_r, report_w = os.pipe()
    go_r, go_w = os.pipe()
    try:
        holder = os.fork()
    except OSError as exc:
        for fd in (report_r, report_w, go_r, go_w):
            os.close(fd)
        raise SandboxError(f"cannot fork the template's holder: {exc}") from exc
    if holder == 0:  # pragma: no cover - runs in the holder, reported through the pipe
        os.close(report_r)
        os.close(go_w)
        _hold_template(staging, read_only, privileged, report_w, go_r)
    os.close(report_w)
    os.close(go_r)
    try:
        answer = os.read(report_r, 4096)
        if privileged and answer == b"u":  # unshared: it waits for its id maps
            try:
                _namespaces.write_id_maps(holder)
                mapped = b"1"
            except OSError:
                mapped = b"0"
            os.write(go_w, mapped)
            answer = os.read(report_r, 4096)
        if not answer.startswith(b"1"):
            reason = answer[1:].decode(errors="replace") or "the holder ended without a word"
            raise SandboxError(f"cannot make the namespace template: {reason}")
        opened: list[int] = []
        try:
            for kind in ("user", "mnt", "net"):
                opened.append(os.open(f"/proc/{holder}/ns/{kind}", os.O_RDONLY | os.O_CLOEXEC))
        except OSError:
            for fd in opened:
                os.close(fd)
            raise
        user, mount, network = opened
    except OSError as exc:
        raise SandboxError(f"cannot make the namespace template: {exc}") from exc
    finally:
        os.close(report_r)
        os.close(go_w)  # the holder's cue to exit
        with contextlib.suppress(ChildProcessError):
            os.waitpid(holder, 0)
    sockets_denied = answer[1:2] == b"s"
    devices = tuple(device for device in answer[2:].decode().split(",") if device)
    mapping = "privileged" if privileged else "self"
    return RootTemplate(user, mount, network, mapping, read_only, devices, sockets_denied)


def _hold_template(
    staging: str, read_only: tuple[str, ...], privileged: bool, report: int, go: int
) -> NoReturn:
    """The holder's body (see :func:`make_root_template`); never returns.

    Reports ``b"u"`` when, as root, it waits for its id maps, then ``b"1"``,
    ``b"s"`` if a worker's seccomp filter could be installed here (``b"-"``
    if not) and the devices it bound (comma-separated), or ``b"0"`` and why;
    exits once its parent closes ``go`` (the parent has opened the namespaces
    by then).
    """
    outcome = b"0"
    try:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        uid, gid = os.geteuid(), os.getegid()
        _namespaces.unshare(
            _namespaces.CLONE_NEWUSER | _namespaces.CLONE_NEWNS | _namespaces.CLONE_NEWNET
        )
        if privileged:
            os.write(report, b"u")
            if os.read(go, 1) != b"1":
                raise SandboxError("its id maps were not written")
            os.setgroups([])
        else:
            _namespaces.map_self(uid, gid)
        devices = _namespaces.build_template_root(staging, read_only)
        # Last, as a worker does: whether the filter that denies a worker every
        # new socket holds on this machine (this process only waits and exits now).
        try:
            _seccomp.install_filter(os.getpid())
            sockets = b"s"
        except OSError:
            sockets = b"-"
        outcome = b"1" + sockets + ",".join(devices).encode()
    except BaseException as exc:  # a forked holder must reach _exit whatever happens
        outcome = b"0" + f"{type(exc).__name__}: {exc}"[:1000].encode(errors="replace")
    finally:
        try:
            os.write(report, outcome)
            os.read(go, 1)
        finally:
            os._exit(0)


# close_range(2)'s "to the last descriptor" (~0U).
_LAST_FD: Final = 0xFFFFFFFF


@functools.cache
def _close_range() -> Callable[[int, int], bool] | None:
    """``close_range(low, high)`` where libc and the kernel have it (probed once)."""
    function = getattr(libc, "close_range", None)
    if function is None:
        return None
    function.argtypes = (ctypes.c_uint, ctypes.c_uint, ctypes.c_uint)
    function.restype = ctypes.c_int
    if function(_LAST_FD, _LAST_FD, 0) != 0:  # closes nothing; fails on an older kernel
        return None

    def close_range(low: int, high: int) -> bool:
        return bool(function(low, high, 0) == 0)

    return close_range


def _close_fds(keep: Sequence[int]) -> None:
    close_range = _close_range()
    if close_range is not None:
        # One system call per gap between the kept descriptors, without
        # listing the open ones first.
        low = 0
        for fd in sorted(set(keep)):
            if fd > low and not close_range(low, fd - 1):
                break
            low = fd + 1
        else:
            if close_range(low, _LAST_FD):
                return
    # closerange() uses close_range(2) where it exists, but falls back to one
    # close() per number: bound the range by the highest fd actually open.
    try:
        top = max(int(name) for name in os.listdir("/proc/self/fd")) + 1
    except (OSError, ValueError):
        top = 1 << 20
    low = 0
    for fd in sorted(set(keep)):
        if fd > low:
            os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, max(low, top))


# How the environment block the process was started with was scrubbed, once
# done: in this process, or in the zygote before it forked it (a fork copies
# the zeroed memory, and nothing writes to that block again).
_scrubbed_block: str | None = None


def _clear_environment() -> str:
    global _scrubbed_block
    count = len(os.environ)
    os.environ.clear()
    # os.environ is a copy: the interpreter's own snapshot and libc's still hold the values.
    posix.environ.clear()
    libc.clearenv()
    if _scrubbed_block is not None:
        return f"{count} variables removed, {_scrubbed_block}"
    try:
        with open("/proc/self/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
        # Fields 50 and 51 of /proc/<pid>/stat (1-based, fields[0] is field 3).
        start, end = int(fields[47]), int(fields[48])
        if 0 < start <= end:
            if start < end:
                ctypes.memset(start, 0, end - start)
            _scrubbed_block = f"{end - start} bytes of the original block zeroed"
            return f"{count} variables removed, {_scrubbed_block}"
    except (OSError, IndexError, ValueError):
        pass
    return f"{count} variables removed (original block not scrubbed: /proc unreadable)"


@dataclass(frozen=True, slots=True)
class _ParentDeath:
    """The caller's parent-death signal, set again after each credential change.

    The kernel clears it whenever the effective ids change (``setresuid`` in
    ``build_private_root`` and in the privilege drop), which would let a spare
    outlive a killed zygote.
    """

    signum: int
    parent: int

    @classmethod
    def capture(cls) -> _ParentDeath:
        value = ctypes.c_int(0)
        prctl(PR_GET_PDEATHSIG, ctypes.addressof(value))
        return cls(value.value, os.getppid())

    def restore(self) -> None:
        """Set the signal again; exit at once if the parent died meanwhile."""
        if self.signum:
            prctl(PR_SET_PDEATHSIG, self.signum)
            if os.getppid() != self.parent:
                os._exit(1)


@dataclass(slots=True)
class _Namespaces:
    """What :func:`_enter_namespaces` achieved, for the later layers."""

    mapping: str | None = None  # "privileged", "self" or None (no user namespace)
    pid: bool = False  # the program is PID 2 under an init of ours, or PID 1 (lifeline)
    lifeline: int = -1  # the program is the init its parent forked: closes as it dies


def _enter_namespaces(
    config: SandboxConfig,
    workdir: str,
    read_only: list[str],
    report: _Report,
    parent_death: _ParentDeath,
    id_mapper: Callable[[bool], bool] | None,
    as_init: int | None,
) -> _Namespaces:
    """Unshare, map ids, build the private root, fork init and program; return in the program.

    With ``as_init`` (see :func:`enter_sandbox`) the PID namespace exists and
    this process is its init: nothing is forked, it is the program.
    """
    flags = (
        _namespaces.CLONE_NEWUSER
        | _namespaces.CLONE_NEWNS
        | _namespaces.CLONE_NEWNET
        | _namespaces.CLONE_NEWIPC
        | _namespaces.CLONE_NEWUTS
    )
    if as_init is None:
        flags |= _namespaces.CLONE_NEWPID
    privileged = os.geteuid() == 0
    uid, gid, parent = os.geteuid(), os.getegid(), os.getpid()
    helper = -1
    # A mapper outside the new namespace (the zygote) spares the fork of a helper.
    forks_helper = privileged and id_mapper is None
    if forks_helper and as_init is not None:
        # (The helper would find this process by its PID, 1 in here.)
        raise SandboxError("an init of a PID namespace needs an id mapper as root")
    if forks_helper:
        go_r, go_w = os.pipe()
        done_r, done_w = os.pipe()
        try:
            helper = os.fork()
        except OSError as exc:
            for name in _NAMESPACE_LAYERS:
                report.add(name, False, f"cannot fork the id-map helper: {exc}")
            return _Namespaces()
        if helper == 0:
            os.close(go_w)
            os.close(done_r)
            _namespaces.map_ids(go_r, done_w, parent)
        os.close(go_r)
        os.close(done_w)
    try:
        _namespaces.unshare(flags)
        unshared: OSError | None = None
    except OSError as exc:
        unshared = exc
    if forks_helper:
        os.write(go_w, b"0" if unshared else b"1")
        mapped = os.read(done_r, 1) == b"1"
        os.close(go_w)
        os.close(done_r)
        os.waitpid(helper, 0)
    elif privileged and id_mapper is not None:
        mapped = id_mapper(unshared is None)
    if unshared is not None:
        reason = f"unshare refused: {unshared.strerror or unshared}"
        if unshared.errno in (errno.EPERM, errno.EACCES, errno.ENOSPC):
            reason += " (user namespaces disabled or limited on this host?)"
        for name in _NAMESPACE_LAYERS:
            report.add(name, False, reason)
        return _Namespaces()
    if privileged:
        if not mapped:
            raise SandboxError("the id-map helper failed: the user namespace is unusable")
        ids = _PRIVILEGED_IDS
    else:
        try:
            _namespaces.map_self(uid, gid)
        except OSError as exc:
            raise SandboxError(f"cannot map ids in the new user namespace: {exc}") from exc
        ids = f"namespace root = host uid {uid} (unprivileged self-mapping)"
    if privileged:
        os.setgroups([])
    _report_new_namespaces(report, ids)
    try:
        devices = _namespaces.build_private_root(workdir, read_only)
        report.add(
            "mount-namespace",
            True,
            f"pivot_root into a read-only tmpfs: Python read-only, {', '.join(devices)}, "
            f"workdir read-write, noexec at {_namespaces.SANDBOX_WORKDIR}; no /proc",
        )
    except OSError as exc:
        report.add("mount-namespace", False, f"private root not built: {exc}")
    return _enter_pid_namespace(
        config, report, parent_death, as_init, "privileged" if privileged else "self"
    )


_PRIVILEGED_IDS: Final = (
    f"sandbox uid/gid {_namespaces.SANDBOX_ID} = host {_namespaces.HOST_SANDBOX_ID}, "
    f"namespace root = host {_namespaces.HOST_ROOT_ID}"
)


_NEW_NETWORK: Final = "new network namespace: loopback down, no interfaces"
_SHARED_NETWORK: Final = (
    "the runtime's network namespace, made once and shared by the workers that may not "
    "open a socket (seccomp): loopback down, no interfaces"
)


def _report_new_namespaces(
    report: _Report, user_detail: str, network_detail: str = _NEW_NETWORK
) -> None:
    """Report the user, network and IPC namespaces entered; name the UTS one and report it."""
    report.add("user-namespace", True, user_detail)
    report.add("network-namespace", True, network_detail)
    report.add("ipc-namespace", True, "new IPC namespace")
    try:
        _namespaces.set_hostname(_HOSTNAME)
        report.add("uts-namespace", True, f"hostname {_HOSTNAME!r}")
    except OSError as exc:
        report.add("uts-namespace", False, str(exc))


def _join_template(
    template: RootTemplate,
    config: SandboxConfig,
    report: _Report,
    parent_death: _ParentDeath,
    as_init: int | None,
) -> _Namespaces:
    """:func:`_enter_namespaces` for a worker of a zygote with a :class:`RootTemplate`.

    Joins its user namespace (becoming the namespace's root), makes a copy of
    its mount namespace and new IPC and UTS (and, without ``as_init``, PID)
    namespaces in one ``unshare``, and mounts the workdir, a tmpfs of its own,
    at ``/tmp``. Its network namespace: the template's where its program may
    not open a socket (seccomp on, and its filter held when the template was
    made), else a new one. Raises :class:`SandboxError` if any step is
    refused: the template was made on this machine, so that is no missing
    layer but a broken one.
    """
    flags = _namespaces.CLONE_NEWNS | _namespaces.CLONE_NEWIPC | _namespaces.CLONE_NEWUTS
    if as_init is None:
        flags |= _namespaces.CLONE_NEWPID
    # Workers that may open sockets (seccomp off, or missing on this machine)
    # would share what they bind in a shared namespace: theirs is their own.
    shared_network = config.seccomp and template.sockets_denied
    if not shared_network:
        flags |= _namespaces.CLONE_NEWNET
    privileged = template.mapping == "privileged"
    try:
        try:
            _namespaces.setns(template.user, _namespaces.CLONE_NEWUSER)
            if privileged:  # from a host id the namespace does not map to its root
                os.setgroups([])
                os.setresgid(0, 0, 0)
                os.setresuid(0, 0, 0)
            _namespaces.setns(template.mount, _namespaces.CLONE_NEWNS)
            if shared_network:
                _namespaces.setns(template.network, _namespaces.CLONE_NEWNET)
        finally:
            template.close()
        _namespaces.unshare(flags)
        owner = _namespaces.SANDBOX_ID if privileged else 0
        _namespaces.mount_workdir(owner, owner)
    except OSError as exc:
        raise SandboxError(f"cannot join the runtime's namespace template: {exc}") from exc
    if privileged:
        ids = _PRIVILEGED_IDS
    else:
        ids = "namespace root = our own host uid (unprivileged self-mapping)"
    _report_new_namespaces(
        report,
        f"{ids}; made once by the runtime, joined by each worker",
        _SHARED_NETWORK if shared_network else _NEW_NETWORK,
    )
    report.add(
        "mount-namespace",
        True,
        "a copy of the runtime's private root (read-only tmpfs, made once by pivot_root: "
        f"Python read-only, {', '.join(template.devices)}), the workdir a tmpfs of its own, "
        f"read-write, noexec at {_namespaces.SANDBOX_WORKDIR}; no /proc",
    )
    return _enter_pid_namespace(config, report, parent_death, as_init, template.mapping)


def _enter_pid_namespace(
    config: SandboxConfig,
    report: _Report,
    parent_death: _ParentDeath,
    as_init: int | None,
    mapping: str,
) -> _Namespaces:
    """The PID namespace's part of entering the namespaces; returns in the program.

    With ``as_init`` this process already is the init of a new PID namespace;
    otherwise one was unshared with the others and the init is forked here.
    """
    if as_init is not None:
        if os.getpid() != 1:  # (the caller's fork made no namespace)
            report.add(
                "pid-namespace", False, f"not the init of a PID namespace: PID {os.getpid()}"
            )
            return _Namespaces(mapping, lifeline=as_init)
        report.add(
            "pid-namespace",
            True,
            "the program is PID 1 of its own namespace, made as it was forked, "
            "and the namespace ends with it",
        )
        return _Namespaces(mapping, pid=True, lifeline=as_init)
    # The id switch (of build_private_root, or joining a template's user
    # namespace) reset the parent-death signal: this process is about to
    # supervise, and must still die with its parent.
    parent_death.restore()
    try:
        _fork_init(config)
    except OSError as exc:
        report.add("pid-namespace", False, f"cannot fork the namespace's init: {exc}")
        return _Namespaces(mapping)
    report.add(
        "pid-namespace",
        True,
        "the program is PID 2 under an init of ours (PID 1), and the namespace ends with it",
    )
    return _Namespaces(mapping, pid=True)


def _fork_init(config: SandboxConfig) -> None:
    """Fork the new PID namespace's init; return only in its child, the program.

    The calling process supervises the init and never returns. The init (PID
    1) dies when the supervisor does (parent-death signal, and a lifeline
    checked once it is set), forks the program (PID 2), reaps it, reports its
    wait status and never returns either. Raises ``OSError`` when the init
    cannot be forked; :class:`SandboxError` (in the init) when the program
    cannot.
    """
    lifeline_r, lifeline_w = os.pipe()
    status_r, status_w = os.pipe()
    try:
        init = fork_unhooked()
    except OSError:
        for fd in (lifeline_r, lifeline_w, status_r, status_w):
            os.close(fd)
        raise
    if init:
        _supervise(init, lifeline_w, status_r, config.cpu_seconds)
    os.close(lifeline_w)
    os.close(status_r)
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    check_lifeline(lifeline_r)
    os.close(lifeline_r)
    try:
        program = fork_unhooked()
    except OSError as exc:
        raise SandboxError(f"the namespace's init cannot fork the program: {exc}") from exc
    if program:
        _serve_as_init(program, status_w)
    os.close(status_w)
    # Out of the supervisor's process group and session: kill(0) and the
    # like cannot reach it (nor the init) from here.
    os.setsid()


def check_lifeline(fd: int) -> None:
    """Exit if the parent holding the lifeline's write end is gone (it closed)."""
    import select

    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP)
    if poller.poll(0):
        os._exit(1)


def _serve_as_init(program: int, status_w: int) -> NoReturn:
    """PID 1 of the run's namespace: reap until the program ends, report its status, end.

    It never runs anything of the program's, holds no descriptor but
    ``status_w`` and has no signal handler, so nothing inside the namespace
    can signal it. Its exit makes the kernel kill whatever else is left there.
    """
    code = 70
    try:
        _close_fds([status_w])
        # Neither traceable nor readable through /proc by a program of the same uid.
        prctl(PR_SET_DUMPABLE, 0)
        while True:
            pid, status = os.waitpid(-1, 0)
            if pid == program:
                break
        os.write(status_w, b"%d" % status)
        code = 0
    except BaseException:  # this process must never return to the caller
        code = 70
    finally:
        os._exit(code)


def _supervise(init: int, lifeline_w: int, status_r: int, cpu_seconds: float) -> NoReturn:
    """The supervisor: wait for the init, then die the way the program did."""
    code = 70
    try:
        for stop in (signal.SIGINT, signal.SIGHUP, signal.SIGQUIT):
            signal.signal(stop, signal.SIG_DFL)
        # The host ends a run it gives up on with SIGTERM here: the init is
        # killed, the kernel kills and reaps every process of its namespace
        # before the init is reaped, and only then does this process exit, so
        # its exit status tells the host that the whole run is gone.
        signal.signal(signal.SIGTERM, lambda signum, frame: _kill(init))
        _close_fds([lifeline_w, status_r])
        while True:
            pid, status, usage = os.wait4(init, 0)
            if pid == init:
                break
        # The init reports the program's status before it exits; nothing
        # reported means the init itself was killed (by the host, with this process).
        reported = os.read(status_r, 32)
        if reported:
            status = int(reported)
        if os.WIFEXITED(status):
            code = os.WEXITSTATUS(status)
        elif os.WIFSIGNALED(status):
            signum: int = os.WTERMSIG(status)
            # The rusage of the init includes the program's. A SIGKILL after the
            # program used up its CPU time is the hard limit's, once it ignored
            # the SIGXCPU of the soft limit.
            cpu_used = usage.ru_utime + usage.ru_stime
            if signum == signal.SIGKILL and reported and cpu_used >= math.ceil(cpu_seconds):
                signum = signal.SIGXCPU
            code = 128 + signum
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            with contextlib.suppress(OSError, ValueError):
                signal.signal(signum, signal.SIG_DFL)
                signal.pthread_sigmask(signal.SIG_UNBLOCK, [signum])
            os.kill(os.getpid(), signum)
    except BaseException:  # this process must never return to the caller
        code = 70
    finally:
        os._exit(code)


def _kill(pid: int) -> None:
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)


def _capabilities_empty() -> bool:
    header = _CapHeader(_CAP_VERSION_3, 0)
    data = _CapData()
    if libc.capget(header, data) != 0:
        return False
    effective_permitted = (data[0], data[1], data[3], data[4])
    return not any(effective_permitted)


def _drop_privileges(namespaces: _Namespaces, report: _Report) -> None:
    steps: list[str] = []
    is_root = os.geteuid() == 0  # host root, or the user namespace's root
    if is_root and namespaces.mapping is None:
        os.setgroups([])
    if is_root:
        steps.append(f"bounding set emptied ({_empty_bounding_set()} caps)")
    with contextlib.suppress(OSError):
        prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    target: int | None = None
    if namespaces.mapping == "privileged":
        target = _namespaces.SANDBOX_ID
    elif is_root and namespaces.mapping is None:
        target = _namespaces.HOST_SANDBOX_ID
    if target is not None:
        os.setresgid(target, target, target)
        os.setresuid(target, target, target)
        steps.append(f"uid/gid {target}")
    elif namespaces.mapping == "self":
        steps.append("namespace uid 0 kept (it is our own unprivileged host uid)")
    else:
        steps.append(f"uid {os.geteuid()} kept")
    # setresuid away from root clears the capability sets; zero them explicitly
    # for the self-mapped namespace root, which keeps its uid.
    libc.capset(_CapHeader(_CAP_VERSION_3, 0), _CapData())
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    prctl(PR_SET_DUMPABLE, 0)
    no_caps = _capabilities_empty() and prctl(PR_GET_NO_NEW_PRIVS) == 1
    # Without CAP_SETPCAP the bounding set cannot shrink; with no_new_privs and
    # exec denied it could never be used either. As root, every drop succeeded
    # up to the first number the kernel refuses (or _empty_bounding_set raised).
    host_root = os.geteuid() == 0 and namespaces.mapping is None
    active = no_caps and not host_root
    steps.append("no capabilities, no_new_privs, not dumpable" if active else "privileges remain")
    report.add("privileges", active, "; ".join(steps))


@functools.cache
def _last_capability() -> int:
    """The kernel's highest capability number, or -1 where it cannot be read.

    Read once, in the zygote (``prepare_for_workers``): a worker drops exactly
    that many without probing past the end for each one.
    """
    try:
        with open("/proc/sys/kernel/cap_last_cap", "rb") as last:
            return int(last.read())
    except (OSError, ValueError):
        return -1


def _empty_bounding_set() -> int:
    """Drop every capability from the bounding set; return how many there were.

    Each drop up to the kernel's last capability must succeed, and the next
    number must be refused (``EINVAL``): then none is left. Raises ``OSError``
    if a drop is refused otherwise.
    """
    last = _last_capability()
    for cap in range(last + 1):
        prctl(PR_CAPBSET_DROP, cap)
    for cap in range(last + 1, 64):  # (past the end at once, unless /proc said nothing)
        try:
            prctl(PR_CAPBSET_DROP, cap)
        except OSError as exc:
            if exc.errno == errno.EINVAL:
                return cap
            raise
    return 64


def _apply_rlimits(config: SandboxConfig, report: _Report, *, init: bool) -> None:
    cpu = max(1, math.ceil(config.cpu_seconds))
    # SIGXCPU at the soft limit, SIGKILL one second later if it is ignored; at
    # once for the init of a PID namespace, which ignores a SIGXCPU.
    cpu_hard = cpu if init else cpu + 1
    limits = [
        ("CORE", resource.RLIMIT_CORE, 0, 0),
        ("NOFILE", resource.RLIMIT_NOFILE, config.max_open_files, config.max_open_files),
        ("FSIZE", resource.RLIMIT_FSIZE, config.max_file_bytes, config.max_file_bytes),
        ("NPROC", resource.RLIMIT_NPROC, 1, 1),
        ("MEMLOCK", resource.RLIMIT_MEMLOCK, 0, 0),
        ("MSGQUEUE", resource.RLIMIT_MSGQUEUE, 0, 0),
        ("CPU", resource.RLIMIT_CPU, cpu, cpu_hard),
        ("AS", resource.RLIMIT_AS, config.memory_bytes, config.memory_bytes),
    ]
    applied: list[str] = []
    failed: list[str] = []
    for name, which, soft, hard in limits:
        try:
            resource.setrlimit(which, (soft, hard))
            applied.append(f"{name}={soft}" if soft == hard else f"{name}={soft}/{hard}")
        except (OSError, ValueError) as exc:
            failed.append(f"{name}: {exc}")
    detail = ", ".join(applied) + (f"; failed: {'; '.join(failed)}" if failed else "")
    report.add("rlimits", not failed, detail)


def enter_sandbox(
    config: SandboxConfig,
    *,
    keep_fds: Sequence[int],
    id_mapper: Callable[[bool], bool] | None = None,
    as_init: int | None = None,
) -> list[LayerStatus]:
    """Apply every available isolation layer to the calling worker process.

    Call it in a freshly forked, single-threaded worker before any untrusted
    code runs. It closes every fd not in ``keep_fds`` (0, 1 and 2 are kept),
    and when namespaces are on it forks twice: only the program (PID 2 of a
    new PID namespace, under an init) returns; the calling process supervises
    the init and exits with the program's status. Returns what each layer
    did. The caller's parent-death signal, if any, survives the credential
    changes (in the process that stays the caller's child).

    ``id_mapper``, for a root caller, asks a process outside the new user
    namespace to write its id maps: called with whether ``unshare`` succeeded,
    it returns whether the maps were written. Without it a helper is forked.

    ``as_init``, when the caller forked this process as the init of a new PID
    namespace (the zygote does, as root), is the read end of a pipe whose write
    end only the parent holds: nothing is forked, this process is the program
    (PID 1: the kernel kills every other process of the namespace as it
    ends), and it exits if the parent is gone once its parent-death signal is
    set for the last time. (In ``keep_fds``; closed here. As root it needs
    ``id_mapper``.)

    Raises:
        SandboxError: ``config.strict`` and a requested layer is unavailable,
            or the process could not be put in a usable state.

    Security warning: the process is changed irreversibly (ids, root, filters)
    and must run nothing but the program afterwards. The caller must not
    start threads before calling it.
    """
    report = _Report(config.strict)
    parent_death = _ParentDeath.capture()
    _close_fds([0, 1, 2, *keep_fds])
    template = config.template
    if template is not None and not config.namespaces:
        template.close()
        template = None
    workdir: str | None = None
    if template is not None:
        read_only = list(template.read_only)
    elif config.workdir is None:
        raise SandboxError("a worker without a namespace template needs a work directory")
    else:
        workdir = os.path.realpath(config.workdir)
        # A read-only path above the workdir would also expose other runs' workdirs.
        read_only = [
            path
            for path in python_paths()
            if not (workdir + "/").startswith(path.rstrip("/") + "/")
        ]
    report.add("environment", True, _clear_environment())
    # Landlock rules bind to inodes, so a ruleset built now from host paths also
    # holds after pivot_root (the bind mounts show the same inodes), and it is
    # built while our host ids can still open every path. (A template's
    # workdir is mounted later: its rule is added once it is.)
    ruleset: tuple[int, int] | None = None
    landlock_failure = "switched off by configuration"
    if config.landlock:
        try:
            ruleset = _landlock.create_ruleset(
                read_only=read_only,
                read_write=[] if workdir is None else [workdir],
                devices=_namespaces.DEVICES,
            )
        except OSError as exc:
            landlock_failure = str(exc.strerror or exc)
    if workdir is not None:
        try:
            if os.geteuid() == 0:
                # The program runs as an unprivileged host id: hand it the directory.
                os.chown(workdir, _namespaces.HOST_SANDBOX_ID, _namespaces.HOST_SANDBOX_ID)
                os.chmod(workdir, 0o700)
            os.chdir(workdir)
        except OSError as exc:
            raise SandboxError(f"cannot use the work directory {workdir!r}: {exc}") from exc
    namespaces = _Namespaces()
    if template is not None:
        namespaces = _join_template(template, config, report, parent_death, as_init)
        if ruleset is not None:
            try:
                _landlock.allow_read_write(*ruleset, _namespaces.SANDBOX_WORKDIR)
            except OSError as exc:
                os.close(ruleset[0])
                ruleset = None
                landlock_failure = str(exc.strerror or exc)
    elif config.namespaces and workdir is not None:
        namespaces = _enter_namespaces(
            config, workdir, read_only, report, parent_death, id_mapper, as_init
        )
    else:
        for name in _NAMESPACE_LAYERS:
            report.add(name, False, "switched off by configuration", required=False)
    if not namespaces.pid:
        # Leave the caller's process group and session so that killpg() and
        # kill(0) aimed at the host's group cannot come from inside (a group
        # leader, as the zygote's children are, already has a group of its own).
        with contextlib.suppress(OSError):
            os.setsid()
    rooted = any(s.name == "mount-namespace" and s.active for s in report.statuses)
    report.add(
        "workdir",
        True,
        f"cwd {_namespaces.SANDBOX_WORKDIR} (the workdir)" if rooted else f"cwd {workdir}",
    )
    _drop_privileges(namespaces, report)
    # The id switch reset the parent-death signal. (The program under an init
    # needs none: the init's end ends it.)
    if namespaces.lifeline >= 0:
        # The init the caller forked: its parent, outside the namespace, is
        # invisible to getppid(); the lifeline tells whether it still lives.
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        check_lifeline(namespaces.lifeline)
        os.close(namespaces.lifeline)
    elif not namespaces.pid:
        parent_death.restore()  # (still the caller's child)
    _apply_rlimits(config, report, init=namespaces.pid and namespaces.lifeline >= 0)
    if ruleset is not None:
        fd, abi = ruleset
        try:
            _landlock.enforce(fd)
            extra = ", TCP denied" if abi >= 4 else ""
            extra += ", signals and abstract sockets scoped" if abi >= 6 else ""
            report.add("landlock", True, f"ABI {abi}: Python read-only, workdir read-write{extra}")
        except OSError as exc:
            report.add("landlock", False, str(exc.strerror or exc))
    else:
        report.add("landlock", False, landlock_failure, required=config.landlock)
    if config.seccomp:
        try:
            count = _seccomp.install_filter(os.getpid())
            report.add("seccomp", True, f"{count}-instruction filter, arch checked")
        except OSError as exc:
            report.add("seccomp", False, str(exc.strerror or exc))
    else:
        report.add("seccomp", False, "switched off by configuration", required=False)
    report.check()
    return report.statuses


def probe_layers() -> list[LayerStatus]:
    """Try every layer in a throwaway child and report what this machine supports.

    For ``ptc doctor``. The child is set up as a zygote's worker is: it joins
    a :class:`RootTemplate` made for it, or, where none can be made, builds
    its own namespaces. Never raises for a missing layer; the child is
    reaped before returning.
    """
    import tempfile  # (not at the top: the zygote imports this module, never this function)

    with tempfile.TemporaryDirectory(prefix="ptc-probe-") as workdir:
        template = None
        with contextlib.suppress(SandboxError):  # (the child then says what is missing)
            template = make_root_template(workdir)
        try:
            read_fd, write_fd = os.pipe()
            pid = os.fork()
            if pid == 0:  # pragma: no cover - runs in the child
                os.close(read_fd)
                _probe_child(workdir, template, write_fd)
            os.close(write_fd)
            chunks: list[bytes] = []
            while chunk := os.read(read_fd, 65536):
                chunks.append(chunk)
            os.close(read_fd)
            _, status = os.waitpid(pid, 0)
        finally:
            if template is not None:
                template.close()
    try:
        rows = json.loads(b"".join(chunks) or b"null")
    except ValueError:
        rows = None
    if not isinstance(rows, list):
        return [
            LayerStatus(
                "sandbox",
                False,
                f"the probe child failed (wait status {status})",
                "everything: no layer could be checked",
            )
        ]
    return [LayerStatus(str(n), bool(a), str(d), str(p)) for n, a, d, p in rows]


def _probe_child(workdir: str, template: RootTemplate | None, write_fd: int) -> NoReturn:
    code = 1
    try:
        keep = [write_fd]
        if template is not None:
            keep += template.descriptors
        config = SandboxConfig(
            workdir=None if template is not None else workdir,
            template=template,
            memory_bytes=1 << 30,
            cpu_seconds=10,
        )
        statuses = enter_sandbox(config, keep_fds=keep)
        rows = [[s.name, s.active, s.detail, s.protects] for s in statuses]
        os.write(write_fd, json.dumps(rows).encode())
        code = 0
    except BaseException as exc:  # report anything, then _exit
        with contextlib.suppress(BaseException):
            os.write(write_fd, json.dumps({"error": repr(exc)}).encode())
    finally:
        os._exit(code)


# Computed at import, so that a zygote that imports this module pays for
# sysconfig once instead of in every forked worker.
_installation_paths()
