"""A seccomp-BPF filter for the worker, assembled by hand (no libseccomp needed).

The filter is a deny list of the system calls an untrusted Python program never
needs and that widen the kernel attack surface or reach outside the worker:
process creation and exec, new sockets, debugging and other processes' memory,
signals to anything but the worker itself, namespaces and mounts, module and
kexec loading, BPF, perf, keyrings, io_uring, userfaultfd, SysV/POSIX IPC,
identity changes, clock and host settings. Everything else (memory, files that
the other layers allow, the already-connected channel, epoll, futex, clocks,
``getrandom``) stays allowed, so CPython and asyncio keep working.

Decisions that the worker bootstrap relies on:

* ``clone`` is denied outright (threads too) and ``clone3`` fails with
  ``ENOSYS`` so that libc falls back to ``clone`` and gets ``EPERM``: the
  worker is single threaded after :func:`install_filter`.
* ``socketpair(AF_UNIX, ...)`` stays allowed (asyncio's self-pipe), every other
  way to create or connect a socket is denied.
* ``kill``/``tkill``/``tgkill`` are allowed only when they target the worker's
  own pid, which is baked into the filter when it is built.
* ``prctl`` is an allow list by option (:data:`ALLOWED_PRCTL_OPTIONS`): reads of
  the process's own state and naming its own memory maps. Every option that
  would loosen what was set up before the filter (the parent-death signal,
  dumpable, a ptracer, becoming a child subreaper, no_new_privs and seccomp
  themselves, the memory map, capabilities, speculation control, ...) fails
  with ``EPERM``. ``arch_prctl`` (x86_64) likewise keeps only the thread-pointer
  and CPU-feature options (:data:`ALLOWED_ARCH_PRCTL_OPTIONS`). ``setsid`` and
  ``setpgid`` are denied: the worker cannot leave the process group and session
  it was put in.

Security warning: a wrong architecture (for example i386 ``int 0x80`` on
x86_64) and the x32 ABI kill the process, since their syscall numbers differ
from the tables below and would otherwise slip through a deny list.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import platform
import struct
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from .._exceptions import SeccompUnavailableError
from ._libc import PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, prctl

__all__ = [
    "ALLOWED_ARCH_PRCTL_OPTIONS",
    "ALLOWED_PRCTL_OPTIONS",
    "DENIED_SYSCALLS",
    "SYSCALL_TABLES",
    "SeccompUnavailableError",
    "build_filter",
    "install_filter",
    "native_arch",
    "prepare_filter",
]

# Classic BPF opcodes (linux/filter.h, linux/bpf_common.h).
_BPF_LD_W_ABS: Final = 0x20  # BPF_LD | BPF_W | BPF_ABS
_BPF_JEQ_K: Final = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_BPF_JGE_K: Final = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_BPF_RET_K: Final = 0x06  # BPF_RET | BPF_K

_RET_KILL_PROCESS: Final = 0x80000000
_RET_ERRNO: Final = 0x00050000
_RET_ALLOW: Final = 0x7FFF0000

# struct seccomp_data: int nr; __u32 arch; __u64 ip; __u64 args[6];
_OFF_NR: Final = 0
_OFF_ARCH: Final = 4


def _arg_low(index: int) -> int:
    # Low 32 bits of args[index]; both supported arches are little endian, and
    # the syscalls we inspect take int-sized arguments that the kernel truncates.
    return 16 + 8 * index


AUDIT_ARCH_X86_64: Final = 0xC000003E
AUDIT_ARCH_AARCH64: Final = 0xC00000B7
_X32_SYSCALL_BIT: Final = 0x40000000

_AF_UNIX: Final = 1
_TIOCSTI: Final = 0x5412
_TIOCLINUX: Final = 0x541C

_SECCOMP_MODE_FILTER: Final = 2

# Syscall numbers that the filter names, per architecture. Calls that an arch
# does not have (fork on aarch64, for example) are simply absent there.
_X86_64: Final[Mapping[str, int]] = {
    "ioctl": 16,
    "shmget": 29,
    "shmat": 30,
    "shmctl": 31,
    "socket": 41,
    "connect": 42,
    "accept": 43,
    "bind": 49,
    "listen": 50,
    "socketpair": 53,
    "clone": 56,
    "fork": 57,
    "vfork": 58,
    "execve": 59,
    "kill": 62,
    "semget": 64,
    "semop": 65,
    "semctl": 66,
    "shmdt": 67,
    "msgget": 68,
    "msgsnd": 69,
    "msgrcv": 70,
    "msgctl": 71,
    "ptrace": 101,
    "syslog": 103,
    "setuid": 105,
    "setgid": 106,
    "setpgid": 109,
    "setsid": 112,
    "setreuid": 113,
    "setregid": 114,
    "setgroups": 116,
    "setresuid": 117,
    "setresgid": 119,
    "setfsuid": 122,
    "setfsgid": 123,
    "capset": 126,
    "rt_sigqueueinfo": 129,
    "mknod": 133,
    "uselib": 134,
    "personality": 135,
    "ustat": 136,
    "sysfs": 139,
    "vhangup": 153,
    "modify_ldt": 154,
    "pivot_root": 155,
    "_sysctl": 156,
    "prctl": 157,
    "arch_prctl": 158,
    "adjtimex": 159,
    "chroot": 161,
    "acct": 163,
    "settimeofday": 164,
    "mount": 165,
    "umount2": 166,
    "swapon": 167,
    "swapoff": 168,
    "reboot": 169,
    "sethostname": 170,
    "setdomainname": 171,
    "iopl": 172,
    "ioperm": 173,
    "create_module": 174,
    "init_module": 175,
    "delete_module": 176,
    "get_kernel_syms": 177,
    "query_module": 178,
    "quotactl": 179,
    "nfsservctl": 180,
    "getpmsg": 181,
    "putpmsg": 182,
    "afs_syscall": 183,
    "tuxcall": 184,
    "security": 185,
    "tkill": 200,
    "lookup_dcookie": 212,
    "semtimedop": 220,
    "clock_settime": 227,
    "tgkill": 234,
    "vserver": 236,
    "mbind": 237,
    "set_mempolicy": 238,
    "mq_open": 240,
    "mq_unlink": 241,
    "mq_timedsend": 242,
    "mq_timedreceive": 243,
    "mq_notify": 244,
    "mq_getsetattr": 245,
    "kexec_load": 246,
    "add_key": 248,
    "request_key": 249,
    "keyctl": 250,
    "migrate_pages": 256,
    "mknodat": 259,
    "unshare": 272,
    "vmsplice": 278,
    "move_pages": 279,
    "accept4": 288,
    "rt_tgsigqueueinfo": 297,
    "perf_event_open": 298,
    "fanotify_init": 300,
    "name_to_handle_at": 303,
    "open_by_handle_at": 304,
    "clock_adjtime": 305,
    "setns": 308,
    "process_vm_readv": 310,
    "process_vm_writev": 311,
    "kcmp": 312,
    "finit_module": 313,
    "memfd_create": 319,
    "kexec_file_load": 320,
    "bpf": 321,
    "execveat": 322,
    "userfaultfd": 323,
}

_AARCH64: Final[Mapping[str, int]] = {
    "lookup_dcookie": 18,
    "ioctl": 29,
    "mknodat": 33,
    "umount2": 39,
    "mount": 40,
    "pivot_root": 41,
    "nfsservctl": 42,
    "chroot": 51,
    "vhangup": 58,
    "quotactl": 60,
    "vmsplice": 75,
    "acct": 89,
    "capset": 91,
    "personality": 92,
    "unshare": 97,
    "kexec_load": 104,
    "init_module": 105,
    "delete_module": 106,
    "clock_settime": 112,
    "syslog": 116,
    "ptrace": 117,
    "kill": 129,
    "tkill": 130,
    "tgkill": 131,
    "rt_sigqueueinfo": 138,
    "reboot": 142,
    "setregid": 143,
    "setgid": 144,
    "setreuid": 145,
    "setuid": 146,
    "setresuid": 147,
    "setresgid": 149,
    "setfsuid": 151,
    "setfsgid": 152,
    "setpgid": 154,
    "setsid": 157,
    "setgroups": 159,
    "sethostname": 161,
    "setdomainname": 162,
    "prctl": 167,
    "settimeofday": 170,
    "adjtimex": 171,
    "mq_open": 180,
    "mq_unlink": 181,
    "mq_timedsend": 182,
    "mq_timedreceive": 183,
    "mq_notify": 184,
    "mq_getsetattr": 185,
    "msgget": 186,
    "msgctl": 187,
    "msgrcv": 188,
    "msgsnd": 189,
    "semget": 190,
    "semctl": 191,
    "semtimedop": 192,
    "semop": 193,
    "shmget": 194,
    "shmctl": 195,
    "shmat": 196,
    "shmdt": 197,
    "socket": 198,
    "socketpair": 199,
    "bind": 200,
    "listen": 201,
    "accept": 202,
    "connect": 203,
    "add_key": 217,
    "request_key": 218,
    "keyctl": 219,
    "clone": 220,
    "execve": 221,
    "swapon": 224,
    "swapoff": 225,
    "mbind": 235,
    "set_mempolicy": 237,
    "migrate_pages": 238,
    "move_pages": 239,
    "rt_tgsigqueueinfo": 240,
    "perf_event_open": 241,
    "accept4": 242,
    "fanotify_init": 262,
    "name_to_handle_at": 264,
    "open_by_handle_at": 265,
    "clock_adjtime": 266,
    "setns": 268,
    "process_vm_readv": 270,
    "process_vm_writev": 271,
    "kcmp": 272,
    "finit_module": 273,
    "memfd_create": 279,
    "bpf": 280,
    "execveat": 281,
    "userfaultfd": 282,
    "kexec_file_load": 294,
}

# Since Linux 5.1 new syscalls share one number on every architecture.
_COMMON: Final[Mapping[str, int]] = {
    "pidfd_send_signal": 424,
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "pidfd_open": 434,
    "clone3": 435,
    "pidfd_getfd": 438,
    "process_madvise": 440,
    "mount_setattr": 442,
    "quotactl_fd": 443,
    "memfd_secret": 447,
    "process_mrelease": 448,
    "set_mempolicy_home_node": 450,
    "statmount": 457,
    "listmount": 458,
    "lsm_set_self_attr": 460,
    "open_tree_attr": 467,
}

#: ``prctl`` options the worker may still use once the filter is in (the first
#: argument, an ``int``); every other option fails with ``EPERM``. The process's
#: own state may be read; the only change allowed is naming its own anonymous
#: memory (``PR_SET_VMA``, which CPython and glibc may use for their arenas).
ALLOWED_PRCTL_OPTIONS: Final[Mapping[str, int]] = {
    "PR_GET_PDEATHSIG": 2,
    "PR_GET_DUMPABLE": 3,
    "PR_GET_UNALIGN": 5,
    "PR_GET_KEEPCAPS": 7,
    "PR_GET_FPEMU": 9,
    "PR_GET_FPEXC": 11,
    "PR_GET_TIMING": 13,
    "PR_GET_NAME": 16,
    "PR_GET_ENDIAN": 19,
    "PR_GET_SECCOMP": 21,
    "PR_CAPBSET_READ": 23,
    "PR_GET_TSC": 25,
    "PR_GET_SECUREBITS": 27,
    "PR_GET_TIMERSLACK": 30,
    "PR_MCE_KILL_GET": 34,
    "PR_GET_CHILD_SUBREAPER": 37,
    "PR_GET_NO_NEW_PRIVS": 39,
    "PR_GET_TID_ADDRESS": 40,
    "PR_GET_THP_DISABLE": 42,
    "PR_GET_FP_MODE": 46,
    "PR_SVE_GET_VL": 51,
    "PR_GET_SPECULATION_CTRL": 52,
    "PR_GET_TAGGED_ADDR_CTRL": 56,
    "PR_GET_IO_FLUSHER": 58,
    "PR_PAC_GET_ENABLED_KEYS": 61,
    "PR_SME_GET_VL": 64,
    "PR_GET_MDWE": 66,
    "PR_GET_MEMORY_MERGE": 68,
    "PR_GET_SHADOW_STACK_STATUS": 74,
    "PR_GET_AUXV": 0x41555856,
    "PR_SET_VMA": 0x53564D41,
}

#: ``arch_prctl`` options (x86_64) the worker may still use: the thread
#: pointers glibc manages, and reads (or a request for permission to use) of
#: CPU features. Denied: CPUID faulting, mapping a vDSO, tagged addresses and
#: changes to the shadow stack, none of which CPython needs after start-up.
ALLOWED_ARCH_PRCTL_OPTIONS: Final[Mapping[str, int]] = {
    "ARCH_SET_GS": 0x1001,
    "ARCH_SET_FS": 0x1002,
    "ARCH_GET_FS": 0x1003,
    "ARCH_GET_GS": 0x1004,
    "ARCH_GET_CPUID": 0x1011,
    "ARCH_GET_XCOMP_SUPP": 0x1021,
    "ARCH_GET_XCOMP_PERM": 0x1022,
    "ARCH_REQ_XCOMP_PERM": 0x1023,
    "ARCH_GET_XCOMP_GUEST_PERM": 0x1024,
    "ARCH_GET_UNTAG_MASK": 0x4001,
    "ARCH_GET_MAX_TAG_BITS": 0x4003,
    "ARCH_SHSTK_STATUS": 0x5005,
}

#: Syscall name -> number, per ``AUDIT_ARCH_*`` value.
SYSCALL_TABLES: Final[Mapping[int, Mapping[str, int]]] = {
    AUDIT_ARCH_X86_64: {**_X86_64, **_COMMON},
    AUDIT_ARCH_AARCH64: {**_AARCH64, **_COMMON},
}

#: Syscalls answered with ``EPERM`` whatever their arguments.
DENIED_SYSCALLS: Final = frozenset(
    {
        # process creation and exec (clone is denied too, see _CONDITIONAL)
        "fork", "vfork", "execve", "execveat",
        # new sockets and connections; the channel is already connected
        "socket", "connect", "bind", "listen", "accept", "accept4",
        # other processes: debugging, memory, signals, handles
        "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_open",
        "pidfd_getfd", "pidfd_send_signal", "process_madvise", "process_mrelease",
        "rt_sigqueueinfo", "rt_tgsigqueueinfo", "migrate_pages", "move_pages",
        # namespaces, mounts and file handles (open_by_handle_at is a classic escape)
        "mount", "umount2", "unshare", "setns", "chroot", "pivot_root", "fsopen",
        "fsconfig", "fsmount", "fspick", "move_mount", "open_tree", "open_tree_attr",
        "mount_setattr", "name_to_handle_at", "open_by_handle_at", "statmount",
        "listmount",
        # kernel attack surface
        "bpf", "perf_event_open", "keyctl", "add_key", "request_key", "userfaultfd",
        "io_uring_setup", "io_uring_enter", "io_uring_register", "kexec_load",
        "kexec_file_load", "init_module", "finit_module", "delete_module",
        "create_module", "get_kernel_syms", "query_module", "personality", "reboot",
        "swapon", "swapoff", "ioperm", "iopl", "modify_ldt", "acct", "quotactl",
        "quotactl_fd", "settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
        "sethostname", "setdomainname", "syslog", "uselib", "ustat", "sysfs",
        "_sysctl", "lookup_dcookie", "nfsservctl", "vhangup", "fanotify_init",
        "memfd_create", "memfd_secret", "vmsplice", "mknod", "mknodat", "mbind",
        "set_mempolicy", "set_mempolicy_home_node", "lsm_set_self_attr",
        "afs_syscall", "tuxcall", "security", "vserver", "getpmsg", "putpmsg",
        # identity changes: nothing is left to switch to
        "setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid",
        "setfsuid", "setfsgid", "setgroups", "capset",
        # leaving the process group and session the host kills
        "setsid", "setpgid",
        # SysV and POSIX IPC: memory that outlives the worker and escapes RLIMIT_AS
        "shmget", "shmat", "shmctl", "shmdt", "msgget", "msgsnd", "msgrcv", "msgctl",
        "semget", "semop", "semctl", "semtimedop", "mq_open", "mq_unlink",
        "mq_timedsend", "mq_timedreceive", "mq_notify", "mq_getsetattr",
    }
)  # fmt: skip

_SockFilter = struct.Struct("=HBBI")


def native_arch() -> int | None:
    """Return the ``AUDIT_ARCH_*`` value of this interpreter, or ``None`` if unsupported."""
    machine = platform.machine().lower()
    if machine in ("x86_64", "amd64") and struct.calcsize("P") == 8:
        return AUDIT_ARCH_X86_64
    if machine in ("aarch64", "arm64"):
        return AUDIT_ARCH_AARCH64
    return None


def _stmt(code: int, k: int) -> bytes:
    return _SockFilter.pack(code, 0, 0, k)


def _jump(code: int, k: int, jt: int, jf: int) -> bytes:
    return _SockFilter.pack(code, jt, jf, k)


def _errno(value: int) -> int:
    return _RET_ERRNO | (value & 0xFFFF)


def _only_if_args_equal(nr: int, checks: Iterable[tuple[int, int]], otherwise: int) -> list[bytes]:
    """Allow ``nr`` when every ``(arg index, value)`` matches, else return ``otherwise``."""
    checks = list(checks)
    body: list[bytes] = []
    for position, (index, value) in enumerate(checks):
        remaining = len(checks) - position - 1
        body.append(_stmt(_BPF_LD_W_ABS, _arg_low(index)))
        # on mismatch jump over the remaining checks and the ALLOW to the refusal
        body.append(_jump(_BPF_JEQ_K, value, 0, 2 * remaining + 1))
    body.append(_stmt(_BPF_RET_K, _RET_ALLOW))
    body.append(_stmt(_BPF_RET_K, otherwise))
    return [_jump(_BPF_JEQ_K, nr, 0, len(body)), *body]


def _only_if_arg_in(nr: int, index: int, values: Iterable[int], otherwise: int) -> list[bytes]:
    """Allow ``nr`` when argument ``index`` is one of ``values``, else return ``otherwise``."""
    values = list(values)
    body = [_stmt(_BPF_LD_W_ABS, _arg_low(index))]
    for position, value in enumerate(values):
        # on a match jump over the remaining checks and the refusal to the ALLOW
        body.append(_jump(_BPF_JEQ_K, value, len(values) - position, 0))
    body.append(_stmt(_BPF_RET_K, otherwise))
    body.append(_stmt(_BPF_RET_K, _RET_ALLOW))
    return [_jump(_BPF_JEQ_K, nr, 0, len(body)), *body]


def _deny_if_arg_in(nr: int, index: int, values: Iterable[int], answer: int) -> list[bytes]:
    """Return ``answer`` when argument ``index`` of ``nr`` is one of ``values``, else allow."""
    values = list(values)
    body = [_stmt(_BPF_LD_W_ABS, _arg_low(index))]
    for position, value in enumerate(values):
        body.append(_jump(_BPF_JEQ_K, value, len(values) - position, 0))
    body.append(_stmt(_BPF_RET_K, _RET_ALLOW))
    body.append(_stmt(_BPF_RET_K, answer))
    return [_jump(_BPF_JEQ_K, nr, 0, len(body)), *body]


def _deny_numbers(numbers: Sequence[int], answer: int) -> list[bytes]:
    """Return ``answer`` for the system calls ``numbers``, allow the rest.

    A balanced search over the points where the verdict changes (where a run of
    consecutive denied numbers starts, and where it ends): a number is decided
    after about log2(points) comparisons, each a ``JGE`` whose branches lead to
    a smaller search or to one of the two shared returns at the end. The
    kernel, installing a filter, runs it once for every system call number
    (to cache the verdicts that do not depend on the arguments). With a chain
    of comparisons, one or two per run, that made each worker's install take
    a median 138 us on x86_64; with the search, 82 us (alternating, 60 each).
    """
    points: list[int] = []
    for nr in sorted(set(numbers)):
        if points and nr == points[-1]:
            points[-1] = nr + 1  # the run goes on: it now ends after nr
        else:
            points += [nr, nr + 1]
    if len(points) > 255:  # (jump offsets are 8-bit)
        raise ValueError(f"too many separate system calls to deny: {len(points)} comparisons")
    # Segment s is the numbers from points[s - 1] up to points[s] (exclusive):
    # allowed before the first point, then denied and allowed by turns.
    body: list[tuple[int, int | str, int | str]] = []

    def search(low: int, high: int) -> int | str:
        """Emit the search among segments low..high; its first instruction, or a return."""
        if low == high:
            return "deny" if low % 2 else "allow"
        middle = (low + high + 1) // 2
        here = len(body)
        body.append((points[middle - 1], 0, 0))  # patched below
        below = search(low, middle - 1)
        above = search(middle, high)
        body[here] = (points[middle - 1], above, below)
        return here

    search(0, len(points))
    size = len(body)
    returns = {"allow": size, "deny": size + 1}
    program: list[bytes] = []
    for index, (point, above, below) in enumerate(body):
        jt = returns[above] if isinstance(above, str) else above
        jf = returns[below] if isinstance(below, str) else below
        program.append(_jump(_BPF_JGE_K, point, jt - index - 1, jf - index - 1))
    return [*program, _stmt(_BPF_RET_K, _RET_ALLOW), _stmt(_BPF_RET_K, answer)]


@functools.lru_cache(maxsize=4)
def build_filter(arch: int, self_pid: int) -> bytes:
    """Assemble the filter program for ``arch`` as packed ``struct sock_filter`` items.

    ``self_pid`` is the pid (as the worker sees it) that signals may target.
    Cached: the zygote builds the filter of an init (PID 1 of its namespace)
    once, and every worker it forks as one finds it built.
    """
    table = SYSCALL_TABLES.get(arch)
    if table is None:
        raise SeccompUnavailableError(errno.ENOSYS, f"no syscall table for arch {arch:#x}")
    eperm = _errno(errno.EPERM)
    prog: list[bytes] = [
        _stmt(_BPF_LD_W_ABS, _OFF_ARCH),
        _jump(_BPF_JEQ_K, arch, 1, 0),
        _stmt(_BPF_RET_K, _RET_KILL_PROCESS),
        _stmt(_BPF_LD_W_ABS, _OFF_NR),
    ]
    if arch == AUDIT_ARCH_X86_64:
        # x32 syscalls carry this bit and have their own numbering: no exceptions.
        prog += [_jump(_BPF_JGE_K, _X32_SYSCALL_BIT, 0, 1), _stmt(_BPF_RET_K, _RET_KILL_PROCESS)]
    # clone3 passes flags in a struct the filter cannot read: ENOSYS makes libc fall
    # back to clone, which is denied below (threads included).
    prog += [_jump(_BPF_JEQ_K, table["clone3"], 0, 1), _stmt(_BPF_RET_K, _errno(errno.ENOSYS))]
    prog += [_jump(_BPF_JEQ_K, table["clone"], 0, 1), _stmt(_BPF_RET_K, eperm)]
    prog += _only_if_args_equal(table["socketpair"], [(0, _AF_UNIX)], eperm)
    prog += _only_if_args_equal(table["kill"], [(0, self_pid)], eperm)
    prog += _only_if_args_equal(table["tkill"], [(0, self_pid)], eperm)
    prog += _only_if_args_equal(table["tgkill"], [(0, self_pid), (1, self_pid)], eperm)
    prog += _deny_if_arg_in(table["ioctl"], 1, (_TIOCSTI, _TIOCLINUX), eperm)
    prog += _only_if_arg_in(table["prctl"], 0, sorted(ALLOWED_PRCTL_OPTIONS.values()), eperm)
    if "arch_prctl" in table:
        options = sorted(ALLOWED_ARCH_PRCTL_OPTIONS.values())
        prog += _only_if_arg_in(table["arch_prctl"], 0, options, eperm)
    prog += _deny_numbers(sorted(table[name] for name in DENIED_SYSCALLS if name in table), eperm)
    return b"".join(prog)


class _SockFprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_void_p))


@functools.lru_cache(maxsize=4)
def _loaded_filter(arch: int, self_pid: int) -> tuple[ctypes.Array[ctypes.c_char], _SockFprog]:
    """:func:`build_filter`'s program in memory the kernel can read it from, and its header.

    Cached like the program: a worker forked after :func:`prepare_filter`
    loads it as it is, without making a ctypes type for its size (about 40
    us and a dozen copied pages in a fresh process).
    """
    program = build_filter(arch, self_pid)
    buffer = (ctypes.c_char * len(program)).from_buffer_copy(program)
    header = _SockFprog(len(program) // _SockFilter.size, ctypes.cast(buffer, ctypes.c_void_p))
    return buffer, header


def prepare_filter(self_pid: int) -> int:
    """Build the filter for a process that will see itself as ``self_pid``, ready to install.

    For a process that forks workers (the zygote, for its inits: PID 1):
    each worker then finds it built. Returns the number of BPF instructions;
    raises :class:`SeccompUnavailableError` on an unsupported architecture.
    """
    arch = native_arch()
    if arch is None:
        raise SeccompUnavailableError(errno.ENOSYS, f"unsupported machine {platform.machine()}")
    return int(_loaded_filter(arch, self_pid)[1].len)


def install_filter(self_pid: int | None = None) -> int:
    """Set ``no_new_privs`` and install the filter on the calling (single-threaded) process.

    Returns the number of BPF instructions. Raises :class:`SeccompUnavailableError`
    on an unsupported architecture or when the kernel refuses the filter.

    Security warning: irreversible, and it applies to the calling thread only;
    call it last, after every other layer, in a process with exactly one thread.
    """
    arch = native_arch()
    if arch is None:
        raise SeccompUnavailableError(errno.ENOSYS, f"unsupported machine {platform.machine()}")
    _buffer, fprog = _loaded_filter(arch, os.getpid() if self_pid is None else self_pid)
    count = int(fprog.len)
    try:
        prctl(PR_SET_NO_NEW_PRIVS, 1)
    except OSError as exc:
        raise SeccompUnavailableError(exc.errno, f"PR_SET_NO_NEW_PRIVS: {exc.strerror}") from None
    try:
        prctl(PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.addressof(fprog))
    except OSError as exc:
        raise SeccompUnavailableError(exc.errno, f"PR_SET_SECCOMP: {exc.strerror}") from None
    return count
