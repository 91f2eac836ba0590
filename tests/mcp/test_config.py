"""``load_mcp_config``: the ``mcpServers`` documents of Claude Desktop, Cursor and Claude Code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from registry import HttpServer, McpConfigError, StdioServer, load_mcp_config


def write(tmp_path: Path, document: object) -> Path:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps(document))
    return path


def test_stdio_and_http_entries(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        {
            "mcpServers": {
                "git": {
                    "command": "uvx",
                    "args": ["mcp-server-git", "--repository", "."],
                    "env": {"GIT_PAGER": "cat"},
                    "cwd": "repo",
                },
                "remote": {"url": "https://example.invalid/mcp", "headers": {"X-Key": "k"}},
                "typed": {"type": "http", "url": "http://127.0.0.1:9/mcp"},
                "explicit": {"type": "stdio", "command": "server"},
            }
        },
    )
    servers = load_mcp_config(path)
    assert servers == {
        "git": StdioServer(
            command="uvx",
            args=("mcp-server-git", "--repository", "."),
            env={"GIT_PAGER": "cat"},
            cwd=str(tmp_path / "repo"),  # relative to the file
        ),
        "remote": HttpServer(url="https://example.invalid/mcp", headers={"X-Key": "k"}),
        "typed": HttpServer(url="http://127.0.0.1:9/mcp"),
        "explicit": StdioServer(command="server"),
    }
    assert list(servers) == ["git", "remote", "typed", "explicit"]  # the file's order


def test_variables_are_expanded_from_the_environment(tmp_path: Path) -> None:
    document = {
        "mcpServers": {
            "api": {
                "url": "${BASE:-http://127.0.0.1:8000}/mcp",
                "headers": {"Authorization": "Bearer ${TOKEN}"},
            },
            "local": {
                "command": "${TOOLS}/server",
                "args": ["--key=${TOKEN}"],
                "env": {"K": "${TOKEN}"},
            },
        }
    }
    servers = load_mcp_config(document, environ={"TOKEN": "s3cret", "TOOLS": "/opt/tools"})
    assert servers["api"] == HttpServer(
        url="http://127.0.0.1:8000/mcp", headers={"Authorization": "Bearer s3cret"}
    )
    assert servers["local"] == StdioServer(
        command="/opt/tools/server", args=("--key=s3cret",), env={"K": "s3cret"}
    )
    with pytest.raises(McpConfigError, match=r"server 'api': headers.Authorization: .*TOKEN"):
        load_mcp_config(document, environ={})


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ([], "mcpServers"),
        ({"servers": {}}, "mcpServers"),
        ({"mcpServers": []}, "mcpServers"),
        ({"mcpServers": {"a": "uvx x"}}, "server 'a': expected an object"),
        ({"mcpServers": {"a": {}}}, "server 'a': command"),
        ({"mcpServers": {"a": {"command": ""}}}, "server 'a': command"),
        ({"mcpServers": {"a": {"command": "x", "args": "--flag"}}}, "server 'a': args"),
        ({"mcpServers": {"a": {"command": "x", "args": [1]}}}, r"server 'a': args\[0\]"),
        ({"mcpServers": {"a": {"command": "x", "env": ["A=1"]}}}, "server 'a': env"),
        ({"mcpServers": {"a": {"url": 5}}}, "server 'a': url"),
        ({"mcpServers": {"a": {"url": "http://h", "headers": "x"}}}, "server 'a': headers"),
        ({"mcpServers": {"a": {"type": "sse", "url": "http://h"}}}, "SSE transport"),
        ({"mcpServers": {"a": {"type": "ws", "url": "ws://h"}}}, "unknown type 'ws'"),
        ({"mcpServers": {"a.b": {"command": "x"}}}, "server name 'a.b'"),
        ({"mcpServers": {"": {"command": "x"}}}, "server name ''"),
    ],
)
def test_malformed_documents_name_the_entry_and_key(document: object, message: str) -> None:
    with pytest.raises(McpConfigError, match=message):
        load_mcp_config(document)  # type: ignore[arg-type]


def test_a_file_that_is_not_json_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text("{not json")
    with pytest.raises(McpConfigError, match=r"broken\.json: not JSON"):
        load_mcp_config(path)


def test_a_missing_file_is_an_os_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        load_mcp_config(tmp_path / "absent.json")
