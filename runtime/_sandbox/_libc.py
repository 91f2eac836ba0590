"""The C library, for the calls Python does not wrap, and a checked ``prctl``.

One handle for every layer (``unshare``, ``mount``, ``capset``, ``syscall``, ...)
and the zygote: loaded once, in the zygote, so a forked worker finds it ready.
"""

from __future__ import annotations

import ctypes
import os
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
