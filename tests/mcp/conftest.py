"""Fixtures for the MCP tests: real servers as plain data (commands and URLs).

Stdio servers are `ServerCommand` values, spawned by whichever client a test uses. HTTP
servers are started here on a free loopback port and stopped at teardown, process group
and all. Everything the fixtures use lives in `tests.mcp.helpers_servers`, for tests that
need a variant (other flags, a second server) the fixtures do not give.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.mcp.helpers_servers import (
    ServerCommand,
    everything_command,
    everything_http,
    everything_missing,
    faults_http,
    git_command,
    make_git_repository,
    time_command,
)


@pytest.fixture
def faults_log(tmp_path: Path) -> Path:
    """Where the fault server writes its event lines (pass as ``log=``; not created yet)."""
    return tmp_path / "faults.log"


@pytest.fixture
def faults_http_url(faults_log: Path) -> Iterator[str]:
    """The fault server over streamable HTTP (both protocol eras), logging to `faults_log`."""
    with faults_http(log=faults_log) as url:
        yield url


@pytest.fixture
def faults_http_legacy_url(faults_log: Path) -> Iterator[str]:
    """The fault server over streamable HTTP, handshake era only, logging to `faults_log`."""
    with faults_http("--legacy", log=faults_log) as url:
        yield url


@pytest.fixture
def time_server() -> ServerCommand:
    """``mcp-server-time`` over stdio (local zone UTC)."""
    return time_command()


@pytest.fixture
def git_repository(tmp_path: Path) -> Path:
    """A fresh repository with one commit, made without reading any git configuration."""
    return make_git_repository(tmp_path / "repository")


@pytest.fixture
def git_server(git_repository: Path) -> ServerCommand:
    """``mcp-server-git`` over stdio on `git_repository`."""
    return git_command(git_repository)


@pytest.fixture
def everything_server() -> ServerCommand:
    """The reference everything server over stdio; skips when node or its install is missing."""
    if (reason := everything_missing()) is not None:
        pytest.skip(reason)
    return everything_command()


@pytest.fixture
def everything_http_url() -> Iterator[str]:
    """The reference everything server over streamable HTTP; skips like `everything_server`."""
    if (reason := everything_missing()) is not None:
        pytest.skip(reason)
    with everything_http() as url:
        yield url
