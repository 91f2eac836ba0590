"""The C library, for the calls Python does not wrap, and a checked ``prctl``.

One handle for every layer (``unshare``, ``mount``, ``capset``, ``syscall``, ...)
and the zygote: loaded once, in the zygote, so a forked worker finds it ready.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
from typing import Final

__all__ = [
    "PR_CAPBSET_DROP",
    "PR_CAPBSET_READ",
    "PR_CAP_AMBIENT",
    "PR_CAP_AMBIENT_CLEAR_ALL",
    "PR_GET_NO_NEW_PRIVS",
    "PR_GET_PDEATHSIG",
    "PR_SET_CHILD_SUBREAPER",
    "PR_SET_DUMPABLE",
    "PR_SET_NO_NEW_PRIVS",
    "PR_SET_PDEATHSIG",
    "PR_SET_SECCOMP",
    "fork_unhooked",
    "libc",
    "prctl",
    "syscall",
]

# <linux/prctl.h>
PR_SET_PDEATHSIG: Final = 1
PR_GET_PDEATHSIG: Final = 2
PR_SET_DUMPABLE: Final = 4
PR_SET_SECCOMP: Final = 22
PR_CAPBSET_READ: Final = 23
PR_CAPBSET_DROP: Final = 24
PR_SET_CHILD_SUBREAPER: Final = 36
PR_SET_NO_NEW_PRIVS: Final = 38
PR_GET_NO_NEW_PRIVS: Final = 39
PR_CAP_AMBIENT: Final = 47
PR_CAP_AMBIENT_CLEAR_ALL: Final = 4

#: The C library of this process, with ``errno`` kept for :func:`ctypes.get_errno`.
libc: Final = ctypes.CDLL(None, use_errno=True)

# The functions the layers call through ``libc``, looked up here, at import (in
# the zygote): ctypes looks a function up on its first use, and each lookup in
# a forked worker would cost it about 40 us and ten copied pages.
for _name in (
    "capget",
    "capset",
    "clearenv",
    "mount",
    "sethostname",
    "setns",
    "umount2",
    "unshare",
):
    getattr(libc, _name)
del _name

#: ``syscall(number, ...)``, returning a ``long`` (pass every argument as a ctypes value).
syscall: Final = libc.syscall
syscall.restype = ctypes.c_long

_prctl = libc.prctl
_prctl.argtypes = (ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong)
_prctl.restype = ctypes.c_int


def prctl(option: int, arg2: int = 0, arg3: int = 0) -> int:
    """Call ``prctl(option, arg2, arg3, 0, 0)`` and return its result.

    Raises:
        OSError: the kernel refused (``errno`` and ``strerror`` set; the message
            names the option).
    """
    result: int = _prctl(option, arg2, arg3, 0, 0)
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl({option}): {os.strerror(err)}")
    return result


_fork = libc.fork
_fork.argtypes = ()
_fork.restype = ctypes.c_int


def fork_unhooked() -> int:
    """``os.fork()`` for a single-threaded process, without CPython's at-fork hooks.

    ``os.fork()`` runs Python code around every fork: the hooks of
    ``os.register_at_fork`` (``threading`` rebuilding its state for the one
    thread left, ``logging`` renewing its locks, ``random`` reseeding) and the
    interpreter's own re-initialisation of its locks. In a process with one
    thread every lock is free at the fork and that thread's state stays right
    in the child, so all of it is work without effect but one: the child
    gets a seed of its own for ``random``'s shared generator here (a program
    must not see the numbers of another run). The rest writes to pages the
    child shares with its parent: skipped, a forked worker copies about 70
    pages fewer (of some 870) and its parent about 10 (``bench_throughput``:
    0.15 ms less machine CPU a run).

    The C library's fork (and its own ``pthread_atfork`` handlers) still runs.
    With another thread alive this is ``os.fork()``.

    Returns:
        the child's PID in the parent, 0 in the child.

    Raises:
        OSError: the fork failed (``errno`` set).
    """
    if threading.active_count() != 1:
        return os.fork()
    pid: int = _fork()
    if pid < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"fork: {os.strerror(err)}")
    if pid == 0:
        generator = sys.modules.get("random")
        if generator is not None:
            generator.seed()
    return pid
