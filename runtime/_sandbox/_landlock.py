"""Landlock: an unprivileged, stackable file-system (and TCP, signal) allow list.

The worker restricts itself to read-only access below the Python installation
and read-write access below its private work directory; every other path is
denied even if it is visible. From ABI 4 on, TCP bind/connect is denied
entirely, and from ABI 6 on, signals and abstract UNIX sockets cannot reach any
process outside the worker's own Landlock domain.

Security warning: a Landlock domain applies to the calling thread and its
future children only, and cannot be removed. It needs ``no_new_privs`` (or
``CAP_SYS_ADMIN``). File descriptors opened before restricting stay usable.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
import struct
from collections.abc import Iterable
from typing import Final

from .._exceptions import LandlockUnavailableError
from ._libc import PR_SET_NO_NEW_PRIVS, prctl, syscall

__all__ = [
    "LandlockUnavailableError",
    "abi_version",
    "allow_read_write",
    "create_ruleset",
    "enforce",
    "restrict_self",
]

_SYS_CREATE_RULESET: Final = 444  # the same number on x86_64 and aarch64
_SYS_ADD_RULE: Final = 445
_SYS_RESTRICT_SELF: Final = 446
_CREATE_RULESET_VERSION: Final = 1
_RULE_PATH_BENEATH: Final = 1

_EXECUTE: Final = 1 << 0
_WRITE_FILE: Final = 1 << 1
_READ_FILE: Final = 1 << 2
_READ_DIR: Final = 1 << 3
_REMOVE_DIR: Final = 1 << 4
_REMOVE_FILE: Final = 1 << 5
_MAKE_CHAR: Final = 1 << 6
_MAKE_DIR: Final = 1 << 7
_MAKE_REG: Final = 1 << 8
_MAKE_SOCK: Final = 1 << 9
_MAKE_FIFO: Final = 1 << 10
_MAKE_BLOCK: Final = 1 << 11
_MAKE_SYM: Final = 1 << 12
_REFER: Final = 1 << 13  # ABI 2
_TRUNCATE: Final = 1 << 14  # ABI 3
_IOCTL_DEV: Final = 1 << 15  # ABI 5

_NET_BIND_TCP: Final = 1 << 0  # ABI 4
_NET_CONNECT_TCP: Final = 1 << 1
_SCOPE_ABSTRACT_UNIX_SOCKET: Final = 1 << 0  # ABI 6
_SCOPE_SIGNAL: Final = 1 << 1

# Rights that make sense on a non-directory; adding others to a file rule is EINVAL.
_FILE_RIGHTS: Final = _EXECUTE | _WRITE_FILE | _READ_FILE | _TRUNCATE | _IOCTL_DEV

# The system calls' argument buffers: struct landlock_ruleset_attr (three
# __u64, the last two added by ABI 4 and 6) and the packed struct
# landlock_path_beneath_attr (__u64 allowed_access; __s32 parent_fd). Their
# ctypes types and struct layouts are made here, at import (in the zygote):
# made by a forked worker, each type costs it about 40 us and a dozen copied
# pages, each layout about 20 us.
_RulesetAttr: Final = ctypes.c_char * 24
_PathBeneathAttr: Final = ctypes.c_char * 12
_RULESET_ATTR: Final = struct.Struct("=QQQ")
_PATH_BENEATH_ATTR: Final = struct.Struct("=Qi")
_READ_ONLY: Final = _READ_FILE | _READ_DIR
_READ_WRITE: Final = (
    _READ_FILE
    | _READ_DIR
    | _WRITE_FILE
    | _REMOVE_DIR
    | _REMOVE_FILE
    | _MAKE_DIR
    | _MAKE_REG
    | _MAKE_SYM
    | _REFER
    | _TRUNCATE
)


def abi_version() -> int:
    """Return the kernel's Landlock ABI version; raise :class:`LandlockUnavailableError`."""
    result = syscall(
        ctypes.c_long(_SYS_CREATE_RULESET),
        ctypes.c_void_p(None),
        ctypes.c_size_t(0),
        ctypes.c_uint32(_CREATE_RULESET_VERSION),
    )
    if result < 0:
        err = ctypes.get_errno()
        reason = {
            errno.ENOSYS: "kernel built without Landlock",
            errno.EOPNOTSUPP: "Landlock disabled at boot (lsm= parameter)",
        }.get(err, os.strerror(err))
        raise LandlockUnavailableError(err, reason)
    return int(result)


def _handled_fs(abi: int) -> int:
    rights = (1 << 13) - 1  # ABI 1: EXECUTE .. MAKE_SYM
    if abi >= 2:
        rights |= _REFER
    if abi >= 3:
        rights |= _TRUNCATE
    if abi >= 5:
        rights |= _IOCTL_DEV
    return rights


def create_ruleset(
    *, read_only: Iterable[str], read_write: Iterable[str], devices: Iterable[str] = ()
) -> tuple[int, int]:
    """Build a ruleset; return ``(ruleset fd, ABI version)`` for :func:`enforce`.

    ``read_only`` paths (files or directories, recursively) may be read,
    ``read_write`` paths may also be changed, ``devices`` (like ``/dev/null``)
    may be read and written; paths that do not exist are skipped. Call it while
    the paths can still be opened (before dropping privileges).
    """
    abi = abi_version()
    handled_fs = _handled_fs(abi)
    handled_net = (_NET_BIND_TCP | _NET_CONNECT_TCP) if abi >= 4 else 0
    scoped = (_SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL) if abi >= 6 else 0
    # struct landlock_ruleset_attr grew with the ABI; pass the size this kernel knows.
    size = 8 if abi < 4 else 16 if abi < 6 else 24
    attr = _RulesetAttr.from_buffer_copy(_RULESET_ATTR.pack(handled_fs, handled_net, scoped))
    ruleset = int(
        syscall(ctypes.c_long(_SYS_CREATE_RULESET), attr, ctypes.c_size_t(size), ctypes.c_uint32(0))
    )
    if ruleset < 0:
        err = ctypes.get_errno()
        raise LandlockUnavailableError(err, f"landlock_create_ruleset: {os.strerror(err)}")
    try:
        for paths, rights in ((read_only, _READ_ONLY), (read_write, _READ_WRITE)):
            for path in paths:
                _add_path_rule(ruleset, path, rights & handled_fs)
        for path in devices:
            _add_path_rule(ruleset, path, (_READ_FILE | _WRITE_FILE) & handled_fs)
    except BaseException:
        os.close(ruleset)
        raise
    return ruleset, abi


def allow_read_write(ruleset: int, abi: int, path: str) -> None:
    """Add the directory ``path`` (recursively) to ``ruleset`` as read-write.

    For a path that exists only after :func:`create_ruleset` returned
    ``(ruleset, abi)``: a worker's own tmpfs. Raises ``OSError`` if it cannot
    be opened or the rule is refused.
    """
    os.close(os.open(path, os.O_PATH | os.O_CLOEXEC | os.O_DIRECTORY))
    _add_path_rule(ruleset, path, _READ_WRITE & _handled_fs(abi))


def enforce(ruleset: int) -> None:
    """Set ``no_new_privs`` and confine the calling thread to ``ruleset`` (then closed)."""
    try:
        try:
            prctl(PR_SET_NO_NEW_PRIVS, 1)
        except OSError as exc:
            raise LandlockUnavailableError(
                exc.errno, f"PR_SET_NO_NEW_PRIVS: {exc.strerror}"
            ) from None
        if syscall(ctypes.c_long(_SYS_RESTRICT_SELF), ctypes.c_int(ruleset), ctypes.c_uint32(0)):
            err = ctypes.get_errno()
            raise LandlockUnavailableError(err, f"landlock_restrict_self: {os.strerror(err)}")
    finally:
        os.close(ruleset)


def restrict_self(
    *, read_only: Iterable[str], read_write: Iterable[str], devices: Iterable[str] = ()
) -> int:
    """:func:`create_ruleset` then :func:`enforce`; returns the ABI version used."""
    ruleset, abi = create_ruleset(read_only=read_only, read_write=read_write, devices=devices)
    enforce(ruleset)
    return abi


def _add_path_rule(ruleset: int, path: str, rights: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except (FileNotFoundError, PermissionError):
        return  # what we cannot open, the program could not read either
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            rights &= _FILE_RIGHTS
        attr = _PathBeneathAttr.from_buffer_copy(_PATH_BENEATH_ATTR.pack(rights, fd))
        if syscall(
            ctypes.c_long(_SYS_ADD_RULE),
            ctypes.c_int(ruleset),
            ctypes.c_int(_RULE_PATH_BENEATH),
            attr,
            ctypes.c_uint32(0),
        ):
            err = ctypes.get_errno()
            raise LandlockUnavailableError(err, f"landlock_add_rule({path}): {os.strerror(err)}")
    finally:
        os.close(fd)
