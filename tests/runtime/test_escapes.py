"""Hostile programs against ``SubprocessRuntime``: every one must fail safely.

Each program tries one escape and, if a step works, puts ``ESCAPED`` (or what
it stole) into its output. After every run the host is checked: the test
process and a bystander process are alive, the secret (a host environment
variable and a root-only file) is not in the outcome, the loopback listeners
received nothing, nothing was written outside the work directory, no worker
process is left, and the runtime still runs a normal program.

Every program runs three times: as configured (import allow-list), with
RestrictedPython on top, and with the language layers effectively off (the
allow-list opened to ``os``, ``ctypes``, ``socket``...) to show that the OS
layers hold by themselves. Nothing is skipped: on a machine without some OS
layer the remaining layers must still stop every attack, or the test fails.
"""

from __future__ import annotations

import glob
import os
import secrets
import select
import socket
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest

from runtime import Limits, RunOutcome, SubprocessRuntime
from runtime._worker._imports import DEFAULT_ALLOWED_MODULES
from runtime.testing import ToolBox

pytestmark = pytest.mark.anyio

TOKEN = secrets.token_hex(8)
SECRET = f"ptc-escape-secret-{secrets.token_hex(16)}"
MARKER = "ESCAPED"
LIMITS = Limits(
    timeout=4.0,
    cpu_seconds=1.0,
    memory_bytes=256 * 1024 * 1024,
    max_output_bytes=256 * 1024,
    max_tool_calls=50,
    max_message_bytes=1024 * 1024,
)
# Enough of the standard library to attack with, for the "os-only" mode.
ATTACK_MODULES = frozenset(
    {
        "asyncio", "builtins", "ctypes", "errno", "fcntl", "gc", "importlib", "inspect", "io",
        "mmap", "multiprocessing", "os", "pathlib", "pty", "resource", "select", "shutil",
        "signal", "socket", "struct", "subprocess", "sys", "tempfile", "termios", "threading",
        "time", "traceback", "types",
    }
)  # fmt: skip
MODES: dict[str, dict[str, Any]] = {
    "configured": {},
    "restricted": {"restricted": True},
    "os-only": {"allowed_modules": DEFAULT_ALLOWED_MODULES | ATTACK_MODULES},
}


@dataclass(frozen=True, slots=True)
class Hostile:
    """One hostile program and the outcome kinds it may end with (None: success)."""

    name: str
    code: str
    kinds: frozenset[str | None] = field(default_factory=frozenset)


def hostile(name: str, code: str, *kinds: str | None) -> Hostile:
    # Split the marker in the source so that a traceback quoting the line is
    # not mistaken for a successful escape.
    code = code.replace(f"b'{MARKER}", f"b'{MARKER[:3]}' b'{MARKER[3:]}")
    code = code.replace(f"'{MARKER}", f"'{MARKER[:3]}' '{MARKER[3:]}")
    return Hostile(name, textwrap.dedent(code).strip() + "\n", frozenset(kinds))


# Programs import what they attack with: under the import allow-list that import
# fails (a safe ending too), in "os-only" mode the OS layers must stop them.
PROGRAMS = [
    # ---------------------------------------------------------------- host files
    hostile("read-etc-passwd", f"return '{MARKER} ' + open('/etc/passwd').read()"),
    hostile("read-secret-file", f"return '{MARKER} ' + open('@SECRET_FILE@').read()"),
    hostile("list-host-dirs", f"import os\nreturn '{MARKER} ' + repr(os.listdir('/etc'))"),
    hostile(
        "write-outside",
        f"""
        open('@OUTSIDE@/pwned-@TOKEN@', 'w').write('x')
        return '{MARKER}'
        """,
    ),
    hostile(
        "write-via-dotdot",
        f"""
        import os
        done = []
        for path in ['../pwned-@TOKEN@', '../../pwned-@TOKEN@', '/pwned-@TOKEN@',
                     '/tmp/../pwned-@TOKEN@', '/tmp/pwned-@TOKEN@/../../pwned-@TOKEN@']:
            try:
                open(path, 'w').write('x')
                done.append(path)
            except OSError:
                pass
        return '{MARKER} ' + repr(done) if done else 'kept in'
        """,
        None,
    ),
    hostile(
        "symlink-to-host-file",
        f"""
        import os
        os.symlink('/etc/passwd', 'link')
        return '{MARKER} ' + open('link').read()
        """,
    ),
    hostile(
        "symlink-to-host-root",
        f"""
        import os
        os.symlink('/', 'root')
        return '{MARKER} ' + repr(os.listdir('root/etc'))
        """,
    ),
    hostile(
        "symlink-write-outside",
        f"""
        import os
        os.symlink('@OUTSIDE@', 'out')
        open('out/pwned-@TOKEN@', 'w').write('x')
        return '{MARKER}'
        """,
    ),
    hostile(
        "hardlink-host-file",
        f"""
        import os
        os.link('/etc/passwd', 'hard')
        return '{MARKER} ' + open('hard').read()
        """,
    ),
    hostile(
        "write-exec-and-load",
        f"""
        import ctypes, ctypes.util, shutil
        shutil.copy(ctypes.util.find_library('c') or '/lib/x86_64-linux-gnu/libc.so.6', 'x.so')
        ctypes.CDLL('./x.so')
        return '{MARKER}'
        """,
    ),
    hostile(
        "device-and-kernel-files",
        f"""
        found = []
        for path in ['/dev/mem', '/dev/kmsg', '/dev/sda', '/dev/vda', '/sys/kernel/notes',
                     '/proc/kcore', '/proc/sysrq-trigger', '/dev/tty']:
            try:
                open(path, 'rb').close()
                found.append(path)
            except OSError:
                pass
        return '{MARKER} ' + repr(found) if found else 'none'
        """,
        None,
    ),
    # ---------------------------------------------------------------- environment and /proc
    hostile("read-environment", "import os\nreturn repr(dict(os.environ))", None),
    hostile(
        "read-own-proc-environ",
        f"return '{MARKER} ' + repr(open('/proc/self/environ','rb').read())",
    ),
    hostile(
        "read-host-proc-environ",
        f"return '{MARKER} ' + repr(open('/proc/@HOST_PID@/environ', 'rb').read())",
    ),
    hostile(
        "write-own-proc-mem",
        f"""
        with open('/proc/self/mem', 'r+b') as mem:
            mem.seek(0x400000)
            mem.write(b'x')
        return '{MARKER}'
        """,
    ),
    hostile(
        "search-memory-for-secrets",
        """
        found = []
        for cls in ().__class__.__base__.__subclasses__():
            if cls.__name__ == '_Environ':
                found.append('environ class')
        import gc
        for obj in gc.get_objects():
            if isinstance(obj, dict) and 'PTC_ESCAPE_SECRET' in obj:
                found.append(repr(obj['PTC_ESCAPE_SECRET']))
        return repr(found)
        """,
        None,
    ),
    # ---------------------------------------------------------------- network
    hostile(
        "tcp-to-loopback",
        f"""
        import socket
        client = socket.create_connection(('127.0.0.1', @PORT@), timeout=2)
        client.sendall(b'{MARKER}')
        return '{MARKER}'
        """,
    ),
    hostile(
        "udp-to-loopback",
        f"""
        import socket
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'{MARKER}', ('127.0.0.1', @UDP_PORT@))
        return '{MARKER}'
        """,
    ),
    hostile(
        "asyncio-open-connection",
        f"""
        import asyncio
        reader, writer = await asyncio.wait_for(asyncio.open_connection('127.0.0.1', @PORT@), 2)
        writer.write(b'{MARKER}')
        await writer.drain()
        return '{MARKER}'
        """,
    ),
    hostile(
        "abstract-unix-socket",
        f"""
        import socket
        client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        client.connect('\\0ptc-escape-@TOKEN@')
        client.sendall(b'{MARKER}')
        return '{MARKER}'
        """,
    ),
    hostile(
        "unix-socket-path",
        f"""
        import socket
        client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        client.connect('@UNIX_PATH@')
        client.sendall(b'{MARKER}')
        return '{MARKER}'
        """,
    ),
    hostile(
        "raw-socket-syscall",
        f"""
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        fd = libc.syscall(41, 2, 1, 0)  # socket(AF_INET, SOCK_STREAM) on x86_64
        return '{MARKER} fd=%d' % fd if fd >= 0 else 'denied'
        """,
        None,
    ),
    # ---------------------------------------------------------------- processes
    hostile(
        "os-fork",
        f"""
        import os
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        return '{MARKER}'
        """,
    ),
    hostile(
        "fork-bomb",
        """
        import os
        while True:
            os.fork()
        """,
    ),
    hostile(
        "subprocess-run",
        f"""
        import subprocess
        out = subprocess.run(['cat', '/etc/passwd'], capture_output=True).stdout
        return '{MARKER} ' + out.decode()
        """,
    ),
    hostile(
        "os-system",
        f"""
        import os
        status = os.system('touch @OUTSIDE@/pwned-@TOKEN@')
        return '{MARKER}' if status == 0 else 'status %d' % status
        """,
        None,
    ),
    hostile(
        "pty-fork",
        f"""
        import pty
        pid, fd = pty.fork()
        return '{MARKER}'
        """,
    ),
    hostile(
        "posix-spawn",
        f"""
        import os, sys
        os.posix_spawn('/bin/sh', ['sh', '-c', 'touch @OUTSIDE@/pwned-@TOKEN@'], {{}})
        return '{MARKER}'
        """,
    ),
    hostile(
        "multiprocessing",
        f"""
        import multiprocessing
        process = multiprocessing.Process(target=print)
        process.start()
        return '{MARKER}'
        """,
    ),
    hostile(
        "thread-spawning",
        f"""
        import threading
        for _ in range(100):
            threading.Thread(target=lambda: None).start()
        return '{MARKER}'
        """,
    ),
    hostile(
        "ctypes-execve",
        """
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        argv = (ctypes.c_char_p * 2)(b'/bin/sh', None)
        libc.execve(b'/bin/sh', argv, None)
        return 'denied errno %d' % ctypes.get_errno()
        """,
        None,
    ),
    # ---------------------------------------------------------------- signals and other processes
    hostile("kill-host", "import os\nos.kill(@HOST_PID@, 9)\nreturn 'ESCAPED'"),
    hostile("kill-bystander", "import os\nos.kill(@BYSTANDER@, 9)\nreturn 'ESCAPED'"),
    hostile("kill-everyone", "import os\nos.kill(-1, 9)\nreturn 'ESCAPED'"),
    hostile(
        "kill-zygote-and-host-children",
        """
        import os
        for pid in [@HOST_CHILDREN@]:
            for sig in (9, 15, 19):
                try:
                    os.kill(pid, sig)
                except OSError:
                    pass
        return 'tried'
        """,
        None,
    ),
    hostile("kill-parent-and-group", "import os\nos.kill(0, 9)\nos.kill(os.getppid(), 9)"),
    hostile("kill-host-group", "import os\nos.killpg(os.getpgid(@HOST_PID@), 9)\nreturn 'ESCAPED'"),
    hostile(
        "ptrace-host",
        f"""
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.ptrace.argtypes = (ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p)
        result = libc.ptrace(16, @HOST_PID@, None, None)
        return '{MARKER}' if result == 0 else 'denied'
        """,
        None,
    ),
    hostile(
        "process-vm-readv-host",
        f"""
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        buf = ctypes.create_string_buffer(16)
        local = (ctypes.c_void_p * 2)(ctypes.cast(buf, ctypes.c_void_p), 16)
        remote = (ctypes.c_void_p * 2)(0x400000, 16)
        n = libc.process_vm_readv(@HOST_PID@, local, 1, remote, 1, 0)
        return '{MARKER}' if n > 0 else 'denied'
        """,
        None,
    ),
    # ---------------------------------------------------------------- privileges and kernel surface
    hostile("setuid-root", "import os\nos.setuid(0)\nos.setgid(0)\nreturn 'ESCAPED'"),
    hostile(
        "dangerous-syscalls",
        f"""
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        calls = {{'unshare': (272, 0x10000000), 'mount': (165, b'none', b'/tmp', b'tmpfs', 0, 0),
                  'bpf': (321, 0, 0, 0), 'perf_event_open': (298, 0, 0, -1, -1, 0),
                  'userfaultfd': (323, 0), 'io_uring_setup': (425, 1, 0), 'keyctl': (250, 0),
                  'setns': (308, 0, 0), 'init_module': (175, 0, 0, b''), 'chroot': (161, b'.'),
                  'open_by_handle_at': (304, 0, 0, 0), 'reboot': (169, 0, 0, 0, 0),
                  'pidfd_open': (434, 1, 0), 'kexec_load': (246, 0, 0, 0, 0),
                  'memfd_create': (319, b'x', 0), 'add_key': (248, b'user', b'x', b'x', 1, -1)}}
        worked = [name for name, args in calls.items() if libc.syscall(*args) >= 0]
        return '{MARKER} ' + repr(worked) if worked else 'all denied'
        """,
        None,
    ),
    hostile(
        "chroot-escape",
        f"""
        import os
        os.mkdir('jail')
        os.chroot('jail')
        for _ in range(20):
            os.chdir('..')
        os.chroot('.')
        return '{MARKER} ' + open('/etc/passwd').read()
        """,
    ),
    hostile(
        "raise-rlimits",
        f"""
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (-1, -1))
        return '{MARKER}'
        """,
    ),
    # ---------------------------------------------------------------- reaching host objects
    hostile(
        "subclasses-to-import",
        f"""
        for cls in ().__class__.__base__.__subclasses__():
            if cls.__name__ == 'catch_warnings':
                builtins = cls()._module.__builtins__
                imp = builtins['__import__']
                imp = getattr(imp, 'original', imp)
                os = imp('os')
                return '{MARKER} ' + repr(os.listdir('/etc'))
        return 'not found'
        """,
    ),
    hostile(
        "frames-to-runtime-globals",
        f"""
        try:
            1 / 0
        except ZeroDivisionError as exc:
            frame = exc.__traceback__.tb_frame
        leaked = []
        while frame is not None:
            leaked.extend(frame.f_globals)
            frame = frame.f_back
        imp = __builtins__.__import__ if hasattr(__builtins__, '__import__') else __builtins__['__import__']
        sys = getattr(imp, 'original', imp)('sys')
        return '{MARKER} ' + open('/etc/shadow').read()
        """,
    ),
    hostile(
        "gc-find-channel-and-forge",
        """
        import gc, socket, json
        sent = 0
        for obj in gc.get_objects():
            if isinstance(obj, socket.socket):
                frame = json.dumps({"type": "call", "id": 99, "name": "explode", "args": {}}).encode()
                obj.sendall(len(frame).to_bytes(4, 'big') + frame)
                sent += 1
        return 'forged %d' % sent
        """,
        None,
        "protocol",
        "crashed",
    ),
    hostile(
        "forge-frames-on-every-fd",
        """
        import os, json
        frames = [{"type": "call", "id": 1, "name": "explode", "args": {}},
                  {"type": "done", "result": "FORGED"},
                  {"type": "ready", "layers": []}]
        data = b''.join(len(f).to_bytes(4, 'big') + f for f in (json.dumps(x).encode() for x in frames))
        for fd in range(1024):
            try:
                os.write(fd, data)
            except OSError:
                pass
        return 'written'
        """,
        None,
        "protocol",
        "crashed",
    ),
    hostile(
        "giant-frame-header",
        """
        import os
        for fd in range(1024):
            try:
                os.write(fd, b'\\xff\\xff\\xff\\xff' + b'x' * 100)
            except OSError:
                pass
        """,
        "protocol",
        "crashed",
    ),
    hostile(
        "close-the-channel",
        "import os\nos.closerange(0, 1024)\nreturn 'closed'",
        "crashed",
        "protocol",
    ),
    # ---------------------------------------------------------------- resource bombs
    hostile("memory-bomb-bytes", "x = bytearray(10 ** 10)", "memory", "exception"),
    hostile(
        "memory-bomb-list",
        "chunks = []\nwhile True:\n    chunks.append(' ' * 10 ** 6)",
        "memory",
        "exception",
        "crashed",
    ),
    hostile("cpu-bomb", "while True:\n    pass", "timeout"),
    hostile("huge-int-bomb", "x = 10 ** (10 ** 10)", "timeout", "memory", "crashed"),
    hostile("huge-int-to-str", "return str(10 ** 100000)", "exception"),
    hostile("recursion-bomb", "def f():\n    return f()\nreturn f()", "exception"),
    hostile(
        "c-stack-overflow",
        """
        import sys
        sys.setrecursionlimit(10 ** 7)
        def f(n):
            return f(n + 1)
        return f(0)
        """,
        "exception",
        "crashed",
        "memory",
        "timeout",
    ),
    hostile(
        "deep-nesting-compile",
        "return eval('(' * 200000 + ')' * 200000)",
        "exception",
        "output_limit",
    ),
    hostile("print-gigabytes", "while True:\n    print('x' * 10 ** 6)", "output_limit"),
    # Under memory pressure the worker may die instead of failing cleanly: still safe.
    hostile("giant-result", "return 'x' * (10 ** 8)", "output_limit", "memory", "crashed"),
    hostile(
        "file-size-bomb",
        """
        with open('big', 'wb') as handle:
            while True:
                handle.write(b'x' * 10 ** 6)
        """,
        "exception",
        "crashed",
        "timeout",
    ),
    hostile("sleep-forever", "import time\ntime.sleep(10 ** 6)", "timeout"),
    hostile("await-forever", "import asyncio\nawait asyncio.sleep(10 ** 6)", "timeout"),
    hostile(
        "ignore-signals-and-spin",
        """
        import signal
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGXCPU):
            signal.signal(sig, signal.SIG_IGN)
        while True:
            pass
        """,
        "timeout",
    ),
    hostile(
        "stop-self",
        "import os, signal\nos.kill(os.getpid(), signal.SIGSTOP)\nwhile True:\n    pass",
        "timeout",
    ),
    hostile("exit-abruptly", "import os\nos._exit(0)", "crashed"),
    hostile("raise-system-exit", "raise SystemExit(3)", "exception", "crashed"),
    hostile(
        "tool-call-flood",
        "while True:\n    await tools.echo({'n': 1})",
        "tool_call_limit",
    ),
    hostile("unlisted-tool", "return await tools['explode']({})", "exception"),
]


def substitute(code: str, host: dict[str, str]) -> str:
    for key, value in host.items():
        code = code.replace(f"@{key}@", value)
    return code


def outcome_text(outcome: RunOutcome) -> str:
    return "\n".join([outcome.message, *outcome.logs, repr(outcome.result)])


def child_processes(root: int) -> list[int]:
    children = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as stat:
                    if int(stat.read().rsplit(b")", 1)[1].split()[1]) == root:
                        children.append(int(entry))
            except (OSError, IndexError, ValueError):
                continue
    return children


def process_state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0].decode()
    except FileNotFoundError:
        return "gone"


def worker_processes(root: int) -> list[int]:
    """Processes two or more generations below ``root``: workers, never the zygote."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as stat:
                    parents[int(entry)] = int(stat.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    children = {pid for pid, parent in parents.items() if parent == root}
    found: list[int] = []
    frontier = {pid for pid, parent in parents.items() if parent in children}
    while frontier:
        found.extend(frontier)
        frontier = {pid for pid, parent in parents.items() if parent in frontier}
    return found


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def host() -> Iterator[dict[str, Any]]:
    """The host-side targets: secrets, listeners, a bystander process, an outside dir."""
    os.environ["PTC_ESCAPE_SECRET"] = SECRET
    outside = tempfile.mkdtemp(prefix="ptc-escape-outside-")
    os.chmod(outside, 0o777)  # only the sandbox can keep the program out
    secret_dir = tempfile.mkdtemp(prefix="ptc-escape-secret-")
    secret_file = os.path.join(secret_dir, "secret.txt")
    with open(secret_file, "w") as handle:
        handle.write(SECRET)
    os.chmod(secret_file, 0o644)  # readable by anyone who can see it
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(16)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    abstract.bind(f"\0ptc-escape-{TOKEN}")
    abstract.listen(16)
    unix_path = os.path.join(outside, "listener.sock")
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix.bind(unix_path)
    unix.listen(16)
    os.chmod(unix_path, 0o777)
    bystander = subprocess.Popen(["sleep", "3600"])
    try:
        yield {
            "values": {
                "PORT": str(tcp.getsockname()[1]),
                "UDP_PORT": str(udp.getsockname()[1]),
                "HOST_PID": str(os.getpid()),
                "BYSTANDER": str(bystander.pid),
                "OUTSIDE": outside,
                "SECRET_FILE": secret_file,
                "UNIX_PATH": unix_path,
                "TOKEN": TOKEN,
            },
            "listeners": [tcp, udp, abstract, unix],
            "bystander": bystander,
            "outside": outside,
        }
    finally:
        bystander.kill()
        bystander.wait()
        for sock in (tcp, udp, abstract, unix):
            sock.close()
        del os.environ["PTC_ESCAPE_SECRET"]
        for path in (secret_file, unix_path):
            os.unlink(path)
        os.rmdir(secret_dir)
        for leftover in glob.glob(os.path.join(outside, "*")):
            os.unlink(leftover)
        os.rmdir(outside)


@pytest.fixture(scope="module", params=list(MODES))
async def runtime(
    request: pytest.FixtureRequest, host: dict[str, Any]
) -> AsyncIterator[SubprocessRuntime]:
    options: dict[str, Any] = MODES[request.param]
    instance = SubprocessRuntime(limits=LIMITS, spares=0, **options)
    async with instance:
        yield instance


# --------------------------------------------------------------------------- the test


def assert_host_unharmed(host: dict[str, Any], outcome: RunOutcome, toolbox: ToolBox) -> None:
    text = outcome_text(outcome)
    assert MARKER not in text, text[:2000]
    assert SECRET not in text
    assert "root:x:0:0" not in text
    for listener in host["listeners"]:
        ready, _, _ = select.select([listener], [], [], 0)
        assert not ready, "a host listener received a connection or datagram"
    assert host["bystander"].poll() is None, "the bystander process was killed"
    written = [path for path in os.listdir(host["outside"]) if path != "listener.sock"]
    assert written == []
    # Not through symlinks: a hostile program's work directory may still hold
    # one to "/" (its worker is ended a moment after the run returns).
    stray = glob.glob(f"/pwned-{TOKEN}") + [
        os.path.join(top, name)
        for top, dirs, files in os.walk("/tmp")
        for name in dirs + files
        if name == f"pwned-{TOKEN}"
    ]
    assert stray == []
    assert [name for name, _ in toolbox.calls if name != "echo"] == []


async def wait_for_no_workers(seconds: float = 10.0) -> list[int]:
    import anyio

    left = worker_processes(os.getpid())
    for _ in range(int(seconds / 0.05)):
        if not left:
            break
        await anyio.sleep(0.05)
        left = worker_processes(os.getpid())
    return left


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.name for p in PROGRAMS])
async def test_hostile_program_fails_safely(
    runtime: SubprocessRuntime, host: dict[str, Any], program: Hostile
) -> None:
    toolbox = ToolBox()
    await runtime.run("return 1", tool_names=[], call_tool=toolbox)  # the zygote is up
    children = child_processes(os.getpid())  # the zygote, the bystander
    values = {**host["values"], "HOST_CHILDREN": ", ".join(map(str, children))}
    outcome = await runtime.run(
        substitute(program.code, values), tool_names=["echo"], call_tool=toolbox
    )
    assert_host_unharmed(host, outcome, toolbox)
    for pid in children:
        assert process_state(pid) in ("R", "S", "D"), f"host child {pid} was stopped or killed"
    if program.kinds:
        allowed = program.kinds | {"exception", "syntax"}  # the allow-list or RestrictedPython
        assert outcome.kind in allowed, (outcome.kind, outcome.message[:500])
    else:
        assert outcome.kind in ("exception", "syntax"), (outcome.kind, outcome.message[:500])
    assert await wait_for_no_workers() == [], "a worker process outlived its run"
    # The runtime (and its zygote) survived the attack.
    after = await runtime.run("return 6 * 7", tool_names=[], call_tool=toolbox)
    assert after.ok and after.result == 42, after


async def test_forged_frames_never_reach_tools(runtime: SubprocessRuntime) -> None:
    frame = orjson.dumps({"type": "call", "id": 1, "name": "explode", "args": {}})
    toolbox = ToolBox()
    code = f"import os\nos.write(1, {len(frame).to_bytes(4, 'big') + frame!r})\nreturn 'x'"
    outcome = await runtime.run(code, tool_names=["echo"], call_tool=toolbox)
    assert toolbox.calls == []
    assert outcome.kind in (None, "exception", "syntax")


BENIGN = """
import json
from dataclasses import dataclass

@dataclass
class Item:
    name: str

async def numbers():
    for i in range(3):
        yield i

class Counter:
    def __init__(self):
        self.total = 0

counter = Counter()
async for n in numbers():
    counter.total = counter.total + n
echoed = await tools.echo({"items": [Item("a").name]})
print("total", counter.total)
return json.dumps({"total": counter.total, "echoed": echoed})
"""


async def test_benign_program_works_in_every_mode(runtime: SubprocessRuntime) -> None:
    # Keeps the hostile runs honest: a mode that broke every program would
    # "stop" every attack too.
    toolbox = ToolBox()
    outcome = await runtime.run(BENIGN, tool_names=["echo"], call_tool=toolbox)
    assert outcome.ok, outcome.message
    assert orjson.loads(outcome.result) == {"total": 3, "echoed": {"items": ["a"]}}
    assert outcome.logs == ["total 3"]


def test_the_suite_is_big_enough() -> None:
    assert len(PROGRAMS) >= 40
    assert len({program.name for program in PROGRAMS}) == len(PROGRAMS)
    assert sys.platform.startswith("linux")
