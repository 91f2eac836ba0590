"""Each OS isolation layer of ``runtime._sandbox._layers`` really holds, plus the language layers.

The live tests fork a child that enters the sandbox, attempts something and
reports through a pipe; the parent asserts. Variants switch layers off to show
that each one holds by itself. The seccomp filter is also checked instruction
by instruction with a small classic-BPF interpreter, for both architectures.
"""

from __future__ import annotations

import asyncio
import builtins
import ctypes
import dataclasses
import errno
import json
import os
import posix
import random
import resource
import select
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime._sandbox import _landlock, _layers, _libc, _namespaces, _seccomp
from runtime._sandbox._layers import (
    PROTECTS,
    LayerStatus,
    RootTemplate,
    SandboxConfig,
    SandboxError,
    enter_sandbox,
    make_root_template,
    probe_layers,
)
from runtime._worker._bootstrap import compile_program
from runtime._worker._imports import (
    DEFAULT_ALLOWED_MODULES,
    ImportGuard,
    install_import_guard,
    installed_guard,
    preload_modules,
)
from runtime._worker._restricted import (
    PROGRAM_FUNCTION,
    compile_restricted_program,
    restricted_globals,
)

MiB = 1024 * 1024
ALL_LAYERS = (
    "environment",
    "user-namespace",
    "network-namespace",
    "ipc-namespace",
    "uts-namespace",
    "mount-namespace",
    "pid-namespace",
    "workdir",
    "privileges",
    "rlimits",
    "landlock",
    "seccomp",
)
LAYER_SWITCHES: dict[str, dict[str, Any]] = {
    "all": {},
    "namespaces only": {"seccomp": False, "landlock": False},
    "seccomp only": {"namespaces": False, "landlock": False},
    "landlock only": {"namespaces": False, "seccomp": False},
}


# --------------------------------------------------------------------------- harness


class Sandboxed:
    """What a sandboxed child reported, and how it ended."""

    def __init__(self, report: dict[str, Any], status: int) -> None:
        self.report = report
        self.status = status

    @property
    def layers(self) -> dict[str, LayerStatus]:
        return {row[0]: LayerStatus(*row) for row in self.report.get("layers", [])}

    @property
    def results(self) -> dict[str, Any]:
        results: dict[str, Any] = self.report.get("results", {})
        return results

    @property
    def signal(self) -> int | None:
        return os.WTERMSIG(self.status) if os.WIFSIGNALED(self.status) else None


def run_sandboxed(
    body: Callable[[], dict[str, Any]],
    *,
    timeout: float = 30.0,
    extra_fds: tuple[int, ...] = (),
    before: Callable[[], None] | None = None,
    **config: Any,
) -> Sandboxed:
    """Fork; the child enters the sandbox, runs ``body`` and reports its dict as JSON.

    A ``workdir`` that is a :class:`TemplateWorkdir` makes the child join its
    template (a zygote's namespaced workers do) instead of building its own root.
    """
    workdir = config.pop("workdir")
    if isinstance(workdir, TemplateWorkdir) and config.get("namespaces", True):
        config["template"] = workdir.template
        extra_fds = (*extra_fds, *workdir.template.descriptors)
        workdir = None
    settings = {"memory_bytes": 512 * MiB, "cpu_seconds": 10.0, "max_file_bytes": MiB, **config}
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 0
        try:
            os.close(read_fd)
            if before is not None:
                before()
            report: dict[str, Any] = {}
            try:
                statuses = enter_sandbox(
                    SandboxConfig(workdir=workdir, **settings), keep_fds=[write_fd, *extra_fds]
                )
                report["layers"] = [[s.name, s.active, s.detail, s.protects] for s in statuses]
                report["results"] = body()
            except SandboxError as exc:
                report["sandbox_error"] = str(exc)
            os.write(write_fd, json.dumps(report, default=repr).encode())
        except BaseException:
            code = 99
        finally:
            os._exit(code)
    os.close(write_fd)
    chunks = []
    deadline = time.monotonic() + timeout
    while True:
        ready, _, _ = select.select([read_fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            os.kill(pid, signal.SIGKILL)
            break
        chunk = os.read(read_fd, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(read_fd)
    _, status = os.waitpid(pid, 0)
    data = b"".join(chunks)
    return Sandboxed(json.loads(data) if data else {}, status)


def attempt(function: Callable[[], Any]) -> str:
    """``"ok: <value>"`` or ``"<ExceptionName>: <errno name>"``: what a child reports."""
    try:
        value = function()
    except OSError as exc:
        return f"{type(exc).__name__}: {errno.errorcode.get(exc.errno or 0, exc.errno)}"
    except BaseException as exc:
        return f"{type(exc).__name__}: {exc}"
    return f"ok: {value!r}"[:200]


def read_text(path: str) -> str:
    with open(path) as handle:
        return handle.read()


def write_text(path: str, text: str = "x") -> int:
    with open(path, "w") as handle:
        return handle.write(text)


def symlink_and_read(target: str, link: str) -> str:
    os.symlink(target, link)
    return read_text(link)


def blocked(result: str) -> bool:
    return not result.startswith("ok")


def landed_in_the_workdir(workdir: str, name: str, *, namespaces: bool = True) -> bool:
    """Whether a file the program made as ``name`` in its cwd is where it should be.

    A worker of its own root writes to the host directory; a template's
    (namespaced) worker to its own tmpfs, which ends with it: the host
    directory (the template's staging point) must stay empty then.
    """
    if isinstance(workdir, TemplateWorkdir) and namespaces:
        return os.listdir(workdir) == []
    return os.path.exists(os.path.join(workdir, name))


class TemplateWorkdir(str):
    """A host directory that also carries a :class:`RootTemplate` for the child to join.

    The directory is the template's staging point; the program's workdir is
    the tmpfs the child mounts in its copy of the template's root.
    """

    template: RootTemplate


@pytest.fixture
def host_workdir() -> Iterator[str]:
    """A host directory the sandboxed child uses as its workdir (it builds its own root)."""
    with tempfile.TemporaryDirectory(prefix="ptc-sandbox-test-") as path:
        yield path


def _with_template(path: str, template: RootTemplate) -> TemplateWorkdir:
    marked = TemplateWorkdir(path)
    marked.template = template
    return marked


@pytest.fixture(params=["own root", "template"])
def workdir(request: pytest.FixtureRequest) -> Iterator[str]:
    """Each live test twice: a worker that builds its own root, and one that joins a template."""
    with tempfile.TemporaryDirectory(prefix="ptc-sandbox-test-") as path:
        if request.param == "own root":
            yield path
            return
        template = make_root_template(path)
        try:
            yield _with_template(path, template)
        finally:
            template.close()


@pytest.fixture
def outside_dir() -> Iterator[str]:
    """A world-writable host directory: only the sandbox can keep the program out."""
    with tempfile.TemporaryDirectory(prefix="ptc-outside-") as path:
        os.chmod(path, 0o777)
        yield path


@pytest.fixture(scope="module")
def machine() -> dict[str, LayerStatus]:
    return {status.name: status for status in probe_layers()}


# --------------------------------------------------------------------------- reporting


def test_prctl_is_one_checked_wrapper() -> None:
    # Every layer and the zygote call prctl through _libc: a refusal raises, never
    # returns -1 to a caller that forgot to look.
    assert _libc.prctl(_libc.PR_GET_NO_NEW_PRIVS) in (0, 1)
    with pytest.raises(OSError) as info:
        _libc.prctl(_libc.PR_CAPBSET_READ, 10_000)  # no such capability
    assert info.value.errno == errno.EINVAL
    assert f"prctl({_libc.PR_CAPBSET_READ})" in str(info.value)
    sandbox = Path(_libc.__file__).parent
    worker = sandbox.parent / "_worker"
    for path in [*sandbox.glob("*.py"), *worker.glob("*.py")]:
        if path.name != "_libc.py":
            assert "CDLL(" not in path.read_text(encoding="utf-8"), path


def test_every_layer_is_reported_in_order(workdir: str) -> None:
    outcome = run_sandboxed(lambda: {}, workdir=workdir)
    assert [name for name in outcome.layers] == list(ALL_LAYERS)
    for status in outcome.layers.values():
        assert status.detail
        assert status.protects == PROTECTS[status.name]


def test_probe_layers_matches_a_real_worker(machine: dict[str, LayerStatus], workdir: str) -> None:
    assert set(machine) == set(ALL_LAYERS)
    outcome = run_sandboxed(lambda: {}, workdir=workdir)
    assert {name: s.active for name, s in outcome.layers.items()} == {
        name: s.active for name, s in machine.items()
    }
    for status in machine.values():
        assert status.active or status.detail, "an unavailable layer must say why"


def test_this_machine_provides_every_layer(machine: dict[str, LayerStatus]) -> None:
    # CI and the development machines run as root with user namespaces, seccomp
    # and Landlock: a layer going missing there is a regression, not a skip.
    assert [name for name, s in machine.items() if not s.active] == []


def test_switched_off_layers_are_reported_and_not_strict_errors(workdir: str) -> None:
    outcome = run_sandboxed(
        lambda: {}, workdir=workdir, namespaces=False, seccomp=False, landlock=False, strict=True
    )
    assert "sandbox_error" not in outcome.report
    layers = outcome.layers
    for name in ("user-namespace", "mount-namespace", "landlock", "seccomp"):
        assert not layers[name].active
        assert layers[name].detail == "switched off by configuration"
    assert layers["privileges"].active
    assert layers["rlimits"].active


def _break_landlock() -> None:
    def unavailable() -> int:
        raise _landlock.LandlockUnavailableError(errno.EOPNOTSUPP, "Landlock disabled at boot")

    _landlock.abi_version = unavailable


def test_strict_refuses_when_a_layer_is_missing(workdir: str) -> None:
    outcome = run_sandboxed(
        lambda: {"ran": True}, workdir=workdir, strict=True, before=_break_landlock
    )
    assert "landlock" in outcome.report["sandbox_error"]
    assert "results" not in outcome.report


def test_without_strict_a_missing_layer_is_reported_and_the_rest_holds(workdir: str) -> None:
    outcome = run_sandboxed(
        lambda: {"passwd": attempt(lambda: read_text("/etc/passwd"))},
        workdir=workdir,
        before=_break_landlock,
    )
    assert not outcome.layers["landlock"].active
    assert "disabled at boot" in outcome.layers["landlock"].detail
    assert outcome.layers["seccomp"].active
    assert blocked(outcome.results["passwd"])


def _become_nobody() -> None:
    if os.geteuid() == 0:  # as a non-root user the whole suite already runs this way
        os.setgroups([])
        os.setresgid(65534, 65534, 65534)
        os.setresuid(65534, 65534, 65534)


@pytest.mark.parametrize("namespaces", [True, False], ids=["namespaces", "no-namespaces"])
def test_unprivileged_caller_gets_the_same_protection(namespaces: bool) -> None:
    workdir = tempfile.mkdtemp(prefix="ptc-sandbox-test-")
    try:
        if os.geteuid() == 0:
            os.chown(workdir, 65534, 65534)

        def body() -> dict[str, Any]:
            return {
                "passwd": attempt(lambda: read_text("/etc/passwd")),
                "socket": attempt(socket.socket),
                "fork": attempt(os.fork),
                "write": attempt(lambda: write_text("inside")),
            }

        outcome = run_sandboxed(body, workdir=workdir, namespaces=namespaces, before=_become_nobody)
        layers = outcome.layers
        if namespaces:
            assert layers["user-namespace"].active, layers["user-namespace"].detail
            assert "self-mapping" in layers["user-namespace"].detail
            assert layers["mount-namespace"].active, layers["mount-namespace"].detail
        assert layers["privileges"].active, layers["privileges"].detail
        assert layers["landlock"].active and layers["seccomp"].active
        results = outcome.results
        assert blocked(results["passwd"]) and blocked(results["socket"])
        assert blocked(results["fork"])
        assert results["write"] == "ok: 1"
    finally:
        for name in os.listdir(workdir):
            os.unlink(os.path.join(workdir, name))
        os.rmdir(workdir)


def test_an_unprivileged_callers_template_gives_the_same_protection() -> None:
    # As a zygote run by an ordinary user: the template maps our own ids (the one
    # mapping such a user may write), and its workers hold as root's do.
    workdir = tempfile.mkdtemp(prefix="ptc-sandbox-test-")
    read, write = os.pipe()
    try:
        if os.geteuid() == 0:
            os.chown(workdir, 65534, 65534)
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child: the unprivileged zygote
            try:
                _become_nobody()
                report: dict[str, Any] = {}
                try:
                    template = make_root_template(workdir)
                except SandboxError as exc:
                    report["template"] = str(exc)
                else:
                    report["template"] = template.mapping
                    outcome = run_sandboxed(
                        lambda: {
                            "passwd": attempt(lambda: read_text("/etc/passwd")),
                            "socket": attempt(socket.socket),
                            "write": attempt(lambda: write_text("inside")),
                            "cwd": os.getcwd(),
                            "uid": os.getuid(),
                        },
                        workdir=_with_template(workdir, template),
                    )
                    report["layers"] = {n: s.active for n, s in outcome.layers.items()}
                    report["details"] = outcome.layers["user-namespace"].detail
                    report["results"] = outcome.results
                os.write(write, json.dumps(report).encode())
            finally:
                os._exit(0)
        os.close(write)
        write = -1
        report = json.loads(os.read(read, 1 << 16))
        os.waitpid(pid, 0)
    finally:
        os.close(read)
        if write >= 0:
            os.close(write)
        os.rmdir(workdir)
    assert report["template"] == "self"
    assert all(report["layers"].values()), report["layers"]
    assert "self-mapping" in report["details"]
    results = report["results"]
    assert blocked(results["passwd"]) and blocked(results["socket"])
    assert results["write"] == "ok: 1"
    assert results["cwd"] == "/tmp" and results["uid"] == 0  # our own host uid, mapped


def _fail_fork_after(successes: int) -> Callable[[], None]:
    """In the child: its forks (both kinds, counted together) fail after ``successes``."""

    def install() -> None:
        left = [successes]

        def failing(real_fork: Callable[[], int]) -> Callable[[], int]:
            def fork() -> int:
                if left[0] <= 0:
                    raise BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable")
                left[0] -= 1
                return real_fork()

            return fork

        os.fork = failing(os.fork)
        _layers.fork_unhooked = failing(_layers.fork_unhooked)

    return install


@pytest.mark.parametrize("successes", [0, 1], ids=["helper-fork-fails", "pid-one-fork-fails"])
def test_failed_internal_fork_degrades_and_reports(successes: int, host_workdir: str) -> None:
    if successes == 1 and os.geteuid() != 0:
        successes = 0  # without root there is no id-map helper, only the init's fork
    outcome = run_sandboxed(
        lambda: {"passwd": attempt(lambda: read_text("/etc/passwd")), "pid": os.getpid()},
        workdir=host_workdir,
        before=_fail_fork_after(successes),
    )
    layers = outcome.layers
    assert not layers["pid-namespace"].active
    assert "fork" in layers["pid-namespace"].detail
    assert layers["user-namespace"].active == bool(successes)
    assert layers["mount-namespace"].active == bool(successes)
    assert layers["landlock"].active and layers["seccomp"].active
    assert blocked(outcome.results["passwd"])
    assert outcome.results["pid"] != 1


def test_a_templates_worker_whose_init_fork_fails_degrades_and_reports(host_workdir: str) -> None:
    # A template's worker forks no id-map helper: its only fork is the init's.
    template = make_root_template(host_workdir)
    try:
        outcome = run_sandboxed(
            lambda: {"passwd": attempt(lambda: read_text("/etc/passwd")), "pid": os.getpid()},
            workdir=_with_template(host_workdir, template),
            before=_fail_fork_after(0),
        )
    finally:
        template.close()
    layers = outcome.layers
    assert not layers["pid-namespace"].active
    assert "fork" in layers["pid-namespace"].detail
    assert layers["user-namespace"].active and layers["mount-namespace"].active
    assert layers["landlock"].active and layers["seccomp"].active
    assert blocked(outcome.results["passwd"])
    assert outcome.results["pid"] != 1


# --------------------------------------------------------------------------- environment


def test_environment_is_empty(monkeypatch: pytest.MonkeyPatch, workdir: str) -> None:
    monkeypatch.setenv("PTC_TEST_SECRET", "s3cr3t-env-value")

    def body() -> dict[str, Any]:
        return {
            "environ": dict(os.environ),
            "posix": {k.decode(): v.decode() for k, v in posix.environ.items()},
            "getenv": os.getenv("PTC_TEST_SECRET"),
        }

    results = run_sandboxed(body, workdir=workdir).results
    assert results == {"environ": {}, "posix": {}, "getenv": None}


# A script's start: the bounds of its original environment block, and what it held.
_BLOCK_PROLOGUE = f"""
import ctypes, os, sys
sys.path.insert(0, {os.getcwd()!r})
from runtime._sandbox._layers import SandboxConfig, enter_sandbox, prepare_for_workers
fields = open("/proc/self/stat", "rb").read().rsplit(b")", 1)[1].split()
start, end = int(fields[47]), int(fields[48])
before = ctypes.string_at(start, end - start)
"""


def _run_with_a_secret_in_its_block(body: str) -> subprocess.CompletedProcess[str]:
    """Run ``_BLOCK_PROLOGUE`` then ``body`` in a process exec'd with a secret variable."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin"), "PTC_EXEC_SECRET": "s3cr3t-exec-value"}
    script = _BLOCK_PROLOGUE + textwrap.dedent(body)
    return subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60
    )


def test_original_environment_block_is_scrubbed(workdir: str) -> None:
    # Only a process exec'd with the secret has it in its original environment
    # block (what /proc/<pid>/environ shows), so start one; after the sandbox
    # the block's memory must not hold the value any more.
    done = _run_with_a_secret_in_its_block(
        f"""
        enter_sandbox(
            SandboxConfig(workdir={workdir!r}, memory_bytes=1 << 30, cpu_seconds=10),
            keep_fds=[],
        )
        after = ctypes.string_at(start, end - start)
        print(b"s3cr3t-exec-value" in before, b"s3cr3t-exec-value" in after)
        """
    )
    assert done.stdout.split() == ["True", "False"], done.stderr


def test_a_block_scrubbed_before_the_fork_is_clean_in_every_worker(workdir: str) -> None:
    # The zygote scrubs its original environment block once (prepare_for_workers):
    # a worker forked after it finds the block clean and says so.
    done = _run_with_a_secret_in_its_block(
        f"""
        prepare_for_workers()
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            statuses = enter_sandbox(
                SandboxConfig(workdir={workdir!r}, memory_bytes=1 << 30, cpu_seconds=10),
                keep_fds=[write],
            )
            detail = [s.detail for s in statuses if s.name == "environment"][0]
            clean = b"s3cr3t-exec-value" not in ctypes.string_at(start, end - start)
            os.write(write, f"{{clean}}|{{detail}}".encode())
            os._exit(0)
        os.close(write)
        print(b"s3cr3t-exec-value" in before, os.read(read, 4096).decode())
        os.waitpid(pid, 0)
        """
    )
    had, rest = done.stdout.split(" ", 1)
    clean, detail = rest.strip().split("|", 1)
    assert (had, clean) == ("True", "True"), done.stderr
    assert "bytes of the original block zeroed" in detail


@pytest.mark.parametrize("close_range", [True, False], ids=["close_range", "fallback"])
def test_only_the_kept_descriptors_stay_open(close_range: bool) -> None:
    # With close_range(2), one call per gap between the kept descriptors; without
    # it, closerange() bounded by the highest descriptor open.
    script = textwrap.dedent(
        f"""
        import os, sys
        sys.path.insert(0, {os.getcwd()!r})
        from runtime._sandbox import _layers
        if not {close_range!r}:
            _layers._close_range = lambda: None
        elif _layers._close_range() is None:
            print("unsupported")
            sys.exit(0)
        fds = [os.open(os.devnull, os.O_RDONLY) for _ in range(40)]
        high = os.dup2(fds[0], 900)
        keep = [fds[3], fds[20], high]
        _layers._close_fds([0, 1, 2, *keep])
        def is_open(fd):
            try:
                os.fstat(fd)
            except OSError:
                return False
            return True
        left = [fd for fd in range(3, 1024) if is_open(fd)]
        print(left == sorted(keep) or left)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.stdout.strip() == "True", (done.stdout, done.stderr)


# --------------------------------------------------------------------------- files


# seccomp does not look at paths: every other variant must keep files out alone.
FILE_SWITCHES = [name for name in LAYER_SWITCHES if name != "seccomp only"]


@pytest.mark.parametrize("switches", FILE_SWITCHES)
def test_host_files_are_out_of_reach(switches: str, workdir: str, outside_dir: str) -> None:
    target = os.path.join(outside_dir, "written")
    namespaces = LAYER_SWITCHES[switches].get("namespaces", True)
    # Where the program's cwd is: /tmp of its private root, or the host directory.
    inside = "/tmp/inside.txt" if namespaces else os.path.join(workdir, "inside.txt")

    def body() -> dict[str, Any]:
        return {
            "read passwd": attempt(lambda: read_text("/etc/passwd")),
            "list root": attempt(lambda: os.listdir("/etc")),
            "write outside": attempt(lambda: write_text(target)),
            "write via ..": attempt(lambda: write_text("../ptc-escape")),
            "write workdir": attempt(lambda: write_text("inside.txt")),
            "in the workdir": attempt(lambda: os.path.samefile("inside.txt", inside)),
            "symlink out": attempt(lambda: symlink_and_read("/etc/passwd", "link")),
            "hardlink": attempt(lambda: os.link("/etc/passwd", "hard")),
            "proc environ": attempt(lambda: open(f"/proc/{os.getppid()}/environ", "rb").read()),
        }

    results = run_sandboxed(body, workdir=workdir, **LAYER_SWITCHES[switches]).results
    assert results["write workdir"] == "ok: 1"
    for name in ("read passwd", "list root", "write outside", "write via ..", "symlink out"):
        assert blocked(results[name]), (name, results[name])
    assert blocked(results["hardlink"]), results["hardlink"]
    assert blocked(results["proc environ"])
    assert not os.path.exists(target)
    assert results["in the workdir"] == "ok: True"
    assert landed_in_the_workdir(workdir, "inside.txt", namespaces=namespaces)


def test_host_mount_table_is_untouched(workdir: str) -> None:
    def mounts() -> list[str]:
        with open("/proc/self/mountinfo") as handle:
            return sorted(" ".join(line.split()[3:5]) for line in handle)

    before = mounts()
    outcome = run_sandboxed(lambda: {"cwd": os.getcwd()}, workdir=workdir)
    assert outcome.results == {"cwd": _namespaces.SANDBOX_WORKDIR}
    assert mounts() == before


@pytest.mark.parametrize("mount_setattr", [True, False], ids=["mount_setattr", "remounts"])
def test_private_root_is_read_only_but_the_workdir_and_devices(
    mount_setattr: bool, workdir: str
) -> None:
    """The mount flags of the new root, with ``mount_setattr`` and with the remounts
    of a kernel older than 5.12 (its system call made to fail with ``ENOSYS``)."""
    stdlib = os.path.dirname(os.__file__)

    def without_mount_setattr() -> None:
        _namespaces._SYS_MOUNT_SETATTR = 1023  # type: ignore[misc]  # no such call

    def flags(path: str) -> list[str]:
        value = os.statvfs(path).f_flag
        names = ("ST_RDONLY", "ST_NOSUID", "ST_NODEV", "ST_NOEXEC")
        return [name for name in names if value & getattr(os, name)]

    def body() -> dict[str, Any]:
        return {
            "root": flags("/"),
            "stdlib": flags(stdlib),
            "tmp": flags("/tmp"),
            "write root": attempt(lambda: write_text("/made")),
            "write stdlib": attempt(lambda: write_text(os.path.join(stdlib, "made.py"))),
            "write tmp": attempt(lambda: write_text("/tmp/made")),
            "cwd": os.getcwd(),
            "write null": attempt(lambda: write_text("/dev/null")),
            "read urandom": attempt(lambda: len(open("/dev/urandom", "rb").read(4))),
        }

    outcome = run_sandboxed(
        body,
        workdir=workdir,
        before=None if mount_setattr else without_mount_setattr,
        **LAYER_SWITCHES["namespaces only"],
    )
    results = outcome.results
    assert outcome.layers["mount-namespace"].active, outcome.report
    assert results["root"] == ["ST_RDONLY", "ST_NOSUID", "ST_NODEV"]
    assert results["stdlib"][:3] == ["ST_RDONLY", "ST_NOSUID", "ST_NODEV"]
    assert results["tmp"] == ["ST_NOSUID", "ST_NODEV", "ST_NOEXEC"]
    assert results["write root"] == "OSError: EROFS"
    assert results["write stdlib"] == "OSError: EROFS"
    assert results["write tmp"] == "ok: 1"
    assert results["write null"] == "ok: 1"
    assert results["read urandom"] == "ok: 4"
    assert results["cwd"] == "/tmp"
    assert landed_in_the_workdir(workdir, "made")


def test_workdir_files_belong_to_an_unprivileged_host_id(host_workdir: str) -> None:
    run_sandboxed(lambda: {"w": attempt(lambda: write_text("made"))}, workdir=host_workdir)
    info = os.stat(os.path.join(host_workdir, "made"))
    if os.geteuid() == 0:
        assert info.st_uid == _namespaces.HOST_SANDBOX_ID
    assert not info.st_mode & (stat.S_ISUID | stat.S_ISGID)


def test_a_templates_workers_are_unprivileged_host_ids(host_workdir: str) -> None:
    # Their files live in a tmpfs of their own: what they map to on the host is
    # the template user namespace's id map, read here by a child that joins it.
    template = make_root_template(host_workdir)
    try:
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            try:
                _namespaces.setns(template.user, _namespaces.CLONE_NEWUSER)
                maps = read_text("/proc/self/uid_map") + read_text("/proc/self/gid_map")
                os.write(write, maps.encode())
            finally:
                os._exit(0)
        os.close(write)
        maps = os.read(read, 4096).decode().split()
        os.close(read)
        os.waitpid(pid, 0)
        outcome = run_sandboxed(
            lambda: {"owner": os.stat(write_text("made") and "made").st_uid, "uid": os.getuid()},
            workdir=_with_template(host_workdir, template),
        )
    finally:
        template.close()
    mapped = [(int(maps[i]), int(maps[i + 1])) for i in range(0, len(maps), 3)]
    if os.geteuid() == 0:
        assert template.mapping == "privileged"
        assert set(mapped) == {
            (0, _namespaces.HOST_ROOT_ID),
            (_namespaces.SANDBOX_ID, _namespaces.HOST_SANDBOX_ID),
        }
        assert outcome.results == {"owner": _namespaces.SANDBOX_ID, "uid": _namespaces.SANDBOX_ID}
    else:
        assert template.mapping == "self"
        assert set(mapped) == {(0, os.geteuid()), (0, os.getegid())}


class _RefusingUnshare:
    """Stands in for libc's ``unshare`` or ``setns``: refuses with ``errno`` a number of times."""

    def __init__(self, errno_value: int, refusals: int) -> None:
        self.errno_value = errno_value
        self.refusals = refusals
        self.calls: list[tuple[int, ...]] = []

    def __call__(self, *args: ctypes.c_int) -> int:
        self.calls.append(tuple(arg.value for arg in args))
        if len(self.calls) <= self.refusals:
            ctypes.set_errno(self.errno_value)
            return -1
        return 0


def test_a_user_namespace_refused_for_a_moment_is_asked_for_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # EINVAL for a new user namespace passes within a millisecond (seen on Linux
    # 6.18 after many namespaces came and went): retried, not reported as missing.
    flaky = _RefusingUnshare(errno.EINVAL, refusals=2)
    monkeypatch.setattr(_namespaces.libc, "unshare", flaky)
    _namespaces.unshare(_namespaces.CLONE_NEWUSER | _namespaces.CLONE_NEWNS)
    assert len(flaky.calls) == 3
    joining = _RefusingUnshare(errno.EINVAL, refusals=2)
    monkeypatch.setattr(_namespaces.libc, "setns", joining)
    _namespaces.setns(7, _namespaces.CLONE_NEWUSER)
    assert joining.calls == [(7, _namespaces.CLONE_NEWUSER)] * 3
    refused = _RefusingUnshare(errno.EINVAL, refusals=2)
    monkeypatch.setattr(_namespaces.libc, "setns", refused)
    with pytest.raises(OSError):  # joining a mount namespace: not retried
        _namespaces.setns(7, _namespaces.CLONE_NEWNS)
    assert len(refused.calls) == 1


@pytest.mark.parametrize(
    ("errno_value", "flags", "calls"),
    [
        (errno.EINVAL, _namespaces.CLONE_NEWNS, 1),  # not about a user namespace
        (errno.EPERM, _namespaces.CLONE_NEWUSER, 1),  # a real refusal
    ],
)
def test_other_unshare_refusals_are_not_retried(
    monkeypatch: pytest.MonkeyPatch, errno_value: int, flags: int, calls: int
) -> None:
    refusing = _RefusingUnshare(errno_value, refusals=1000)
    monkeypatch.setattr(_namespaces.libc, "unshare", refusing)
    with pytest.raises(OSError) as info:
        _namespaces.unshare(flags)
    assert info.value.errno == errno_value
    assert len(refusing.calls) == calls


def test_a_lasting_einval_is_reported_after_the_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    refusing = _RefusingUnshare(errno.EINVAL, refusals=10_000)
    monkeypatch.setattr(_namespaces.libc, "unshare", refusing)
    started = time.monotonic()
    with pytest.raises(OSError) as info:
        _namespaces.unshare(_namespaces.CLONE_NEWUSER)
    assert info.value.errno == errno.EINVAL
    assert time.monotonic() - started >= _namespaces.USERNS_RETRY_SECONDS
    assert 2 < len(refusing.calls) < 200


def test_a_template_that_cannot_be_made_says_why(host_workdir: str) -> None:
    # The holder reports its failure; nothing is left open or running.
    def children() -> set[str]:
        with open(f"/proc/self/task/{threading.get_native_id()}/children") as listing:
            return set(listing.read().split())

    fds, before = set(os.listdir("/proc/self/fd")), children()
    with pytest.raises(SandboxError, match=r"cannot make the namespace template: .*No such file"):
        make_root_template(os.path.join(host_workdir, "missing"))
    assert set(os.listdir("/proc/self/fd")) == fds
    assert children() <= before  # the holder was reaped


def test_a_templates_shared_root_stays_read_only_even_for_its_root(host_workdir: str) -> None:
    # Every worker's copy of the template shares its root file system: one that
    # clears the read-only flag of its own mount (with the capabilities it has
    # before it drops them) still cannot write there, nor make a device.
    template = make_root_template(host_workdir)
    read, write = os.pipe()
    try:
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            results: dict[str, str] = {}
            try:
                _namespaces.setns(template.user, _namespaces.CLONE_NEWUSER)
                if template.mapping == "privileged":
                    os.setresgid(0, 0, 0)
                    os.setresuid(0, 0, 0)
                _namespaces.setns(template.mount, _namespaces.CLONE_NEWNS)
                _namespaces.unshare(_namespaces.CLONE_NEWNS)
                writable = _namespaces._MountAttr(0, _namespaces._MOUNT_ATTR_RDONLY, 0, 0)
                cleared = _libc.syscall(
                    ctypes.c_long(_namespaces._SYS_MOUNT_SETATTR),
                    ctypes.c_int(_namespaces._AT_FDCWD),
                    b"/",
                    ctypes.c_uint(0),
                    ctypes.byref(writable),
                    ctypes.c_size_t(ctypes.sizeof(writable)),
                )
                results["clear the mount's flag"] = "ok" if cleared == 0 else "refused"
                results["write"] = attempt(lambda: write_text("/made"))
                results["mkdir"] = attempt(lambda: os.mkdir("/made"))
            finally:
                os.write(write, json.dumps(results).encode())
                os._exit(0)
        os.close(write)
        write = -1
        results = json.loads(os.read(read, 4096))
        os.waitpid(pid, 0)
    finally:
        os.close(read)
        if write >= 0:
            os.close(write)
        template.close()
    assert results["clear the mount's flag"] == "ok"  # (its own copy's: allowed)
    assert results["write"] == "OSError: EROFS"
    assert results["mkdir"] == "OSError: EROFS"


def test_a_templates_workdir_holds_a_bounded_number_of_entries(host_workdir: str) -> None:
    # Empty files cost no bytes but an inode each: the tmpfs caps them.
    def body() -> dict[str, Any]:
        made = 0
        try:
            for index in range(5000):
                open(f"f{index}", "w").close()
                made += 1
        except OSError as exc:
            return {"made": made, "error": errno.errorcode.get(exc.errno or 0)}
        return {"made": made}

    template = make_root_template(host_workdir)
    try:
        outcome = run_sandboxed(body, workdir=_with_template(host_workdir, template))
    finally:
        template.close()
    assert outcome.results["error"] == "ENOSPC"
    assert 4000 <= outcome.results["made"] < 4096


def test_late_imports_still_work(workdir: str) -> None:
    def body() -> dict[str, Any]:
        for name in ("statistics", "fractions", "difflib", "graphlib", "encodings.idna"):
            sys.modules.pop(name, None)
        import difflib
        import fractions
        import graphlib
        import statistics

        return {
            "mean": statistics.mean([1, 2, 3]),
            "fraction": str(fractions.Fraction(1, 3)),
            "diff": list(difflib.unified_diff(["a"], ["b"], lineterm=""))[-1],
            "order": list(graphlib.TopologicalSorter({"b": {"a"}}).static_order()),
            "idna": "bücher.example".encode("idna").decode(),
        }

    results = run_sandboxed(body, workdir=workdir).results
    assert results == {
        "mean": 2,
        "fraction": "1/3",
        "diff": "+b",
        "order": ["a", "b"],
        "idna": "xn--bcher-kva.example",
    }


# --------------------------------------------------------------------------- network


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.setblocking(False)
    yield server
    server.close()


def assert_nobody_connected(server: socket.socket) -> None:
    ready, _, _ = select.select([server], [], [], 0.2)
    assert not ready, "the sandboxed program reached the host's loopback listener"


@pytest.mark.parametrize("switches", list(LAYER_SWITCHES), ids=list(LAYER_SWITCHES))
def test_no_network(switches: str, workdir: str, listener: socket.socket) -> None:
    port = listener.getsockname()[1]

    def connect(family: int, address: Any) -> str:
        with socket.socket(family, socket.SOCK_STREAM) as client:
            client.settimeout(2)
            client.connect(address)
            return "connected"

    def body() -> dict[str, Any]:
        return {
            "tcp": attempt(lambda: connect(socket.AF_INET, ("127.0.0.1", port))),
            "udp": attempt(
                lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(
                    b"x", ("127.0.0.1", port)
                )
            ),
            "asyncio": attempt(
                lambda: asyncio.run(asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 2))
            ),
        }

    results = run_sandboxed(body, workdir=workdir, **LAYER_SWITCHES[switches]).results
    assert blocked(results["tcp"]), results
    assert blocked(results["asyncio"]), results
    if switches != "landlock only":  # Landlock filters TCP, not UDP
        assert blocked(results["udp"]), results
    assert_nobody_connected(listener)


_SHARED = "the runtime's network namespace, made once and shared"


@pytest.mark.parametrize(
    ("config", "filter_held", "detail"),
    [
        ({"strict": True}, True, _SHARED),
        ({"strict": False}, True, _SHARED),
        ({"strict": True, "seccomp": False}, True, "new network namespace"),
        ({"strict": False}, False, "new network namespace"),
    ],
    ids=["strict", "best-effort", "seccomp off", "no seccomp on the machine"],
)
def test_a_templates_network_is_joined_only_by_workers_that_cannot_open_sockets(
    host_workdir: str,
    listener: socket.socket,
    config: dict[str, Any],
    filter_held: bool,
    detail: str,
) -> None:
    port = listener.getsockname()[1]

    def body() -> dict[str, Any]:
        def udp() -> int:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as client:
                return client.sendto(b"x", ("127.0.0.1", port))

        return {"udp": attempt(udp)}

    template = make_root_template(host_workdir)
    # This machine has seccomp filters: the holder installed one.
    assert template.sockets_denied
    try:
        joined = dataclasses.replace(template, sockets_denied=filter_held)
        sandboxed = run_sandboxed(body, workdir=_with_template(host_workdir, joined), **config)
    finally:
        template.close()
    assert sandboxed.layers["network-namespace"].active
    assert sandboxed.layers["network-namespace"].detail.startswith(detail)
    # Either way no datagram leaves: no socket (seccomp), or no route (loopback down).
    assert blocked(sandboxed.results["udp"]), sandboxed.results
    assert_nobody_connected(listener)


def test_seccomp_denies_socket_creation_but_keeps_socketpair(workdir: str) -> None:
    def body() -> dict[str, Any]:
        return {
            "inet": attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM)),
            "unix": attempt(lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)),
            "pair": attempt(lambda: len(socket.socketpair())),
            "loop": attempt(lambda: asyncio.run(asyncio.sleep(0, result="ran"))),
        }

    results = run_sandboxed(body, workdir=workdir).results
    assert results["inet"] == "PermissionError: EPERM"
    assert results["unix"] == "PermissionError: EPERM"
    assert results["pair"] == "ok: 2"
    assert results["loop"] == "ok: 'ran'"


def test_channel_socket_keeps_working(workdir: str) -> None:
    host, worker = socket.socketpair()

    def body() -> dict[str, Any]:
        worker.sendall(b"ping")
        return {"reply": worker.recv(4).decode()}

    with host, worker:
        host.settimeout(10)

        def answer() -> None:
            host.recv(4)
            host.sendall(b"pong")

        thread = threading.Thread(target=answer)
        thread.start()
        results = run_sandboxed(body, workdir=workdir, extra_fds=(worker.fileno(),)).results
        thread.join(10)
    assert results == {"reply": "pong"}


# --------------------------------------------------------------------------- processes


@pytest.mark.parametrize("switches", list(LAYER_SWITCHES), ids=list(LAYER_SWITCHES))
def test_no_process_creation(switches: str, workdir: str) -> None:
    def body() -> dict[str, Any]:
        results = {
            "fork": attempt(os.fork),
            "spawn": attempt(lambda: os.posix_spawn(sys.executable, [sys.executable], {})),
            "subprocess": attempt(lambda: subprocess.run(["/bin/true"], check=False)),
            "thread": attempt(lambda: threading.Thread(target=lambda: None).start()),
        }
        if results["fork"].startswith("ok: 0"):
            os._exit(0)  # a forked copy must never report
        return results

    results = run_sandboxed(body, workdir=workdir, **LAYER_SWITCHES[switches]).results
    assert blocked(results["fork"]), results
    assert blocked(results["spawn"]), results
    assert blocked(results["subprocess"]), results
    if switches in ("all", "seccomp only"):
        assert blocked(results["thread"]), results


def test_exec_is_denied(workdir: str) -> None:
    outcome = run_sandboxed(
        lambda: {"exec": attempt(lambda: os.execv(sys.executable, [sys.executable, "-c", ""]))},
        workdir=workdir,
    )
    assert outcome.results["exec"] in ("PermissionError: EPERM", "FileNotFoundError: ENOENT")


@pytest.mark.parametrize("switches", list(LAYER_SWITCHES), ids=list(LAYER_SWITCHES))
def test_signals_cannot_leave_the_sandbox(switches: str, workdir: str) -> None:
    host_pid = os.getpid()
    bystander = subprocess.Popen(["sleep", "30"])
    try:

        def body() -> dict[str, Any]:
            return {
                "host": attempt(lambda: os.kill(host_pid, signal.SIGKILL)),
                "bystander": attempt(lambda: os.kill(bystander.pid, signal.SIGKILL)),
                "everyone": attempt(lambda: os.kill(-1, signal.SIGKILL)),
                "group": attempt(lambda: os.killpg(os.getpgid(host_pid), signal.SIGKILL)),
                "self": attempt(lambda: os.kill(os.getpid(), 0)),
            }

        results = run_sandboxed(body, workdir=workdir, **LAYER_SWITCHES[switches]).results
        assert results["self"] == "ok: None"
        for name in ("host", "bystander", "group"):
            assert blocked(results[name]), (name, results[name])
        assert bystander.poll() is None, "the sandbox killed a host process"
    finally:
        bystander.kill()
        bystander.wait()


def test_ptrace_and_process_memory_are_denied(workdir: str) -> None:
    host_pid = os.getpid()

    def body() -> dict[str, Any]:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.ptrace.argtypes = (ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p)

        def ptrace(request: int, pid: int) -> int:
            if libc.ptrace(request, pid, None, None) == -1:
                raise OSError(ctypes.get_errno(), "ptrace")
            return 0

        return {
            "attach": attempt(lambda: ptrace(16, host_pid)),
            "traceme": attempt(lambda: ptrace(0, 0)),
            "mem": attempt(lambda: open(f"/proc/{host_pid}/mem", "rb")),
        }

    results = run_sandboxed(body, workdir=workdir).results
    assert results["attach"] == "PermissionError: EPERM"
    assert results["traceme"] == "PermissionError: EPERM"
    assert blocked(results["mem"])


def test_privileges_are_gone(workdir: str) -> None:
    def body() -> dict[str, Any]:
        header = (ctypes.c_uint32 * 2)(0x20080522, 0)
        data = (ctypes.c_uint32 * 6)()
        ctypes.CDLL(None).capget(header, data)
        bounding = []
        for cap in range(64):
            try:
                bounding.append(_libc.prctl(_libc.PR_CAPBSET_READ, cap))
            except OSError:
                break  # past the kernel's last capability
        return {
            "caps": list(data),
            "bounding": bounding,
            "uid": os.getresuid(),
            "groups": os.getgroups(),
            "setuid": attempt(lambda: os.setuid(0)),
            "unshare": attempt(lambda: ctypes.CDLL(None, use_errno=True).unshare(0x10000000)),
            "chroot": attempt(lambda: os.chroot(".")),
        }

    results = run_sandboxed(body, workdir=workdir).results
    assert results["caps"] == [0] * 6
    with open("/proc/sys/kernel/cap_last_cap") as last:
        assert results["bounding"] == [0] * (int(last.read()) + 1)
    assert 0 not in results["uid"]
    assert results["groups"] == []
    assert results["setuid"] == "PermissionError: EPERM"
    assert results["unshare"] == "ok: -1"
    assert results["chroot"] == "PermissionError: EPERM"


def test_rlimits_are_in_place(workdir: str) -> None:
    def body() -> dict[str, Any]:
        names = ("AS", "CPU", "FSIZE", "NOFILE", "CORE", "NPROC")
        limits: dict[str, Any] = {
            name: resource.getrlimit(getattr(resource, f"RLIMIT_{name}")) for name in names
        }
        limits["raise"] = attempt(
            lambda: resource.setrlimit(resource.RLIMIT_AS, (1 << 40, 1 << 40))
        )
        return limits

    results = run_sandboxed(
        body, workdir=workdir, memory_bytes=300 * MiB, cpu_seconds=2.5, max_file_bytes=4096
    ).results
    assert results["AS"] == [300 * MiB, 300 * MiB]
    assert results["CPU"] == [3, 4]  # SIGXCPU, then SIGKILL a second later
    assert results["FSIZE"] == [4096, 4096]
    assert results["NOFILE"] == [64, 64]
    assert results["CORE"] == [0, 0]
    assert results["NPROC"] == [1, 1]
    assert blocked(results["raise"])


def test_memory_bomb_fails_with_memory_error(workdir: str) -> None:
    def body() -> dict[str, Any]:
        return {"bomb": attempt(lambda: len(bytearray(400 * MiB)))}

    results = run_sandboxed(body, workdir=workdir, memory_bytes=256 * MiB).results
    assert results["bomb"].startswith("MemoryError")


def test_file_size_limit(workdir: str) -> None:
    def body() -> dict[str, Any]:
        with open("big", "wb", buffering=0) as handle:
            first = handle.write(b"x" * 8192)  # the kernel stops at the limit
            write = attempt(lambda: handle.write(b"x"))
        return {"first": first, "write": write, "size": os.path.getsize("big")}

    results = run_sandboxed(body, workdir=workdir, max_file_bytes=4096).results
    assert results["first"] == 4096
    assert results["write"] == "OSError: EFBIG"
    assert results["size"] == 4096
    if not isinstance(workdir, TemplateWorkdir):
        assert os.path.getsize(os.path.join(workdir, "big")) == 4096


@pytest.mark.parametrize("namespaces", [True, False], ids=["pid-1", "no-namespaces"])
def test_cpu_bomb_is_killed_and_reported_as_sigxcpu(namespaces: bool, workdir: str) -> None:
    def body() -> dict[str, Any]:
        while True:
            pass

    started = time.monotonic()
    outcome = run_sandboxed(body, workdir=workdir, cpu_seconds=1, namespaces=namespaces)
    assert outcome.signal == signal.SIGXCPU
    assert time.monotonic() - started < 20


def test_wrong_abi_syscalls_kill_the_worker(workdir: str) -> None:
    def body() -> dict[str, Any]:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall(ctypes.c_long(0x40000000 | 39))  # x32 getpid
        return {"survived": True}

    if _seccomp.native_arch() != _seccomp.AUDIT_ARCH_X86_64:
        pytest.skip("the x32 ABI exists on x86_64 only")  # the BPF tests cover other arches
    outcome = run_sandboxed(body, workdir=workdir)
    assert outcome.signal == signal.SIGSYS
    assert "results" not in outcome.report


def test_program_dies_with_its_supervisor(workdir: str) -> None:
    # The supervisor is what the host kills; the program (PID 2 of its
    # namespace, under our init) must go with it, leaving no process behind.
    alive_r, alive_w = os.pipe()
    ready_r, ready_w = os.pipe()

    def body() -> dict[str, Any]:
        os.write(ready_w, b"1")
        time.sleep(60)
        return {}

    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.close(alive_r)
            os.close(ready_r)
            config = SandboxConfig(workdir=workdir, memory_bytes=512 * MiB, cpu_seconds=60)
            enter_sandbox(config, keep_fds=[alive_w, ready_w])
            body()
        finally:
            os._exit(0)
    os.close(alive_w)
    os.close(ready_w)
    try:
        assert select.select([ready_r], [], [], 30)[0], "the sandboxed child never started"
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        # Only the program still holds alive_w: EOF means it is gone too.
        assert select.select([alive_r], [], [], 10)[0], "the program outlived its supervisor"
        assert os.read(alive_r, 1) == b""
    finally:
        os.close(alive_r)
        os.close(ready_r)


def test_exit_status_is_passed_through(workdir: str) -> None:
    def body() -> dict[str, Any]:
        os._exit(7)

    assert os.WEXITSTATUS(run_sandboxed(body, workdir=workdir).status) == 7


# --------------------------------------------------------------------------- seccomp BPF


def run_filter(program: bytes, arch: int, nr: int, *args: int) -> int:
    """Evaluate a classic-BPF seccomp program the way the kernel would."""
    return _evaluate(program, arch, nr, *args)[0]


def filter_steps(program: bytes, arch: int, nr: int, *args: int) -> int:
    """How many instructions the program runs to decide on ``nr``."""
    return _evaluate(program, arch, nr, *args)[1]


def _evaluate(program: bytes, arch: int, nr: int, *args: int) -> tuple[int, int]:
    padded = [*args, 0, 0, 0, 0, 0, 0][:6]
    data = struct.pack("<II", nr & 0xFFFFFFFF, arch) + struct.pack("<Q6Q", 0, *padded)
    instructions = [struct.unpack_from("=HBBI", program, i) for i in range(0, len(program), 8)]
    pc = accumulator = steps = 0
    while True:
        code, jt, jf, k = instructions[pc]
        steps += 1
        if code == 0x20:
            accumulator = struct.unpack_from("<I", data, k)[0]
            pc += 1
        elif code == 0x15:
            pc += 1 + (jt if accumulator == k else jf)
        elif code == 0x35:
            pc += 1 + (jt if accumulator >= k else jf)
        elif code == 0x06:
            return int(k), steps
        else:  # pragma: no cover - the assembler emits nothing else
            raise AssertionError(f"unexpected BPF opcode {code:#x}")


ALLOW = 0x7FFF0000
KILL = 0x80000000
EPERM = 0x00050000 | errno.EPERM
ENOSYS = 0x00050000 | errno.ENOSYS
ARCHES = {"x86_64": _seccomp.AUDIT_ARCH_X86_64, "aarch64": _seccomp.AUDIT_ARCH_AARCH64}
# What CPython, asyncio and the channel need: must stay allowed.
NEEDED = {
    "x86_64": {
        "read": 0, "write": 1, "close": 3, "poll": 7, "mmap": 9, "mprotect": 10, "munmap": 11,
        "brk": 12, "rt_sigaction": 13, "madvise": 28, "sendto": 44, "recvfrom": 45,
        "sendmsg": 46, "recvmsg": 47, "futex": 202, "clock_gettime": 228, "exit_group": 231,
        "epoll_wait": 232, "epoll_ctl": 233, "openat": 257, "epoll_create1": 291,
        "getrandom": 318, "getpid": 39, "prlimit64": 302,
    },
    "aarch64": {
        "epoll_create1": 20, "epoll_ctl": 21, "epoll_pwait": 22, "openat": 56, "close": 57,
        "read": 63, "write": 64, "ppoll": 73, "exit_group": 94, "futex": 98,
        "clock_gettime": 113, "rt_sigaction": 134, "getpid": 172, "sendto": 206,
        "recvfrom": 207, "sendmsg": 211, "recvmsg": 212, "brk": 214, "munmap": 215,
        "mmap": 222, "mprotect": 226, "madvise": 233, "prlimit64": 261, "getrandom": 278,
    },
}  # fmt: skip
CONDITIONAL = {
    "clone", "clone3", "socketpair", "kill", "tkill", "tgkill", "ioctl", "prctl", "arch_prctl",
}  # fmt: skip


@pytest.mark.parametrize("arch_name", list(ARCHES))
def test_filter_checks_the_architecture(arch_name: str) -> None:
    arch = ARCHES[arch_name]
    program = _seccomp.build_filter(arch, self_pid=1)
    assert len(program) // 8 < 4096
    other = next(value for value in ARCHES.values() if value != arch)
    assert run_filter(program, other, 0) == KILL
    assert run_filter(program, 0x40000003, 0) == KILL  # AUDIT_ARCH_I386


def test_filter_kills_x32_syscalls() -> None:
    program = _seccomp.build_filter(_seccomp.AUDIT_ARCH_X86_64, self_pid=1)
    assert run_filter(program, _seccomp.AUDIT_ARCH_X86_64, 0x40000000 | 39) == KILL
    assert run_filter(program, _seccomp.AUDIT_ARCH_X86_64, 0x40000000 | 59) == KILL


@pytest.mark.parametrize("arch_name", list(ARCHES))
def test_filter_denies_the_dangerous_syscalls(arch_name: str) -> None:
    arch = ARCHES[arch_name]
    table = _seccomp.SYSCALL_TABLES[arch]
    program = _seccomp.build_filter(arch, self_pid=1)
    for name in _seccomp.DENIED_SYSCALLS & set(table):
        assert run_filter(program, arch, table[name]) == EPERM, name
    assert run_filter(program, arch, table["clone"], 0x10000) == EPERM  # CLONE_THREAD too
    assert run_filter(program, arch, table["clone3"]) == ENOSYS
    for name in ("fork", "execve", "socket", "connect", "ptrace", "mount", "bpf", "unshare"):
        if name in table:
            assert run_filter(program, arch, table[name]) == EPERM


@pytest.mark.parametrize("arch_name", list(ARCHES))
def test_filter_keeps_what_python_needs(arch_name: str) -> None:
    arch = ARCHES[arch_name]
    program = _seccomp.build_filter(arch, self_pid=1)
    for name, nr in NEEDED[arch_name].items():
        assert run_filter(program, arch, nr) == ALLOW, name


@pytest.mark.parametrize("arch_name", list(ARCHES))
def test_filter_argument_checks(arch_name: str) -> None:
    arch = ARCHES[arch_name]
    table = _seccomp.SYSCALL_TABLES[arch]
    program = _seccomp.build_filter(arch, self_pid=4242)
    assert run_filter(program, arch, table["socketpair"], socket.AF_UNIX) == ALLOW
    assert run_filter(program, arch, table["socketpair"], socket.AF_INET) == EPERM
    assert run_filter(program, arch, table["socketpair"], socket.AF_NETLINK) == EPERM
    assert run_filter(program, arch, table["kill"], 4242, 9) == ALLOW
    for target in (1, 0, 0xFFFFFFFF, 4243):
        assert run_filter(program, arch, table["kill"], target, 9) == EPERM, target
    assert run_filter(program, arch, table["tkill"], 4242) == ALLOW
    assert run_filter(program, arch, table["tkill"], 77) == EPERM
    assert run_filter(program, arch, table["tgkill"], 4242, 4242, 9) == ALLOW
    assert run_filter(program, arch, table["tgkill"], 4242, 77, 9) == EPERM
    assert run_filter(program, arch, table["tgkill"], 77, 4242, 9) == EPERM
    assert run_filter(program, arch, table["ioctl"], 0, 0x5412) == EPERM  # TIOCSTI
    assert run_filter(program, arch, table["ioctl"], 0, 0x541C) == EPERM  # TIOCLINUX
    assert run_filter(program, arch, table["ioctl"], 0, 0x5451) == ALLOW  # FIOCLEX


@pytest.mark.parametrize("arch_name", list(ARCHES))
def test_filter_allows_exactly_the_rest(arch_name: str) -> None:
    """Every number from 0 to 1023: refused if denied, allowed if unknown or not denied."""
    arch = ARCHES[arch_name]
    table = _seccomp.SYSCALL_TABLES[arch]
    program = _seccomp.build_filter(arch, self_pid=1)
    names = {number: name for name, number in table.items()}
    for nr in range(1024):
        verdict = run_filter(program, arch, nr)
        if nr not in names:
            assert verdict == ALLOW, nr
        elif names[nr] in _seccomp.DENIED_SYSCALLS:
            assert verdict == EPERM, names[nr]
        elif names[nr] not in CONDITIONAL:
            assert verdict == ALLOW, names[nr]


@pytest.mark.parametrize("arch_name", list(ARCHES))
def test_filter_decides_every_number_in_a_few_steps(arch_name: str) -> None:
    """The denied numbers are searched, not compared one by one.

    Installing a filter, the kernel runs it for every system call number to
    cache the verdicts: a chain of comparisons made that most of each worker's
    install time.
    """
    arch = ARCHES[arch_name]
    table = _seccomp.SYSCALL_TABLES[arch]
    program = _seccomp.build_filter(arch, self_pid=1)
    conditional = {table[name] for name in CONDITIONAL if name in table}
    steps = [filter_steps(program, arch, nr) for nr in range(1024) if nr not in conditional]
    # The prologue (architecture, x32, the conditional calls), then the search.
    assert max(steps) <= 10 + 2 * len(CONDITIONAL), max(steps)


def test_deny_numbers_searches_runs_and_lone_numbers() -> None:
    numbers = [0, 1, 2, 5, 7, 8, 9, 10, 12, 12, 40]  # (12 twice: counted once)
    program = b"".join(
        [
            _seccomp._stmt(0x20, 0),  # load the number (what run_filter packs first)
            *_seccomp._deny_numbers(numbers, EPERM),
        ]
    )
    for nr in range(64):
        assert run_filter(program, 0, nr) == (EPERM if nr in numbers else ALLOW), nr
    assert run_filter(program, 0, 0xFFFFFFFF) == ALLOW


def test_syscall_tables_agree_with_libseccomp() -> None:
    try:
        lib = ctypes.CDLL("libseccomp.so.2")
    except OSError:
        pytest.skip("libseccomp is not installed (the tables are checked where it is)")
    resolve = lib.seccomp_syscall_resolve_name_arch
    resolve.argtypes = (ctypes.c_uint32, ctypes.c_char_p)
    resolve.restype = ctypes.c_int
    checked = 0
    for arch, table in _seccomp.SYSCALL_TABLES.items():
        for name, number in table.items():
            known = resolve(arch, name.encode())
            if known >= 0:  # an older libseccomp may not know the newest calls
                assert known == number, (hex(arch), name)
                checked += 1
    assert checked > 150


# --------------------------------------------------------------------------- import guard


@pytest.fixture
def restore_import(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(builtins, "__import__", builtins.__import__)


def program_namespace() -> dict[str, Any]:
    return {"__name__": "__main__", "__builtins__": builtins}


def run_program_text(text: str) -> dict[str, Any]:
    namespace = program_namespace()
    exec(compile(text, "<program>", "exec"), namespace)
    return namespace


@pytest.mark.usefixtures("restore_import")
def test_import_guard_lets_future_statements_run() -> None:
    # The guard is in place before the program's module code runs, and that
    # code imports __future__ for every future statement.
    install_import_guard(frozenset({"json"}))
    namespace = run_program_text("from __future__ import annotations\nx: undefined = 1")
    assert namespace["x"] == 1
    with pytest.raises(ImportError):
        run_program_text("import os")


@pytest.mark.usefixtures("restore_import")
def test_import_guard_allows_the_allow_list() -> None:
    install_import_guard(frozenset({"json", "urllib.parse"}))
    namespace = run_program_text(
        "import json\nimport json.decoder\nfrom json import decoder\nimport urllib.parse\n"
        "from urllib import parse\nvalue = json.dumps([1])"
    )
    assert namespace["value"] == "[1]"
    assert namespace["parse"] is sys.modules["urllib.parse"]


@pytest.mark.usefixtures("restore_import")
@pytest.mark.parametrize(
    "statement",
    [
        "import os",  # already in sys.modules
        "import sys",
        "import ctypes",
        "import importlib",
        "__import__('subprocess')",
        "import urllib.request",
        "from urllib import request",
        "from typing import sys",  # an allowed module's attribute that is a module
        "from . import anything",
        "import jsonx",
        "from json import *",
    ],
)
def test_import_guard_denies(statement: str) -> None:
    install_import_guard(frozenset({"json", "urllib.parse", "typing"}))
    with pytest.raises(ImportError):
        run_program_text(statement)


@pytest.mark.usefixtures("restore_import")
def test_import_guard_trusts_the_runtimes_own_modules() -> None:
    module = types.ModuleType("ptc_test_trusted")
    exec("def lazy():\n    import os\n    return os.sep", module.__dict__)
    sys.modules[module.__name__] = module
    try:
        install_import_guard(frozenset({"json"}))
        assert module.lazy() == os.sep
        forged = run_program_text("import json\nok = json.dumps(1)")
        assert forged["ok"] == "1"
        with pytest.raises(ImportError):
            # a program cannot borrow trust by naming a module in its globals
            exec("import os", {"__name__": "ptc_test_trusted", "__builtins__": builtins})
    finally:
        del sys.modules[module.__name__]


@pytest.mark.usefixtures("restore_import")
def test_installing_again_replaces_the_allow_list() -> None:
    install_import_guard(frozenset({"json"}))
    install_import_guard(frozenset({"math"}))
    guard = installed_guard()
    assert isinstance(guard, ImportGuard)
    assert guard.allowed == frozenset({"math"})
    assert not isinstance(guard.original, ImportGuard)


def test_default_allow_list_is_safe_and_importable() -> None:
    dangerous = {"os", "sys", "subprocess", "socket", "ctypes", "importlib", "pathlib", "io"}
    dangerous |= {"gc", "inspect", "builtins", "types", "pickle", "threading", "signal"}
    assert not dangerous & DEFAULT_ALLOWED_MODULES
    assert preload_modules(DEFAULT_ALLOWED_MODULES) == []


# --------------------------------------------------------------------------- RestrictedPython


def program_function(namespace: dict[str, object]) -> Callable[[], Any]:
    function = namespace[PROGRAM_FUNCTION]
    assert callable(function)
    return function


def run_restricted(source: str, **base: Any) -> Any:
    code = compile_restricted_program(source)
    namespace = restricted_globals({"__ptc_nothing__": None, **base})
    exec(code, namespace)
    return asyncio.run(program_function(namespace)())


def test_restricted_async_program_runs() -> None:
    source = textwrap.dedent(
        """
        import asyncio
        from dataclasses import dataclass
        from enum import Enum

        class Color(Enum):
            RED = 1

        @dataclass
        class Point:
            x: int

        async def numbers():
            for i in range(3):
                await asyncio.sleep(0)
                yield i

        class Box:
            async def __aenter__(self):
                return self
            async def __aexit__(self, *exc):
                return False

        collected = [n async for n in numbers()]
        async for n in numbers():
            collected.append(n * 10)
        async with Box() as box:
            point = Point(1)
            point.x = 5
        pairs = {k: v for k, v in [("a", 1)]}
        print("done", Color.RED.name)
        return {"collected": collected, "x": point.x, "pairs": pairs, "printed": printed}
        """
    )
    logs: list[str] = []
    result = run_restricted(source, print=lambda *a, **k: logs.append(" ".join(map(str, a))))
    assert result == {
        "collected": [0, 1, 2, 0, 10, 20],
        "x": 5,
        "pairs": {"a": 1},
        "printed": "done RED\n",
    }
    assert logs == ["done RED"]


def test_restricted_bare_and_missing_return_yield_the_sentinel() -> None:
    sentinel = object()
    for source in ("x = 1", "return", "if True:\n    return\nx = 2"):
        code = compile_restricted_program(source)
        namespace = restricted_globals({"__ptc_nothing__": sentinel})
        exec(code, namespace)
        assert asyncio.run(program_function(namespace)()) is sentinel


def test_restricted_code_has_the_bootstraps_shape() -> None:
    plain: dict[str, Any] = {"__ptc_nothing__": None}
    exec(compile_program("return 41 + 1"), plain)
    restricted = restricted_globals({"__ptc_nothing__": None})
    exec(compile_restricted_program("return 41 + 1"), restricted)
    expected = asyncio.run(program_function(plain)())
    assert asyncio.run(program_function(restricted)()) == expected == 42


@pytest.mark.parametrize(
    ("source", "line"),
    [
        ("x = 1\ny = ().__class__", 2),
        ("a = 1\n\nb = a._private", 3),
        ("import json\n_hidden = 1", 2),
        ("exec('1')", 1),
        ("x = 1\ndef f():\n    yield 1\nyield 2", 4),
        ("async def f(_x):\n    await g()", 1),
        ("x = [a async for a in (1, 2) if a.__dict__]", 1),
        ("def ok(:\n", 1),
    ],
)
def test_restricted_rejections_carry_program_line_numbers(source: str, line: int) -> None:
    with pytest.raises(SyntaxError) as caught:
        compile_restricted_program(source)
    assert caught.value.lineno == line


@pytest.mark.parametrize(
    "source",
    [
        "getattr((), '__class__')",
        "'{0.__class__}'.format(1)",
        "'{x.__class__}'.format_map({'x': 1})",
        "import operator\noperator.attrgetter('x')",
        "from operator import methodcaller",
        "import typing\ntyping.sys",
        "from typing import get_type_hints",
        "import random\nrandom.Random.__init__",
        "import os",
        "open('/etc/passwd')",
        "import json\njson.dumps = None",
        "type(1)",
        "__import__('os')",
        "import asyncio\nasyncio.base_events.os",
    ],
)
def test_restricted_runtime_guards(source: str) -> None:
    with pytest.raises(
        (SyntaxError, AttributeError, ImportError, NameError, TypeError, NotImplementedError)
    ):
        run_restricted(source)


# --------------------------------------------------------------------------- lifecycle (issue 13)


_PID_PROBE = """
import json, os, sys
from runtime._sandbox._layers import SandboxConfig, enter_sandbox
fd = int(sys.argv[2])
config = SandboxConfig(
    workdir=sys.argv[1], memory_bytes=512 << 20, cpu_seconds=10.0, max_file_bytes=1 << 20
)
statuses = enter_sandbox(config, keep_fds=[fd])
layer = next(s for s in statuses if s.name == "pid-namespace")
report = {"active": layer.active, "detail": layer.detail, "pid": os.getpid(),
          "parent": os.getppid(), "session": os.getsid(0) == os.getpid()}
os.write(fd, json.dumps(report).encode())
"""


def test_program_is_pid_2_under_an_init(workdir: str) -> None:
    # In a fresh interpreter, as a worker is: forked from this test process, the
    # at-fork hooks of libraries other tests imported (an OpenTelemetry SDK's
    # thread pools, say) would run in the init and take PIDs of its namespace.
    read_fd, write_fd = os.pipe()
    try:
        subprocess.run(
            [sys.executable, "-c", _PID_PROBE, workdir, str(write_fd)],
            pass_fds=[write_fd],
            cwd=str(Path(__file__).resolve().parents[2]),
            check=True,
            timeout=60,
        )
        os.close(write_fd)
        write_fd = -1
        report = json.loads(os.read(read_fd, 1 << 16))
    finally:
        os.close(read_fd)
        if write_fd >= 0:
            os.close(write_fd)
    assert report["active"], report["detail"]
    assert "PID 2" in report["detail"]
    assert (report["pid"], report["parent"], report["session"]) == (2, 1, True)


def _clear_death_signal() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(1, 0, 0, 0, 0) != 0:  # PR_SET_PDEATHSIG
        raise OSError(ctypes.get_errno(), "prctl")


@pytest.mark.parametrize("switches", ["all", "namespaces only"])
def test_program_dies_with_its_init_whatever_its_death_signal(switches: str, workdir: str) -> None:
    # Without seccomp the program may clear its own parent-death signal: the
    # init's end still ends it, with the namespace.
    alive_r, alive_w = os.pipe()
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.close(alive_r)
            os.close(ready_r)
            config = SandboxConfig(
                workdir=workdir, memory_bytes=512 * MiB, cpu_seconds=60, **LAYER_SWITCHES[switches]
            )
            enter_sandbox(config, keep_fds=[alive_w, ready_w])
            os.write(ready_w, attempt(_clear_death_signal).encode())
            time.sleep(60)
        finally:
            os._exit(0)
    os.close(alive_w)
    os.close(ready_w)
    try:
        assert select.select([ready_r], [], [], 30)[0], "the sandboxed child never started"
        cleared = os.read(ready_r, 100).decode()
        assert cleared == (
            "ok: None" if switches == "namespaces only" else "PermissionError: EPERM"
        )
        os.kill(pid, signal.SIGKILL)  # the supervisor, which the init dies with
        os.waitpid(pid, 0)
        # Only the program still holds alive_w: EOF means it is gone too.
        assert select.select([alive_r], [], [], 10)[0], "the program outlived its init"
        assert os.read(alive_r, 1) == b""
    finally:
        os.close(alive_r)
        os.close(ready_r)


@pytest.mark.parametrize("namespaces", [True, False], ids=["namespaces", "no-namespaces"])
def test_the_callers_death_signal_survives_the_id_switches(namespaces: bool, workdir: str) -> None:
    # A zygote's child sets SIGKILL as its parent-death signal before it enters
    # the sandbox; the id switches inside (as root) reset it, and the sandbox
    # must set it again, or spares outlive a killed zygote.
    alive_r, alive_w = os.pipe()
    ready_r, ready_w = os.pipe()
    middle = os.fork()
    if middle == 0:  # pragma: no cover - the stand-in zygote
        try:
            os.close(alive_r)
            os.close(ready_r)
            parent = os.getpid()
            if os.fork() == 0:
                libc = ctypes.CDLL(None, use_errno=True)
                libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
                if os.getppid() == parent:
                    config = SandboxConfig(
                        workdir=workdir,
                        memory_bytes=512 * MiB,
                        cpu_seconds=60,
                        namespaces=namespaces,
                    )
                    enter_sandbox(config, keep_fds=[alive_w, ready_w])
                    os.write(ready_w, b"1")
                    time.sleep(60)
                os._exit(0)
            os.close(alive_w)
            os.close(ready_w)
            time.sleep(60)
        finally:
            os._exit(0)
    os.close(alive_w)
    os.close(ready_w)
    try:
        assert select.select([ready_r], [], [], 30)[0], "the sandboxed child never started"
        os.kill(middle, signal.SIGKILL)
        os.waitpid(middle, 0)
        assert select.select([alive_r], [], [], 10)[0], "the sandboxed child outlived its parent"
        assert os.read(alive_r, 1) == b""
    finally:
        os.close(alive_r)
        os.close(ready_r)


def test_a_self_inflicted_sigkill_is_not_the_cpu_limit(workdir: str) -> None:
    def body() -> dict[str, Any]:
        os.kill(os.getpid(), signal.SIGKILL)
        return {}

    assert run_sandboxed(body, workdir=workdir, cpu_seconds=1).signal == signal.SIGKILL


PRCTL_DENIED = {
    "PR_SET_PDEATHSIG": 1, "PR_SET_DUMPABLE": 4, "PR_SET_UNALIGN": 6, "PR_SET_KEEPCAPS": 8,
    "PR_SET_FPEMU": 10, "PR_SET_FPEXC": 12, "PR_SET_TIMING": 14, "PR_SET_NAME": 15,
    "PR_SET_ENDIAN": 20, "PR_SET_SECCOMP": 22, "PR_CAPBSET_DROP": 24, "PR_SET_TSC": 26,
    "PR_SET_SECUREBITS": 28, "PR_SET_TIMERSLACK": 29, "PR_TASK_PERF_EVENTS_DISABLE": 31,
    "PR_TASK_PERF_EVENTS_ENABLE": 32, "PR_MCE_KILL": 33, "PR_SET_MM": 35,
    "PR_SET_CHILD_SUBREAPER": 36, "PR_SET_NO_NEW_PRIVS": 38, "PR_SET_THP_DISABLE": 41,
    "PR_SET_FP_MODE": 45, "PR_CAP_AMBIENT": 47, "PR_SVE_SET_VL": 50,
    "PR_SET_SPECULATION_CTRL": 53, "PR_PAC_RESET_KEYS": 54, "PR_SET_TAGGED_ADDR_CTRL": 55,
    "PR_SET_IO_FLUSHER": 57, "PR_SET_SYSCALL_USER_DISPATCH": 59, "PR_SCHED_CORE": 62,
    "PR_SET_MDWE": 65, "PR_SET_MEMORY_MERGE": 67, "PR_SET_SHADOW_STACK_STATUS": 75,
    "PR_SET_PTRACER": 0x59616D61,
}  # fmt: skip


@pytest.mark.parametrize("arch_name", list(ARCHES))
def test_filter_allows_prctl_by_option_only(arch_name: str) -> None:
    arch = ARCHES[arch_name]
    table = _seccomp.SYSCALL_TABLES[arch]
    program = _seccomp.build_filter(arch, self_pid=2)
    for name, option in _seccomp.ALLOWED_PRCTL_OPTIONS.items():
        assert run_filter(program, arch, table["prctl"], option) == ALLOW, name
    for name, option in PRCTL_DENIED.items():
        assert option not in _seccomp.ALLOWED_PRCTL_OPTIONS.values(), name
        assert run_filter(program, arch, table["prctl"], option) == EPERM, name
    # Only the low 32 bits of the option count, as for the kernel (an int).
    assert run_filter(program, arch, table["prctl"], (1 << 32) | 2) == ALLOW
    assert run_filter(program, arch, table["prctl"], (1 << 32) | 1) == EPERM
    for name in ("setsid", "setpgid"):
        assert run_filter(program, arch, table[name]) == EPERM


@given(option=st.integers(min_value=0, max_value=(1 << 32) - 1))
def test_filter_denies_every_other_prctl_option(option: int) -> None:
    for arch in ARCHES.values():
        program = _seccomp.build_filter(arch, self_pid=2)
        verdict = run_filter(program, arch, _seccomp.SYSCALL_TABLES[arch]["prctl"], option)
        assert verdict == (ALLOW if option in _seccomp.ALLOWED_PRCTL_OPTIONS.values() else EPERM)


def test_filter_allows_arch_prctl_by_option_only() -> None:
    arch = _seccomp.AUDIT_ARCH_X86_64
    program = _seccomp.build_filter(arch, self_pid=2)
    nr = _seccomp.SYSCALL_TABLES[arch]["arch_prctl"]
    for name, option in _seccomp.ALLOWED_ARCH_PRCTL_OPTIONS.items():
        assert run_filter(program, arch, nr, option) == ALLOW, name
    # ARCH_SET_CPUID, ARCH_MAP_VDSO_*, ARCH_ENABLE_TAGGED_ADDR, ARCH_SHSTK_ENABLE/DISABLE/LOCK
    for option in (0x1012, 0x2001, 0x2002, 0x2003, 0x4002, 0x4004, 0x5001, 0x5002, 0x5003):
        assert run_filter(program, arch, nr, option) == EPERM, hex(option)
    assert "arch_prctl" not in _seccomp.SYSCALL_TABLES[_seccomp.AUDIT_ARCH_AARCH64]


def test_prctl_is_filtered_in_a_live_worker(workdir: str) -> None:
    def body() -> dict[str, Any]:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl.argtypes = (ctypes.c_int, *[ctypes.c_ulong] * 4)

        def prctl(option: int, arg: int = 0) -> int:
            result: int = libc.prctl(option, arg, 0, 0, 0)
            if result < 0:
                raise OSError(ctypes.get_errno(), "prctl")
            return result

        value = ctypes.c_int(-1)
        return {
            "set pdeathsig": attempt(lambda: prctl(1, signal.SIGKILL)),
            "clear pdeathsig": attempt(lambda: prctl(1, 0)),
            "dumpable": attempt(lambda: prctl(4, 1)),
            "subreaper": attempt(lambda: prctl(36, 1)),
            "ptracer": attempt(lambda: prctl(0x59616D61, (1 << 64) - 1)),
            "get pdeathsig": attempt(lambda: prctl(2, ctypes.addressof(value))),
            "get dumpable": attempt(lambda: prctl(3)),
            "setsid": attempt(os.setsid),
            "setpgid": attempt(lambda: os.setpgid(0, 0)),
        }

    results = run_sandboxed(body, workdir=workdir).results
    for name in ("set pdeathsig", "clear pdeathsig", "dumpable", "subreaper", "ptracer"):
        assert results[name] == "PermissionError: EPERM", (name, results[name])
    assert results["setsid"] == results["setpgid"] == "PermissionError: EPERM"
    assert results["get pdeathsig"] == "ok: 0"
    assert results["get dumpable"] == "ok: 0"


def _script_report(script: str) -> Any:
    """Run ``script`` in a fresh interpreter (from the repository's root); its JSON output."""
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=str(Path(__file__).resolve().parents[2]),
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return json.loads(done.stdout)


_FORK_AS_INIT = r"""
import json, os, sys, time
sys.path.insert(0, os.getcwd())
from runtime._exceptions import SandboxError
from runtime._sandbox import _namespaces

own = os.open("/proc/self/ns/pid", os.O_RDONLY)
report = {}


def pid_seen_by_child(fork):
    r, w = os.pipe()
    pid = fork()
    if pid == 0:
        os.write(w, str(os.getpid()).encode())
        os._exit(0)
    os.close(w)
    seen = int(os.read(r, 16))
    os.close(r)
    os.waitpid(pid, 0)
    return seen


report["inits"] = [pid_seen_by_child(lambda: _namespaces.fork_as_init(own)) for _ in range(3)]
report["plain"] = pid_seen_by_child(os.fork)
r, w = os.pipe()
pid = os.fork()
if pid == 0:  # without the capability, the namespace is refused and nothing forked
    os.setgid(65534)
    os.setuid(65534)
    os.write(w, json.dumps(_namespaces.fork_as_init(own)).encode())
    os._exit(0)
os.close(w)
report["refused"] = json.loads(os.read(r, 16))
os.waitpid(pid, 0)
not_a_namespace, _ = os.pipe()
try:
    if _namespaces.fork_as_init(not_a_namespace) == 0:
        time.sleep(60)
        os._exit(0)
except SandboxError as exc:
    report["error"] = str(exc)
try:
    report["left"] = os.waitpid(-1, os.WNOHANG)
except ChildProcessError:
    report["left"] = None
print(json.dumps(report))
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="a new PID namespace needs CAP_SYS_ADMIN")
def test_fork_as_init_gives_each_child_a_pid_namespace_of_its_own() -> None:
    report = _script_report(_FORK_AS_INIT)
    # Each child is PID 1 of a new namespace; a later plain fork is back in the caller's.
    assert report["inits"] == [1, 1, 1]
    assert report["plain"] != 1
    assert report["refused"] is None
    # A namespace the caller cannot return to: the child is killed and reaped, and it says so.
    assert report["error"].startswith("cannot return to its own PID namespace")
    assert report["left"] is None


_FORK_UNHOOKED = """
import ctypes, errno, json, os, random, sys, threading
sys.path.insert(0, os.getcwd())
from runtime._sandbox import _libc

hooks_ran = []
os.register_at_fork(after_in_child=lambda: hooks_ran.append(1))


def in_child(fork, what):
    r, w = os.pipe()
    pid = fork()
    if pid == 0:
        os.write(w, json.dumps(what()).encode())
        os._exit(0)
    os.close(w)
    seen = json.loads(os.read(r, 4096))
    os.close(r)
    os.waitpid(pid, 0)
    return seen


report = {"threads": threading.active_count()}
random.seed(1234)
report["children"] = [in_child(_libc.fork_unhooked, random.random) for _ in range(2)]
report["parent"] = random.random()
report["hooks"] = in_child(_libc.fork_unhooked, lambda: len(hooks_ran))
stop = threading.Event()
thread = threading.Thread(target=stop.wait)
thread.start()
report["hooks_with_a_thread"] = in_child(_libc.fork_unhooked, lambda: len(hooks_ran))
stop.set()
thread.join()


def refused():
    ctypes.set_errno(errno.EAGAIN)
    return -1


_libc._fork = refused
try:
    _libc.fork_unhooked()
except OSError as exc:
    report["error"] = [exc.errno, str(exc)]
print(json.dumps(report))
"""


def test_fork_unhooked_skips_the_hooks_but_reseeds_and_falls_back_with_threads() -> None:
    report = _script_report(_FORK_UNHOOKED)
    assert report["threads"] == 1
    # Each child draws from a seed of its own, not from the parent's sequence
    # (which the forks leave as it was).
    first, second = report["children"]
    assert first != second
    assert report["parent"] == random.Random(1234).random()
    assert report["parent"] not in (first, second)
    # No at-fork hook runs in a single-threaded process; with a thread alive it is os.fork().
    assert report["hooks"] == 0
    assert report["hooks_with_a_thread"] == 1
    assert report["error"] == [
        errno.EAGAIN,
        f"[Errno {errno.EAGAIN}] fork: {os.strerror(errno.EAGAIN)}",
    ]


_TYPES_MADE = """
import ctypes, gc, json, os, select, struct, sys, tempfile  # (the zygote has select)
sys.path.insert(0, os.getcwd())
from runtime._sandbox._layers import SandboxConfig, enter_sandbox, make_root_template, prepare_for_workers

prepare_for_workers()
staging = tempfile.mkdtemp()
template = make_root_template(staging)
gc.freeze()  # as the zygote does: what is made from now on is the worker's
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    config = SandboxConfig(workdir=None, template=template, memory_bytes=1 << 30, cpu_seconds=10, strict=True)
    enter_sandbox(config, keep_fds=[w, *template.descriptors])
    # Types (ctypes makes one per array size), C functions (ctypes looks each
    # up on its first call) and struct layouts (compiled on first use).
    made = sorted(
        type(o).__qualname__ if not isinstance(o, type) else o.__qualname__
        for o in gc.get_objects()
        if isinstance(o, (type, ctypes._CFuncPtr, struct.Struct))
    )
    os.write(w, json.dumps(made).encode())
    os._exit(0)
os.close(w)
print(os.read(r, 65536).decode())
os.waitpid(pid, 0)
os.rmdir(staging)
"""


def test_a_worker_makes_no_type_function_or_layout_on_the_way_into_the_sandbox() -> None:
    # Each made in a freshly forked worker costs it tens of microseconds and
    # a dozen copied pages: the zygote makes them all before it forks.
    report = _script_report(_TYPES_MADE)
    assert report == []
