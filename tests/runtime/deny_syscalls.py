"""Run this interpreter with some kernel features refused, as a locked-down host would.

    python deny_syscalls.py namespaces,landlock -- -m ptc doctor

installs a seccomp filter that makes the kernel answer the named features'
system calls with the errno a host without them gives, then runs this same
interpreter with the arguments after ``--`` (the filter is inherited across
``exec`` and by every child). Nothing is faked in the code under test: the
sandbox tries the real system call and the kernel refuses it.

- ``namespaces``: ``unshare`` fails with ``EPERM`` (a container's default
  seccomp profile, or user namespaces disabled).
- ``landlock``: ``landlock_create_ruleset`` fails with ``ENOSYS`` (a kernel
  older than 5.13, or built without Landlock).
- ``seccomp``: installing a filter fails with ``EINVAL`` (a kernel built
  without seccomp filters); this filter is installed first.

:func:`python_wrapper` writes an executable that does this, for
``SubprocessRuntime(python=...)``.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import shlex
import struct
import sys
from pathlib import Path

FEATURES = ("namespaces", "landlock", "seccomp")

_LD_W_ABS = 0x20
_JEQ_K = 0x15
_RET_K = 0x06
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
# (AUDIT_ARCH, {syscall: number}) for the machine.
_ARCHES = {
    "x86_64": (0xC000003E, {"unshare": 272, "prctl": 157, "seccomp": 317, "landlock": 444}),
    "aarch64": (0xC00000B7, {"unshare": 97, "prctl": 167, "seccomp": 277, "landlock": 444}),
}


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("HBBI", code, jt, jf, k)


def _refuse(nr: int, err: int) -> list[bytes]:
    return [_insn(_JEQ_K, nr, 0, 1), _insn(_RET_K, _RET_ERRNO | err)]


def build(features: list[str]) -> bytes:
    arch, numbers = _ARCHES[platform.machine().lower()]
    program = [_insn(_LD_W_ABS, 4), _insn(_JEQ_K, arch, 1, 0), _insn(_RET_K, _RET_ALLOW)]
    program.append(_insn(_LD_W_ABS, 0))
    if "namespaces" in features:
        program += _refuse(numbers["unshare"], errno.EPERM)
    if "landlock" in features:
        program += _refuse(numbers["landlock"], errno.ENOSYS)
    if "seccomp" in features:
        program += _refuse(numbers["seccomp"], errno.EINVAL)
        # prctl(PR_SET_SECCOMP, ...) too; every other prctl option is allowed.
        program += [
            _insn(_JEQ_K, numbers["prctl"], 0, 3),
            _insn(_LD_W_ABS, 16),  # the low half of args[0]
            _insn(_JEQ_K, _PR_SET_SECCOMP, 0, 1),
            _insn(_RET_K, _RET_ERRNO | errno.EINVAL),
        ]
    program.append(_insn(_RET_K, _RET_ALLOW))
    return b"".join(program)


def install(features: list[str]) -> None:
    unknown = set(features) - set(FEATURES)
    if unknown:
        raise SystemExit(f"unknown features: {sorted(unknown)}")
    program = build(features)
    buffer = ctypes.create_string_buffer(program, len(program))

    class SockFprog(ctypes.Structure):
        _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_void_p))

    fprog = SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = (ctypes.c_int, *[ctypes.c_ulong] * 4)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "PR_SET_NO_NEW_PRIVS")
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.addressof(fprog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "PR_SET_SECCOMP")


def python_wrapper(directory: Path, features: str) -> str:
    """An executable in ``directory`` that runs this interpreter with ``features`` refused."""
    path = directory / f"python-without-{features.replace(',', '-')}"
    command = [sys.executable, str(Path(__file__).resolve()), features, "--"]
    path.write_text(f'#!/bin/sh\nexec {shlex.join(command)} "$@"\n', encoding="utf-8")
    path.chmod(0o755)
    return str(path)


def main(argv: list[str]) -> None:
    if len(argv) < 2 or argv[1] != "--":
        raise SystemExit(__doc__)
    install([feature for feature in argv[0].split(",") if feature])
    os.execv(sys.executable, [sys.executable, *argv[2:]])


if __name__ == "__main__":
    main(sys.argv[1:])
