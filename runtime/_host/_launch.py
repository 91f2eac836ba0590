"""Spawning the zygote process: no event loop, and only a few light imports.

:func:`spawn_zygote` starts the zygote (see ``runtime._worker._zygote``) and
returns at once; the host reads its greeting later, in its event loop
(``_pool``). ``ptc run`` spawns it this way before it imports the rest of the
command line: the zygote's boot (an interpreter that imports the sandbox layers
and every allowed module, about 100 ms) then overlaps those imports on another
core, and the :class:`~runtime.SubprocessRuntime` the run makes adopts it
(its ``zygote`` argument). A runtime given none spawns its own the same way.

Whoever holds a :class:`SpawnedZygote` closes it: a runtime that adopted it
does (its ``aclose``), and :meth:`SpawnedZygote.discard` ends one no runtime
took (a ``ptc run`` that failed before its run, or printed its help).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from typing import NamedTuple

from .._worker._imports import DEFAULT_ALLOWED_MODULES

__all__ = ["ZYGOTE_BOOT", "SpawnedZygote", "ZygoteSettings", "spawn_zygote", "zygote_settings"]

#: ``python -c`` text that imports ``runtime._worker._zygote`` without running
#: ``runtime/__init__`` (which pulls in the host side) and calls its ``main``
#: with ``argv[2]``. The cyclic GC is off until ``main`` has imported everything
#: (then it freezes what there is, and turns it back on). The modules of the
#: options' ``"never"`` are marked absent first (see :data:`_NEVER_LOADED`).
ZYGOTE_BOOT = (
    "import gc;gc.disable();"
    "import sys,types,json;o=json.loads(sys.argv[2]);m=types.ModuleType('runtime');"
    "m.__path__=[sys.argv[1]];sys.modules['runtime']=m;"
    "sys.modules.update(dict.fromkeys(o['never']));sys.path[:0]=o['paths'];"
    "from runtime._worker._zygote import main;main(sys.argv[2])"
)

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # runtime/
# Modules the bootstrap itself needs in every worker.
_BOOTSTRAP_MODULES = ("asyncio",)
#: Modules asyncio loads for what no worker can do (TLS: a worker has no
#: network), kept out of the zygote unless the allow-list names them: 4-6 ms
#: less of its boot, on the path of a cold ``ptc run``, and no TLS library
#: mapped in any worker. asyncio does without (``ssl`` is optional to it).
_NEVER_LOADED = ("ssl",)

# Where the zygote's directory goes unless $TMPDIR (or $TEMP, $TMP) says: the
# zygote makes and removes a work directory in it for every run (holding empty
# files at most: a worker's file-size limit is 0), and the worker changes its
# owner and mode. On ext4 here, mkdir and rmdir took 40 + 77 us, and the
# journal commits each change afterwards; on tmpfs, 5 + 5 us.
_MEMORY_DIR = "/dev/shm"


def _zygote_dir_parent() -> str | None:
    """Tempfile's choice (``None``) where the environment names one, else ``/dev/shm`` if usable."""
    if any(os.environ.get(name) for name in ("TMPDIR", "TEMP", "TMP")):
        return None
    if os.path.isdir(_MEMORY_DIR) and os.access(_MEMORY_DIR, os.W_OK | os.X_OK):
        return _MEMORY_DIR
    return None


class ZygoteSettings(NamedTuple):
    """What a zygote is started with; a runtime adopts only a zygote of its own settings.

    (A named tuple rather than a dataclass: ``dataclasses`` would be imported
    before the zygote is spawned, on the path of a cold ``ptc run``.)
    """

    python: str
    allowed_modules: frozenset[str] | None
    preimport: tuple[str, ...]
    restricted: bool


def zygote_settings(
    *,
    python: str | None = None,
    allowed_modules: Iterable[str] | None = None,
    restricted: bool = False,
) -> ZygoteSettings:
    """The settings of a :class:`~runtime.SubprocessRuntime` made with these arguments.

    ``None`` means what the runtime's defaults mean: this interpreter, and the
    safe standard-library allow-list of ``runtime._worker._imports``.
    """
    allowed = frozenset(DEFAULT_ALLOWED_MODULES if allowed_modules is None else allowed_modules)
    return ZygoteSettings(
        python=python or sys.executable,
        allowed_modules=allowed,
        preimport=tuple(sorted({*allowed, *_BOOTSTRAP_MODULES})),
        restricted=restricted,
    )


class SpawnedZygote:
    """A zygote process just started: its process, the host end of its control socket, its directory.

    Its greeting (``ready``, or why it cannot serve) is still to be read, by the
    runtime that adopts it.
    """

    __slots__ = ("ctl", "discarded", "pidfd", "process", "settings", "taken", "tmp")

    def __init__(
        self,
        *,
        settings: ZygoteSettings,
        process: subprocess.Popen[bytes],
        ctl: socket.socket,
        tmp: str,
        pidfd: int | None,
    ) -> None:
        self.settings = settings
        self.process = process
        self.ctl = ctl
        self.tmp = tmp
        # Readable once the process exits (``None`` where the kernel has no pidfds).
        self.pidfd = pidfd
        # Adopted by a runtime (which then closes it), or discarded.
        self.taken = False
        self.discarded = False

    def take(self) -> None:
        """Mark it as adopted: from now on its runtime closes it, :meth:`discard` does nothing.

        Raises:
            ValueError: a runtime adopted it already.
        """
        if self.taken:
            raise ValueError("this zygote was adopted by another runtime already")
        if self.discarded:
            raise ValueError("this zygote was discarded")
        self.taken = True

    def discard(self) -> None:
        """End it if no runtime adopted it: kill it, reap it, remove its directory.

        (No worker was asked of it, so it has no children to end.)
        """
        if self.taken or self.discarded:
            return
        self.discarded = True
        with contextlib.suppress(OSError):
            self.process.send_signal(signal.SIGKILL)
        self.process.wait()
        self.ctl.close()
        if self.pidfd is not None:
            os.close(self.pidfd)
        shutil.rmtree(self.tmp, ignore_errors=True)


def spawn_zygote(settings: ZygoteSettings) -> SpawnedZygote:
    """Start a zygote process with ``settings`` and return without waiting for it.

    It runs in an isolated interpreter (``-I -S``, an empty environment, a new
    session), in a private temporary directory that holds its workers' own:
    under ``$TMPDIR`` (or ``$TEMP``, ``$TMP``) if set, else in ``/dev/shm``
    (memory) where that is usable, else in the system's temporary directory.

    Raises:
        OSError: the process, its socket or its directory cannot be made.
        ImportError: orjson (or, for ``restricted``, RestrictedPython) is not installed.
    """
    tmp = tempfile.mkdtemp(prefix="ptc-runtime-", dir=_zygote_dir_parent())
    try:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    options = {
        "fd": theirs.fileno(),
        "tmp": tmp,
        "paths": _dependency_paths(settings.restricted),
        "allowed": None if settings.allowed_modules is None else sorted(settings.allowed_modules),
        "preimport": list(settings.preimport),
        "never": [name for name in _NEVER_LOADED if name not in (settings.allowed_modules or ())],
        "restricted": settings.restricted,
    }
    command = [settings.python, "-I", "-S", "-X", "utf8", "-c", ZYGOTE_BOOT, _PACKAGE_DIR]
    command.append(json.dumps(options))
    try:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=None,
            cwd=tmp,
            env={},
            start_new_session=True,
            pass_fds=[theirs.fileno()],
        )
    except BaseException:
        ours.close()
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        theirs.close()
    ours.setblocking(False)
    return SpawnedZygote(
        settings=settings, process=process, ctl=ours, tmp=tmp, pidfd=_open_pidfd(process.pid)
    )


def _open_pidfd(pid: int) -> int | None:
    """A descriptor that becomes readable when ``pid`` (a child not yet reaped) exits."""
    pidfd_open = getattr(os, "pidfd_open", None)
    if pidfd_open is None:
        return None
    try:
        fd: int = pidfd_open(pid)  # close-on-exec, as every pidfd is
    except OSError:
        return None
    return fd


def _dependency_paths(restricted: bool) -> list[str]:
    """``sys.path`` entries the zygote needs beyond the standard library.

    Found without importing them (orjson's import costs the host several
    milliseconds it would spend before the zygote starts).
    """
    names = ["orjson", "RestrictedPython"] if restricted else ["orjson"]
    paths: list[str] = []
    for name in names:
        spec = importlib.util.find_spec(name)
        origin = spec.origin if spec is not None else None
        if origin is None:
            raise ModuleNotFoundError(f"the zygote needs {name}, which is not installed")
        path = os.path.dirname(os.path.dirname(os.path.realpath(origin)))
        if path not in paths:
            paths.append(path)
    return paths
