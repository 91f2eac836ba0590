"""Real MCP servers for the MCP client's tests, described as plain data.

Nothing here imports the project's MCP client (only the SDK, for `stdio_parameters`): a
server is a `ServerCommand` (what to spawn for stdio) or a URL (a streamable-HTTP server
this module started on loopback).

The servers:

- the fault server, ``servers/faults.py`` (ours, on the SDK's server API): see its
  docstring for the tools and flags;
- ``mcp-server-time`` and ``mcp-server-git`` from PyPI (the ``test`` extra installs them);
- the reference "everything" server from npm, installed by
  ``npm ci --prefix tests/mcp/servers --no-audit --no-fund``; `everything_missing` says
  why it cannot run when node or that install is missing.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from mcp import StdioServerParameters

SERVERS_DIR = Path(__file__).resolve().parent / "servers"
FAULTS_SCRIPT = SERVERS_DIR / "faults.py"
EVERYTHING_ENTRY = (
    SERVERS_DIR
    / "node_modules"
    / "@modelcontextprotocol"
    / "server-everything"
    / "dist"
    / "index.js"
)
EVERYTHING_INSTALL = "npm ci --prefix tests/mcp/servers --no-audit --no-fund"

MODERN = "2026-07-28"
"""The per-request-envelope protocol version the 2.x SDK's servers negotiate by default."""
HANDSHAKE = "2025-11-25"
"""The newest initialize-handshake version (what a legacy connection negotiates)."""

GIT_ENV: Mapping[str, str] = {
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "PTC Test",
    "GIT_AUTHOR_EMAIL": "ptc-test@example.invalid",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00+00:00",
    "GIT_COMMITTER_NAME": "PTC Test",
    "GIT_COMMITTER_EMAIL": "ptc-test@example.invalid",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00+00:00",
}
"""A fixed identity and no user or system git configuration, for the repository and the server."""

GIT_COMMIT_MESSAGE = "Initial commit of the test repository"

_READY_TIMEOUT = 20.0
_STOP_TIMEOUT = 5.0
_LINE_TIMEOUT = 10.0


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerCommand:
    """How to spawn a stdio MCP server.

    ``env`` holds only the variables the server needs; a client merges them over whatever
    it passes by default (the SDK's stdio client: HOME, LOGNAME, PATH, SHELL, TERM, USER).
    """

    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None

    @property
    def argv(self) -> list[str]:
        return [self.command, *self.args]


def stdio_parameters(server: ServerCommand) -> StdioServerParameters:
    """The SDK's spawn parameters for ``server`` (for tests that use ``mcp.Client`` directly)."""
    return StdioServerParameters(
        command=server.command, args=list(server.args), env=dict(server.env) or None, cwd=server.cwd
    )


def faults_command(
    *flags: str, log: Path | None = None, env: Mapping[str, str] | None = None
) -> ServerCommand:
    """The fault server over stdio, with ``flags`` (``--legacy``, ``--many N``, ...).

    ``log`` becomes ``FAULTS_LOG``, the file the server appends its event lines to.
    """
    extra = dict(env or {})
    if log is not None:
        extra["FAULTS_LOG"] = str(log)
    return ServerCommand(command=sys.executable, args=(str(FAULTS_SCRIPT), *flags), env=extra)


def time_command() -> ServerCommand:
    """``mcp-server-time``, its local zone pinned to UTC."""
    return ServerCommand(
        command=sys.executable, args=("-m", "mcp_server_time", "--local-timezone", "UTC")
    )


def git_command(repository: Path) -> ServerCommand:
    """``mcp-server-git`` on ``repository``, reading no user or system git configuration."""
    return ServerCommand(
        command=sys.executable,
        args=("-m", "mcp_server_git", "--repository", str(repository)),
        env=dict(GIT_ENV),
    )


def make_git_repository(path: Path) -> Path:
    """A new repository at ``path`` on branch main with one commit (README.md)."""
    path.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **GIT_ENV}

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=path, env=env, check=True, capture_output=True)

    git("init", "--quiet", "--initial-branch=main")
    (path / "README.md").write_text("# test repository\n", encoding="utf-8")
    git("add", "README.md")
    git("commit", "--quiet", "-m", GIT_COMMIT_MESSAGE)
    return path


def everything_missing() -> str | None:
    """Why the everything server cannot run here, or None when it can."""
    if shutil.which("node") is None:
        return "node is not on PATH (the everything MCP server needs Node.js)"
    if not EVERYTHING_ENTRY.is_file():
        return f"the everything MCP server is not installed: run `{EVERYTHING_INSTALL}`"
    return None


def everything_command() -> ServerCommand:
    """The everything server over stdio (check `everything_missing` first)."""
    node = shutil.which("node")
    assert node is not None, everything_missing()
    return ServerCommand(command=node, args=(str(EVERYTHING_ENTRY), "stdio"))


@contextmanager
def running_http_server(
    argv: list[str],
    *,
    ready: re.Pattern[str],
    url: Callable[[re.Match[str]], str],
    env: Mapping[str, str] | None = None,
    timeout: float = _READY_TIMEOUT,
) -> Iterator[str]:
    """Start a server, wait until its output matches ``ready``, yield its URL, then stop it.

    The server runs in a session (and process group) of its own; stopping it signals the
    whole group, SIGTERM and then SIGKILL, so neither it nor a child outlives the block.
    Its stdout and stderr go to a file, so a chatty server never blocks on a full pipe;
    they are quoted in the error when it exits or stays silent before it is ready.
    """
    with tempfile.TemporaryDirectory(prefix="mcp-server-") as scratch:
        output_path = Path(scratch) / "output.log"
        with output_path.open("wb") as output:
            process = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                env={**os.environ, **(env or {})},
                start_new_session=True,
            )
        try:
            yield url(_wait_ready(process, output_path, ready, timeout))
        finally:
            stop_process_group(process)


def _wait_ready(
    process: subprocess.Popen[bytes], output: Path, ready: re.Pattern[str], timeout: float
) -> re.Match[str]:
    deadline = time.monotonic() + timeout
    while True:
        text = output.read_text(encoding="utf-8", errors="replace")
        if (match := ready.search(text)) is not None:
            return match
        if process.poll() is not None:
            raise RuntimeError(
                f"the server exited with status {process.returncode} before it was ready:\n{text}"
            )
        if time.monotonic() > deadline:
            raise RuntimeError(f"the server was not ready after {timeout} s:\n{text}")
        time.sleep(0.02)


def stop_process_group(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM the process's group, SIGKILL whatever is left of it, and reap the process."""
    with suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    with suppress(subprocess.TimeoutExpired):
        process.wait(_STOP_TIMEOUT)
    # A leader that ignored SIGTERM, or a child it left in the group.
    with suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


_FAULTS_READY = re.compile(r"^READY (http://127\.0\.0\.1:\d+/mcp)$", re.MULTILINE)
_EVERYTHING_READY = re.compile(r"listening on port (\d+)")


@contextmanager
def faults_http(*flags: str, log: Path | None = None) -> Iterator[str]:
    """The fault server over streamable HTTP on a free loopback port; yields its URL."""
    env = {"FAULTS_LOG": str(log)} if log is not None else {}
    with running_http_server(
        [sys.executable, str(FAULTS_SCRIPT), "--http", "0", *flags],
        ready=_FAULTS_READY,
        url=lambda match: match.group(1),
        env=env,
    ) as address:
        yield address


def free_loopback_port() -> int:
    """A port free on 127.0.0.1 a moment ago (for servers that cannot pick one themselves)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def everything_http(attempts: int = 3) -> Iterator[str]:
    """The everything server over streamable HTTP; yields its URL (check `everything_missing`).

    It takes its port from ``PORT`` and cannot pick a free one itself (``PORT=0`` works but
    it then reports 0), so a free port is chosen here and the start retried if another
    process took it first. It listens on every interface, not only loopback; the tests
    reach it at 127.0.0.1.
    """
    node = shutil.which("node")
    assert node is not None, everything_missing()
    with ExitStack() as stack:
        for attempt in range(1, attempts + 1):
            try:
                address = stack.enter_context(
                    running_http_server(
                        [node, str(EVERYTHING_ENTRY), "streamableHttp"],
                        ready=_EVERYTHING_READY,
                        url=lambda match: f"http://127.0.0.1:{match.group(1)}/mcp",
                        env={"PORT": str(free_loopback_port())},
                    )
                )
            except RuntimeError as exc:
                if "already in use" in str(exc) and attempt < attempts:
                    continue
                raise
            break
        yield address


async def wait_for_line(path: Path, line: str, count: int = 1) -> list[str]:
    """Wait until the file at ``path`` holds ``line`` ``count`` times; return all its lines.

    For what another process writes (the fault server's ``FAULTS_LOG``): there is no
    event to await across processes, so this checks every 20 ms, for 10 s at most
    (then TimeoutError).
    """
    with anyio.fail_after(_LINE_TIMEOUT):
        while True:
            lines = read_lines(path)
            if lines.count(line) >= count:
                return lines
            await anyio.sleep(0.02)


def read_lines(path: Path) -> list[str]:
    """The lines of ``path``, or none when it does not exist yet."""
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
