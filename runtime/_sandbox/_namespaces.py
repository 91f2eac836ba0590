"""Linux namespaces and the private root file system of a worker.

The worker unshares user, mount, network, IPC, UTS and PID namespaces in one
call. When the host runs as root, a process that stays in the initial user
namespace writes the id maps (the zygote for its workers, otherwise a
short-lived helper forked for it), so the sandbox ids map to
*unprivileged* host ids (``HOST_ROOT_ID`` for the namespace's root while it
sets up, ``HOST_SANDBOX_ID`` for the program) rather than to host root. Without
root, the single self-mapping the kernel allows is used.

The new root is a read-only tmpfs holding only: read-only bind mounts of the
Python installation, ``/dev/null``, ``/dev/zero``, ``/dev/urandom``, and the
private work directory at ``/tmp`` (read-write, ``noexec``, ``nosuid``,
``nodev``). ``pivot_root`` plus a lazy
unmount of the old root leaves no path back to host files; no ``/proc`` is
mounted.

Security warning: everything here needs a single-threaded process, and the
mount namespace set-up must finish before seccomp forbids ``mount``.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import signal
import time
from collections.abc import Callable, Iterable
from typing import Final, NoReturn

from .._exceptions import SandboxError
from ._libc import PR_SET_DUMPABLE, fork_unhooked, libc, prctl, syscall

__all__ = [
    "CLONE_NEWIPC",
    "CLONE_NEWNET",
    "CLONE_NEWNS",
    "CLONE_NEWPID",
    "CLONE_NEWUSER",
    "CLONE_NEWUTS",
    "DEVICES",
    "HOST_ROOT_ID",
    "HOST_SANDBOX_ID",
    "SANDBOX_ID",
    "SANDBOX_WORKDIR",
    "USERNS_RETRY_SECONDS",
    "build_private_root",
    "build_template_root",
    "fork_as_init",
    "map_ids",
    "map_self",
    "mount_workdir",
    "set_hostname",
    "setns",
    "unshare",
    "write_id_maps",
]

CLONE_NEWNS: Final = 0x00020000
CLONE_NEWUTS: Final = 0x04000000
CLONE_NEWIPC: Final = 0x08000000
CLONE_NEWUSER: Final = 0x10000000
CLONE_NEWPID: Final = 0x20000000
CLONE_NEWNET: Final = 0x40000000

#: Host uid/gid of the user namespace's root while the worker sets itself up.
HOST_ROOT_ID: Final = 2_147_000_000
#: Host uid/gid the program runs as (also used without a user namespace, as root).
HOST_SANDBOX_ID: Final = 2_147_000_001
#: The program's uid/gid inside the user namespace.
SANDBOX_ID: Final = 1000
#: Where the work directory appears inside the private root (also the cwd).
SANDBOX_WORKDIR: Final = "/tmp"

_MS_RDONLY: Final = 0x1
_MS_NOSUID: Final = 0x2
_MS_NODEV: Final = 0x4
_MS_NOEXEC: Final = 0x8
_MS_REMOUNT: Final = 0x20
_MS_NOATIME: Final = 0x400
_MS_NODIRATIME: Final = 0x800
_MS_BIND: Final = 0x1000
_MS_REC: Final = 0x4000
_MS_PRIVATE: Final = 0x40000
_MS_RELATIME: Final = 0x200000
_MNT_DETACH: Final = 0x2
# statvfs f_flag bits share their values with the MS_* flags they report.
_LOCKABLE_FLAGS: Final = (
    _MS_RDONLY | _MS_NOSUID | _MS_NODEV | _MS_NOEXEC | _MS_NOATIME | _MS_NODIRATIME | _MS_RELATIME
)

_SYS_PIVOT_ROOT: Final = {"x86_64": 155, "aarch64": 41}
# New system calls share one number on every architecture.
_SYS_MOUNT_SETATTR: Final = 442
_AT_FDCWD: Final = -100
_AT_RECURSIVE: Final = 0x8000
_MOUNT_ATTR_RDONLY: Final = 0x1
_MOUNT_ATTR_NOSUID: Final = 0x2
_MOUNT_ATTR_NODEV: Final = 0x4
_MOUNT_ATTR_NOEXEC: Final = 0x8

#: The devices bound into a private root (where the host has them).
DEVICES: Final = ("/dev/null", "/dev/zero", "/dev/urandom")


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


#: How long joining or making a user namespace refused with ``EINVAL`` is asked for
#: again. The kernel refuses both to a process with more than one thread, and a
#: process forked from a busy multi-threaded one (a test runner) was seen to be
#: refused that way now and then for under a millisecond, though single-threaded
#: by the time it looked; a moment later it succeeds.
USERNS_RETRY_SECONDS: Final = 0.05


def unshare(flags: int) -> None:
    """``unshare(2)``; raises ``OSError`` with the reason on refusal.

    A new user namespace refused with ``EINVAL`` is asked for again every half
    millisecond, for up to :data:`USERNS_RETRY_SECONDS`.
    """
    _retrying(lambda: libc.unshare(ctypes.c_int(flags)), "unshare", flags & CLONE_NEWUSER)


def setns(fd: int, nstype: int) -> None:
    """Join the namespace ``fd`` refers to (``setns(2)``); ``OSError`` when refused.

    Joining a user namespace is retried as :func:`unshare` retries making one.
    """
    _retrying(
        lambda: libc.setns(ctypes.c_int(fd), ctypes.c_int(nstype)),
        "setns",
        nstype == CLONE_NEWUSER,
    )


def _retrying(call: Callable[[], int], what: str, user_namespace: int | bool) -> None:
    deadline: float | None = None
    while call() != 0:
        err = ctypes.get_errno()
        if err == errno.EINVAL and user_namespace:
            now = time.monotonic()
            if deadline is None:
                deadline = now + USERNS_RETRY_SECONDS
            if now < deadline:
                time.sleep(0.0005)
                continue
        raise OSError(err, f"{what}: {os.strerror(err)}")


def fork_as_init(own_pid_namespace: int) -> int | None:
    """A fork (:func:`fork_unhooked`), the child being the init (PID 1) of a new PID namespace.

    ``own_pid_namespace`` is a descriptor of the caller's own PID namespace,
    which the caller's later forks return to: no later child joins this one's.
    Returns ``None`` when the new namespace is refused (nothing is forked).
    Raises ``OSError`` when the fork fails, :class:`SandboxError` when
    returning to the caller's own namespace is refused (the child, if any, is
    killed and reaped: the caller must fork nothing more).
    """
    try:
        unshare(CLONE_NEWPID)
    except OSError:
        return None
    try:
        pid = fork_unhooked()
    except OSError:
        _return_to(own_pid_namespace)
        raise
    if pid:
        try:
            _return_to(own_pid_namespace)
        except SandboxError:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise
    return pid


def _return_to(own_pid_namespace: int) -> None:
    try:
        setns(own_pid_namespace, CLONE_NEWPID)
    except OSError as exc:
        raise SandboxError(f"cannot return to its own PID namespace: {exc}") from exc


def set_hostname(name: str) -> None:
    data = name.encode()
    _check(libc.sethostname(data, ctypes.c_size_t(len(data))), "sethostname")


def _mount(
    source: str | None, target: str, fstype: str | None, flags: int, data: str | None
) -> None:
    def enc(value: str | None) -> bytes | None:
        return None if value is None else os.fsencode(value)

    result = libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data))
    _check(result, f"mount {source!r} on {target!r}")


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def write_id_maps(target_pid: int) -> None:
    """Write the id maps of ``target_pid``, which has just unshared its user namespace.

    Called by a root process of the parent user namespace: the zygote for its
    workers, or the helper of :func:`map_ids`.
    """
    ids = f"0 {HOST_ROOT_ID} 1\n{SANDBOX_ID} {HOST_SANDBOX_ID} 1\n"
    _write(f"/proc/{target_pid}/gid_map", ids)
    _write(f"/proc/{target_pid}/uid_map", ids)


def map_ids(ready_to_map: int, mapped: int, target_pid: int) -> NoReturn:
    """Body of the helper that writes ``target_pid``'s id maps; never returns.

    Runs in a child forked *before* the target unshares its user namespace: it
    waits for one byte on ``ready_to_map``, writes the maps, reports one byte on
    ``mapped`` (``b"1"`` for success) and exits.
    """
    ok = b"0"
    try:
        if os.read(ready_to_map, 1) == b"1":
            write_id_maps(target_pid)
            ok = b"1"
    except BaseException:  # a forked helper must reach _exit whatever happens
        ok = b"0"
    finally:
        try:
            os.write(mapped, ok)
        finally:
            os._exit(0)


def map_self(uid: int, gid: int) -> None:
    """Map the namespace's root to our own host ids (all an unprivileged user may map)."""
    # A process whose ids changed is not dumpable, which makes its /proc files
    # root's; the sandbox makes it non-dumpable again afterwards.
    prctl(PR_SET_DUMPABLE, 1)
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/gid_map", f"0 {gid} 1\n")
    _write("/proc/self/uid_map", f"0 {uid} 1\n")


class _MountAttr(ctypes.Structure):
    _fields_ = (
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    )


def _restrict(target: str, attributes: int, *, recursive: bool) -> bool:
    """Add ``MOUNT_ATTR_*`` restrictions to the mount at ``target`` (and the ones below).

    ``mount_setattr(2)`` only sets what it is given, so flags locked by a more
    privileged namespace stay as they are. Returns ``False`` where the kernel
    has no such call (before 5.12): the caller remounts instead.
    """
    attr = _MountAttr(attributes, 0, 0, 0)
    result = syscall(
        ctypes.c_long(_SYS_MOUNT_SETATTR),
        ctypes.c_int(_AT_FDCWD),
        os.fsencode(target),
        ctypes.c_uint(_AT_RECURSIVE if recursive else 0),
        ctypes.byref(attr),
        ctypes.c_size_t(ctypes.sizeof(attr)),
    )
    if result == 0:
        return True
    err = ctypes.get_errno()
    if err == errno.ENOSYS:
        return False
    raise OSError(err, f"mount_setattr {target!r}: {os.strerror(err)}")


def _remount(target: str, flags: int) -> None:
    """``_restrict`` without ``mount_setattr``: a bind remount repeating the locked flags."""
    locked = os.statvfs(target).f_flag & _LOCKABLE_FLAGS
    if not flags & _MS_RDONLY:
        locked &= ~_MS_RDONLY
    _mount(None, target, None, _MS_REMOUNT | _MS_BIND | flags | locked, None)


def _pivot_root_number() -> int:
    machine = os.uname().machine
    if machine not in _SYS_PIVOT_ROOT:
        raise OSError(errno.ENOSYS, f"pivot_root: unsupported machine {machine}")
    return _SYS_PIVOT_ROOT[machine]


def _mount_points(read_only: Iterable[str], devices: Iterable[str]) -> list[str]:
    """The directories of a new root, relative and parents first, for these mounts.

    Made with one ``mkdir`` each, in this order, on the empty tmpfs.
    """
    wanted = [*read_only, *(os.path.dirname(device) for device in devices), SANDBOX_WORKDIR]
    points: dict[str, None] = {}
    for path in wanted:
        parts = path.strip("/").split("/")
        for depth in range(1, len(parts) + 1):
            points["./" + "/".join(parts[:depth])] = None
    return list(points)


def build_private_root(workdir: str, read_only: Iterable[str]) -> list[str]:
    """Make a fresh root of the read-only paths, the devices and ``workdir`` at ``/tmp``.

    Must run right after ``unshare`` (new user and mount namespaces), before
    any id switch: paths are opened while the process still has its host
    credentials (a Python installation below ``/root`` is not searchable by the
    unprivileged ids), then the process becomes the namespace's root, so that
    the mount points it creates are owned by a mapped id. On success the
    process's root and cwd are the new root's ``/tmp``, the old root is gone,
    and the devices that were bound are returned. On failure ``OSError`` is
    raised and no mount is left over the work directory.
    """
    return _build_root(workdir, read_only, bind_workdir=True)


def build_template_root(staging: str, read_only: Iterable[str]) -> list[str]:
    """:func:`build_private_root` for a template: ``/tmp`` left an empty mount point.

    The root a :class:`RootTemplate` keeps: every worker that joins it makes a
    copy of this mount namespace and mounts a tmpfs of its own on ``/tmp``
    (:func:`mount_workdir`). ``staging`` is any existing directory, used only
    in this process's mount namespace (the tmpfs is mounted over it there);
    it is not changed for anyone else. The root and cwd become the new root.
    """
    return _build_root(staging, read_only, bind_workdir=False)


def _build_root(workdir: str, read_only: Iterable[str], *, bind_workdir: bool) -> list[str]:
    pivot_root = _pivot_root_number()
    opened: list[int] = []

    def open_path(path: str, flags: int = 0) -> int:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC | flags)
        opened.append(fd)
        return fd

    try:
        work_fd = open_path(workdir, os.O_DIRECTORY)
        binds = []
        for path in sorted(set(read_only)):
            with contextlib.suppress(FileNotFoundError, PermissionError, NotADirectoryError):
                binds.append((open_path(path, os.O_DIRECTORY), path))
        devices = []
        for device in DEVICES:
            with contextlib.suppress(FileNotFoundError):
                devices.append((open_path(device), device))
        mount_points = _mount_points((path for _, path in binds), (path for _, path in devices))
        # Keep our mounts from propagating back into the host's namespace.
        _mount(None, "/", None, _MS_REC | _MS_PRIVATE, None)
        # The new root is a tmpfs over the work directory itself (an existing
        # directory nobody else uses; its real content stays reachable through
        # work_fd). Relative paths from inside it need no search permission on
        # the host directories above it. uid=0 is the namespace's root: the
        # default (our still-unmapped host id) would make it unwritable.
        _mount(
            "tmpfs",
            workdir,
            "tmpfs",
            _MS_NOSUID | _MS_NODEV,
            "size=1m,nr_inodes=4096,mode=0755,uid=0,gid=0",
        )
        os.chdir(workdir)
        try:
            os.setresgid(0, 0, 0)
            os.setresuid(0, 0, 0)
            for point in mount_points:
                os.mkdir(point, 0o755)
            for _, device in devices:
                os.close(os.open("." + device, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o644))
            for fd, path in binds:
                _mount(f"/proc/self/fd/{fd}", "." + path, None, _MS_BIND | _MS_REC, None)
            # The root and the Python installation, read-only in one call; the
            # devices and the workdir are bound afterwards, writable.
            if not _restrict(
                ".", _MOUNT_ATTR_RDONLY | _MOUNT_ATTR_NOSUID | _MOUNT_ATTR_NODEV, recursive=True
            ):
                for _, path in binds:
                    _remount("." + path, _MS_RDONLY | _MS_NOSUID | _MS_NODEV)
                _mount(None, ".", None, _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV, None)
            for fd, device in devices:
                _mount(f"/proc/self/fd/{fd}", "." + device, None, _MS_BIND, None)
            if not bind_workdir:
                # A template's root is one tmpfs that every worker's copy shares:
                # read-only as a file system too, not only as this mount.
                _mount(None, ".", None, _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV, None)
            if bind_workdir:
                target = "." + SANDBOX_WORKDIR
                _mount(f"/proc/self/fd/{work_fd}", target, None, _MS_BIND, None)
                # Files the program writes are data: never set-uid, devices or executables.
                data = _MOUNT_ATTR_NOSUID | _MOUNT_ATTR_NODEV | _MOUNT_ATTR_NOEXEC
                if not _restrict(target, data, recursive=False):
                    _remount(target, _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
            _check(syscall(ctypes.c_long(pivot_root), b".", b"."), "pivot_root")
        except BaseException:
            libc.umount2(b".", ctypes.c_int(_MNT_DETACH))
            os.fchdir(work_fd)
            raise
        # The old root is stacked on top of the new one at "/": detach it whole.
        _check(libc.umount2(b".", ctypes.c_int(_MNT_DETACH)), "umount old root")
        os.chdir(SANDBOX_WORKDIR if bind_workdir else "/")
    finally:
        for fd in opened:
            os.close(fd)
    return [path for _, path in devices]


def mount_workdir(uid: int, gid: int) -> None:
    """Mount a fresh tmpfs at ``/tmp`` (``SANDBOX_WORKDIR``) for the program, and enter it.

    In the copy of a template's root a worker joined (:func:`build_template_root`):
    the program's work directory, owned by ``uid``/``gid`` (its ids in the
    namespace), mode 0700, ``nosuid``, ``nodev``, ``noexec``, at most 4,096
    entries. It is the worker's alone: it lives in the worker's own mount
    namespace and ends with it.
    """
    _mount(
        "tmpfs",
        SANDBOX_WORKDIR,
        "tmpfs",
        _MS_NOSUID | _MS_NODEV | _MS_NOEXEC,
        f"size=1m,nr_inodes=4096,mode=0700,uid={uid},gid={gid}",
    )
    os.chdir(SANDBOX_WORKDIR)
